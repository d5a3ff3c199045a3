"""The ways of reaching an MCP server, in one table: server block key -> typed spec -> the transport to open.

A benchmark file's ``server:`` block names where the tools come from with one key (``tools_file``, or one of
:data:`TRANSPORTS`'s keys); an ``mcp_server`` fixture returns a URL or an SDK object instead.  Each becomes one
small spec object (:class:`Stdio`, :class:`Http`, :class:`InProcess`) and each spec's :class:`Transport` opens
it: what ``mcp.Client`` is then given (a transport context manager, or the in-process server itself).

A new transport is one entry here (its spec, how a server block builds it, how it opens) and its fields in
:class:`pytest_mcpeval.benchmark.schema.ServerSpec`, whose "exactly one of" check and messages read
:data:`SOURCE_KEYS`.  Nothing here imports mcp (nor anything of ours) at load: the SDK is imported when a
connection opens.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "SOURCE_KEYS",
    "TRANSPORTS",
    "Http",
    "InProcess",
    "ServerBlock",
    "ServerError",
    "Stdio",
    "Target",
    "Transport",
    "expand_env",
    "import_target",
    "open_transport",
    "target_of_object",
]

# MCP's default timeouts for its HTTP transport (mcp.shared._httpx_utils: MCP_DEFAULT_TIMEOUT and
# MCP_DEFAULT_SSE_READ_TIMEOUT): 30 s to connect, write and wait for the pool, 300 s per read (a server may hold
# a response stream open)
HTTP_TIMEOUT = 30.0
HTTP_READ_TIMEOUT = 300.0


class ServerBlock(Protocol):
    """What a transport reads of a benchmark file's ``server:`` block
    (:class:`~pytest_mcpeval.benchmark.schema.ServerSpec`, which imports this module for :data:`SOURCE_KEYS`)."""

    @property
    def command(self) -> list[str] | None: ...
    @property
    def env(self) -> dict[str, str] | None: ...
    @property
    def cwd(self) -> str | None: ...
    @property
    def url(self) -> str | None: ...
    @property
    def headers(self) -> dict[str, str] | None: ...
    @property
    def python(self) -> str | None: ...


@dataclass(frozen=True)
class Stdio:
    """A command spoken to over its stdin / stdout (its stderr goes to the server's log)."""

    command: list[str]
    env: dict[str, str] | None = None
    cwd: str | None = None
    params: Any = None  # an SDK ``StdioServerParameters`` an mcp_server fixture returned, used as it is


@dataclass(frozen=True)
class Http:
    """A streamable HTTP endpoint, with the headers sent on every request."""

    url: str
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class InProcess:
    """A server object in this process (an ``MCPServer``, a low-level ``Server``, anything ``mcp.Client`` takes)."""

    server: Any
    search_dirs: tuple[str, ...] = ()  # what import_target put on sys.path for it: taken off when it closes


Target = Stdio | Http | InProcess


def expand_env(value: str) -> str:
    """``${VAR}`` replaced from the environment (an unset variable by nothing)."""
    return re.sub(r"\$\{(\w+)\}", lambda m: os.environ.get(m.group(1), ""), value)


class ServerError(Exception):
    """The server could not be started, reached or listed: an infrastructure error."""


_path_holds: dict[str, int] = {}  # directory import_target put on sys.path -> connections that still need it


def import_target(target: str, search_dirs: list[Path]) -> InProcess:
    """Import ``module:attr`` with ``search_dirs`` first on ``sys.path``.

    A directory not on ``sys.path`` already is put in front of it for the import and stays there while a server
    imported through it runs (its tools may import their own modules when called): :func:`release`, when the
    connection closes, takes it off again once no other such server needs it."""
    module_name, _, attr = target.partition(":")
    held: list[str] = []
    for d in map(str, reversed(search_dirs)):
        if d in _path_holds:
            _path_holds[d] += 1
        elif d not in sys.path:
            sys.path.insert(0, d)
            _path_holds[d] = 1
        else:
            continue  # the user's own entry: never ours to take off
        held.append(d)
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            if not hasattr(obj, part):
                raise ServerError(f"module `{module_name}` has no attribute `{attr}`")
            obj = getattr(obj, part)
    except ServerError:
        release(held)
        raise
    except Exception as exc:  # the caller logs the traceback (the cause)
        release(held)
        raise ServerError(f"cannot import `{module_name}`: {type(exc).__name__}: {exc}") from exc
    return InProcess(obj, tuple(held))


def release(search_dirs: tuple[str, ...] | list[str]) -> None:
    """Give back the hold :func:`import_target` took on each directory; the last one takes it off ``sys.path``."""
    for d in search_dirs:
        left = _path_holds.get(d, 0) - 1
        if left > 0:
            _path_holds[d] = left
            continue
        _path_holds.pop(d, None)
        if d in sys.path:
            sys.path.remove(d)


async def _open_stdio(spec: Stdio, stack: AsyncExitStack, log: Path) -> Any:
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    from pytest_mcpeval.server_log import StderrPipe

    params = spec.params
    if params is None:
        params = StdioServerParameters(command=spec.command[0], args=spec.command[1:], env=spec.env, cwd=spec.cwd)
    # masked and capped by a thread (server_log.StderrPipe); closed once the server has stopped, before a failure
    # quotes its last line (the stack unwinds in reverse: the client first)
    pipe = StderrPipe(log)
    stack.push_async_callback(pipe.close)
    return stdio_client(params, errlog=pipe.writer)  # type: ignore[arg-type]


async def _open_http(spec: Http, stack: AsyncExitStack, log: Path) -> Any:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    # The client the SDK would make itself (mcp.shared._httpx_utils.create_mcp_http_client: its timeouts, no other
    # setting), built here because that factory is private to the SDK and mcp 2.x has no public one; the SDK's
    # streamable_http_client takes headers only through the client it is given.
    kwargs: dict[str, Any] = {"timeout": httpx2.Timeout(HTTP_TIMEOUT, read=HTTP_READ_TIMEOUT)}
    if spec.headers:
        kwargs["headers"] = spec.headers
    http = await stack.enter_async_context(httpx2.AsyncClient(**kwargs))
    return streamable_http_client(spec.url, http_client=http)


async def _open_in_process(spec: InProcess, stack: AsyncExitStack, log: Path) -> Any:
    stack.callback(release, spec.search_dirs)
    return spec.server


def _stdio_from_block(block: ServerBlock, base_dir: Path, root_dir: Path) -> Target:
    assert block.command is not None
    cwd = base_dir / expand_env(block.cwd) if block.cwd else base_dir
    env = {k: expand_env(v) for k, v in block.env.items()} if block.env else None
    return Stdio([expand_env(part) for part in block.command], env, str(cwd))


def _http_from_block(block: ServerBlock, base_dir: Path, root_dir: Path) -> Target:
    assert block.url is not None
    return Http(block.url, {k: expand_env(v) for k, v in (block.headers or {}).items()})


def _in_process_from_block(block: ServerBlock, base_dir: Path, root_dir: Path) -> Target:
    assert block.python is not None
    return import_target(block.python, [base_dir, root_dir])


@dataclass(frozen=True)
class Transport:
    """One way of reaching a server: the key of the server block that selects it, the spec it builds, and how
    that spec opens (inside the connection's exit stack, which closes what it opened)."""

    key: str
    spec: type
    from_block: Callable[[ServerBlock, Path, Path], Target]
    open: Callable[[Any, AsyncExitStack, Path], Awaitable[Any]]
    stdio: bool = False  # a process of ours: stopped on failure, its exit status and stderr quoted


TRANSPORTS: dict[str, Transport] = {
    t.key: t for t in (
        Transport("command", Stdio, _stdio_from_block, _open_stdio, stdio=True),
        Transport("url", Http, _http_from_block, _open_http),
        Transport("python", InProcess, _in_process_from_block, _open_in_process),
    )
}
"""Server block key -> its transport, in the order the format documents them."""

SOURCE_KEYS: tuple[str, ...] = ("tools_file", *TRANSPORTS)
"""The keys of a server block of which exactly one says where the tools come from (``tools_file``: no server)."""

_BY_SPEC = {t.spec: t for t in TRANSPORTS.values()}


def transport_of(target: Target) -> Transport:
    return _BY_SPEC[type(target)]


def target_of_object(obj: Any) -> Target:
    """The spec of what an ``mcp_server`` fixture returned: a URL, ``StdioServerParameters``, or a server object."""
    from mcp import StdioServerParameters

    if isinstance(obj, str):
        return Http(obj)
    if isinstance(obj, StdioServerParameters):
        return Stdio([obj.command, *obj.args], params=obj)
    return InProcess(obj)


async def open_transport(target: Target, stack: AsyncExitStack, log: Path) -> Any:
    """What ``mcp.Client`` is given for ``target``, opened inside ``stack``."""
    return await transport_of(target).open(target, stack, log)


def not_found_hint(target: Any, exc: BaseException) -> str:
    """Where a relative command that was not found was looked for (the benchmark file's directory, or ``cwd``)."""
    if not isinstance(target, Stdio) or not target.command or target.cwd is None:
        return ""
    program = target.command[0]
    if os.path.isabs(program) or os.sep not in program:  # absolute, or looked up on PATH
        return ""
    found: list[BaseException] = [exc]
    while found:
        one = found.pop()
        if isinstance(one, FileNotFoundError):
            where = os.path.normpath(os.path.join(target.cwd, program))
            return f"; {program} was resolved from {target.cwd} (the file's directory, or its `cwd`) to {where}"
        found.extend(getattr(one, "exceptions", ()))
        if one.__cause__ is not None:
            found.append(one.__cause__)
    return ""
