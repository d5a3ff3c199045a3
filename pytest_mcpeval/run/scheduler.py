"""The xdist scheduler of ``-n`` without ``--dist``: each benchmark file's slices go whole to one worker.

xdist lets a plugin hand it a scheduler through its documented hook ``pytest_xdist_make_scheduler``: any
object with the methods of xdist's published ``Scheduling`` protocol (``xdist.scheduler.protocol``).
:class:`BenchmarkSliceScheduling` is one, written here from that protocol alone: it imports, subclasses and
reads nothing of xdist's.  Of a worker it uses what the protocol's callers hand it, through
xdist's ``WorkerController`` methods ``send_runtest_some`` and ``shutdown``, its ``shutting_down`` flag and
its gateway's ``id`` (:class:`Worker`).

Why not ``--dist loadgroup`` with an ``xdist_group`` mark per slice: pytest-xdist 3.8 groups by writing the
group into each item's node id (``file::case[model]@group``) through pytest's private ``Item._nodeid``,
which pytest 9.2 no longer reads, so nothing is grouped there (pytest-xdist issue #1386, checked on this
machine); where it works it changes the id of every grouped test (``--lf``, JUnit XML, IDEs).  And its
engine, ``LoadScopeScheduling``, sends the item a crashed worker was running again: an item that kills its
worker kills every worker it is sent to until ``--max-worker-restart`` stops the run.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any, Protocol

import pytest

from pytest_mcpeval.run.prefetch import benchmark_slices

LOOKAHEAD = 2  # a worker runs an item once it holds the next one, or is told that none will come


class Gateway(Protocol):
    id: str


class Worker(Protocol):
    """What the scheduler uses of xdist's ``WorkerController`` (its public methods)."""

    @property
    def gateway(self) -> Gateway: ...

    @property
    def shutting_down(self) -> bool: ...

    def send_runtest_some(self, indices: Sequence[int]) -> None: ...

    def shutdown(self) -> None: ...


def workers_of(config: pytest.Config) -> int:
    """How many workers ``--tx`` starts (``-n 2`` is ``--tx popen --tx popen``; ``--tx 3*popen`` is three)."""
    specs: list[str] = config.getvalue("tx") or []
    return sum(int(spec.split("*", 1)[0]) if "*" in spec else 1 for spec in specs)


