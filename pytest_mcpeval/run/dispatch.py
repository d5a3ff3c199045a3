"""Concurrent model calls, and which xdist worker runs which items.

pytest runs items one after another; an evaluation is I/O bound.  So when the first item of a group
runs, the model calls of the group's items (every repeat) are submitted to a thread pool per model
(``--mcp-concurrency``, per-model overrides in ``mcp_concurrency``), and each item then only waits for
its own call, in collection order.  A group is a benchmark file, and under xdist a part of one that
stays on one worker, so every call is made once, by the process that runs its item.

With ``-n`` and no ``--dist``, :func:`slice_scheduler` is the xdist scheduler: it cuts each file into
one slice per worker and sends a slice's items to one worker (other tests are spread one by one).  No
worker waits for another, so a worker that dies costs the run its one item.  Under a ``--dist`` mode
that spreads a file's items (``load``, ``worksteal``, ``loadgroup``, ``each``) an item's group is itself.
"""

from __future__ import annotations

import concurrent.futures
import functools
import os
import re
import threading
import types
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.keys import SETTINGS_KEY
from pytest_mcpeval.models import ModelCallError, call_model
from pytest_mcpeval.models.config import ModelSpec
from pytest_mcpeval.models.local import PREFIX as LOCAL_PREFIX
from pytest_mcpeval.models.reply import ModelReply
from pytest_mcpeval.run.cache import (
    CALLED_AGAIN,
    FAILED,
    REPLAYED_OLDER,
    BadEntry,
    ResponseCache,
    legacy_request_key,
    request_key,
)
from pytest_mcpeval.run.pool import DaemonPool
from pytest_mcpeval.settings import FILE_SUFFIXES

if TYPE_CHECKING:
    from pytest_mcpeval.models.processes import CallProcesses
    from pytest_mcpeval.run.budget import Budget

WORKERINPUT_KEY = "mcpeval_distribution"  # what the controller's --dist mode keeps on one worker: see distribution()
_SLICES_KEY = pytest.StashKey[dict[str, str]]()


@dataclass(frozen=True)
class Unit:
    """One model call: a case, a model, a repeat."""

    model: ModelSpec
    messages: list[dict[str, Any]] = field(hash=False, compare=False)
    catalog: Catalog = field(hash=False, compare=False)
    repeat: int
    label: str  # file::case[model] for messages
    key: str

    @classmethod
    def make(cls, model: ModelSpec, messages: list[dict[str, Any]], catalog: Catalog, repeat: int,
             label: str) -> Unit:
        return cls(model, messages, catalog, repeat, label, request_key(model, messages, catalog.openai_tools, repeat))

    @functools.cached_property
    def legacy_key(self) -> str:
        """The key a cache recorded before version 2 of the keys holds this call under (read, never written)."""
        return legacy_request_key(self.model, self.messages, self.catalog.openai_tools, self.repeat)


@dataclass
class DispatchSettings:
    concurrency: int = 16
    per_model: dict[str, int] = field(default_factory=dict)
    retries: int = 3
    timeout: float = 120.0
    workers: int = 1  # processes that may make this run's calls at the same time, sharing the budget


