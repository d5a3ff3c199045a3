"""MCP server lifecycle: one connection per server per process (xdist worker), tools fetched once.

Servers run in a background event loop (an anyio blocking portal) so a connection stays open for the
whole session: single-call evaluation only needs the tool list; flows with ``execute: live`` call tools
over the same session (:meth:`ServerPool.call_tool`, by the catalog that session listed).

Kinds of server: a static ``tools_file``, a ``command`` spoken to over stdio (stderr goes to a log
file, never to pytest's output), a streamable HTTP ``url``, an in-process ``python`` object, or
whatever an ``mcp_server`` fixture returns (an ``MCPServer``, a URL, ``StdioServerParameters``, or a
list of tool dicts).

Every server has a log file, and every failure of a server is written to it with its whole traceback
(each exception of an exception group), as are the MCP SDK's own log records about that connection (a line
a stdio server printed on stdout that is not JSON-RPC, ...); the one-line :class:`ServerError` says what
happened and names the log.

Time is bounded: starting a server, completing the MCP handshake and listing its tools get
``--mcp-connect-timeout`` in all (the SDK's own per-request timeouts would add up to more); past it the
connection is abandoned, a stdio server is stopped (the SDK closes its stdin, then terminates its process
group) and only then are its cases given the error, so no server process outlives its error.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import importlib
import logging
import math
import os
import re
import signal
import sys
import traceback
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_mcpeval.benchmark.schema import ServerSpec
from pytest_mcpeval.catalog import Catalog, catalog_from_json, catalog_from_mcp
from pytest_mcpeval.defaults import DEFAULT_CONNECT_TIMEOUT

STOP_GRACE = 10.0
"""Seconds a connection gets to stop after it is given up or at the end of the session (the SDK's stdio
shutdown is bounded at about 6.5 s: 0.5 s to flush, 2 s for the server to exit after its stdin closes,
2 s after SIGTERM, 2 s after SIGKILL)."""

TIMEOUT_OPTION = "--mcp-connect-timeout"


class ServerError(Exception):
    """The server could not be started, reached or listed: an infrastructure error."""


@dataclass(frozen=True)
class ToolResult:
    """A tool's answer over a live session, as builtin data.

    ``text`` is what a model is sent: the result's text parts joined by newlines (a text resource's text;
    ``[image: MIME]`` and the like for content a chat message cannot carry), or the structured content as
    compact JSON when there is no content.  ``structured`` is the structured content as the server sent it.
    """

    is_error: bool
    text: str
    structured: Any = None


@dataclass
class _Live:
    client: Any
    stop: Any  # anyio.Event, set from the portal to close the connection
    done: concurrent.futures.Future[None]
    label: str
    log: Path
    closed: str | None = None  # how the session was seen to close under a tool call: no call is tried again


def _first_leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _one_line(exc: BaseException) -> str:
    """``Type: message`` of the first leaf of an exception (group), on one line, for a one-line error."""
    leaf = _first_leaf(exc)
    text = " ".join(str(leaf).split())
    return f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__


def _invalid_answer(exc: BaseException) -> str | None:
    """``tools[1].inputSchema: Input should be ... (got 'query: string')`` when the SDK rejected what the server
    sent (a pydantic ``ValidationError``), else None."""
    from pydantic import ValidationError

    leaf = _first_leaf(exc)
    if not isinstance(leaf, ValidationError):
        return None
    parts = []
    for error in leaf.errors()[:3]:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"]).lstrip(".")
        got = repr(error.get("input"))
        got = got if len(got) <= 60 else got[:57] + "..."
        parts.append(f"{where}: {error['msg']} (got {got})")
    more = leaf.error_count() - len(parts)
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def _write_log(log: Path, headline: str, exc: BaseException | None = None) -> None:
    """Append ``mcpeval: HEADLINE`` and the whole traceback of ``exc`` (every exception of a group) to a log."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as out:
        out.write(f"mcpeval: {headline}\n")
        if exc is not None:
            out.write("".join(traceback.format_exception(exc)))


# -- the SDK's log records about a connection go to that server's log --------------------------------------------

