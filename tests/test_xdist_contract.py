"""The contract between run/scheduler.py and the installed pytest-xdist.

The slice scheduler subclasses xdist's ``LoadScopeScheduling`` and reads and overrides state xdist does not
publish.  Each test here drives xdist's own class (not ours) with stand-in workers and checks one thing the
scheduler assumes.  When one fails after an xdist upgrade, the scheduler must be checked again before
``CHECKED_XDIST`` is widened; until then, an xdist outside it gets xdist's own scheduling (the last tests).

Run against another xdist without installing it: unpack its wheel in DIR and
``PYTHONPATH=DIR:. python -m pytest -p no:xdist tests/test_xdist_contract.py`` (the stand-ins need no plugin).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_mcpeval.run import scheduler

xdist_scheduler = pytest.importorskip("xdist.scheduler")
LoadScopeScheduling: Any = xdist_scheduler.LoadScopeScheduling

IDS = [f"a.py::test_a{i}" for i in range(3)] + [f"b.py::test_b{i}" for i in range(2)] + ["c.py::test_c0"]


@dataclass
class Gateway:
    id: str


@dataclass(eq=False)  # hashable by identity, as xdist keys its work by worker
class Worker:
    gateway: Gateway
    batches: list[list[int]] = field(default_factory=list)
    shutting_down: bool = False

    def send_runtest_some(self, indices: list[int]) -> None:
        self.batches.append(list(indices))

    def shutdown(self) -> None:
        self.shutting_down = True


def config(workers: int = 2) -> Any:
    """What LoadScopeScheduling reads of pytest's config: ``--tx`` and ``--loadscope-reorder`` (3.7 on)."""
    return SimpleNamespace(getvalue=lambda name: [f"{workers}*popen"] if name == "tx" else None,
                           option=SimpleNamespace(loadscopereorder=True))