class Dispatcher:
    def __init__(self, settings: DispatchSettings, cache: ResponseCache | None,
                 processes: CallProcesses | None = None, budget: Budget | None = None,
                 stopping: threading.Event | None = None) -> None:
        self.settings = settings
        self.cache = cache
        self.budget = budget  # --mcp-max-cost: checked before each call made, paid calls added after
        self.processes = processes  # --mcp-processes: litellm calls made in worker processes
        self.stopping = stopping  # set on SIGINT / SIGTERM (interrupts.py): no call starts after it
        self._futures: dict[str, concurrent.futures.Future[ModelReply]] = {}
        self._pools: dict[str, DaemonPool] = {}
        self._lock = threading.RLock()

    # -- public ---------------------------------------------------------------------------------
    def submit(self, unit: Unit) -> None:
        """Start the call in the background (no-op for retrievers, which are fast and local)."""
        if unit.model.target.startswith(LOCAL_PREFIX):
            return
        if self.cache is not None and (self.cache.mode == "none" or (self.cache.mode == "new" and (
                self.cache.has(unit.model, unit.key) or self.cache.has(unit.model, unit.legacy_key)))):
            return  # a replay (or, in mode none, a miss, which is an error): the item reads it itself
        with self._lock:
            if unit.key in self._futures:
                return
            self._futures[unit.key] = self._pool(unit.model).submit(self._fetch, unit)

    def call(self, unit: Unit) -> ModelReply:
        """The unit's reply, the call made in turn with the others of its model (within its concurrency)."""
        self.submit(unit)
        return self.get(unit)

    def get(self, unit: Unit) -> ModelReply:
        """The unit's reply; raises :class:`ModelCallError` for infrastructure failures."""
        with self._lock:
            future = self._futures.pop(unit.key, None)
        if future is not None:
            try:
                return future.result()
            except concurrent.futures.CancelledError:
                raise ModelCallError(f"{unit.label}: the call was cancelled") from None
        return self._fetch(unit)

    def close(self) -> None:
        for pool in self._pools.values():
            pool.shutdown(cancel_futures=True)
        if self.processes is not None:
            self.processes.close()

    def pool_size(self, model: ModelSpec) -> int:
        """The calls of ``model`` this process has in flight at most (its share of the concurrency)."""
        total = self.settings.per_model.get(model.name, self.settings.concurrency)
        return max(1, -(-total // max(1, self.settings.workers)))  # ceil: this worker's part

    # -- internals ------------------------------------------------------------------------------
    def _note_bad(self, bad: list[BadEntry], outcome: str) -> None:
        if self.cache is not None:
            for entry in bad:
                self.cache.note_bad(entry, outcome)

    def _pool(self, model: ModelSpec) -> DaemonPool:
        with self._lock:
            if model.name not in self._pools:  # abandoned on exit (Ctrl-C)
                self._pools[model.name] = DaemonPool(self.pool_size(model), f"mcpeval-{model.name}")
            return self._pools[model.name]

    def _replay(self, unit: Unit, bad: list[BadEntry]) -> ModelReply | None:
        """The recorded reply, or ``None``; an entry at the call's key that does not validate is added to ``bad``
        and counts as absent."""
        if self.cache is None:
            return None
        entry = self._read(unit, unit.key, bad)
        if entry is None and self.cache.mode in ("new", "none"):  # all, off: only this run's entries, all current
            entry = self._read(unit, unit.legacy_key, bad)
        if entry is None:
            return None
        reply = ModelReply.from_entry(entry["reply"])
        reply.cached = entry.get("run") != self.cache.run_id  # this run's calls are paid for once, here
        sent = entry.get("params_sent")
        reply.params_sent = sent if isinstance(sent, dict) else None  # None: written before they were kept
        return reply

    def _read(self, unit: Unit, key: str, bad: list[BadEntry]) -> dict[str, Any] | None:
        assert self.cache is not None
        try:
            return self.cache.get(unit.model, key)
        except BadEntry as exc:
            bad.append(exc)
            return None

    def _fetch(self, unit: Unit) -> ModelReply:
        if unit.model.target.startswith(LOCAL_PREFIX):
            return call_model(unit.model, unit.messages, unit.catalog)
        bad: list[BadEntry] = []
        reply = self._replay(unit, bad)
        if reply is not None:
            self._note_bad(bad, REPLAYED_OLDER)  # the entry of the current key was bad, the older key's answered
            return reply
        if self.cache is not None and self.cache.mode == "none":
            self._note_bad(bad, FAILED)
            if bad:
                raise ModelCallError(f"{unit.label}: the recorded response {bad[0].path} cannot be replayed: "
                                     f"{bad[0].reason} (--mcp-record=none replays only); record it again by running "
                                     "once with --mcp-record=new and a key for the model")
            raise ModelCallError(
                f"{unit.label}: no recorded response (--mcp-record=none replays only); record it by "
                "running once with --mcp-record=new and a key for the model"
            )
        if self.stopping is not None and self.stopping.is_set():  # the run is ending: nothing more is paid for
            raise ModelCallError(f"{unit.label}: not called: the run was interrupted")
        if self.budget is not None:
            try:
                self.budget.check()
            except ModelCallError as exc:
                raise ModelCallError(f"{unit.label}: {exc}") from None
        self._note_bad(bad, CALLED_AGAIN)  # said before the call: it is made, whatever it answers
        seed = zlib.crc32(unit.key.encode())
        reply = None
        if self.processes is not None:
            reply = self.processes.complete(unit.model, unit.messages, unit.catalog, retries=self.settings.retries,
                                            timeout=self.settings.timeout, seed=seed)
        if reply is None:  # in this process (or no worker could be started)
            reply = call_model(unit.model, unit.messages, unit.catalog, retries=self.settings.retries,
                               timeout=self.settings.timeout, seed=seed)
        if self.budget is not None:
            self.budget.add(reply.cost_usd)
        # a reply the provider's safety filter withheld is an error, not the model's answer: not kept, as no error
        # is, so the next run asks again (scoring/stops.py)
        if self.cache is not None and reply.finish_reason != "content_filter":
            entry = {"model": unit.model.target, "case": unit.label, "repeat": unit.repeat, "reply": reply.to_entry()}
            if reply.params_sent is not None:  # a replay reports them without litellm
                entry["params_sent"] = reply.params_sent
            self.cache.put(unit.model, unit.key, entry)
        return reply


# -- which calls are made ahead, and by which process ----------------------------------------------------

SESSION_GROUP = "<session>"


def prefetch_group(item: pytest.Item) -> str:
    """The group whose calls this process makes ahead when ``item`` is the first of it to run.

    Without xdist the group is the whole session (every call of the run is submitted when its first case
    runs), unless a ``conftest.py`` or plugin overrides the ``mcp_server`` fixture: its value, which decides
    the tools, is only known to items that request it, so the group is then the item's file, whose items
    all see the same conftest files.  Under ``--dist loadfile/loadscope`` it is the file (xdist hands out
    whole files); a slice of the file under :func:`slice_scheduler`; the item alone under modes that spread
    a file's items.  Cheap: every item asks, only the first of a group goes on to :func:`group_items`.
    """
    scope = _scope(item.config)
    if scope == "item":
        return item.nodeid
    if scope == "file":
        if getattr(item.config, "workerinput", None) is None and not _server_overridden(item.config):
            return SESSION_GROUP
        return str(item.path)
    return _slices(item).get(item.nodeid, item.nodeid)


def group_items(item: pytest.Item, group: str) -> list[pytest.Item]:
    """The items of ``group`` from ``item`` on (those before it ran elsewhere, on a worker that crashed)."""
    if group == item.nodeid:
        return [item]
    items = item.session.items
    later = items[items.index(item):]
    if group == SESSION_GROUP:
        return later
    if _scope(item.config) == "file":
        return [other for other in later if other.path == item.path]
    slices = _slices(item)
    return [other for other in later if slices.get(other.nodeid) == group]


def _slices(item: pytest.Item) -> dict[str, str]:
    slices = item.config.stash.get(_SLICES_KEY, None)
    if slices is None:
        workers = int(item.config.workerinput["workercount"])  # type: ignore[attr-defined]
        slices = item.config.stash[_SLICES_KEY] = benchmark_slices([o.nodeid for o in item.session.items], workers)
    return slices


# -- a large collection and the garbage collector ---------------------------------------------------------

_GC_PAUSED_KEY = pytest.StashKey[bool]()
FREEZE_FROM = 500  # case items: below, the collector's passes cost little


def pause_gc(config: pytest.Config) -> None:
    """When the first benchmark file is collected: no cyclic garbage collection until the collection is done.

    Collecting builds long-lived objects (items, parsed cases) by the ten thousand, and each of the
    collector's full passes traverses all of them again: measured, 0.9 s of the 2.5 s that collecting
    10,000 cases took.  :func:`collection_done` turns it back on."""
    import gc

    if _GC_PAUSED_KEY not in config.stash:
        config.stash[_GC_PAUSED_KEY] = gc.isenabled()  # a process that had it off keeps it off
        gc.disable()


def collection_done(session: pytest.Session, cases: int) -> None:
    """The collector back on (:func:`close_processes` does it too, should a collection end without finishing).

    After a large collection in a run that makes no model call (``--collect-only``, a replay with
    ``--mcp-record=none``), its garbage is collected once and the rest moved out of the collector's reach
    (``gc.freeze``): the items live until the process exits, and are no longer traversed by the collector's
    full pass at exit (measured: 1 s of the 3.8 s of ``--collect-only`` of 10,000 cases).  Not in runs that
    call models in this process: with the collection frozen, one call in a few runs of 2000 never got its
    answer until the timeout (httpx's pool, in litellm; not seen without the freeze)."""
    import gc

    config = session.config
    if config.stash.get(_GC_PAUSED_KEY, False):
        config.stash[_GC_PAUSED_KEY] = False
        gc.enable()
    if cases >= FREEZE_FROM and (config.option.collectonly or config.stash[SETTINGS_KEY].record == "none"):
        gc.collect()
        gc.freeze()


_OVERRIDDEN_KEY = pytest.StashKey[bool]()


def _server_overridden(config: pytest.Config) -> bool:
    """Whether a plugin or ``conftest.py`` other than ours defines an ``mcp_server`` fixture (asked once the
    items run, when every conftest of the collection is loaded)."""
    found = config.stash.get(_OVERRIDDEN_KEY, None)
    if found is None:
        from pytest_mcpeval import plugin as ours

        found = False
        for plugin in config.pluginmanager.get_plugins():
            if plugin is ours or plugin is None:
                continue
            spaces = [vars(plugin)] if isinstance(plugin, types.ModuleType) else [
                vars(klass) for klass in type(plugin).__mro__]
            if any(name == "mcp_server" or (type(value).__name__ == "FixtureFunctionDefinition"
                                            and getattr(value, "name", None) == "mcp_server")
                   for space in spaces for name, value in list(space.items())):
                found = True
                break
        config.stash[_OVERRIDDEN_KEY] = found
    return found


# -- model calls in worker processes (--mcp-processes) --------------------------------------------------

MIN_CALLS_FOR_PROCESSES = 100  # auto: fewer calls than this are made in the pytest process (docs/performance.md)
MAX_AUTO_PROCESSES = 4  # auto: at ~10 ms of CPU a call, 4 processes make 400 calls a second, past most rate limits
_PROCESSES_KEY = pytest.StashKey["CallProcesses | None"]()
_COUNT_KEY = pytest.StashKey[int]()


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def processes_for(config: pytest.Config) -> int:
    """How many worker processes make this process's litellm calls (0: this process): ``--mcp-processes``, or
    for ``auto`` a process per core this process may use (the cores shared among xdist workers; at most
    :data:`MAX_AUTO_PROCESSES`), none on one core or when the session's own code imported litellm (its settings
    are in this process: :func:`~pytest_mcpeval.models.processes.litellm_set_up_here`)."""
    chosen: int | None = config.stash[SETTINGS_KEY].processes
    if chosen is not None:
        return chosen
    from pytest_mcpeval.models.processes import litellm_set_up_here

    if litellm_set_up_here():  # the user's litellm settings are in this process: the calls are made here
        return 0
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    workers = int(workerinput["workercount"]) if workerinput else 1
    cores = available_cores()
    return min(cores // workers, MAX_AUTO_PROCESSES) if cores >= 2 else 0


def note_model_item(item: pytest.Item, model: ModelSpec) -> None:
    """Called for each case item as it is collected: once this process will make enough litellm calls for worker
    processes to pay (``auto``; any number with ``--mcp-processes=N``), plan them and, when the calls are sure
    to be made (the cache holds nothing of the model yet, or is not read), start them now, so that litellm is
    imported while pytest goes on collecting.  Not for replays (``--mcp-record=none``) and runs that call
    nothing (``--collect-only``, ``--mcp-tools``)."""
    if model.target.startswith(LOCAL_PREFIX):
        return
    config = item.config
    planned = config.stash.get(_PROCESSES_KEY, None)
    if planned is not None:
        if not planned.started and _calls_certain(config, model):
            planned.start()
        return
    settings = config.stash[SETTINGS_KEY]
    if settings.record == "none" or config.option.collectonly or settings.list_tools:
        return
    count = config.stash[_COUNT_KEY] = config.stash.get(_COUNT_KEY, 0) + settings.repeat
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    share = count // (int(workerinput["workercount"]) if workerinput else 1)
    if settings.processes is None and share < MIN_CALLS_FOR_PROCESSES:
        return
    wanted = processes_for(config)
    if wanted <= 0:
        return
    from pytest_mcpeval.models.processes import CallProcesses

    planned = config.stash[_PROCESSES_KEY] = CallProcesses(wanted, auto=settings.processes is None)
    if _calls_certain(config, model):
        planned.start()


_CERTAIN_KEY = pytest.StashKey[dict[str, bool]]()
_CASE_LINE = re.compile(rb"(?m)^[ \t]*-[ \t]+id[ \t]*:")


def note_benchmark_file(config: pytest.Config, path: Path) -> None:
    """When a benchmark file is found, before it is parsed: a file that alone holds enough cases for worker
    processes (its ``- id:`` lines, times the models named on the command line or in the ini file) starts them
    now, a parse earlier than :func:`note_model_item` would (0.3 s for 1000 cases)."""
    settings = config.stash[SETTINGS_KEY]
    if (_PROCESSES_KEY in config.stash or not settings.models or settings.record == "none"
            or config.option.collectonly or settings.list_tools):
        return
    models = [m for m in settings.model_specs([]) if not m.target.startswith(LOCAL_PREFIX)]
    try:
        cases = len(_CASE_LINE.findall(path.read_bytes()))
    except OSError:
        return
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    share = cases * len(models) * settings.repeat // (int(workerinput["workercount"]) if workerinput else 1)
    if not models or (settings.processes is None and share < MIN_CALLS_FOR_PROCESSES):
        return
    wanted = processes_for(config)
    if wanted > 0 and any(_calls_certain(config, model) for model in models):
        from pytest_mcpeval.models.processes import CallProcesses

        processes = config.stash[_PROCESSES_KEY] = CallProcesses(wanted, auto=settings.processes is None)
        processes.start()


def start_chosen_processes(config: pytest.Config) -> None:
    """At configure time, with ``--mcp-processes=N`` (N > 0): start the workers now, so litellm is imported while
    pytest starts and collects (not on the xdist controller, which makes no call, nor for runs that call nothing)."""
    settings = config.stash[SETTINGS_KEY]
    controller = bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")
    if controller or settings.record == "none" or config.option.collectonly or settings.list_tools:
        return
    from pytest_mcpeval.models.processes import CallProcesses

    processes = config.stash[_PROCESSES_KEY] = CallProcesses(int(settings.processes or 0))
    processes.start()


def _calls_certain(config: pytest.Config, model: ModelSpec) -> bool:
    """The model's calls will be made: the cache is not read, or holds nothing of the model yet."""
    settings = config.stash[SETTINGS_KEY]
    if settings.record in ("off", "all"):
        return True
    known = config.stash.setdefault(_CERTAIN_KEY, {})
    if model.target not in known:
        folder = ResponseCache(settings.cache_dir, settings.record, "").path(model, "00").parent.parent
        known[model.target] = not folder.is_dir()
    return known[model.target]


def call_processes(config: pytest.Config) -> CallProcesses | None:
    """The worker processes planned for this process's calls (started at the first call if not yet)."""
    processes = config.stash.get(_PROCESSES_KEY, None)
    if processes is None and config.stash[SETTINGS_KEY].processes:  # chosen, though fewer calls than planned for
        from pytest_mcpeval.models.processes import CallProcesses

        processes = config.stash[_PROCESSES_KEY] = CallProcesses(int(config.stash[SETTINGS_KEY].processes or 0))
    return processes


def close_processes(config: pytest.Config) -> None:
    """At the end of the run: workers started while collecting, for calls that no case made (all deselected);
    and the garbage collector, should a collection have ended without :func:`collection_done`."""
    processes = config.stash.get(_PROCESSES_KEY, None)
    if processes is not None:
        processes.close()
    if config.stash.get(_GC_PAUSED_KEY, False):
        import gc

        config.stash[_GC_PAUSED_KEY] = False
        gc.enable()


def makes_calls_at_once(config: pytest.Config, files: int) -> int:
    """How many processes of this run may have calls in flight at the same time (they share the budget)."""
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput is None:
        return 1
    workers = int(workerinput["workercount"])
    # whole files: a worker makes one file's calls at a time (its items wait for them), so at most one per file
    return max(1, min(workers, files)) if _scope(config) == "file" else workers


def distribution(config: pytest.Config, dist_chosen: bool) -> str:
    """On the controller: what the ``--dist`` mode keeps on one worker, ``slice``, ``file`` or ``item``."""
    dist = config.getoption("dist", "no")
    if dist == "load" and not dist_chosen:
        return "slice"  # pytest_xdist_make_scheduler hands xdist slice_scheduler()
    return "file" if dist in ("loadfile", "loadscope") else "item"  # loadscope's scope of file::item is the file


def _scope(config: pytest.Config) -> str:
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    return "file" if workerinput is None else str(workerinput.get(WORKERINPUT_KEY, "item"))


def benchmark_slices(nodeids: list[str], workers: int) -> dict[str, str]:
    """``{node id: slice}`` for the benchmark items: each file's items, in collection order, cut into
    ``workers`` runs of equal length (the last one shorter).  Every worker computes the same from its
    collection, which xdist checks is the same on all of them, and so does the scheduler."""
    by_file: dict[str, list[str]] = {}
    for nodeid in nodeids:
        path = nodeid.split("::", 1)[0]
        if path.endswith(FILE_SUFFIXES):
            by_file.setdefault(path, []).append(nodeid)
    slices: dict[str, str] = {}
    for path, ids in by_file.items():
        size = -(-len(ids) // max(1, workers))
        slices.update((nodeid, f"{path}::slice-{i // size}") for i, nodeid in enumerate(ids))
    return slices


def slice_scheduler(config: pytest.Config, log: Any) -> Any:
    """An xdist scheduler: each benchmark file is cut into one slice per worker, and a slice is one unit
    of work, so its items run on one worker, which makes their calls ahead; every other test is a unit
    of its own, spread as ``--dist load`` spreads it.

    It is xdist's ``LoadScopeScheduling`` (the engine of ``--dist loadscope/loadfile/loadgroup``) with
    two changes.  Scopes come from :func:`benchmark_slices`, not from node ids, so no node id changes
    (``loadgroup`` appends ``@group`` to node ids, which pytest 9.2 ignores: pytest-xdist issue #1386).
    And the item a crashed worker was running is reported failed by xdist and not sent again: the scope
    schedulers put it back in the queue, so an item that kills its worker kills every worker it is sent
    to until ``--max-worker-restart`` stops the run, and the tests still queued never run.  The rest of
    the crashed worker's units go to the other workers, as in every xdist mode.
    """
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    class BenchmarkSliceScheduling(LoadScopeScheduling):  # type: ignore[misc]
        _slices: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._slices is None:  # first called by schedule(), once the collection is known
                self._slices = benchmark_slices(list(self.collection or ()), self.numnodes)
            return self._slices.get(nodeid, nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            super()._assign_work_unit(node)
            if not self.workqueue:  # nothing left to hand out: said to every node (see _reschedule)
                for other in self.nodes:
                    if not other.shutting_down:
                        other.shutdown()

        def _reschedule(self, node: Any) -> None:
            # A worker runs an item only once it knows the next one or that none will come, and the scope
            # schedulers hand out work, or say "none", to a node only when it finishes an item: a node holding
            # one item (a crashed worker's rest, given to its replacement) waits for good.  So a node that gets
            # work is given units until it holds two items or the queue is empty, and an empty queue is said
            # to every node (another may have taken the last unit, or been told to stop before a crash put
            # units back).  Not in the first distribution (schedule() gives each node one unit first).
            super()._reschedule(node)
            if node.shutting_down or node not in self.assigned_work:
                return
            while self.workqueue and self._pending_of(self.assigned_work[node]) < 2:
                self._assign_work_unit(node)

        def remove_node(self, node: Any) -> str | None:
            workload: dict[str, dict[str, bool]] = self.assigned_work.get(node, {})
            crashed = next((nodeid for unit in workload.values() for nodeid, done in unit.items() if not done),
                           None)
            if crashed is not None:  # a worker runs its units in order: the first not done is the one it ran
                workload[self._split_scope(crashed)][crashed] = True
                for scope in [scope for scope, unit in workload.items() if all(unit.values())]:
                    # put back, a unit with nothing left to run is sent as an empty batch; a worker with one
                    # item left runs it only once it knows the next one, so it would wait for good
                    del workload[scope]
            super().remove_node(node)  # puts the node's unfinished units back in the queue
            return crashed

    return BenchmarkSliceScheduling(config, log)
