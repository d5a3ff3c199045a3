"""A server's log, and its failures in one line.

Every server has a log file.  It holds what a stdio server wrote to stderr (masked and capped: :class:`StderrPipe`),
every failure of the server with
its whole traceback (:func:`write_log`; each exception of an exception group), and the MCP SDK's own log
records about that connection (:func:`watch_connection`: a line a stdio server printed on stdout that is not
JSON-RPC, ...).  The rest of this module turns such a failure into the one line a :class:`ServerError
<pytest_mcpeval.servers.ServerError>` says: the first leaf exception (:func:`one_line`), what the SDK found
invalid in an answer (:func:`invalid_answer`), a connection the server closed (:func:`is_closed`) and how its
process ended (:func:`exit_status`), and the last line of its stderr (:meth:`Watch.details`).
"""

from __future__ import annotations

import collections
import contextvars
import logging
import os
import re
import signal
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

# -- a failure in one line, and the whole of it in the log -------------------------------------------------------

def _first_leaf(exc: BaseException) -> BaseException:
    """The first exception that is not a group: what a failure of an exception group is said to be."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def one_line(exc: BaseException) -> str:
    """``Type: message`` of the first leaf of an exception (group), on one line, for a one-line error."""
    leaf = _first_leaf(exc)
    text = " ".join(str(leaf).split())
    return f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__


def invalid_answer(exc: BaseException) -> str | None:
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


def write_log(log: Path, headline: str, exc: BaseException | None = None) -> None:
    """Append ``mcpeval: HEADLINE`` and the whole traceback of ``exc`` (every exception of a group) to a log,
    masked (a URL's token in an exception, a key in a request the SDK logged).  What a stdio server writes to its
    stderr goes to the same file, masked too (:class:`StderrPipe`)."""
    from pytest_mcpeval.redact import masked

    log.parent.mkdir(parents=True, exist_ok=True)
    text = f"mcpeval: {headline}\n" + ("".join(traceback.format_exception(exc)) if exc is not None else "")
    with log.open("a", encoding="utf-8") as out:
        out.write(masked(text))


# -- a stdio server's stderr: masked, capped, always drained ---------------------------------------------------

STDERR_CAP = 1_000_000  # bytes of a server's stderr its log keeps from the start; then only its last lines
STDERR_TAIL = 20  # the last lines kept past the cap (the "last line of its stderr" of a failure is one of them)
LINE_MAX = 65_536  # a line longer than this (no newline in sight) is masked and written in pieces of this size
STDERR_GRACE = 2.0  # seconds the end of a connection waits for the reader to drain what the server left


class StderrPipe:
    """The stderr of a stdio server: a pipe that a thread drains into the server's log, line by line.

    Each line is masked (by value and by shape, :func:`pytest_mcpeval.redact.masked`: a server that echoes its
    ``env:`` or prints its command line shows no secret) before it is written, and the log keeps the first
    :data:`STDERR_CAP` bytes; past them it keeps only the last :data:`STDERR_TAIL` lines, written when the server
    ends after one line ``mcpeval: ... [N bytes of its stderr cut by pytest-mcpeval]``.  The thread reads all the
    while, so a server that writes without end never blocks on a full pipe, and ends when the last process
    holding the write end (the server, its children) closes it: :meth:`close` closes ours and waits for that.
    """

    def __init__(self, log: Path) -> None:
        read, write = os.pipe()
        self.log = log
        self.writer = os.fdopen(write, "wb", buffering=0)  # given to the server as its stderr
        self._thread = threading.Thread(target=self._drain, args=(read,), name=f"mcpeval-stderr-{log.stem}",
                                        daemon=True)
        self._thread.start()

    async def close(self) -> None:
        """Once the server is stopped: close our write end and wait (bounded, off the event loop) for the reader
        to write what is left, so that a failure's message can quote the last line."""
        import anyio

        self.writer.close()
        with anyio.CancelScope(shield=True):  # also when the connection's deadline cancelled everything else
            await anyio.to_thread.run_sync(self._thread.join, STDERR_GRACE)

    def _drain(self, fd: int) -> None:
        from pytest_mcpeval.redact import masked

        kept = 0  # bytes written to the log
        cut = 0  # bytes past the cap, the tail included
        tail: collections.deque[bytes] = collections.deque(maxlen=STDERR_TAIL)

        def take(lines: list[bytes], out: BinaryIO) -> None:
            nonlocal kept, cut
            for line in lines:
                if kept < STDERR_CAP:
                    text = (masked(line.decode("utf-8", "replace")) + "\n").encode("utf-8", "replace")
                    out.write(text)
                    kept += len(text)
                    if kept >= STDERR_CAP:
                        out.write(f"mcpeval: its stderr reached the {STDERR_CAP:,}-byte cap of this log: the rest is "
                                  f"cut but for its last {STDERR_TAIL} lines, written when it ends\n".encode())
                else:
                    cut += len(line) + 1
                    tail.append(line)

        with os.fdopen(fd, "rb", buffering=0) as pipe:
            try:
                out = self.log.open("ab")
            except OSError:  # no log: still drained, or the server would block
                while pipe.read(LINE_MAX):
                    pass
                return
            with out:
                pending = b""
                while chunk := pipe.read(LINE_MAX):
                    lines = (pending + chunk).split(b"\n")
                    pending = lines.pop()
                    if len(pending) >= LINE_MAX:
                        lines.append(pending)
                        pending = b""
                    take(lines, out)
                    out.flush()
                if pending:
                    take([pending], out)
                if cut:
                    shown = sum(len(line) + 1 for line in tail)
                    out.write(f"mcpeval: ... [{cut - shown:,} bytes of its stderr cut by pytest-mcpeval: the log "
                              f"keeps the first {STDERR_CAP:,} bytes and the last {len(tail)} lines]\n".encode())
                    for line in tail:
                        out.write((masked(line.decode("utf-8", "replace")) + "\n").encode("utf-8", "replace"))


# -- the SDK's log records about a connection go to that server's log --------------------------------------------

@dataclass
class Watch:
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
            lines = _stderr_lines(self.log, self.stderr_start)
            last = _shown(lines[-1]) if lines else None
            out += f"; the last line of its stderr: {last}" if last else "; it wrote nothing to stderr"
            if lines:
                out += mcp_hint(lines)
        return out


_WATCH: contextvars.ContextVar[Watch | None] = contextvars.ContextVar("mcpeval_server_watch", default=None)
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
            detail = ": " + one_line(record.exc_info[1])
        try:
            write_log(watch.log, f"{record.name}: {record.levelname}: {record.getMessage()}{detail}")
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


def watch_connection(log: Path) -> Watch:
    """Start watching the connection the calling task opens, whose server writes to ``log``.

    The watch is set in the task's context, which the SDK's tasks inherit: from then on the SDK's log records
    about this connection go to ``log`` (and its errors are counted) instead of pytest's output.
    """
    watch = Watch(log)
    _WATCH.set(watch)
    _divert_sdk_logs()
    return watch


# -- how a stdio server ended ----------------------------------------------------------------------------------


def exit_status(exc: BaseException) -> str | None:
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


def _stderr_lines(log: Path, start: int) -> list[str]:
    """The lines a server wrote to its log (its stderr) since ``start``, not counting our own lines."""
    try:
        with log.open("rb") as f:
            f.seek(start)
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    return [line.rstrip() for line in text.splitlines() if line.strip() and not line.startswith("mcpeval: ")]


def _shown(line: str) -> str:
    from pytest_mcpeval.redact import masked

    last = masked(line.strip())  # before the cut: a cut secret would escape the mask
    return last if len(last) <= 200 else last[:197] + "..."


MCP1_HINT = ("; it looks written for mcp 1.x and ran with mcp 2.x: a stdio server runs from its own environment "
             "(command: [path/to/its/venv/bin/python, -m, ...]), and installing pytest-mcpeval (mcp 2.x) into "
             "that environment upgrades its mcp (README: Servers built on mcp 1.x)")
"""Said after the last line of a server's stderr when :func:`written_for_mcp1` holds."""
NO_MCP_HINT = ("; the Python that ran it has no mcp (a bare `python` in command is the one on PATH): start it with "
               "its own environment's Python (command: [path/to/its/venv/bin/python, ...])")
"""Said when the server's Python could not import ``mcp`` at all."""


def mcp_hint(lines: list[str]) -> str:
    """What to do about a stdio server that died of the MCP SDK it found (or did not find); else ``""``."""
    if lines[-1].strip() == "ModuleNotFoundError: No module named 'mcp'":
        return NO_MCP_HINT
    return MCP1_HINT if written_for_mcp1(lines) else ""


_API_ERRORS = ("ImportError", "ModuleNotFoundError", "AttributeError")
_MCP_NAMED = re.compile(r"""['"]mcp(?:\.[\w.]+)?['"]""")  # No module named 'mcp.server.fastmcp'; from 'mcp.types'
_OBJECT = re.compile(r"""^'(\w+)' object has no attribute""")
_MCP_FRAME = re.compile(r"""^\s*File "(?:.*[/\\])?mcp[/\\]""")


def written_for_mcp1(lines: list[str]) -> bool:
    """The server died of an import or attribute error of the MCP SDK: code of mcp 1.x under mcp 2.x.

    mcp 2.x renamed and removed APIs (``mcp.server.fastmcp`` is gone, the low-level ``Server`` lost its
    ``list_resources()``... decorators), so a server written for 1.x and run where the plugin's mcp 2.x is
    installed dies at import with ``ModuleNotFoundError`` / ``ImportError`` / ``AttributeError``.  Such an error
    is the SDK's when its message names an ``mcp`` module, a frame of its traceback is in an ``mcp/`` package,
    or the object without the attribute is of a class the SDK exports (``'Server' object has no attribute
    'list_resources'``, raised by the server's own decorator line).
    """
    last = lines[-1].strip()
    kind, _, message = last.partition(": ")
    if kind.rpartition(".")[2] not in _API_ERRORS:
        return False
    if _MCP_NAMED.search(message):
        return True
    start = max((i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")),
                default=0)
    if any(_MCP_FRAME.match(line) for line in lines[start:]):
        return True
    named = _OBJECT.match(message)
    return named is not None and named.group(1) in _sdk_classes()


def _sdk_classes() -> set[str]:
    """Names of the classes the MCP SDK exports where servers import them from."""
    import importlib

    names: set[str] = set()
    for module in ("mcp", "mcp.server", "mcp.server.lowlevel"):
        try:
            found = importlib.import_module(module)
        except ImportError:  # pragma: no cover - the plugin requires mcp
            continue
        names.update(n for n, v in vars(found).items() if isinstance(v, type) and not n.startswith("_"))
    return names


def is_closed(exc: BaseException) -> bool:
    """The connection closed under the client (the server exited, or closed its end)."""
    from mcp.shared.exceptions import MCPError
    from mcp.types import CONNECTION_CLOSED

    leaf = _first_leaf(exc)
    return isinstance(leaf, MCPError) and leaf.code == CONNECTION_CLOSED
