"""MCP server lifecycle: one connection per server per process (xdist worker), tools fetched once.

Connections live on the process's event loop (:mod:`pytest_mcpeval.core`), the one that makes the model
calls, so a connection stays open for the whole session: single-call evaluation only needs the tool list;
flows with ``execute: live`` call tools over the same session, on the same loop (:meth:`ServerPool.call_tool`,
by the catalog that session listed).

Kinds of server: a static ``tools_file``, a ``command`` spoken to over stdio (stderr goes to a log
file, never to pytest's output), a streamable HTTP ``url``, an in-process ``python`` object, or
whatever an ``mcp_server`` fixture returns (an ``MCPServer``, a URL, ``StdioServerParameters``, or a
list of tool dicts).

Every server has a log file, and every failure of a server is written to it with its whole traceback
(each exception of an exception group), as are the MCP SDK's own log records about that connection (a line
a stdio server printed on stdout that is not JSON-RPC, ...); the one-line :class:`ServerError` says what
happened and names the log.  What the log holds and how a failure reads in one line is
:mod:`pytest_mcpeval.server_log`; what a tool call answers is :mod:`pytest_mcpeval.tool_result`.

Start-up is timed: :meth:`ServerPool.startup_s` is how long a connection took from its start (a stdio server's
process being started) to its tool list, once per server per process (each xdist worker starts its own).

Time is bounded: a tool call gets ``--mcp-connect-timeout`` in all, however the server trickles its answer
(:func:`_call_tool`); starting a server, completing the MCP handshake and listing its tools get
``--mcp-connect-timeout`` in all (the SDK's own per-request timeouts would add up to more); past it the
connection is abandoned, a stdio server is stopped (the SDK closes its stdin, then terminates its process
group) and only then are its cases given the error, so no server process outlives its error.
"""

from __future__ import annotations

import concurrent.futures
import math
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_mcpeval.benchmark.schema import ServerSpec
from pytest_mcpeval.bounds import depth_exceeds
from pytest_mcpeval.catalog import Catalog, catalog_from_json, catalog_from_mcp
from pytest_mcpeval.catalog_files import load_tools_file
from pytest_mcpeval.core import Core
from pytest_mcpeval.defaults import DEFAULT_CONNECT_TIMEOUT, MAX_DEPTH
from pytest_mcpeval.server_log import (
    Watch,
    exit_status,
    invalid_answer,
    is_closed,
    one_line,
    watch_connection,
    write_log,
)
from pytest_mcpeval.server_secrets import object_secrets, server_secrets
from pytest_mcpeval.tool_result import ToolResult, tool_result_from_mcp
from pytest_mcpeval.transports import (
    TRANSPORTS,
    ServerError,
    Target,
    import_target,
    not_found_hint,
    open_transport,
    target_of_object,
    transport_of,
)

__all__ = [
    "STOP_GRACE",
    "TIMEOUT_OPTION",
    "ServerError",
    "ServerPool",
    "ToolResult",
    "import_target",
    "load_tools_file",
    "object_secrets",
    "server_secrets",
]

STOP_GRACE = 10.0
"""Seconds a connection gets to stop after it is given up or at the end of the session (the SDK's stdio
shutdown is bounded at about 6.5 s: 0.5 s to flush, 2 s for the server to exit after its stdin closes,
2 s after SIGTERM, 2 s after SIGKILL)."""

TIMEOUT_OPTION = "--mcp-connect-timeout"

@dataclass
class _Live:
    client: Any
    stop: Any  # anyio.Event, set from the portal to close the connection
    done: concurrent.futures.Future[None]
    label: str
    log: Path
    closed: str | None = None  # how the session was seen to close under a tool call: no call is tried again