class BenchmarkSliceScheduling:
    """Each benchmark file is cut into one slice per worker (:func:`~pytest_mcpeval.run.prefetch.benchmark_slices`)
    and a slice is one unit of work, so its items run on one worker, which makes their calls ahead; every
    other test is a unit of its own, spread as ``--dist load`` spreads it.  Node ids are left as they are.

    A worker is given units, first one each in turn, then whenever it holds fewer than two items, and every
    worker is told to stop once the queue is empty, so no worker ever holds one item with no word of what
    comes next.  The item a crashed worker was running is reported failed by xdist and not sent again; the
    rest of its units go back to the front of the queue, for the workers left and the replacement.
    """

    def __init__(self, config: pytest.Config, log: Any = None) -> None:
        self.config = config
        self.numnodes = workers_of(config)
        self.collection: list[str] | None = None
        self.queue: deque[list[int]] = deque()  # units of work: indices into the collection, in order
        self.pending: dict[Worker, list[int]] = {}  # each worker's items sent and not reported done, in order
        self.collections: dict[Worker, list[str]] = {}

    # -- xdist's Scheduling protocol ---------------------------------------------------------------------
    @property
    def nodes(self) -> list[Worker]:
        return list(self.pending)

    @property
    def collection_is_completed(self) -> bool:
        return len(self.collections) >= self.numnodes

    @property
    def tests_finished(self) -> bool:
        # an item left alone on a worker runs once the worker is told to stop (as in xdist's own schedulers)
        return (self.collection_is_completed and not self.queue
                and all(len(items) < LOOKAHEAD for items in self.pending.values()))

    @property
    def has_pending(self) -> bool:
        return bool(self.queue) or any(self.pending.values())

    def add_node(self, node: Worker) -> None:
        self.pending[node] = []

    def add_node_collection(self, node: Worker, collection: Sequence[str]) -> None:
        if self.collection is not None and list(collection) != self.collection:  # a late worker, collected apart
            self._collections_differ(node, collection)
            node.shutdown()
            return
        self.collections[node] = list(collection)

    def mark_test_complete(self, node: Worker, item_index: int, duration: float = 0) -> None:
        self.pending[node].remove(item_index)
        self._refill(node)

    def mark_test_pending(self, item: str) -> None:
        """Sent again (``pytest_handlecrashitem`` of a plugin that reruns a crashed item), first in the queue."""
        assert self.collection is not None
        self.queue.appendleft([self.collection.index(item)])
        self._refill_all()

    def remove_pending_tests_from_node(self, node: Worker, indices: Sequence[int]) -> None:
        raise NotImplementedError  # answers xdist's "steal" command, which only --dist worksteal sends

    def remove_node(self, node: Worker) -> str | None:
        """A worker that finished, or died: the item it was running (``None`` if none), not sent again."""
        items = self.pending.pop(node)  # its collection stays: the run's collection is complete all the same
        if not items:
            return None
        assert self.collection is not None
        crashed, rest = items[0], items[1:]  # a worker runs its items in order: the first not done is the one
        if rest:
            self.queue.appendleft(rest)
        self._refill_all()
        return self.collection[crashed]

    def schedule(self) -> None:
        if self.collection is not None:  # a replacement worker joined
            self._refill_all()
            return
        first, *others = self.collections.items()
        differ = [self._collections_differ(node, collection) for node, collection in others
                  if collection != first[1]]
        if differ:
            return  # xdist then ends the run, with the differences reported
        self.collection = first[1]
        units: dict[str, list[int]] = {}
        slices = benchmark_slices(self.collection, self.numnodes)
        for index, nodeid in enumerate(self.collection):
            units.setdefault(self.unit(nodeid, slices), []).append(index)
        self.queue.extend(units.values())
        for node in self.nodes:  # one unit each first, then as many as each needs
            if self.queue and node in self.collections:
                self._send(node)
        self._refill_all()

    # -- ours ------------------------------------------------------------------------------------------
    def unit(self, nodeid: str, slices: dict[str, str]) -> str:
        """The unit of work an item belongs to: its benchmark slice, or the item alone.  A subclass may group more
        (the plugin's own test suite keeps the tests of one loaded model together)."""
        return slices.get(nodeid, nodeid)

    def _send(self, node: Worker) -> None:
        unit = self.queue.popleft()
        self.pending[node] += unit
        node.send_runtest_some(unit)

    def _refill(self, node: Worker) -> None:
        if not node.shutting_down and node in self.collections:
            while self.queue and len(self.pending[node]) < LOOKAHEAD:
                self._send(node)
        if not self.queue:  # said to every worker: another may hold one item, waiting for a next one
            for other in self.nodes:
                if not other.shutting_down:
                    other.shutdown()

    def _refill_all(self) -> None:
        for node in self.nodes:
            self._refill(node)

    def _collections_differ(self, node: Worker, collection: Sequence[str]) -> bool:
        """Reported as xdist's own schedulers report it: a failed collection naming the difference."""
        from difflib import unified_diff

        first_node, first = next(iter(self.collections.items()))
        diff = unified_diff(first, list(collection), fromfile=first_node.gateway.id, tofile=node.gateway.id)
        message = (f"Different tests were collected between {first_node.gateway.id} and {node.gateway.id}. "
                   "The difference is:\n" + "\n".join(line.rstrip() for line in diff))
        self.config.hook.pytest_collectreport(
            report=pytest.CollectReport(node.gateway.id, "failed", longrepr=message, result=[]))
        return True
