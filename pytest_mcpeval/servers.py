"""MCP server lifecycle: one connection per server per process (xdist worker), tools fetched once.

Servers run in a background event loop (an anyio blocking portal) so a connection stays open for the
whole session: single-call evaluation only needs the tool list, multi-step flows will call tools over
the same session (:meth:`ServerPool.call_tool` is that seam).

Kinds of server: a static ``tools_file``, a ``command`` spoken to over stdio (stderr goes to a log
file, never to pytest's output), a streamable HTTP ``url``, an in-process ``python`` object, or
whatever an ``mcp_server`` fixture returns (an ``MCPServer``, a URL, ``StdioServerParameters``, or a
list of tool dicts).

Every server has a log file, and every failure of a server is written to it with its whole traceback
(each exception of an exception group); the one-line :class:`ServerError` names the first exception and
the log.
"""

from __future__ import annotations

import concurrent.futures
import importlib
import json
import os
import re
import sys
import traceback
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_mcpeval.benchmark.schema import ServerSpec
from pytest_mcpeval.catalog import Catalog, catalog_from_json, catalog_from_mcp
from pytest_mcpeval.defaults import DEFAULT_CONNECT_TIMEOUT


class ServerError(Exception):
    """The server could not be started, reached or listed: an infrastructure error."""


@dataclass
class _Live:
    client: Any
    stop: Any  # anyio.Event, set from the portal to close the connection
    done: concurrent.futures.Future[None]
    label: str
    log: Path


def _first_leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _one_line(exc: BaseException) -> str:
    """``Type: message`` of the first leaf of an exception (group), for a one-line error."""
    leaf = _first_leaf(exc)
    return f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__


def _write_log(log: Path, headline: str, exc: BaseException | None = None) -> None:
    """Append ``mcpeval: HEADLINE`` and the whole traceback of ``exc`` (every exception of a group) to a log."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as out:
        out.write(f"mcpeval: {headline}\n")
        if exc is not None:
            out.write("".join(traceback.format_exception(exc)))


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

    def call_tool(self, catalog_key: str, name: str, arguments: dict[str, Any]) -> Any:  # pragma: no cover
        """Seam for multi-step flows: call a tool over the live session."""
        live = self._live[catalog_key]
        return self._portal.call(live.client.call_tool, name, arguments)

    def close(self) -> None:
        for live in self._live.values():
            if self._portal is not None:
                try:
                    self._portal.call(live.stop.set)
                    live.done.result(timeout=10)
                except concurrent.futures.TimeoutError:
                    _write_log(live.log, f"the server ({live.label}) did not close within 10 s")
                except Exception as exc:  # closing a broken server must not mask the session's result: logged
                    _write_log(live.log, f"closing the server ({live.label}) failed", exc)
        self._live.clear()
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
        try:
            client, tools = opened.result(timeout=self.timeout + 15)
        except concurrent.futures.TimeoutError:
            portal.call(stop.set)
            message = f"server ({label}) did not answer within {self.timeout + 15:.0f} s"
            _write_log(log, message)  # if the connection fails later, _hold appends the traceback
            raise ServerError(f"{message}; its log: {log}") from None
        except Exception as exc:  # _hold has written the traceback to the log
            raise ServerError(f"could not connect to the server ({label}): {_one_line(exc)}; its log: {log}") from None
        self._live[key] = _Live(client, stop, done, label, log)
        try:
            return catalog_from_mcp(tools)
        except ValueError as exc:
            message = f"server ({label}) published an invalid tool list: {exc}"
            _write_log(log, message)
            raise ServerError(f"{message}; its log: {log}") from None


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

    Any failure, before or after the tools were reported, is written to ``log`` with its whole traceback.
    """
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    try:
        async with AsyncExitStack() as stack:
            errlog = stack.enter_context(open(log, "a", encoding="utf-8"))  # noqa: SIM115
            if isinstance(target, StdioServerParameters):
                target = stdio_client(target, errlog=errlog)
            elif isinstance(target, tuple):
                url, headers = target
                http = await stack.enter_async_context(create_mcp_http_client(headers=headers or None))
                target = streamable_http_client(url, http_client=http)
            client = await stack.enter_async_context(Client(target, read_timeout_seconds=timeout))
            tools: list[Any] = []
            cursor: str | None = None
            while True:
                page = await client.list_tools(cursor=cursor)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
            opened.set_result((client, tools))
            await stop.wait()
    except BaseException as exc:
        connected = opened.done()  # the tools were reported: the failure came later, while held or closing
        lost = f"the connection to the server ({label}) failed"
        try:
            _write_log(log, lost if connected else f"could not connect to the server ({label})", exc)
        finally:
            if not connected:
                failure = exc if isinstance(exc, Exception) else RuntimeError(repr(exc))
                if failure is not exc:
                    failure.__cause__ = exc
                opened.set_exception(failure)
        if not isinstance(exc, Exception):
            raise


def load_tools_file(path: Path) -> Catalog:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ServerError(f"tools_file {path} does not exist") from None
    except (OSError, ValueError) as exc:
        raise ServerError(f"tools_file {path} is not valid JSON: {exc}") from None
    try:
        return catalog_from_json(data)
    except ValueError as exc:
        raise ServerError(f"tools_file {path}: {exc}") from None