class ServerPool:
    """Connections to the servers this process needs, keyed by what identifies each server."""

    def __init__(self, log_dir: Path, timeout: float = DEFAULT_CONNECT_TIMEOUT, core: Core | None = None) -> None:
        self.log_dir = log_dir
        self.timeout = timeout
        self._catalogs: dict[str, Catalog | ServerError] = {}
        self._live: dict[str, _Live] = {}
        self._own_core = core is None  # a pool outside a run (pre-flight, draft) has a loop of its own
        self.core = core if core is not None else Core()  # the loop its sessions live on: call_tool is awaited there
        self._spec_keys: dict[tuple[int, Path], str] = {}
        self._sessions: dict[int, str] = {}  # id(catalog) -> key of the live session that listed it
        self._startup: dict[int, float] = {}  # id(catalog) -> seconds from starting the connection to its tool list

    # -- public ---------------------------------------------------------------------------------
    def catalog_for_spec(self, spec: ServerSpec, base_dir: Path, root_dir: Path) -> Catalog:
        memo = (id(spec), base_dir)
        if memo not in self._spec_keys:  # relative paths resolve per directory
            self._spec_keys[memo] = f"{base_dir.resolve()}|{spec.model_dump_json()}"
        key = self._spec_keys[memo]
        return self._cached(key, lambda: self._open_spec(key, spec, base_dir, root_dir))

    def catalog_for_object(self, obj: Any) -> Catalog:
        """Connect to what an ``mcp_server`` fixture returned (its secrets learnt first: see :func:`object_secrets`)."""
        from pytest_mcpeval.redact import current

        key = f"fixture:{type(obj).__name__}:{id(obj)}" if not isinstance(obj, str) else f"url:{obj}"
        if key not in self._catalogs:
            current().add(object_secrets(obj))
        return self._cached(key, lambda: self._open_object(key, obj))

    def startup_s(self, catalog: Catalog) -> float | None:
        """Seconds the server of ``catalog`` took to start, complete the MCP handshake and list its tools, in this
        process; ``None`` for a static tool list (no server was started)."""
        return self._startup.get(id(catalog))

    def same_server(self, derived: Catalog, original: Catalog) -> None:
        """``derived`` (``original`` with other descriptions: overlay.py) is served by ``original``'s connection."""
        if id(original) in self._sessions:
            self._sessions[id(derived)] = self._sessions[id(original)]
        if id(original) in self._startup:
            self._startup[id(derived)] = self._startup[id(original)]

    async def call_tool(self, catalog: Catalog, name: str, arguments: dict[str, Any], timeout: float) -> ToolResult:
        """Call tool ``name`` over the live session that listed ``catalog``, on the loop, within ``timeout`` seconds.

        An MCP error result is an answer like any other (``is_error``).  Anything else is a
        :class:`ServerError` naming the server's log, where the traceback goes: no live session (a static
        tool list), a session that ended (the server exited), no answer within ``timeout`` seconds.
        """
        key = self._sessions.get(id(catalog))
        live = self._live.get(key) if key is not None else None
        if live is None:
            raise ServerError("no live connection to call tools on: the tools come from a static tool list "
                              "(tools_file, or a list from the mcp_server fixture)")
        if live.closed is None and live.done.done():  # _hold returned: the connection failed (logged) or was closed
            live.closed = "its connection ended"
        if live.closed is not None:
            raise ServerError(f"the server ({live.label}) is no longer connected ({live.closed}); its log: {live.log}")
        try:
            result = await _call_tool(live.client, name, arguments, timeout)
        except TimeoutError:
            message = (f"the server ({live.label}) did not answer a call of `{name}` within {timeout:g} s "
                       f"({TIMEOUT_OPTION})")
            write_log(live.log, message)
            raise ServerError(f"{message}; its log: {live.log}") from None
        except Exception as exc:
            write_log(live.log, f"the call of `{name}` on the server ({live.label}) failed", exc)
            if is_closed(exc):
                live.closed = f"it closed the connection during a call of `{name}`"
                raise ServerError(f"the server ({live.label}) closed the connection during a call of `{name}` (it "
                                  f"exited or crashed); its log: {live.log}") from None
            raise ServerError(f"the server ({live.label}) failed to answer a call of `{name}`: {one_line(exc)}; "
                              f"its log: {live.log}") from None
        if depth_exceeds(result.structured_content):  # the SDK read it; every walk after this may recurse
            message = (f"the server ({live.label}) answered a call of `{name}` with structured content nested deeper "
                       f"than {MAX_DEPTH} levels")
            write_log(live.log, message)
            raise ServerError(f"{message}; its log: {live.log}")
        return tool_result_from_mcp(result)

    def close(self) -> None:
        """Stop every connection (all at once, within ``STOP_GRACE`` in all); never raises."""
        lives = list(self._live.values())
        self._live.clear()
        if self.core.started:
            deadline = time.monotonic() + STOP_GRACE
            for live in lives:
                try:  # bounded: a loop held up by a blocking tool must not hold up the end of the run
                    self.core.start(_set, live.stop).result(timeout=max(0.0, deadline - time.monotonic()))
                except Exception as exc:  # the loop is gone or stuck: nothing left to stop
                    write_log(live.log, f"closing the server ({live.label}) failed", exc)
            for live in lives:
                try:
                    live.done.result(timeout=max(0.0, deadline - time.monotonic()))
                except concurrent.futures.TimeoutError:
                    live.done.cancel()  # or the loop would hold it forever
                    write_log(live.log, f"the server ({live.label}) did not close within "
                                         f"{STOP_GRACE:g} s; its connection was cancelled")
                except Exception as exc:  # closing a broken server must not mask the session's result: logged
                    write_log(live.log, f"closing the server ({live.label}) failed", exc)
        if self._own_core:
            self.core.close()

    # -- internals ------------------------------------------------------------------------------
    def _cached(self, key: str, opener: Any) -> Catalog:
        if key not in self._catalogs:
            try:
                self._catalogs[key] = opener()
            except ServerError as exc:
                self._catalogs[key] = exc
        found = self._catalogs[key]
        if isinstance(found, ServerError):
            raise found
        return found

    def _open_spec(self, key: str, spec: ServerSpec, base_dir: Path, root_dir: Path) -> Catalog:
        if spec.tools_file is not None:
            return load_tools_file(base_dir / spec.tools_file)
        log = self.log_dir / f"server-{len(self._catalogs)}.log"
        try:
            target = TRANSPORTS[spec.kind].from_block(spec, base_dir, root_dir)
        except ServerError as exc:  # an in-process server that cannot be imported
            write_log(log, str(exc), exc.__cause__)
            raise ServerError(f"{exc}; its log: {log}") from None
        return self._connect(key, target, spec.describe(), log)

    def _open_object(self, key: str, obj: Any) -> Catalog:
        if isinstance(obj, Catalog):
            return obj
        if isinstance(obj, list | dict):
            try:
                return catalog_from_json(obj)
            except ValueError as exc:
                raise ServerError(f"the mcp_server fixture returned an invalid tool list: {exc}") from None
        label = f"url: {obj}" if isinstance(obj, str) else f"fixture {type(obj).__name__}"
        return self._connect(key, target_of_object(obj), label, self.log_dir / "server-fixture.log")

    def _connect(self, key: str, target: Target, label: str, log: Path) -> Catalog:
        log.parent.mkdir(parents=True, exist_ok=True)
        opened: concurrent.futures.Future[tuple[Any, list[Any], float]] = concurrent.futures.Future()
        stop = self.core.call(_make_event)
        done = self.core.start(_hold, target, label, log, self.timeout, opened, stop)
        try:  # _hold gives up at self.timeout and stops the server first: the grace is only a safety net
            client, tools, startup = opened.result(timeout=self.timeout + STOP_GRACE)
        except concurrent.futures.TimeoutError:
            done.cancel()
            message = (f"server ({label}) did not start and list its tools within {self.timeout:g} s "
                       f"({TIMEOUT_OPTION}), nor stop within {STOP_GRACE:g} s more")
            write_log(log, message)
            raise ServerError(f"{message}; its log: {log}") from None
        except ServerError:
            raise
        except Exception as exc:  # pragma: no cover - _hold reports a ServerError; anything else is a bug, logged
            write_log(log, f"could not connect to the server ({label})", exc)
            raise ServerError(f"could not connect to the server ({label}): {one_line(exc)}; its log: {log}") from None
        self._live[key] = _Live(client, stop, done, label, log)
        try:
            catalog = catalog_from_mcp(tools)
        except ValueError as exc:
            message = f"server ({label}) published an invalid tool list: {exc}"
            write_log(log, message)
            raise ServerError(f"{message}; its log: {log}") from None
        self._sessions[id(catalog)] = key  # the catalog stays in self._catalogs: its id is not reused
        self._startup[id(catalog)] = startup
        return catalog