@dataclass
class _Watch:
    """What is known of one connection while it opens: its log, where the server's stderr starts in it, and
    how many errors the MCP SDK logged about it (lines a stdio server printed on stdout that are not JSON-RPC)."""

    log: Path
    stderr_start: int = 0
    sdk_errors: int = 0

    def details(self, stdio: bool) -> str:
        """``; the last line of its stderr: ...`` and the SDK's errors, for a message about a failed start."""
        out = ""
        if self.sdk_errors:
            noun = "error" if self.sdk_errors == 1 else "errors"
            out += f"; the MCP SDK logged {self.sdk_errors} {noun} about it (in its log)"
        if stdio:
            last = _last_stderr_line(self.log, self.stderr_start)
            out += f"; the last line of its stderr: {last}" if last else "; it wrote nothing to stderr"
        return out


_WATCH: contextvars.ContextVar[_Watch | None] = contextvars.ContextVar("mcpeval_server_watch", default=None)
"""The connection the current task serves (the SDK's tasks inherit it from the task that opens it)."""


class _ToServerLog(logging.Filter):
    """Diverts the records an MCP SDK logger makes while serving one of our connections to that server's log.

    Such a record (``Failed to parse JSONRPC message from server``, ...) is about the user's server, so it
    belongs with the server's stderr and failures, not in pytest's output (where pytest would show it, with a
    traceback, under an unrelated item).  Records made anywhere else pass through unchanged.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        watch = _WATCH.get()
        if watch is None:
            return True
        detail = ""
        if record.exc_info and record.exc_info[1] is not None:
            detail = ": " + _one_line(record.exc_info[1])
        try:
            _write_log(watch.log, f"{record.name}: {record.levelname}: {record.getMessage()}{detail}")
        except OSError:
            return True
        if record.levelno >= logging.ERROR:
            watch.sdk_errors += 1
        return False


_DIVERT = _ToServerLog()


def _divert_sdk_logs() -> None:
    """Put :data:`_DIVERT` on every logger of the MCP SDK (``mcp.*``, and ``client`` of its session module).

    A logger's filters apply only to the records made on it, so each gets one; called after the SDK's modules
    are imported (their loggers exist from then on), and idempotent.
    """
    for name, logger in list(logging.root.manager.loggerDict.items()):
        sdk = name == "mcp" or name.startswith("mcp.") or name == "client"
        if sdk and isinstance(logger, logging.Logger) and _DIVERT not in logger.filters:
            logger.addFilter(_DIVERT)


# -- how a stdio server ended ----------------------------------------------------------------------------------


def _exit_status(exc: BaseException) -> str | None:
    """``exit code 3`` / ``signal SIGKILL``: how a stdio server's process ended, when the traceback tells.

    The SDK keeps its process object to itself; when a connection fails while its stdio transport is open,
    the transport's frame (``stdio_client``, local ``process``) is in the traceback, and by then the SDK has
    waited for the process to end.  Best effort: ``None`` when it cannot be found.
    """
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        tb = current.__traceback__
        while tb is not None:
            frame = tb.tb_frame
            if frame.f_code.co_name == "stdio_client" and frame.f_globals.get("__name__") == "mcp.client.stdio":
                code = getattr(frame.f_locals.get("process"), "returncode", None)
                if isinstance(code, int):
                    if code >= 0:
                        return f"exit code {code}"
                    try:
                        return f"signal {signal.Signals(-code).name}"
                    except ValueError:
                        return f"signal {-code}"
            tb = tb.tb_next
        pending.extend(getattr(current, "exceptions", None) or ())
        pending.extend((current.__cause__, current.__context__))
    return None


def _last_stderr_line(log: Path, start: int) -> str | None:
    """The last line a server wrote to its log (its stderr) since ``start``, not counting our own lines."""
    try:
        with log.open("rb") as f:
            f.seek(start)
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("mcpeval: ")]
    if not lines:
        return None
    last = lines[-1]
    return last if len(last) <= 200 else last[:197] + "..."


def _is_closed(exc: BaseException) -> bool:
    """The connection closed under the client (the server exited, or closed its end)."""
    from mcp.shared.exceptions import MCPError
    from mcp.types import CONNECTION_CLOSED

    leaf = _first_leaf(exc)
    return isinstance(leaf, MCPError) and leaf.code == CONNECTION_CLOSED


def _expand_env(value: str) -> str:
    return re.sub(r"\$\{(\w+)\}", lambda m: os.environ.get(m.group(1), ""), value)


def import_target(target: str, search_dirs: list[Path]) -> Any:
    """Import ``module:attr`` with ``search_dirs`` first on ``sys.path``."""
    module_name, _, attr = target.partition(":")
    for d in reversed(search_dirs):
        if str(d) not in sys.path:
            sys.path.insert(0, str(d))
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # the caller logs the traceback (the cause)
        raise ServerError(f"cannot import `{module_name}`: {type(exc).__name__}: {exc}") from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ServerError(f"module `{module_name}` has no attribute `{attr}`")
        obj = getattr(obj, part)
    return obj


class ServerPool:
    """Connections to the servers this process needs, keyed by what identifies each server."""

    def __init__(self, log_dir: Path, timeout: float = DEFAULT_CONNECT_TIMEOUT) -> None:
        self.log_dir = log_dir
        self.timeout = timeout
        self._catalogs: dict[str, Catalog | ServerError] = {}
        self._live: dict[str, _Live] = {}
        self._stack = ExitStack()
        self._portal: Any = None
        self._spec_keys: dict[tuple[int, Path], str] = {}
        self._sessions: dict[int, str] = {}  # id(catalog) -> key of the live session that listed it

    # -- public ---------------------------------------------------------------------------------
    def catalog_for_spec(self, spec: ServerSpec, base_dir: Path, root_dir: Path) -> Catalog:
        memo = (id(spec), base_dir)
        if memo not in self._spec_keys:  # relative paths resolve per directory
            self._spec_keys[memo] = f"{base_dir.resolve()}|{spec.model_dump_json()}"
        key = self._spec_keys[memo]
        return self._cached(key, lambda: self._open_spec(key, spec, base_dir, root_dir))

    def catalog_for_object(self, obj: Any) -> Catalog:
        """Connect to what an ``mcp_server`` fixture returned."""
        key = f"fixture:{type(obj).__name__}:{id(obj)}" if not isinstance(obj, str) else f"url:{obj}"
        return self._cached(key, lambda: self._open_object(key, obj))

    def call_tool(self, catalog: Catalog, name: str, arguments: dict[str, Any], timeout: float) -> ToolResult:
        """Call tool ``name`` over the live session that listed ``catalog``.

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
            result = self._portal.call(_call_tool, live.client, name, arguments, timeout)
        except Exception as exc:
            _write_log(live.log, f"the call of `{name}` on the server ({live.label}) failed", exc)
            if _is_closed(exc):
                live.closed = f"it closed the connection during a call of `{name}`"
                raise ServerError(f"the server ({live.label}) closed the connection during a call of `{name}` (it "
                                  f"exited or crashed); its log: {live.log}") from None
            raise ServerError(f"the server ({live.label}) failed to answer a call of `{name}`: {_one_line(exc)}; "
                              f"its log: {live.log}") from None
        return _tool_result(result)

    def close(self) -> None:
        """Stop every connection (all at once, within ``STOP_GRACE`` in all); never raises."""
        import time

        lives = list(self._live.values())
        self._live.clear()
        if self._portal is not None:
            for live in lives:
                try:
                    self._portal.call(live.stop.set)
                except Exception as exc:  # the portal is gone: nothing left to stop
                    _write_log(live.log, f"closing the server ({live.label}) failed", exc)
            deadline = time.monotonic() + STOP_GRACE
            for live in lives:
                try:
                    live.done.result(timeout=max(0.0, deadline - time.monotonic()))
                except concurrent.futures.TimeoutError:
                    live.done.cancel()  # or the portal would wait for it forever
                    _write_log(live.log, f"the server ({live.label}) did not close within "
                                         f"{STOP_GRACE:g} s; its connection was cancelled")
                except Exception as exc:  # closing a broken server must not mask the session's result: logged
                    _write_log(live.log, f"closing the server ({live.label}) failed", exc)
        self._stack.close()

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
        if spec.python is not None:
            try:
                target = import_target(spec.python, [base_dir, root_dir])
            except ServerError as exc:
                _write_log(log, str(exc), exc.__cause__)
                raise ServerError(f"{exc}; its log: {log}") from None
            return self._connect(key, target, spec.describe(), log)
        if spec.command is not None:
            from mcp import StdioServerParameters

            cwd = base_dir / spec.cwd if spec.cwd else base_dir
            env = {k: _expand_env(v) for k, v in spec.env.items()} if spec.env else None
            params = StdioServerParameters(command=spec.command[0], args=spec.command[1:], env=env, cwd=str(cwd))
            return self._connect(key, params, spec.describe(), log)
        assert spec.url is not None
        headers = {k: _expand_env(v) for k, v in (spec.headers or {}).items()}
        return self._connect(key, (spec.url, headers), spec.describe(), log)

    def _open_object(self, key: str, obj: Any) -> Catalog:
        if isinstance(obj, Catalog):
            return obj
        if isinstance(obj, list | dict):
            try:
                return catalog_from_json(obj)
            except ValueError as exc:
                raise ServerError(f"the mcp_server fixture returned an invalid tool list: {exc}") from None
        if isinstance(obj, str):
            return self._connect(key, (obj, {}), f"url: {obj}", self.log_dir / "server-fixture.log")
        return self._connect(key, obj, f"fixture {type(obj).__name__}", self.log_dir / "server-fixture.log")

    def _ensure_portal(self) -> Any:
        if self._portal is None:
            from anyio.from_thread import start_blocking_portal

            self._portal = self._stack.enter_context(start_blocking_portal())
        return self._portal

    def _connect(self, key: str, target: Any, label: str, log: Path) -> Catalog:
        portal = self._ensure_portal()
        log.parent.mkdir(parents=True, exist_ok=True)
        opened: concurrent.futures.Future[tuple[Any, list[Any]]] = concurrent.futures.Future()
        stop = portal.call(_make_event)
        done = portal.start_task_soon(_hold, target, label, log, self.timeout, opened, stop)
        try:  # _hold gives up at self.timeout and stops the server first: the grace is only a safety net
            client, tools = opened.result(timeout=self.timeout + STOP_GRACE)
        except concurrent.futures.TimeoutError:
            done.cancel()
            message = (f"server ({label}) did not start and list its tools within {self.timeout:g} s "
                       f"({TIMEOUT_OPTION}), nor stop within {STOP_GRACE:g} s more")
            _write_log(log, message)
            raise ServerError(f"{message}; its log: {log}") from None
        except ServerError:
            raise
        except Exception as exc:  # pragma: no cover - _hold reports a ServerError; anything else is a bug, logged
            _write_log(log, f"could not connect to the server ({label})", exc)
            raise ServerError(f"could not connect to the server ({label}): {_one_line(exc)}; its log: {log}") from None
        self._live[key] = _Live(client, stop, done, label, log)
        try:
            catalog = catalog_from_mcp(tools)
        except ValueError as exc:
            message = f"server ({label}) published an invalid tool list: {exc}"
            _write_log(log, message)
            raise ServerError(f"{message}; its log: {log}") from None
        self._sessions[id(catalog)] = key  # the catalog stays in self._catalogs: its id is not reused
        return catalog


