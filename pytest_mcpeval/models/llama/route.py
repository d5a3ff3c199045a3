"""One call of a ``local/qwen2.5-coder-*`` model: what a serving layer in front of llama-server owns, then litellm.

:func:`acomplete` is reached from :func:`pytest_mcpeval.models.litellm_client.acomplete` (a hook there), so it runs
wherever litellm calls run (the event loop of the pytest process or of an xdist worker).  It

1. gets the machine's server for the route (:mod:`.server`; started on the first call);
2. sends a copy of the tools whose ``pattern`` llama.cpp cannot compile rewritten (:mod:`.schema_patterns`);
3. calls the server **through litellm** as an OpenAI-compatible endpoint (``openai/<route>`` with ``api_base``),
   with ``max_tokens`` :data:`DEFAULT_MAX_TOKENS` unless the user set one (generation is always bounded) and a
   deadline of at least :data:`MIN_TIMEOUT` s (the first request reads the whole catalog: ~80 s for the 1.5B on two
   cores); at most as many requests in flight on the machine as the server has slots (a file lock per slot, so the
   latency is the request's, not the queue's);
4. parses a tool call the model wrote in its text (Qwen2.5-Coder writes a ```` ```json ```` fence in ``content``,
   not ``tool_calls``) into calls, with :func:`pytest_mcpeval.models.text_calls.find_text_calls` (as vLLM's tool
   parsers do server-side); the reply keeps its text and says the calls were parsed from it
   (``ModelReply.parsed_from_text``, the case result's ``calls_parsed_from_text``), so ``tool_call_in_text`` (a
   server without a parser) is not diagnosed for this route.

The report records the serving facts under the model's ``params_sent.serving`` (:func:`serving_facts`): runtime and
build, weights file and SHA-256, context, slots, threads, the tool parser, and the patterns rewritten per tool.
"""

from __future__ import annotations

import contextlib
import fcntl
import threading
import time
from collections.abc import Awaitable, Callable, Collection, Iterator
from dataclasses import replace
from typing import Any

from pytest_mcpeval.defaults import DEFAULT_RETRIES, DEFAULT_TIMEOUT
from pytest_mcpeval.models.config import ModelSpec
from pytest_mcpeval.models.llama import LlamaError, Route, route_of
from pytest_mcpeval.models.llama import weights as weights_mod
from pytest_mcpeval.models.llama.schema_patterns import rewrite_tools
from pytest_mcpeval.models.llama.server import SERVERS, Running
from pytest_mcpeval.models.llama.sizing import catalog_tokens
from pytest_mcpeval.models.reply import ModelReply, RawCall
from pytest_mcpeval.models.text_calls import find_text_calls

DEFAULT_MAX_TOKENS = 512  # a call or two of JSON is ~40-200 tokens; prose beyond this is cut (finish_reason length)
MIN_TIMEOUT = 600.0  # seconds: a CPU server reads a 2,600-token catalog in ~80 s, more on a loaded machine
NO_KEY = "sk-no-key-needed"  # llama-server checks no key; the openai SDK wants one
TOOL_PARSER = "text calls in content (JSON, ```json fences, <tool_call> tags): pytest_mcpeval.models.text_calls"

_rewritten: dict[str, dict[str, list[dict[str, str]]]] = {}  # route -> tool -> changes, across the catalogs seen
_rewritten_lock = threading.Lock()


def _slot_dir(route: Route) -> Any:
    return weights_mod.cache_dir() / "servers" / f"{route.name}.slots"


@contextlib.contextmanager
def slot(route: Route, count: int) -> Iterator[None]:
    """One of the server's ``count`` slots for the duration of a request, machine-wide (file locks)."""
    folder = _slot_dir(route)
    folder.mkdir(parents=True, exist_ok=True)
    handles = [open(folder / str(i), "a+b") for i in range(count)]  # noqa: SIM115 (closed below)
    try:
        taken = None
        while taken is None:
            for handle in handles:
                try:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                taken = handle
                break
            else:
                if count == 1:  # wait for it
                    fcntl.flock(handles[0].fileno(), fcntl.LOCK_EX)
                    taken = handles[0]
                else:
                    time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(taken.fileno(), fcntl.LOCK_UN)
    finally:
        for handle in handles:
            handle.close()


def max_tokens(model: ModelSpec) -> int:
    """The reply's bound: the user's ``max_tokens`` (or ``max_completion_tokens``), else :data:`DEFAULT_MAX_TOKENS`."""
    for name in ("max_tokens", "max_completion_tokens"):
        value = model.params.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return DEFAULT_MAX_TOKENS


