"""A dead xdist worker: its item is an error of the report, the run goes on, nobody waits for its calls.

The worker is killed (SIGKILL, as the OOM killer does) while its case runs; before the slice scheduler the
other worker waited timeout x (retries + 1) + 60 s for each call the dead one had claimed (1,186 s in all).
"""

from __future__ import annotations

import time

import pytest
from conftest import read_report, run

from pytest_mcpeval.testing import ScriptedModelServer

GET_ME = {"tool_calls": [{"name": "get_me", "arguments": {}}]}
KILL_A1 = """\
import os
import signal


def pytest_mcpeval_case_result(item, result):
    # on a worker, while the case runs (scored, not yet reported): the process dies as if OOM-killed
    if item.name == "a1[fake]" and hasattr(item.config, "workerinput"):
        os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.fixture
def project(two_benchmark_files: pytest.Pytester) -> pytest.Pytester:
    """Two benchmark files of 6 cases and a Python test file of 4 tests (conftest.py)."""
    return two_benchmark_files


def test_a_killed_worker_costs_its_item_and_stalls_nobody(project: pytest.Pytester,
                                                         model_server: ScriptedModelServer) -> None:
    (project.path / "conftest.py").write_text(KILL_A1)
    model_server.script("a question 2", dict(GET_ME, delay=3))  # in flight on the worker when it dies
    started = time.monotonic()
    result = run(project, "--mcp-models=fake", "--mcp-record=off", "--mcp-timeout=5", "--mcp-report=report.json",
                 "-n", "2", "-v")
    elapsed = time.monotonic() - started
    print(f"run with a killed worker: {elapsed:.1f} s")
    assert elapsed < 60  # before: the other worker waited timeout x (retries + 1) + 60 s for each dead claim
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*replacing crashed worker gw*",
                                 "FAILED a.mcpeval.yaml::a1[[]fake[]] - worker 'gw*' crashed while running*"])
    # reported failed once and not sent to another worker (where it would kill that one too)
    assert sum(line.startswith("FAILED a.mcpeval.yaml::a1[fake]") for line in result.stdout.lines) == 1
    result.assert_outcomes(passed=15, failed=1)
    report = read_report(project)
    cases = {c["id"]: c for c in report["cases"]}
    assert len(report["cases"]) == 12  # the crashed worker's case is in the report, once, as an error
    assert cases["a1"]["error"].startswith("no result: worker 'gw") and "crashed while running" in cases["a1"]["error"]
    assert cases["a1"]["passed"] is None and cases["a1"]["line"] == 6  # named as the worker collected it
    assert not report["gate"]["passed"] and not report["run"]["interrupted"]
    assert "1 of 12 cases have no score" in report["gate"]["failures"][0]
    assert sorted(cases.keys() - {"a1"}) == sorted(f"{p}{i}" for p in "ab" for i in range(6) if f"{p}{i}" != "a1")
    assert all(c["passed"] for i, c in cases.items() if i != "a1")