async def _call_tool(client: Any, name: str, arguments: dict[str, Any], timeout: float) -> Any:
    return await client.call_tool(name, arguments, read_timeout_seconds=timeout)


def _content_text(part: Any) -> str:
    """What a chat message can carry of one content part of a tool result."""
    kind = getattr(part, "type", "")
    if kind == "text":
        return str(part.text)
    if kind == "resource":
        resource = part.resource
        text = getattr(resource, "text", None)
        return str(text) if text is not None else f"[resource: {resource.uri}]"
    if kind == "resource_link":
        return f"[resource link: {part.uri}]"
    mime = getattr(part, "mime_type", None) or getattr(part, "mimeType", None)
    return f"[{kind}: {mime}]" if mime else f"[{kind}]"


def _tool_result(result: Any) -> ToolResult:
    from pytest_mcpeval.text import canonical_json

    structured = result.structured_content
    parts = [_content_text(part) for part in result.content or []]
    text = "\n".join(parts) if parts else (canonical_json(structured) if structured is not None else "")
    return ToolResult(bool(result.is_error), text, structured)


async def _make_event() -> Any:
    import anyio

    return anyio.Event()


async def _hold(
    target: Any,
    label: str,
    log: Path,
    timeout: float,
    opened: concurrent.futures.Future[tuple[Any, list[Any]]],
    stop: Any,
) -> None:
    """Open the connection, list the tools, report them, and keep the session until ``stop``.

    Opening and listing get ``timeout`` in all.  A failure before the tools are reported is given to
    ``opened`` as a one-line :class:`ServerError`, once the connection is closed (a stdio server stopped);
    any failure, before or after, is written to ``log`` with its whole traceback.
    """
    import anyio
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    watch = _Watch(log)
    _WATCH.set(watch)  # this task's context, inherited by the SDK's tasks: their log records go to `log`
    _divert_sdk_logs()
    stdio = isinstance(target, StdioServerParameters)
    phase = "the MCP handshake"
    timed_out = False
    try:
        # one deadline for starting, the handshake and listing; lifted once the tools are in.  The scope wraps the
        # whole connection because the SDK's task groups must close inside the scope they were opened in.
        with anyio.CancelScope(deadline=anyio.current_time() + timeout) as deadline:
            async with AsyncExitStack() as stack:
                errlog = stack.enter_context(open(log, "a", encoding="utf-8"))  # noqa: SIM115
                watch.stderr_start = errlog.tell()
                if isinstance(target, StdioServerParameters):
                    target = stdio_client(target, errlog=errlog)
                elif isinstance(target, tuple):
                    url, headers = target
                    http = await stack.enter_async_context(create_mcp_http_client(headers=headers or None))
                    target = streamable_http_client(url, http_client=http)
                client = await stack.enter_async_context(Client(target, read_timeout_seconds=timeout))
                phase = "`tools/list`"
                tools: list[Any] = []
                cursor: str | None = None
                while True:
                    page = await client.list_tools(cursor=cursor)
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
                deadline.deadline = math.inf
                opened.set_result((client, tools))
                await stop.wait()
        if deadline.cancelled_caught and not opened.done():  # the stack is unwound: a stdio server has stopped
            timed_out = True
            raise TimeoutError(f"no answer within {timeout:g} s")
    except BaseException as exc:
        connected = opened.done()  # the tools were reported: the failure came later, while held or closing
        try:
            if connected:
                _write_log(log, f"the connection to the server ({label}) failed", exc)
            elif timed_out:
                what = "complete the MCP handshake" if phase == "the MCP handshake" else "answer `tools/list`"
                message = f"server ({label}) did not {what} within {timeout:g} s ({TIMEOUT_OPTION})"
                _write_log(log, message + ("; it was stopped" if stdio else ""))
                opened.set_exception(ServerError(f"{message}{watch.details(stdio)}; its log: {log}"))
            else:
                reason = _one_line(exc)
                invalid = _invalid_answer(exc)
                if invalid is not None:
                    reason = f"its answer during {phase} is not valid MCP: {invalid}"
                elif _is_closed(exc):
                    how = _exit_status(exc) if stdio else None
                    reason = f"the server closed the connection during {phase}"
                    reason += f" (its process ended with {how})" if how else ""
                reason += watch.details(stdio)
                _write_log(log, f"could not connect to the server ({label})", exc)
                message = f"could not connect to the server ({label}): {reason}; its log: {log}"
                opened.set_exception(ServerError(message))
        finally:
            if not opened.done():  # writing the log failed: the caller must still hear of it
                opened.set_exception(ServerError(f"could not connect to the server ({label}): {_one_line(exc)}"))
        if not isinstance(exc, Exception):
            raise


def load_tools_file(path: Path, shown: str | None = None) -> Catalog:
    """The catalog of a ``tools_file``; a :class:`ServerError` names the file (as ``shown``) and every problem."""
    from pytest_mcpeval.benchmark.loader import BenchmarkError
    from pytest_mcpeval.benchmark.tools_file import read_tools_file

    try:
        tools = read_tools_file(path, shown)
    except FileNotFoundError:
        raise ServerError(f"tools_file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ServerError(f"tools_file {path} cannot be read: {exc}") from None
    except BenchmarkError as exc:
        raise ServerError(f"tools_file {shown or path} is not a valid tool list:\n{exc}") from None
    try:
        return Catalog(tools)
    except ValueError as exc:  # pragma: no cover - read_tools_file checked names
        raise ServerError(f"tools_file {shown or path}: {exc}") from None
