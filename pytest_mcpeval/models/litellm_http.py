"""The HTTP side of litellm calls: a pool that keeps its connections, each attempt held to its deadline, and
litellm made to hand over tool arguments nested too deep for ``json``.

``timeout`` (``--mcp-timeout``) is a deadline for each attempt as a whole: connecting, the headers and the
whole body (:func:`_attempt`).  litellm hands it to httpx, which applies it to each read on its own, so a
provider that sends a byte every few seconds kept a call going for minutes.
"""

from __future__ import annotations

import contextvars
import logging
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx  # litellm's HTTP client: imported with litellm anyway

log = logging.getLogger(__name__)

_pool_lock = threading.Lock()
_pool_checked = False


def keep_alive_pool(litellm: Any) -> None:
    """Give litellm, once per process, an HTTP client for OpenAI-compatible endpoints whose pool never closes
    a surplus idle connection, unless the user set ``litellm.client_session`` themselves.

    httpx's default pool keeps at most 20 idle connections and closes the rest; httpcore (1.0.9, and its main
    branch) can close one it has just handed to a waiting request (encode/httpcore issue 1110): the request then
    fails with "Bad file descriptor" or, worse, waits for its whole read timeout.  Measured here, 2,000 calls at
    64 in flight: a retried "Bad file descriptor" in about one run in three, a 120 s stall in about one in eight;
    with this client, none in 14 runs.  The client is built as litellm builds its own (its SSL settings, HTTP/2
    switch, redirects), with no limit on connections kept alive: the plugin's concurrency bounds them, and with
    the hooks that hold each attempt's exchange to its deadline (:func:`_attempt`)."""
    global _pool_checked
    if _pool_checked:
        return
    with _pool_lock:
        if _pool_checked:
            return
        try:
            if litellm.client_session is None:  # else the user's own
                from litellm.llms.custom_httpx.http_handler import get_ssl_configuration, http2_enabled

                for tries_left in reversed(range(3)):
                    try:
                        litellm.client_session = httpx.Client(
                            verify=get_ssl_configuration(), follow_redirects=True, http2=http2_enabled(),
                            limits=httpx.Limits(max_connections=None, max_keepalive_connections=None),
                            event_hooks={"request": [_bound_request], "response": [_bound_body]})
                        break
                    except (KeyError, RuntimeError):
                        # httpx reads the proxy variables with os.environ.items(), on this call's thread: a name
                        # pytest's main thread deletes meanwhile (PYTEST_CURRENT_TEST, after every item) raises
                        if not tries_left:
                            raise
        except Exception as exc:  # another litellm: its own clients, as before (only the pool fix is lost)
            log.debug("litellm's HTTP client left as it is (%r): its connections are its own", exc)
        _pool_checked = True  # only now: the other threads' calls must not start before the client is set


# -- the deadline of an attempt ------------------------------------------------------------------------

LOCAL_ALLOWANCE = 10.0
"""Seconds an attempt may spend in this process around its HTTP exchange, before :func:`_attempt` abandons it:
litellm building the request (its first call in a process imports the provider's SDK: 0.6 s measured here) and
reading the answer (a 5 MB completion); the exchange itself gets ``timeout``."""


@dataclass
class _Exchange:
    """The deadline of one attempt's HTTP exchange, shared by the hooks of the client :func:`keep_alive_pool`
    gives litellm: set when the first request is sent (``timeout`` seconds later), in the attempt's thread."""

    timeout: float
    at: float | None = None


_exchange: contextvars.ContextVar[_Exchange | None] = contextvars.ContextVar("mcpeval_exchange", default=None)


class DeadlinePassed(Exception):
    """An attempt that had no answer by its deadline; :func:`classify` reads it as any timeout (retried)."""

    def __init__(self, timeout: float) -> None:
        super().__init__(f"timed out after {timeout:g} s")


