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
import threading
import zlib
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.models import ModelCallError, call_model
from pytest_mcpeval.models.config import ModelSpec
from pytest_mcpeval.models.local import PREFIX as LOCAL_PREFIX
from pytest_mcpeval.models.reply import ModelReply
from pytest_mcpeval.run.cache import ResponseCache, request_key
from pytest_mcpeval.run.pool import DaemonPool
from pytest_mcpeval.settings import FILE_SUFFIXES

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


@dataclass
class DispatchSettings:
    concurrency: int = 16
    per_model: dict[str, int] = field(default_factory=dict)
    retries: int = 3
    timeout: float = 120.0
    workers: int = 1  # processes that may make this run's calls at the same time, sharing the budget


class Dispatcher:
    def __init__(self, settings: DispatchSettings, cache: ResponseCache | None) -> None:
        self.settings = settings
        self.cache = cache
        self._futures: dict[str, concurrent.futures.Future[ModelReply]] = {}
        self._pools: dict[str, DaemonPool] = {}
        self._lock = threading.Lock()

    # -- public ---------------------------------------------------------------------------------
    def submit(self, unit: Unit) -> None:
        """Start the call in the background (no-op for retrievers, which are fast and local)."""
        if unit.model.target.startswith(LOCAL_PREFIX):
            return
        if self.cache is not None and self.cache.mode in ("new", "none") and self.cache.has(unit.model, unit.key):
            return  # a replay: the item reads it itself, cheaper than a hand-off to a thread
        with self._lock:
            if unit.key in self._futures:
                return
            self._futures[unit.key] = self._pool(unit.model).submit(self._fetch, unit)

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

    # -- internals ------------------------------------------------------------------------------
    def _pool(self, model: ModelSpec) -> DaemonPool:
        if model.name not in self._pools:
            total = self.settings.per_model.get(model.name, self.settings.concurrency)
            share = max(1, -(-total // max(1, self.settings.workers)))  # ceil: this worker's part
            self._pools[model.name] = DaemonPool(share, f"mcpeval-{model.name}")  # abandoned on exit (Ctrl-C)
        return self._pools[model.name]

    def _replay(self, unit: Unit) -> ModelReply | None:
        if self.cache is None:
            return None
        entry = self.cache.get(unit.model, unit.key)
        if entry is None:
            return None
        reply = ModelReply.from_entry(entry["reply"])
        reply.cached = entry.get("run") != self.cache.run_id  # this run's calls are paid for once, here
        return reply

    def _fetch(self, unit: Unit) -> ModelReply:
        if unit.model.target.startswith(LOCAL_PREFIX):
            return call_model(unit.model, unit.messages, unit.catalog)
        reply = self._replay(unit)
        if reply is not None:
            return reply
        if self.cache is not None and self.cache.mode == "none":
            raise ModelCallError(
                f"{unit.label}: no recorded response (--mcp-record=none replays only); record it by "
                "running once with --mcp-record=new and a key for the model"
            )
        seed = zlib.crc32(unit.key.encode())
        reply = call_model(unit.model, unit.messages, unit.catalog, retries=self.settings.retries,
                           timeout=self.settings.timeout, seed=seed)
        if self.cache is not None:
            self.cache.put(unit.model, unit.key, {"model": unit.model.target, "case": unit.label,
                                                  "repeat": unit.repeat, "reply": reply.to_entry()})
        return reply


# -- xdist: which worker runs which items ------------------------------------------------------------

def prefetch_group(item: pytest.Item) -> str:
    """The group whose calls this process makes ahead when ``item`` is the first of it to run.

    The group is the item's file without xdist (and under ``--dist loadfile/loadscope``); a slice of
    the file under :func:`slice_scheduler`; the item alone under modes that spread a file's items.
    Cheap: every item asks, only the first of a group goes on to :func:`group_items`.
    """
    scope = _scope(item.config)
    if scope == "item":
        return item.nodeid
    if scope == "file":
        return str(item.path)
    return _slices(item).get(item.nodeid, item.nodeid)


def group_items(item: pytest.Item, group: str) -> list[pytest.Item]:
    """The items of ``group`` from ``item`` on (those before it ran elsewhere, on a worker that crashed)."""
    if group == item.nodeid:
        return [item]
    items = item.session.items
    later = items[items.index(item):]
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
            if not self.workqueue:
                # nothing left to hand out: say so now.  A worker runs its last item only once it knows the next one
                # or that none will come, and the scope schedulers say "none" only when a node finishes an item:
                # a node handed the last unit, holding one item (a crashed worker's rest, given to its
                # replacement), would wait for good
                node.shutdown()

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
