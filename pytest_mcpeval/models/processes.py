"""Model calls made in worker processes: litellm's CPU on every core, and its import while pytest collects.

litellm spends several milliseconds of CPU on every call (building the request, parsing and pricing the
answer), under one GIL: in one process, thousands of calls are bound by one core whatever the concurrency.
With ``--mcp-processes=N`` the litellm calls of a run are made by N worker processes, each serving its calls
on threads, with half (a 1/N share) of the run's concurrency: the threads of the dispatcher's pools
(:mod:`pytest_mcpeval.run.dispatch`) are spread over them, one connection each, so the concurrency,
retries, cache and order of the calls are the pytest process's as before, and only the litellm call itself
(:func:`pytest_mcpeval.models.litellm_client.complete`, retries included) runs in the worker.

The executor is the standard library's :class:`multiprocessing.managers.BaseManager`: a server process that
serves each connection on a thread of its own, so calls stream back one by one as they complete.
(``concurrent.futures.ProcessPoolExecutor`` runs one task at a time per process: a process could not have
several calls in flight and hand back each as it completes.)  Workers are forked from a fork server that
imported litellm once (``forkserver`` with litellm preloaded; ``spawn`` where there is no fork server), so
the import is paid once, in the background, while pytest collects (:func:`pytest_mcpeval.run.planning.note_model_item`).

A worker sees the pytest process's environment as it is at each call (API keys set by a fixture too; not the
variables pytest sets per item, :data:`PER_ITEM_ENV`; copied by :func:`environment`, the one safe way here), the
tool list once per catalog, and nothing else of it: litellm settings made in a ``conftest.py`` (callbacks,
custom providers, monkeypatches) stay in the pytest process.  So under ``auto`` no call goes to a worker once
the session's own code has imported litellm (:func:`litellm_set_up_here`); ``--mcp-processes=N`` is obeyed.
A worker that cannot be started leaves its calls to the pytest process; one that dies makes the calls it
had in flight errors of their cases.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import sys
import threading
from concurrent.futures import Future
from multiprocessing.managers import BaseManager
from typing import TYPE_CHECKING, Any

from pytest_mcpeval.models.common import OFFLINE_ENV, ModelCallError
from pytest_mcpeval.models.reply import ModelReply

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from pytest_mcpeval.catalog import Catalog
    from pytest_mcpeval.models.config import ModelSpec

# imported by the fork server once, before it forks the workers: this module first (its environment before the
# imports: _ENV_BEFORE), then litellm_client, whose litellm_load sets the offline switches, then litellm
# (litellm_loaded: the import made by litellm_load.load_litellm, the collector off, its objects frozen before any fork)
PRELOAD = ["pytest_mcpeval.models.processes", "pytest_mcpeval.models.litellm_client",
           "pytest_mcpeval.models.litellm_loaded"]
# what pytest sets for the item it runs, and deletes after it: nothing a model call depends on, and a value that
# changes with every item would make every call send the whole environment again
PER_ITEM_ENV = frozenset({"PYTEST_CURRENT_TEST"})


def environment() -> dict[str, str]:
    """A copy of ``os.environ`` without :data:`PER_ITEM_ENV`, safe to take on any thread while pytest's main thread
    sets and deletes variables.

    ``dict(os.environ)``, ``os.environ.copy()`` (the same) and comparing ``os.environ`` with a dict all list the
    names, then look each one up: a name deleted in between (``PYTEST_CURRENT_TEST``, once per item) raised
    ``KeyError`` and lost the case (1-3 in 10,000).  Listing the names is one atomic copy of the underlying dict
    (``os.environ`` iterates over ``list()`` of it), and ``get`` answers ``None`` for a name that has gone since,
    so nothing here can raise: a name deleted meanwhile is left out, one set meanwhile is in the next copy."""
    found: dict[str, str] = {}
    for name in list(os.environ):
        if name not in PER_ITEM_ENV:
            value = os.environ.get(name)
            if value is not None:
                found[name] = value
    return found


_ENV_BEFORE = environment()


class _NeedTools(Exception):
    """The worker has not seen this catalog yet (another thread's first call with it is still on its way)."""


_env_lock = threading.Lock()
_env_last: dict[str, str] = {}  # the pytest process's environment as last sent; {}: _ENV_BEFORE


def _sync_env(env: dict[str, str]) -> None:
    """The pytest process's changes since the last call, applied here: what it set, and what it removed.  What
    the worker's own imports set (litellm sets ``TIKTOKEN_CACHE_DIR``) stays: removing it made litellm fetch
    its tokenizer from the network on its first Anthropic call."""
    global _env_last
    with _env_lock:
        last = _env_last or _ENV_BEFORE
        if env == last:
            return
        for name in [n for n in last if n not in env]:
            os.environ.pop(name, None)
        os.environ.update(env)
        _env_last = env


class _Caller:
    """In a worker process: litellm calls, one per connection (the manager serves each on its thread)."""

    def __init__(self) -> None:
        self._tools: dict[str, list[dict[str, Any]]] = {}

    def pid(self) -> int:
        return os.getpid()

    def complete(self, model: ModelSpec, messages: list[dict[str, Any]], digest: str, tools_json: str | None,
                 retries: int, timeout: float, seed: int, env: dict[str, str] | None) -> ModelReply:
        from pytest_mcpeval.models import litellm_client

        if env is not None:  # None: as this thread sent it last
            _sync_env(env)
        tools = self._tools.get(digest)
        if tools is None:
            if tools_json is None:
                raise _NeedTools(digest)
            tools = self._tools.setdefault(digest, json.loads(tools_json))
        return litellm_client.complete(model, messages, tools, retries=retries, timeout=timeout, seed=seed)


class _Manager(BaseManager):
    pass


_Manager.register("Caller", _Caller)


def _warm() -> None:
    """The worker's initializer: litellm imported before the first call (a no-op when the fork server has it),
    and the worker ends with its parent, the fork server, which ends with the pytest process: a pytest process
    killed outright (SIGKILL, or SIGTERM outside a session) leaves no worker behind.

    The fork server ends when the last holder of its "alive" pipe is gone, and it hands that pipe to every
    process it forks (so that they may use it in turn): a worker holding it kept the fork server alive, which
    kept the worker alive (the fork server, its resource tracker and two workers outlived a pytest process sent
    SIGTERM).  A worker forks nothing: it closes its copy."""
    import signal
    from multiprocessing import forkserver

    from pytest_mcpeval.interrupts import end_with_parent
    from pytest_mcpeval.models import litellm_load

    for name in PER_ITEM_ENV:  # the fork server may have been started while an item ran: not the worker's to keep
        os.environ.pop(name, None)
    server = getattr(forkserver, "_forkserver", None)
    alive = getattr(server, "_forkserver_alive_fd", None)  # None under spawn
    if isinstance(alive, int):
        with contextlib.suppress(OSError):
            os.close(alive)
        server._forkserver_alive_fd = None  # type: ignore[union-attr]
    # nothing of the run is in a worker: its calls in flight are abandoned; the kernel's signal only for a worker
    # forked by the fork server (under spawn its parent is a starting thread of the pytest process, soon gone)
    end_with_parent(signal.SIGKILL, kernel=isinstance(alive, int))
    litellm_load.load_litellm()


def _context() -> Any:
    import multiprocessing

    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)  # no effect when this process's fork server is already running
        return context
    return multiprocessing.get_context("spawn")