async def _call_tool(client: Any, name: str, arguments: dict[str, Any], timeout: float) -> Any:
    """The call, within ``timeout`` seconds in all.  The SDK's ``read_timeout_seconds`` alone is not that: its clock
    starts once the request is written (a server that does not read its stdin holds the write) and runs again for
    each round of a call (input requests, a re-list after ``HEADER_MISMATCH``)."""
    import anyio

    with anyio.fail_after(timeout):
        return await client.call_tool(name, arguments, read_timeout_seconds=timeout)


async def _set(event: Any) -> None:
    event.set()


async def _make_event() -> Any:
    import anyio

    return anyio.Event()


async def _list_tools(client: Any) -> list[Any]:
    """Every page of ``tools/list``."""
    tools: list[Any] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools


async def _hold(
    target: Target,
    label: str,
    log: Path,
    timeout: float,
    opened: concurrent.futures.Future[tuple[Any, list[Any], float]],
    stop: Any,
) -> None:
    """Open the connection, list the tools, report them (with the seconds that took), and keep the session until
    ``stop``.

    Opening and listing get ``timeout`` in all.  A failure before the tools are reported is given to
    ``opened`` as a one-line :class:`ServerError`, once the connection is closed (a stdio server stopped);
    any failure, before or after, is written to ``log`` with its whole traceback.
    """
    import anyio
    from mcp import Client

    started = time.monotonic()
    watch = watch_connection(log)  # this task's context, inherited by the SDK's tasks: their log records go to `log`
    stdio = transport_of(target).stdio
    phase = "the MCP handshake"
    timed_out = False
    try:
        # one deadline for starting, the handshake and listing; lifted once the tools are in.  The scope wraps the
        # whole connection because the SDK's task groups must close inside the scope they were opened in.
        with anyio.CancelScope(deadline=anyio.current_time() + timeout) as deadline:
            async with AsyncExitStack() as stack:
                with open(log, "a", encoding="utf-8") as errlog:
                    watch.stderr_start = errlog.tell()
                transport = await open_transport(target, stack, log)
                client = await stack.enter_async_context(Client(transport, read_timeout_seconds=timeout))
                phase = "`tools/list`"
                tools = await _list_tools(client)
                deadline.deadline = math.inf
                opened.set_result((client, tools, time.monotonic() - started))
                await stop.wait()
        if deadline.cancelled_caught and not opened.done():  # the stack is unwound: a stdio server has stopped
            timed_out = True
            raise TimeoutError(f"no answer within {timeout:g} s")
    except BaseException as exc:
        try:
            _report(exc, opened, label, log, timeout, phase, stdio, timed_out, watch, not_found_hint(target, exc))
        finally:
            if not opened.done():  # writing the log failed: the caller must still hear of it
                opened.set_exception(ServerError(f"could not connect to the server ({label}): {one_line(exc)}"))
        if not isinstance(exc, Exception):
            raise