def _attempt(litellm: Any, kwargs: dict[str, Any], timeout: float) -> Any:
    """``litellm.completion(**kwargs)``: an answer whose HTTP exchange (connecting, the headers, the whole body)
    ended within ``timeout`` seconds, or an error once it did not, whatever the provider sends and however slowly.

    httpx, which litellm hands its timeout, applies it to each read alone: a provider that sends a byte every few
    seconds kept a call going for minutes.  The client the plugin gives litellm (:func:`keep_alive_pool`, used for
    OpenAI-compatible endpoints) bounds the exchange itself: its hooks read this attempt's :class:`_Exchange` (a
    context variable of the call's thread), bound each read, write and connect by the time left, and fail the body
    at the deadline (httpx's ``ReadTimeout``, a timeout like any other; the connection is closed).  Other
    providers' clients are litellm's own, which the plugin does not touch: for every call, the call runs on a
    daemon thread of its own and this one waits at most ``timeout`` + :data:`LOCAL_ALLOWANCE`; past it the call is
    abandoned (:class:`DeadlinePassed`), as the dispatcher's threads are after Ctrl-C, and its thread ends with
    its connection (the provider's answer or a read timeout)."""
    exchange = _Exchange(timeout)
    done = threading.Event()
    outcome: list[tuple[bool, Any]] = []

    def run() -> None:
        _exchange.set(exchange)
        try:
            outcome.append((True, litellm.completion(**kwargs)))
        except BaseException as exc:  # handed to the waiting thread
            outcome.append((False, exc))
        finally:
            done.set()

    context = contextvars.copy_context()  # litellm's own context variables, as in the calling thread
    threading.Thread(target=context.run, args=(run,), name="mcpeval-call", daemon=True).start()
    if not done.wait(timeout + LOCAL_ALLOWANCE):
        raise DeadlinePassed(timeout)
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def _bound_request(request: httpx.Request) -> None:
    """httpx request hook: the attempt's exchange starts with its first request; no read, write, connect or wait
    for a connection lasts longer than its deadline leaves."""
    exchange = _exchange.get()
    if exchange is None:  # a call not made by complete(): as litellm asked
        return
    now = time.monotonic()
    if exchange.at is None:
        exchange.at = now + exchange.timeout
    left = exchange.at - now
    if left <= 0:
        raise httpx.ConnectTimeout("timed out before the request was sent", request=request)
    timeouts = request.extensions.get("timeout")
    if isinstance(timeouts, dict):
        request.extensions["timeout"] = {k: left if v is None else min(float(v), left) for k, v in timeouts.items()}


def _bound_body(response: httpx.Response) -> None:
    """httpx response hook (the headers are in, the body not yet read): the body fails at the deadline."""
    exchange = _exchange.get()
    if exchange is not None and exchange.at is not None and isinstance(response.stream, httpx.SyncByteStream):
        response.stream = _DeadlineStream(response.stream, exchange.at, response.request)


class _DeadlineStream(httpx.SyncByteStream):
    """A response body that raises httpx's ``ReadTimeout`` once its deadline passes; closing it closes the
    connection (httpx closes a response whose read failed, and a connection not read to the end is dropped)."""

    def __init__(self, stream: httpx.SyncByteStream, deadline: float, request: httpx.Request) -> None:
        self._stream = stream
        self._deadline = deadline
        self._request = request

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._stream:
            if time.monotonic() > self._deadline:
                raise httpx.ReadTimeout("timed out: the body did not arrive in time", request=self._request)
            yield chunk

    def close(self) -> None:
        self._stream.close()


_deep_checked = False


def tolerate_deep_arguments() -> None:
    """Make litellm hand over a tool call whose arguments nest deeper than ``json`` can parse, once per process.

    litellm (1.110) parses every tool call's argument text to spot OpenAI's ``multi_tool_use.parallel``
    pseudo-call (``handle_invalid_parallel_tool_calls``) and keeps the calls unchanged when the text is not JSON,
    but catches only ``JSONDecodeError``: text nested past ``json``'s recursion limit (about 1,000 levels) raises
    ``RecursionError``, and litellm then rejects the whole, well-formed chat completion as "Invalid response
    object".  The model made a malformed call, which is a miss (``malformed_call``, see
    :mod:`pytest_mcpeval.bounds`), not an error of the provider: so the function is wrapped to treat
    ``RecursionError`` as it treats text that is not JSON, in its module and in those that imported it by name.
    Another litellm without the function is left alone (its reply is then an error, as before)."""
    global _deep_checked
    if _deep_checked:
        return
    with _pool_lock:
        if _deep_checked:
            return
        _deep_checked = True
        try:
            from litellm.litellm_core_utils.llm_response_utils import convert_dict_to_response as home

            original = home.handle_invalid_parallel_tool_calls
        except (ImportError, AttributeError):
            return
        if getattr(original, "_mcpeval_tolerant", False):
            return

        def handle(tool_calls: Any) -> Any:
            try:
                return original(tool_calls)
            except RecursionError:
                return tool_calls

        handle._mcpeval_tolerant = True  # type: ignore[attr-defined]
        setattr(home, "handle_invalid_parallel_tool_calls", handle)  # noqa: B010 (mypy: not in the stubs)
        for name, module in sys.modules.copy().items():  # one C-level copy: another thread may import meanwhile
            if name.startswith("litellm.") and getattr(module, "handle_invalid_parallel_tool_calls", None) is original:
                setattr(module, "handle_invalid_parallel_tool_calls", handle)  # noqa: B010