def litellm_set_up_here() -> bool:
    """Whether litellm was imported in this process by something other than the plugin (a ``conftest.py``, a
    plugin, the tests' own code): whatever it set there (callbacks, custom providers, ``litellm.api_base``,
    monkeypatches) lives in this process only, and a worker process would call without it."""
    if "litellm" not in sys.modules:
        return False
    client = sys.modules.get("pytest_mcpeval.models.litellm_load")
    return client is None or bool(client.imported_elsewhere())


class CallProcesses:
    """``count`` worker processes making litellm calls; :meth:`complete` is :func:`litellm_client.complete`.

    Chosen by ``auto`` (not by ``--mcp-processes=N``), they make no call once :func:`litellm_set_up_here`: the
    calls are then made in the pytest process, where the user's litellm settings are."""

    def __init__(self, count: int, auto: bool = False) -> None:
        self.count = count
        self.auto = auto
        self._here = False  # auto, and litellm is set up in the pytest process: every call made there
        self._workers: list[Future[tuple[Any, Any]]] = []
        self._known: list[set[str]] = [set() for _ in range(count)]  # catalogs each worker was sent
        self._lock = threading.Lock()
        self._order = itertools.count()
        self._local = threading.local()
        self._closed = False

    @property
    def started(self) -> bool:
        return bool(self._workers)

    def start(self) -> None:
        """Start the workers in the background (they import litellm); returns at once.  Idempotent."""
        with self._lock:
            if self._workers or self._closed:
                return
            for name, value in OFFLINE_ENV.items():  # the workers' environment follows ours at every call
                os.environ.setdefault(name, value)
            context = _context()
            for index in range(self.count):
                future: Future[tuple[Any, Any]] = Future()
                self._workers.append(future)
                threading.Thread(target=self._start_one, args=(context, future), name=f"mcpeval-start-{index}",
                                 daemon=True).start()

    def _start_one(self, context: Any, future: Future[tuple[Any, Any]]) -> None:
        try:
            manager = _Manager(ctx=context)
            manager.start(initializer=_warm)
            caller = manager.Caller()  # type: ignore[attr-defined]
            pid = int(caller.pid())
        except BaseException as exc:  # handed to the calls, which fall back to this process
            future.set_exception(exc)
            return
        if self._closed:  # the run ended while this worker was starting
            _stop(pid)
        future.set_result((pid, caller))

    def complete(self, model: ModelSpec, messages: list[dict[str, Any]], catalog: Catalog, *, retries: int,
                 timeout: float, seed: int) -> ModelReply | None:
        """The reply, made by this thread's worker; ``None`` when no worker could be started, or litellm is set
        up in this process under ``auto`` (call here)."""
        if self.auto and (self._here or litellm_set_up_here()):
            self._here = True  # for good: the rest of the run's calls are made where these are
            return None
        self.start()
        if self._closed:
            return None
        index = getattr(self._local, "index", None)
        if index is None:  # each thread of the dispatcher's pools keeps one worker: they share the concurrency
            index = self._local.index = next(self._order) % self.count
        try:
            _, caller = self._workers[index].result()
        except Exception as exc:  # the worker could not be started: the pytest process makes the call itself
            log.debug("call process %d not available (%r): the call is made in this process", index, exc)
            return None
        digest = catalog.digest
        known = self._known[index]
        send = None if digest in known else json.dumps(catalog.openai_tools)
        known.add(digest)
        env: dict[str, str] | None = environment()  # taken on this thread: a copy, never os.environ itself
        if getattr(self._local, "env", None) == env:  # sent once per thread, and again when it changes
            env = None
        else:
            self._local.env = env
        for _ in range(2):
            try:
                reply: ModelReply = caller.complete(model, messages, digest, send, retries, timeout, seed, env)
                return reply
            except _NeedTools:
                send = json.dumps(catalog.openai_tools)
            except (EOFError, OSError) as exc:  # the worker died (killed, out of memory) or was shut down
                raise ModelCallError(f"model {model.name} ({model.target}): the process making its calls ended "
                                     f"({type(exc).__name__}: {exc})") from None
        raise AssertionError("unreachable: the tools were sent")

    def close(self) -> None:
        """Stop the workers at once (a call in flight is abandoned, as the dispatcher's threads are; nothing of
        the run is in a worker).  Not the manager's shutdown, which waits up to a second per worker."""
        with self._lock:
            self._closed = True
            workers = list(self._workers)
        for future in workers:
            if future.done() and future.exception() is None:
                pid, _ = future.result()
                _stop(pid)


def _stop(pid: int) -> None:
    import signal

    with contextlib.suppress(OSError):  # already gone
        os.kill(pid, signal.SIGTERM)
