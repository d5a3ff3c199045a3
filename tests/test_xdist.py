"""pytest-xdist: a slice of a benchmark file runs on one worker, every call is made once, a dead worker stalls nobody.

The scheduler is driven directly with stand-in workers where the point is its bookkeeping (a crash at a
chosen item); the rest are ``-n 2`` runs (pytester in this process; the workers are processes of their own).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pytest
from conftest import GITHUB_TOOLS, get_me_cases, run

from pytest_mcpeval.run.identities import resolve
from pytest_mcpeval.run.prefetch import benchmark_slices
from pytest_mcpeval.run.scheduler import BenchmarkSliceScheduling
from pytest_mcpeval.testing import ScriptedModelServer

GET_ME = {"tool_calls": [{"name": "get_me", "arguments": {}}]}
@pytest.fixture
def project(two_benchmark_files: pytest.Pytester) -> pytest.Pytester:
    """Two benchmark files of 6 cases and a Python test file of 4 tests (conftest.py)."""
    return two_benchmark_files


def workers_by_item(result: pytest.RunResult) -> dict[str, str]:
    """``{node id: worker id}`` from the ``-v`` lines (``[gw0] [  8%] PASSED a.mcpeval.yaml::a0[fake]``)."""
    seen = {}
    for line in result.stdout.lines:
        match = re.match(r"\[(gw\d+)\] \[ *\d+%\] \w+ (\S+)", line)
        if match:
            seen[match[2]] = match[1]
    return seen


def test_slices_are_a_files_items_in_order_one_per_worker() -> None:
    ids = [f"a.mcpeval.yaml::a{i}[m]" for i in range(5)] + ["test_x.py::test_x", "b.mcpeval.yaml::b0[m]"]
    assert benchmark_slices(ids, 2) == {
        "a.mcpeval.yaml::a0[m]": "a.mcpeval.yaml::slice-0", "a.mcpeval.yaml::a1[m]": "a.mcpeval.yaml::slice-0",
        "a.mcpeval.yaml::a2[m]": "a.mcpeval.yaml::slice-0", "a.mcpeval.yaml::a3[m]": "a.mcpeval.yaml::slice-1",
        "a.mcpeval.yaml::a4[m]": "a.mcpeval.yaml::slice-1", "b.mcpeval.yaml::b0[m]": "b.mcpeval.yaml::slice-0"}
    assert set(benchmark_slices(ids, 1).values()) == {"a.mcpeval.yaml::slice-0", "b.mcpeval.yaml::slice-0"}


def test_the_controller_names_the_cases_it_is_sent_from_the_files_not_by_parsing_node_ids(
        pytester: pytest.Pytester) -> None:
    """``x.mcpeval.yaml`` and ``x.mcpeval.yaml::y.mcpeval.yaml`` are two files of one folder, and a model alias
    holds ``[``, ``]`` and ``::``: each node id is matched whole against the names of the items collection
    builds, so each case is named by its own file, line and model; a skipped case and a plain test are none."""
    pytester.makeini("[pytest]\nmcp_model_aliases = o]d::m[ = openai/fake\n")
    (pytester.path / "tools.json").write_text(GITHUB_TOOLS.read_text())
    skipped = "  - {id: s, input: hi, expect: [], skip: true}\n"
    (pytester.path / "x.mcpeval.yaml").write_text(get_me_cases(2, "a") + skipped)
    (pytester.path / "x.mcpeval.yaml::y.mcpeval.yaml").write_text(get_me_cases(2, "b"))
    config = pytester.parseconfigure("--mcp-models=o]d::m[")
    ids = ["x.mcpeval.yaml::a1[o]d::m[]", "x.mcpeval.yaml::y.mcpeval.yaml::b0[o]d::m[]",
           "x.mcpeval.yaml::s[o]d::m[]", "x.mcpeval.yaml::lint", "test_p.py::test_p[x.mcpeval.yaml::a1]"]
    found = resolve(config, ids)
    assert found == {
        ids[0]: {"file": "x.mcpeval.yaml", "line": 6, "id": "a1", "model": "o]d::m[", "tags": []},
        ids[1]: {"file": "x.mcpeval.yaml::y.mcpeval.yaml", "line": 3, "id": "b0", "model": "o]d::m[", "tags": []}}


@dataclass
class Gateway:
    id: str


@dataclass(eq=False)  # hashable by identity, as the scheduler keys its work by worker
class Worker:
    """What the scheduler sees of an xdist worker; like one, it runs an item only once it knows the next
    one or is told to shut down (pytest's runtest protocol needs ``nextitem``)."""

    gateway: Gateway
    batches: list[list[int]] = field(default_factory=list)
    queue: list[int] = field(default_factory=list)
    shutting_down: bool = False

    def send_runtest_some(self, indices: list[int]) -> None:
        self.batches.append(list(indices))
        self.queue += indices

    def shutdown(self) -> None:
        self.shutting_down = True

    def can_run(self) -> bool:
        return len(self.queue) >= 2 or (len(self.queue) == 1 and self.shutting_down)


def drain(sched: object, workers: list[Worker], ran: list[int]) -> None:
    """Run the workers until none can go on, as the controller's event loop would."""
    while any(w.can_run() for w in workers):
        worker = next(w for w in workers if w.can_run())
        ran.append(worker.queue.pop(0))
        sched.mark_test_complete(worker, ran[-1])  # type: ignore[attr-defined]


def scheduled(pytester: pytest.Pytester, ids: list[str]) -> tuple[Any, list[Worker]]:
    """The slice scheduler with two stand-in workers that collected ``ids``, after its first distribution."""
    sched = BenchmarkSliceScheduling(pytester.parseconfig("--tx=2*popen"))
    workers = [Worker(Gateway("gw0")), Worker(Gateway("gw1"))]
    for worker in workers:
        sched.add_node(worker)
        sched.add_node_collection(worker, ids)
    sched.schedule()
    return sched, workers


@pytest.mark.parametrize("crash_at", ["a1", "a2"])  # in the middle of its slice, and its slice's last item
def test_the_item_of_a_crashed_worker_is_not_sent_again(pytester: pytest.Pytester, crash_at: str) -> None:
    ids = [f"a.mcpeval.yaml::a{i}[m]" for i in range(6)] + [f"test_p.py::test_p[{i}]" for i in range(3)]
    sched, workers = scheduled(pytester, ids)
    doomed = next(w for w in workers if ids.index(f"a.mcpeval.yaml::{crash_at}[m]") in w.queue)
    ran: list[int] = []
    while ids[doomed.queue[0]] != f"a.mcpeval.yaml::{crash_at}[m]":  # the doomed worker gets more work meanwhile
        ran.append(doomed.queue.pop(0))
        sched.mark_test_complete(doomed, ran[-1])
    assert sched.remove_node(doomed) == f"a.mcpeval.yaml::{crash_at}[m]"
    workers.remove(doomed)
    drain(sched, workers, ran)
    assert sched.tests_finished
    assert sorted(ids[i] for i in ran) == sorted(set(ids) - {f"a.mcpeval.yaml::{crash_at}[m]"})  # each once
    assert [] not in workers[0].batches  # an empty batch leaves a worker waiting for a next item forever


def test_a_replacement_worker_given_one_item_is_told_nothing_else_comes(pytester: pytest.Pytester) -> None:
    """The survivor has finished when the crashed worker's replacement joins and gets the one item left of the
    crashed slice: it runs it only once told no other item will come (CI once hung here for good)."""
    ids = [f"a.mcpeval.yaml::a{i}[m]" for i in range(6)]
    sched, workers = scheduled(pytester, ids)
    doomed = next(w for w in workers if ids.index("a.mcpeval.yaml::a1[m]") in w.queue)
    survivor = next(w for w in workers if w is not doomed)
    ran: list[int] = [doomed.queue.pop(0)]  # a0 ran; the worker dies running a1, a2 is left
    sched.mark_test_complete(doomed, ran[-1])
    drain(sched, [survivor], ran)  # the survivor finishes its slice, and is told to stop
    assert survivor.shutting_down
    assert sched.remove_node(doomed) == "a.mcpeval.yaml::a1[m]"
    replacement = Worker(Gateway("gw2"))
    sched.add_node(replacement)
    sched.add_node_collection(replacement, ids)
    sched.schedule()
    assert [ids[i] for i in replacement.queue] == ["a.mcpeval.yaml::a2[m]"] and replacement.shutting_down
    drain(sched, [replacement], ran)
    assert sched.tests_finished
    assert sorted(ids[i] for i in ran) == sorted(set(ids) - {"a.mcpeval.yaml::a1[m]"})


def test_a_worker_holding_one_item_is_told_when_another_takes_the_last_unit(pytester: pytest.Pytester) -> None:
    """The replacement of a crashed worker gets a unit of one item while other units are still queued; the survivor
    takes the last of them.  The replacement must be told then that nothing else comes, or it waits for a next
    item for good (`make test` hung here once in about ten runs)."""
    ids = [f"a.mcpeval.yaml::a{i}[m]" for i in range(6)] + [f"test_p.py::test_p[{i}]" for i in range(4)]
    sched, workers = scheduled(pytester, ids)
    doomed = next(w for w in workers if ids.index("a.mcpeval.yaml::a1[m]") in w.queue)
    survivor = next(w for w in workers if w is not doomed)
    ran: list[int] = [doomed.queue.pop(0)]  # a0 ran (and the doomed worker was given one more unit); it dies on a1
    sched.mark_test_complete(doomed, ran[-1])
    assert sched.remove_node(doomed) == "a.mcpeval.yaml::a1[m]"
    replacement = Worker(Gateway("gw2"))
    sched.add_node(replacement)
    sched.add_node_collection(replacement, ids)
    sched.schedule()
    assert len(replacement.queue) >= 2 or replacement.shutting_down  # never one item and no word
    drain(sched, [survivor, replacement], ran)
    assert replacement.shutting_down and not replacement.queue
    assert sched.tests_finished
    assert sorted(ids[i] for i in ran) == sorted(set(ids) - {"a.mcpeval.yaml::a1[m]"})


def test_a_replacement_never_holds_one_item_while_units_are_queued(pytester: pytest.Pytester) -> None:
    """Both workers were told that nothing else comes (the queue had emptied) when one of them dies with two
    units unfinished: its slice's last item and a unit it had not started.  Its replacement is given what
    is left and is told that nothing else comes; given one item and no word it would wait for a next one,
    the survivor takes no work once told to stop, and the run would hang (`.ci/run` hung here)."""
    ids = [f"a.mcpeval.yaml::a{i}[m]" for i in range(6)] + [f"test_p.py::test_p[{i}]" for i in range(4)]
    sched, workers = scheduled(pytester, ids)
    doomed = next(w for w in workers if ids.index("a.mcpeval.yaml::a2[m]") in w.queue)
    survivor = next(w for w in workers if w is not doomed)
    ran: list[int] = []
    for _ in range(2):  # a0 and a1 ran, and the doomed worker, down to one item, was given a test_p unit
        ran.append(doomed.queue.pop(0))
        sched.mark_test_complete(doomed, ran[-1])
    assert len(doomed.queue) == 2
    while sched.queue:  # the survivor takes the rest of the queue
        ran.append(survivor.queue.pop(0))
        sched.mark_test_complete(survivor, ran[-1])
    assert survivor.shutting_down and doomed.shutting_down
    assert sched.remove_node(doomed) == "a.mcpeval.yaml::a2[m]"  # its test_p unit goes back
    replacement = Worker(Gateway("gw2"))
    sched.add_node(replacement)
    sched.add_node_collection(replacement, ids)
    sched.schedule()
    assert replacement.can_run()
    drain(sched, [survivor, replacement], ran)
    assert sched.tests_finished
    assert sorted(ids[i] for i in ran) == sorted(set(ids) - {"a.mcpeval.yaml::a2[m]"})


def test_a_rerun_plugin_can_send_a_crashed_item_again(pytester: pytest.Pytester) -> None:
    """xdist's ``pytest_handlecrashitem`` hands plugins the scheduler to send a crashed item again
    (``mark_test_pending``, part of the protocol): it goes first, to a worker that can take work."""
    ids = [f"a.mcpeval.yaml::a{i}[m]" for i in range(4)]
    sched, workers = scheduled(pytester, ids)
    doomed = next(w for w in workers if 0 in w.queue)
    survivor = next(w for w in workers if w is not doomed)
    assert sched.remove_node(doomed) == "a.mcpeval.yaml::a0[m]"
    sched.mark_test_pending("a.mcpeval.yaml::a0[m]")
    replacement = Worker(Gateway("gw2"))  # the survivor was told to stop (the queue had emptied): xdist starts one
    sched.add_node(replacement)
    sched.add_node_collection(replacement, ids)
    sched.schedule()
    assert replacement.batches[0] == [0]
    ran: list[int] = []
    drain(sched, [survivor, replacement], ran)
    assert sched.tests_finished and sorted(ran) == [0, 1, 2, 3]


def test_a_late_worker_that_collected_other_items_is_reported_and_stopped(pytester: pytest.Pytester) -> None:
    ids = [f"a.mcpeval.yaml::a{i}[m]" for i in range(4)]
    sched, _ = scheduled(pytester, ids)
    reports: list[pytest.CollectReport] = []

    class Recorder:
        def pytest_collectreport(self, report: pytest.CollectReport) -> None:
            reports.append(report)

    sched.config.pluginmanager.register(Recorder())
    late = Worker(Gateway("gw2"))
    sched.add_node(late)
    sched.add_node_collection(late, ids[:3])
    sched.schedule()
    assert late.shutting_down and not late.batches
    assert [r.nodeid for r in reports] == ["gw2"] and "Different tests were collected" in str(reports[0].longrepr)


# the workers here are forks of the suite's zygote, with its hash seed (tests/preloaded_workers.py); that the
# collection's order does not depend on the seed, as xdist needs of a user's workers, is checked in test_shards.py
def test_a_slice_runs_on_one_worker_and_every_call_is_made_once(project: pytest.Pytester,
                                                                 model_server: ScriptedModelServer) -> None:
    model_server.latency = 0.2
    result = run(project, "--mcp-models=fake", "--mcp-record=off", "--mcp-concurrency=4", "-n", "2", "-v")
    result.stdout.fnmatch_lines(["*scheduling tests via BenchmarkSliceScheduling*"])
    result.assert_outcomes(passed=16)
    workers = workers_by_item(result)
    assert len(workers) == 16 and not any("@" in nodeid for nodeid in workers)  # node ids are left as they are
    for file in "ab":  # each file in two slices of three cases, each slice on one worker
        for first in (0, 3):
            assert len({workers[f"{file}.mcpeval.yaml::{file}{i}[fake]"] for i in range(first, first + 3)}) == 1
    assert sorted(r["messages"][-1]["content"] for r in model_server.requests) == sorted(
        f"{p} question {i}" for p in "ab" for i in range(6))
    # each worker has half of the budget of 4, and makes its slice's calls at once
    assert 2 <= model_server.max_in_flight <= 4


@pytest.mark.parametrize(("dist", "scheduler"), [("load", "LoadScheduling"), ("loadfile", "LoadFileScheduling")])
def test_a_chosen_dist_mode_is_kept_and_every_call_is_still_made_once(
        project: pytest.Pytester, model_server: ScriptedModelServer, dist: str, scheduler: str) -> None:
    result = run(project, "--mcp-models=fake", "--mcp-record=off", "-n", "2", f"--dist={dist}", "-v")
    result.stdout.fnmatch_lines([f"*scheduling tests via {scheduler}*"])
    result.assert_outcomes(passed=16)
    assert len(model_server.requests) == 12  # load: each item its own call; loadfile: the file's calls ahead


def test_the_controller_learns_a_local_worker_s_pid_through_execnet_s_public_remote_exec() -> None:
    """Asked of a new gateway before xdist starts its worker in it (the controller passes signals on to that
    pid); the gateway then runs xdist's own remote code as before."""
    import os

    execnet = pytest.importorskip("execnet")
    from pytest_mcpeval.interrupts import ask_worker_pid, worker_pid

    gateway = execnet.makegateway("execmodel=main_thread_only//popen")
    try:
        ask_worker_pid(gateway)
        pid = worker_pid(gateway)
        assert pid is not None and pid != os.getpid()
        assert gateway.remote_exec("import os\nchannel.send(os.getppid())").receive(10) == os.getpid()
        assert gateway.remote_exec("import os\nchannel.send(os.getpid())").receive(10) == pid
    finally:
        gateway.exit()


NOTE_FACTS = """\
def pytest_mcpeval_case_result(item, result):
    # where the case ran (a worker under xdist): a fact said once for the run, not with the case
    from pytest_mcpeval.run.facts import of

    of(item.config).note_catalog("feedface", {"server": "noted once", "tools": {}, "tokens": 7})
    of(item.config).note_model("other", {"temperature": 0.5})
"""


def test_facts_noted_once_for_the_run_reach_the_report_through_workeroutput(
        project: pytest.Pytester, model_server: ScriptedModelServer, xdist_args: list[str]) -> None:
    """Without xdist the session reads its own process's; a worker hands them over in ``workeroutput``."""
    from conftest import read_report

    (project.path / "conftest.py").write_text(NOTE_FACTS)
    result = run(project, "--mcp-models=fake", "--mcp-record=off", "--mcp-report=report.json", *xdist_args)
    result.assert_outcomes(passed=16)
    report = read_report(project)
    assert report["catalogs"]["feedface"] == {"server": "noted once", "tools": {}, "tokens": 7}
