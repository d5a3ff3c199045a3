"""The xdist scheduler of ``-n`` without ``--dist``: each benchmark file's slices go whole to one worker.

:func:`slice_scheduler` builds on xdist's ``LoadScopeScheduling``, from outside xdist, and so on state xdist
does not publish: ``workqueue``, ``assigned_work``, ``collection``, ``numnodes``, ``nodes`` and the methods
``_split_scope``, ``_assign_work_unit``, ``_reschedule``, ``_pending_of`` and ``remove_node``.
``tests/test_xdist_contract.py`` checks that each of them exists and behaves as assumed here, against the
installed xdist; it was run against the versions in :data:`CHECKED_XDIST`.  With an xdist outside that range
:func:`make_scheduler` says so in one line and returns ``None``: xdist then schedules as ``--dist load`` does
(every item on its own, each its own prefetch group), nothing crashes.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_mcpeval.run.prefetch import benchmark_slices

CHECKED_XDIST = ((3, 5), (3, 9))  # [from, to): 3.5.0, 3.6.1, 3.7.0 and 3.8.0 pass tests/test_xdist_contract.py


def xdist_version() -> tuple[int, ...]:
    """The installed pytest-xdist's release numbers (``3.8.0`` -> ``(3, 8, 0)``; ``3.9.0rc1`` -> ``(3, 9, 0)``)."""
    from importlib.metadata import version

    from packaging.version import Version  # a dependency of pytest's

    return Version(version("pytest-xdist")).release


def supported(found: tuple[int, ...]) -> bool:
    low, high = CHECKED_XDIST
    return low <= found[:2] < high


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """The slice scheduler, or ``None`` (xdist's own ``--dist load``) with a one-line notice when the installed
    xdist is not one :func:`slice_scheduler` was checked against."""
    found = xdist_version()
    if not supported(found):
        shown = ".".join(map(str, found))
        low, high = (".".join(map(str, v)) for v in CHECKED_XDIST)
        notice = (f"pytest-mcpeval: pytest-xdist {shown} is not a version its scheduler was checked against "
                  f"(>={low},<{high}); xdist's own --dist load schedules this run (calls are made ahead per item)")
        terminal = config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None:  # a line, not a warning: under -W error a warning would end the run
            terminal.write_line(notice, yellow=True)
        return None
    return slice_scheduler(config, log)


def slice_scheduler(config: pytest.Config, log: Any) -> Any:
    """An xdist scheduler: each benchmark file is cut into one slice per worker, and a slice is one unit
    of work, so its items run on one worker, which makes their calls ahead; every other test is a unit
    of its own, spread as ``--dist load`` spreads it.

    It is xdist's ``LoadScopeScheduling`` (the engine of ``--dist loadscope/loadfile/loadgroup``) with
    two changes.  Scopes come from :func:`~pytest_mcpeval.run.prefetch.benchmark_slices`, not from node ids,
    so no node id changes (``loadgroup`` appends ``@group`` to node ids, which pytest 9.2 ignores:
    pytest-xdist issue #1386).  And the item a crashed worker was running is reported failed by xdist and
    not sent again: the scope schedulers put it back in the queue, so an item that kills its worker kills
    every worker it is sent to until ``--max-worker-restart`` stops the run, and the tests still queued never
    run.  The rest of the crashed worker's units go to the other workers, as in every xdist mode.
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