class Recording(LoadScopeScheduling):  # type: ignore[misc]
    """xdist's class, noting the calls of the methods the slice scheduler overrides."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.calls: list[tuple[str, Any]] = []

    def _split_scope(self, nodeid: str) -> str:
        self.calls.append(("_split_scope", nodeid))
        return str(super()._split_scope(nodeid))

    def _assign_work_unit(self, node: Any) -> None:
        self.calls.append(("_assign_work_unit", node.gateway.id))
        super()._assign_work_unit(node)

    def _reschedule(self, node: Any) -> None:
        self.calls.append(("_reschedule", node.gateway.id))
        super()._reschedule(node)


def started(workers: int = 2, ids: list[str] = IDS) -> tuple[Any, list[Worker]]:
    sched = Recording(config(workers), None)
    nodes = [Worker(Gateway(f"gw{i}")) for i in range(workers)]
    for node in nodes:
        sched.add_node(node)
        sched.add_node_collection(node, ids)
    return sched, nodes


def test_the_constructor_takes_config_and_log_and_counts_the_tx_nodes() -> None:
    sched = LoadScopeScheduling(config(3), None)
    assert sched.numnodes == 3
    assert sched.collection is None  # _split_scope's first call comes after it is set (the slices need it)
    assert isinstance(sched.workqueue, OrderedDict) and not sched.workqueue
    assert sched.assigned_work == {} and sched.nodes == []


def test_schedule_sets_the_collection_then_asks_split_scope_for_every_item() -> None:
    seen: list[Any] = []

    class Probe(Recording):
        def _split_scope(self, nodeid: str) -> str:
            seen.append(self.collection)
            return str(super()._split_scope(nodeid))

    sched = Probe(config(), None)
    nodes = [Worker(Gateway("gw0")), Worker(Gateway("gw1"))]
    for node in nodes:
        sched.add_node(node)
        sched.add_node_collection(node, IDS)
    sched.schedule()
    assert [nodeid for name, nodeid in sched.calls if name == "_split_scope"] == IDS
    assert all(collection == IDS for collection in seen)


def test_the_workqueue_maps_each_scope_to_its_items_and_their_completion() -> None:
    class ByModule(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return "unit-" + nodeid.split("::")[0]  # the scopes a subclass returns are the units, as they are

    sched = ByModule(config(1), None)
    node = Worker(Gateway("gw0"))
    sched.add_node(node)
    sched.add_node_collection(node, IDS)
    sched.schedule()
    units = {**{scope: dict(unit) for scope, unit in sched.assigned_work[node].items()},
             **{scope: dict(unit) for scope, unit in sched.workqueue.items()}}
    assert units == {"unit-a.py": dict.fromkeys(IDS[:3], False), "unit-b.py": dict.fromkeys(IDS[3:5], False),
                     "unit-c.py": {IDS[5]: False}}


def test_assign_work_unit_hands_out_the_first_queued_unit_and_records_it() -> None:
    sched, nodes = started(1)
    sched.schedule()
    node = nodes[0]
    first = next(iter(sched.workqueue))
    unit = sched.workqueue[first]
    sched._assign_work_unit(node)
    assert first not in sched.workqueue and sched.assigned_work[node][first] is unit
    assert node.batches[-1] == [IDS.index(nodeid) for nodeid in unit]  # indices in the worker's collection


def test_assign_work_unit_sends_only_the_items_not_done() -> None:
    sched, nodes = started(1)
    sched.schedule()
    scope = next(iter(sched.workqueue))
    done = next(iter(sched.workqueue[scope]))
    sched.workqueue[scope][done] = True
    sched._assign_work_unit(nodes[0])
    assert nodes[0].batches[-1] == [IDS.index(n) for n in sched.assigned_work[nodes[0]][scope] if n != done]


def test_pending_of_counts_the_items_not_done_in_a_workload() -> None:
    sched = LoadScopeScheduling(config(), None)
    assert sched._pending_of({"a": {"x": False, "y": True}, "b": {"z": False}}) == 2
    assert sched._pending_of({}) == 0


def test_schedule_gives_each_node_a_unit_then_reschedules_each() -> None:
    sched, nodes = started()
    sched.schedule()
    order = [call for call in sched.calls if call[0] != "_split_scope"]
    assert order[:4] == [("_assign_work_unit", "gw0"), ("_assign_work_unit", "gw1"),
                         ("_reschedule", "gw0"), ("_reschedule", "gw1")]
    assert sched.nodes == nodes  # nodes: the keys of assigned_work, in the order they were added


def test_mark_test_complete_marks_the_item_in_assigned_work_and_reschedules_its_node() -> None:
    sched, nodes = started()
    sched.schedule()
    node = nodes[0]
    scope, unit = next(iter(sched.assigned_work[node].items()))
    nodeid = next(iter(unit))
    sched.calls.clear()
    sched.mark_test_complete(node, IDS.index(nodeid))
    assert sched.assigned_work[node][scope][nodeid] is True
    assert sched.calls == [("_split_scope", nodeid), ("_reschedule", "gw0")]


FOUR_UNITS = [f"{m}.py::test_{i}" for m in "abcd" for i in range(3)]


def finish(sched: Any, node: Worker, count: int) -> None:
    """Mark the first ``count`` items of the node's workload done, as xdist's bookkeeping does."""
    for unit in sched.assigned_work[node].values():
        for nodeid, done in unit.items():
            if count and not done:
                unit[nodeid] = True
                count -= 1


def test_reschedule_stops_a_node_when_the_queue_is_empty() -> None:
    sched, nodes = started(1, IDS[:3])
    sched.schedule()
    assert not sched.workqueue and nodes[0].shutting_down  # one unit, sent: the node is told nothing else comes


def test_reschedule_leaves_a_node_that_is_shutting_down() -> None:
    sched, nodes = started(1, FOUR_UNITS)
    sched.schedule()
    finish(sched, nodes[0], 3)
    nodes[0].shutting_down = True
    queued = len(sched.workqueue)
    sched._reschedule(nodes[0])
    assert len(sched.workqueue) == queued and not nodes[0].batches[1:]


def test_reschedule_hands_out_a_unit_only_to_a_node_with_two_items_or_fewer_pending() -> None:
    sched, nodes = started(1, FOUR_UNITS)
    sched.schedule()
    node = nodes[0]
    assert sched._pending_of(sched.assigned_work[node]) == 3 and len(sched.workqueue) == 3
    sched._reschedule(node)
    assert len(sched.workqueue) == 3  # three pending: nothing more
    finish(sched, node, 1)
    sched._reschedule(node)
    assert len(sched.workqueue) == 2 and len(node.batches) == 2  # two pending: one more unit


def test_remove_node_returns_the_first_item_not_done_and_queues_the_whole_workload_again() -> None:
    sched, nodes = started()
    sched.schedule()
    node = nodes[0]
    workload = sched.assigned_work[node]
    scope, unit = next(iter(workload.items()))
    first = next(iter(unit))
    unit[first] = True  # ran; the worker died on the next one
    crashed = list(unit)[1]
    assert sched.remove_node(node) == crashed
    assert node not in sched.assigned_work
    assert sched.workqueue[scope] is unit and unit[first] is True  # put back as it was, the item done included


def test_remove_node_of_a_node_with_nothing_pending_returns_none() -> None:
    sched, nodes = started()
    sched.schedule()
    node = nodes[0]
    for unit in sched.assigned_work[node].values():
        for nodeid in unit:
            unit[nodeid] = True
    queued = dict(sched.workqueue)
    assert sched.remove_node(node) is None
    assert dict(sched.workqueue) == queued


def test_tests_finished_needs_an_empty_queue_and_fewer_than_two_pending_per_node() -> None:
    sched, nodes = started(1, IDS[:3])
    sched.schedule()
    assert not sched.tests_finished  # three pending
    unit = next(iter(sched.assigned_work[nodes[0]].values()))
    for nodeid in list(unit)[:2]:
        unit[nodeid] = True
    assert sched.tests_finished  # one pending: the worker runs it once told nothing else comes


def test_the_installed_xdist_is_one_the_scheduler_was_checked_against() -> None:
    assert scheduler.supported(scheduler.xdist_version()), (
        f"pytest-xdist {scheduler.xdist_version()}: run this file against it, then widen CHECKED_XDIST")


@pytest.mark.parametrize(("found", "expected"), [((3, 5, 0), True), ((3, 8, 0), True), ((3, 4, 9), False),
                                                 ((3, 9, 0), False), ((4, 0), False)])
def test_supported_is_the_checked_range(found: tuple[int, ...], expected: bool) -> None:
    assert scheduler.supported(found) is expected


def test_an_xdist_outside_the_range_gets_its_own_scheduling_and_one_line(pytester: pytest.Pytester,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scheduler, "xdist_version", lambda: (9, 1, 0))
    pytester.makepyfile("import pytest\n\n@pytest.mark.parametrize('i', range(4))\ndef test_x(i):\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "-n", "2")
    assert result.ret == 0
    result.assert_outcomes(passed=4)
    notices = [line for line in result.stdout.lines if "pytest-xdist 9.1.0 is not a version" in line]
    assert notices == ["pytest-mcpeval: pytest-xdist 9.1.0 is not a version its scheduler was checked against "
                       "(>=3.5,<3.9); xdist's own --dist load schedules this run (calls are made ahead per item)"]
