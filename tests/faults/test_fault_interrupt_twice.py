"""Ctrl-C twice (issue 30, item 2): the first SIGINT stops the run as promised (interrupted, gate failed, no
baseline); the second ends it at once and quietly.

A terminal sends Ctrl-C to the whole foreground process group: pytest and its xdist workers all receive it.
So these runs get their signals as a terminal sends them
(``killpg``), twice, with calls in flight; and once, at the pytest process alone, while the report is being
written.  Before, the second SIGINT raised ``KeyboardInterrupt`` into whatever pytest was doing to end the
first: two tracebacks, and an exit status that was Python's own.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from conftest import read_report
from test_fault_signals import CASES, CONCURRENCY, FAST, Run, group_members, project  # noqa: F401

from pytest_mcpeval.testing import ScriptedModelServer

LINE = "pytest-mcpeval: second interrupt: stopping now"


SLOW_TO_STOP = """\
import time


def pytest_keyboard_interrupt(excinfo):
    time.sleep(3)  # a run slow to stop after the first Ctrl-C (a server's teardown): why a user presses it again
"""


def ctrl_c(run: Run) -> None:
    os.killpg(run.process.pid, signal.SIGINT)  # as a terminal does: to every process of the foreground group


@pytest.mark.parametrize("how", [[], ["-n", "1"]], ids=["plain", "xdist"])
def test_ctrl_c_twice_ends_the_run_at_once_with_one_line(project: pytest.Pytester,  # noqa: F811
                                                         model_server: ScriptedModelServer, how: list[str]) -> None:
    (project.path / "conftest.py").write_text(SLOW_TO_STOP)
    run = Run(project, *how)
    run.wait_for(model_server, FAST + CONCURRENCY)
    ctrl_c(run)
    time.sleep(0.5)
    assert run.process.poll() is None  # still stopping
    ctrl_c(run)
    took = run.wait_gone(timeout=20)
    out = run.output
    print(out[-3000:], f"\nevery process gone {took:.1f} s after the second Ctrl-C")
    assert took < 2  # not the 3 s the first one's handling would still take
    assert run.process.returncode == pytest.ExitCode.INTERRUPTED
    assert "Traceback" not in out and "KeyboardInterrupt" not in out.replace("!!! KeyboardInterrupt !!!", "")
    assert out.count(LINE) == 1 and LINE + "\n" in out
    assert not (project.path / "baseline.json").exists()
    # the reports are as the first interrupt left them: written in full and saying so, or not written at all (the
    # older run's were removed when this one started: nothing at the paths claims a pass)
    if (project.path / "report.json").exists():
        report = read_report(project)
        assert report["run"]["interrupted"] is True and not report["gate"]["passed"]
    for name in ("summary.md", "junit.xml"):
        assert not (project.path / name).exists() or "gate passed" not in (project.path / name).read_text()
    assert not group_members(run.process.pid)


SECOND_WHILE_WRITING = """\
import os
import signal


def pytest_mcpeval_report(config, report):
    os.kill(os.getpid(), signal.SIGINT)  # a second Ctrl-C, while the report is being written
"""


def test_a_second_ctrl_c_while_the_report_is_written_lets_it_be_written_then_ends(
        project: pytest.Pytester, model_server: ScriptedModelServer) -> None:  # noqa: F811
    (project.path / "conftest.py").write_text(SECOND_WHILE_WRITING)
    run = Run(project)
    run.wait_for(model_server, FAST + CONCURRENCY)
    ctrl_c(run)
    run.wait_gone(timeout=20)
    out = run.output
    print(out[-3000:])
    assert run.process.returncode == pytest.ExitCode.INTERRUPTED
    assert "Traceback" not in out and out.count(LINE) == 1
    report = read_report(project)  # written in full: the second signal waited for it
    assert report["run"]["interrupted"] is True and report["run"]["stopped"] == "interrupted by SIGINT (Ctrl-C)"
    assert sorted(c["id"] for c in report["cases"]) == sorted(f"q{i}" for i in range(CASES))
    assert "gate passed" not in (project.path / "summary.md").read_text()
    assert not (project.path / "baseline.json").exists()
