"""Signals to a real pytest process: SIGTERM (CI runners, ``timeout``) stops the run as Ctrl-C does, a second
Ctrl-C never turns an interrupted run into a finished one, and no process of the run outlives it.

Each test runs ``python -m pytest`` in its own session (process group), against the scripted model over HTTP
with calls in flight, signals it once the model has received a given number of requests, and checks the
exit status, the report, the junit XML, the files an older run left, and the processes of the group.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import GITHUB_TOOLS, get_me_cases, make_project, read_report

from pytest_mcpeval.interrupts import Interrupts
from pytest_mcpeval.testing import ScriptedModelServer

GET_ME = {"tool_calls": [{"name": "get_me", "arguments": {}}]}
CASES = 30
FAST = 4  # q0..q3 are answered at once; the others take DELAY seconds each, CONCURRENCY at a time
DELAY = 1.0
CONCURRENCY = 4
OLD_REPORT = json.dumps({"version": 1, "gate": {"passed": True, "failures": []}, "cases": []})
OLD_JUNIT = '<testsuites><testsuite name="pytest" tests="1" errors="0" failures="0"/></testsuites>'


@pytest.fixture
def project(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> pytest.Pytester:
    make_project(pytester, model_server, {"a.mcpeval.yaml": get_me_cases(CASES)})
    (pytester.path / "tools.json").write_text(GITHUB_TOOLS.read_text())
    model_server.script("*", dict(GET_ME, delay=DELAY))
    for i in range(FAST):
        model_server.script(f"q question {i}", GET_ME)
    for name, text in (("report.json", OLD_REPORT), ("junit.xml", OLD_JUNIT), ("summary.md", "gate passed\n")):
        (pytester.path / name).write_text(text)  # what an older run left at the paths
    return pytester


def group_members(pgid: int) -> list[int]:
    """The live processes of a process group (from /proc: psutil is not a dependency)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:  # state, ppid, pgrp
            members.append(int(entry))
    return members


class Run:
    """``python -m pytest`` in its own session; its output read as it comes."""

    def __init__(self, project: pytest.Pytester, *args: str) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-v",
             "--mcp-models=fake", "--mcp-record=off", f"--mcp-concurrency={CONCURRENCY}", "--mcp-report=report.json",
             "--mcp-markdown=summary.md", "--mcp-save-baseline=baseline.json", "--junitxml=junit.xml",
             "--mcp-min-accuracy=0.5", *args],
            cwd=project.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=lambda: self.lines.extend(iter(self.process.stdout.readline, "")),
                                       daemon=True)
        self.reader.start()

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(self, server: ScriptedModelServer, requests: int, passed: int = FAST) -> None:
        """Until the first cases have passed and the model has received ``requests`` requests (calls in flight)."""
        deadline = time.monotonic() + 90
        while sum("PASSED" in line for line in list(self.lines)) < passed or len(server.requests) < requests:
            assert time.monotonic() < deadline, "the run did not get its calls going:\n" + self.output
            assert self.process.poll() is None, self.output
            time.sleep(0.05)

    def signal(self, signum: int) -> float:
        self.process.send_signal(signum)
        return time.monotonic()

    def wait_gone(self, timeout: float) -> float:
        """Until the pytest process and every process of its group have ended; seconds it took."""
        start = time.monotonic()
        self.process.wait(timeout=timeout)
        while group_members(self.process.pid):
            assert time.monotonic() - start < timeout, f"left running: {group_members(self.process.pid)}"
            time.sleep(0.05)
        self.reader.join(timeout=10)
        return time.monotonic() - start


def assert_interrupted(project: pytest.Pytester, by: str) -> dict:
    report = read_report(project)
    assert report["run"]["interrupted"] is True and report["run"]["stopped"] == f"interrupted by {by}"
    assert sorted(c["id"] for c in report["cases"]) == sorted(f"q{i}" for i in range(CASES))
    for case in report["cases"]:  # scored, or not run: nothing else
        assert case["passed"] or case["error"].startswith(f"not run: the session was interrupted by {by}"), case
    assert sum(1 for c in report["cases"] if c["passed"]) >= FAST
    assert not report["gate"]["passed"] and report["gate"]["failures"]
    assert not (project.path / "baseline.json").exists()
    return report