def _report(exc: BaseException, opened: concurrent.futures.Future[tuple[Any, list[Any], float]], label: str,
            log: Path, timeout: float, phase: str, stdio: bool, timed_out: bool, watch: Watch, hint: str = "") -> None:
    """Write the failure of a connection to its log and, before its tools were reported, give ``opened`` the
    one-line :class:`ServerError` that says what happened during ``phase``."""
    if opened.done():  # the tools were reported: the failure came later, while held or closing
        write_log(log, f"the connection to the server ({label}) failed", exc)
    elif timed_out:
        what = "complete the MCP handshake" if phase == "the MCP handshake" else "answer `tools/list`"
        message = f"server ({label}) did not {what} within {timeout:g} s ({TIMEOUT_OPTION})"
        write_log(log, message + ("; it was stopped" if stdio else ""))
        opened.set_exception(ServerError(f"{message}{watch.details(stdio)}; its log: {log}"))
    else:
        reason = one_line(exc)
        invalid = invalid_answer(exc)
        if invalid is not None:
            reason = f"its answer during {phase} is not valid MCP: {invalid}"
        elif is_closed(exc):
            how = exit_status(exc) if stdio else None
            reason = f"the server closed the connection during {phase}"
            reason += f" (its process ended with {how})" if how else ""
        reason += hint + watch.details(stdio)
        write_log(log, f"could not connect to the server ({label})", exc)
        opened.set_exception(ServerError(f"could not connect to the server ({label}): {reason}; its log: {log}"))