def served_spec(model: ModelSpec, running: Running) -> ModelSpec:
    """The litellm-side model: llama-server's OpenAI-compatible endpoint, ``max_tokens`` bounded."""
    route = route_of(model.target)
    params = {**model.params, "api_base": running.url + "/v1", "api_key": NO_KEY}
    defaults = set(model.defaults)
    if "max_tokens" not in params and "max_completion_tokens" not in params:
        params["max_tokens"] = DEFAULT_MAX_TOKENS
        defaults.add("max_tokens")
    return replace(model, target=f"openai/{route.name}", params=params, defaults=frozenset(defaults),
                   prompt_cache=False)


def serving_facts(route: Route, running: Running) -> dict[str, Any]:
    with _rewritten_lock:
        rewritten = {tool: list(changes) for tool, changes in sorted(_rewritten.get(route.name, {}).items())}
    return {**running.facts, "tool_parser": TOOL_PARSER, "patterns_rewritten": rewritten}


class _AnyName(Collection[str]):
    """Every non-empty name, for :func:`find_text_calls`: a serving layer hands on the call the model wrote, whatever
    tool it names (a tool that does not exist is then scored as the model's hallucination, not as no call)."""

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and bool(name.strip())

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 1


def parse_text_calls(reply: ModelReply, tools: list[dict[str, Any]]) -> ModelReply:
    """The calls the model wrote in its text, as calls, when it made none itself (the reply otherwise unchanged).

    A call of a tool the model was shown counts wherever it is written; a call of another name only where the
    model clearly wrote a call: in a fence or a ``<tool_call>`` tag, or as the whole reply (not JSON quoted in
    prose, such as ``{"name": "Alice"}`` in a sentence)."""
    if reply.calls or not reply.content:
        return reply
    names = {str(t["function"]["name"]) for t in tools if isinstance(t.get("function"), dict)}
    if not names:  # no tools were sent (a judge's request): nothing is a call
        return reply
    whole = reply.content.strip()[:1] in ("{", "[")
    found = [c for c in find_text_calls(reply.content, _AnyName())
             if c.name in names or c.format != "json" or whole]
    if not found:
        return reply
    reply.calls = [RawCall(name=c.name, arguments=c.arguments) for c in found]
    reply.parsed_from_text = ",".join(sorted({c.format for c in found}))
    return reply


async def acomplete(model: ModelSpec, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                    call: Callable[..., Awaitable[ModelReply]], error: type[Exception], retries: int = DEFAULT_RETRIES,
                    timeout: float = DEFAULT_TIMEOUT, seed: int = 0,
                    timeout_option: str = "--mcp-timeout") -> ModelReply:
    """``call`` is litellm_client.acomplete and ``error`` its ModelCallError (given, not imported: the route imports
    nothing that imports it).  Starting the server and waiting for a slot block: they run on a worker thread, so
    the event loop goes on with the run's other calls meanwhile."""
    import anyio

    sent, changes = rewrite_tools(tools)
    try:
        route = route_of(model.target)
        running = await anyio.to_thread.run_sync(
            SERVERS.get, route, catalog_tokens(sent) if sent else 0, max_tokens(model))
    except LlamaError as exc:
        raise error(f"model {model.name}: {exc}") from None
    if changes:
        with _rewritten_lock:
            _rewritten.setdefault(route.name, {}).update(changes)
    served = served_spec(model, running)
    with contextlib.ExitStack() as held:
        await anyio.to_thread.run_sync(held.enter_context, slot(route, running.slots))
        try:
            reply = await call(served, messages, sent, retries=retries, timeout=max(timeout, MIN_TIMEOUT), seed=seed,
                               timeout_option=timeout_option)
        except error as exc:
            raise error(f"{exc}; the local server's log: {running.log}") from None
    reply = parse_text_calls(reply, tools)
    if not reply.cached:
        reply.cost_usd = 0.0  # it ran on this machine: no bill (litellm has no price for it: "cost unknown")
    shown = dict(reply.params_sent or {})
    shown.pop("api_base", None)  # a port of this run: the serving facts say where it ran
    shown["serving"] = serving_facts(route, running)
    reply.params_sent = shown
    return reply


def problem(model: ModelSpec) -> str | None:
    """The pre-flight check's line for ``model`` (run/preflight.py): packages missing or not the pinned versions,
    weights that fail their hash (joined now, once), a GGUF file of the user's that is not one; ``None`` when it
    can be served."""
    try:
        route = route_of(model.target)
        weights_mod.check_installed(route)
        weights_mod.weights_file(route)
    except LlamaError as exc:
        return f"model {model.name}: {exc}"
    return None


def start(model: ModelSpec, tokens: int | None) -> str | None:
    """The pre-flight check starts the route's server for the largest catalog a case of ``model`` shows (``tokens``;
    ``None`` when one could not be counted): a catalog that cannot fit, or a server that dies while starting, is its
    one line, before any call; ``None`` when the server answers."""
    try:
        SERVERS.get(route_of(model.target), tokens, max_tokens(model))
    except LlamaError as exc:
        return f"model {model.name}: {exc}"
    return None