@pytest.mark.parametrize("how", [[], ["-n", "1"]], ids=["plain", "xdist"])
def test_sigterm_stops_the_run_as_ctrl_c_does(project: pytest.Pytester, model_server: ScriptedModelServer,
                                              how: list[str]) -> None:
    run = Run(project, *how)
    run.wait_for(model_server, FAST + CONCURRENCY)
    run.signal(signal.SIGTERM)
    at_signal = len(model_server.requests)
    took = run.wait_gone(timeout=20)
    at_exit = len(model_server.requests)
    print(run.output[-2500:], f"\nevery process gone {took:.1f} s after SIGTERM")
    assert run.process.returncode == pytest.ExitCode.INTERRUPTED
    assert took < 15
    report = assert_interrupted(project, "SIGTERM")
    assert "GATE FAILED the run did not finish: it was interrupted by SIGTERM" in run.output
    # the files at the paths are this run's: the JSON (above), the Markdown, and junit XML with every case
    assert "gate passed" not in (project.path / "summary.md").read_text()
    suite = ET.parse(project.path / "junit.xml").getroot().find("testsuite")
    assert suite is not None and int(suite.get("tests", 0)) == CASES
    assert int(suite.get("errors", 0)) == sum(1 for c in report["cases"] if c["error"])
    # no call starts after the signal (at most the ones already on their way), none once the run is gone
    assert len(model_server.requests) - at_signal <= CONCURRENCY
    assert len(model_server.requests) == at_exit


def test_a_killed_pytest_process_leaves_no_process_calling(project: pytest.Pytester,
                                                           model_server: ScriptedModelServer) -> None:
    """SIGKILL: nothing of the pytest process runs; its xdist workers end on their own, at
    once (before, xdist's workers went on calling for seconds: 4 to 16 more requests, by the concurrency)."""
    run = Run(project, "-n", "1", "--mcp-concurrency=8")
    run.wait_for(model_server, FAST + 8)
    run.signal(signal.SIGKILL)
    at_kill = len(model_server.requests)
    took = run.wait_gone(timeout=10)
    print(f"every process gone {took:.1f} s after SIGKILL; {len(model_server.requests) - at_kill} requests after it")
    assert took < 5
    assert len(model_server.requests) - at_kill <= 2  # a call on its way at the kill, at most one per worker
    # an older report and junit XML are not left to pass for this run's
    assert not (project.path / "report.json").exists() and not (project.path / "junit.xml").exists()


SECOND_INTERRUPT = """\
import os
import signal


def {hook}({args}):
    os.kill(os.getpid(), signal.SIGINT)  # a second Ctrl-C, {when}
"""


# a second Ctrl-C while pytest handles the first now ends the run at once, with no report (as the first left it):
# tests/faults/test_fault_interrupt_twice.py
@pytest.mark.parametrize("hook, args, when", [
    ("pytest_mcpeval_report", "config, report", "while the report is being written"),
], ids=["while-the-report-is-written"])
def test_a_second_ctrl_c_never_makes_an_interrupted_run_finished(project: pytest.Pytester,
                                                                 model_server: ScriptedModelServer, hook: str,
                                                                 args: str, when: str) -> None:
    (project.path / "conftest.py").write_text(SECOND_INTERRUPT.format(hook=hook, args=args, when=when))
    run = Run(project)
    run.wait_for(model_server, FAST + CONCURRENCY)
    run.signal(signal.SIGINT)
    run.wait_gone(timeout=20)
    print(run.output[-2500:])
    assert run.process.returncode == pytest.ExitCode.INTERRUPTED
    assert_interrupted(project, "SIGINT (Ctrl-C)")
    assert "gate passed" not in run.output


HUNG_AFTER_SIGTERM = """\
import os, signal, threading
from pytest_mcpeval import interrupts
interrupts.EXIT_GRACE_S = 1.0
handler = interrupts.Interrupts()
handler.install()
# a thread nothing will ever end, and not a daemon: the interpreter waits for it at exit, for ever
threading.Thread(target=threading.Event().wait, name="stuck").start()
try:
    os.kill(os.getpid(), signal.SIGTERM)
except interrupts.Terminated:
    print("stopped", flush=True)
"""


def test_a_run_hung_after_its_signal_is_ended_with_the_stacks_shown() -> None:
    """The watchdog of interrupts.py: a process that a lock or a thread keeps alive after SIGTERM ends anyway, with
    exit status 2 and every thread's stack on stderr, instead of hanging the CI job that waits for it."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", HUNG_AFTER_SIGTERM], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == "stopped\n"
    assert "the run did not end within 1 s of SIGTERM; ending it (exit status 2)" in done.stderr
    assert "in wait" in done.stderr and "threading.py" in done.stderr  # where the stuck thread was
    assert time.monotonic() - started < 30


def test_the_handlers_are_python_s_again_after_the_session_and_a_user_s_own_stays() -> None:
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL), signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        interrupts = Interrupts()
        interrupts.install()
        assert signal.getsignal(signal.SIGTERM) == interrupts._handle
        interrupts.restore()
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

        def own(signum: int, frame: object) -> None:
            pass

        thread = threading.Thread(target=Interrupts().install)  # only the main thread may: a no-op elsewhere
        thread.start()
        thread.join()
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL

        signal.signal(signal.SIGTERM, own)
        interrupts = Interrupts()
        interrupts.install()
        assert signal.getsignal(signal.SIGTERM) is own  # a handler set before the session is the user's
        interrupts.restore()
        assert signal.getsignal(signal.SIGTERM) is own
    finally:
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])
