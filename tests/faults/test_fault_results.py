"""Faults around the results themselves: every selected case ends in the report exactly once, the gate
never passes on a partial run, and what we write never carries a secret or half a file.

Each test injects one fault into a real run (the scripted model over HTTP through litellm, real files):
an exception inside our own code, a fixture that fails, a stopped run, Ctrl-C with calls in flight,
unwritable output paths, a lone surrogate in a reply, and secrets in parameters, environment, URLs and
provider errors.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from conftest import GITHUB_TOOLS, get_me_cases, make_project, read_report, run

from pytest_mcpeval.testing import ScriptedModelServer

GET_ME = {"tool_calls": [{"name": "get_me", "arguments": {}}]}


@pytest.fixture
def project(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> pytest.Pytester:
    make_project(pytester, model_server, {"a.mcpeval.yaml": get_me_cases(4)})
    (pytester.path / "tools.json").write_text(GITHUB_TOOLS.read_text())
    model_server.script("*", GET_ME)
    return pytester


def assert_each_case_once(report: dict, ids: list[str]) -> dict[str, dict]:
    seen = [c["id"] for c in report["cases"]]
    assert sorted(seen) == sorted(ids), seen
    return {c["id"]: c for c in report["cases"]}


# -- our own code raises -------------------------------------------------------------------------------------

RAISE_FOR_Q2 = """\
import functools

import pytest
import pytest_mcpeval.run.single as single


@pytest.fixture(autouse=True)
def broken_scoring(request, monkeypatch):
    if "q2" not in request.node.name:
        return
    # the plugin's own scoring, called wrong: the exception is raised inside pytest_mcpeval (as a bug would be)
    monkeypatch.setattr(single, "score_case", functools.partial(single.score_case, catalog=None))
"""

USER_HOOK_RAISES = """def pytest_mcpeval_case_result(item, result):
    if item.name.startswith("q2"):
        raise RuntimeError("dashboard down")
"""


def test_an_exception_in_our_code_is_an_error_of_that_case(project: pytest.Pytester) -> None:
    """(Without xdist: on a worker the same makereport hook runs, and a dead worker is tests/test_xdist.py's.)"""
    (project.path / "conftest.py").write_text(RAISE_FOR_Q2)
    result = run(project, "--mcp-models=fake", "--mcp-record=off", "--mcp-report=report.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    report = read_report(project)
    cases = assert_each_case_once(report, ["q0", "q1", "q2", "q3"])
    assert cases["q2"]["error"].startswith("internal error of pytest-mcpeval (TypeError: ")
    assert "not a model miss" in cases["q2"]["error"]
    assert [cases[i]["passed"] for i in ("q0", "q1", "q3")] == [True, True, True]
    assert report["models"]["fake"]["errors"] == 1 and report["models"]["fake"]["accuracy"] == 1.0
    assert not report["gate"]["passed"]
    assert any("1 of 4 cases have no score" in f for f in report["gate"]["failures"])
    result.stdout.fnmatch_lines(["*TypeError*", "*GATE FAILED 1 of 4 cases have no score*"])


def test_an_exception_in_a_users_hook_is_an_error_named_for_where_it_was_raised(project: pytest.Pytester) -> None:
    (project.path / "conftest.py").write_text(USER_HOOK_RAISES)
    run(project, "--mcp-models=fake", "--mcp-record=off", "--mcp-report=report.json")
    cases = assert_each_case_once(read_report(project), ["q0", "q1", "q2", "q3"])
    assert cases["q2"]["error"].startswith("an exception raised in conftest.py:3 while the case ran "
                                           "(RuntimeError: dashboard down)")


def test_a_report_hook_that_raises_or_adds_what_json_cannot_hold_fails_the_gate(project: pytest.Pytester) -> None:
    (project.path / "report.json").write_text('{"old": true}')
    (project.path / "conftest.py").write_text(
        "def pytest_mcpeval_report(config, report):\n    report['extra'] = {1, 2}\n    raise RuntimeError('down')\n")
    result = run(project, "--mcp-models=fake", "--mcp-record=off", "--mcp-report=report.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*GATE FAILED a pytest_mcpeval_report hook raised RuntimeError: down",
                                 "*GATE FAILED could not write --mcp-report=*report.json: *not JSON serializable"])
    assert not (project.path / "report.json").exists()  # never an older report passing for this run's


RUNTIME_FAILS = """
import pytest
from pytest_mcpeval.run import runtime

def boom(*args, **kwargs):
    raise OSError("no room for the servers' logs")

def pytest_configure(config):
    config._original_runtime_init = runtime.Runtime.__init__
    runtime.Runtime.__init__ = boom

def pytest_unconfigure(config):
    runtime.Runtime.__init__ = config._original_runtime_init
"""


def test_a_runtime_that_cannot_open_makes_every_case_a_setup_error(project: pytest.Pytester) -> None:
    """The session's runtime is opened by the first case's setup (collect.CaseItem.setup): if it cannot be, each
    case is an error of its setup, as for any fixture, not an internal error of the plugin."""
    (project.path / "conftest.py").write_text(RUNTIME_FAILS)
    result = run(project, "--mcp-models=fake", "--mcp-record=off", "--mcp-report=report.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    cases = assert_each_case_once(read_report(project), ["q0", "q1", "q2", "q3"])
    assert all(c["error"].startswith("setup of the case failed (OSError: no room for the servers' logs)")
               for c in cases.values()), cases
    result.assert_outcomes(errors=4)


def test_a_failing_fixture_makes_every_case_an_error(project: pytest.Pytester) -> None:
    (project.path / "conftest.py").write_text(
        "import pytest\n\n@pytest.fixture(scope='session')\ndef mcp_server():\n    raise OSError('vault sealed')\n")
    result = run(project, "--mcp-models=fake", "--mcp-record=off", "--mcp-report=report.json",
                 "--mcp-min-accuracy=0.5")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    report = read_report(project)
    cases = assert_each_case_once(report, ["q0", "q1", "q2", "q3"])
    assert all(c["error"].startswith("setup of the case failed (OSError: vault sealed)") for c in cases.values())
    assert not report["gate"]["passed"]  # thresholds over nothing, and 4 unscored cases
    result.assert_outcomes(errors=4)


# -- runs that do not finish ---------------------------------------------------------------------------------

def test_a_stopped_run_reports_every_case_and_fails_the_gate(project: pytest.Pytester,
                                                            model_server: ScriptedModelServer,
                                                            xdist_args: list[str]) -> None:
    model_server.script("q question 1", {"content": "no tool"})  # a miss; --mcp-strict fails it; -x stops
    result = run(project, "--mcp-models=fake", "--mcp-record=off", "--mcp-report=report.json", "--mcp-strict",
                 "-x", "--mcp-save-baseline=baseline.json", *xdist_args)
    # xdist's controller stops a -x run by interrupting it (exit 2)
    assert result.ret == (pytest.ExitCode.INTERRUPTED if xdist_args else pytest.ExitCode.TESTS_FAILED)
    report = read_report(project)
    cases = assert_each_case_once(report, ["q0", "q1", "q2", "q3"])
    assert cases["q1"]["passed"] is False and cases["q1"]["error"] is None
    not_run = [c for c in cases.values() if (c["error"] or "").startswith("not run: the session was stopped early")]
    # without xdist q2 and q3; with -n 2 whatever the other worker had not started (it may have run all)
    assert len(not_run) == 2 if not xdist_args else len(not_run) <= 2
    if not_run:
        assert report["run"]["interrupted"] is True and report["run"]["stopped"].startswith("stopped early")
        assert not report["gate"]["passed"] and report["gate"]["failures"][0].startswith("the run did not finish")
        assert not (project.path / "baseline.json").exists()
        result.stdout.fnmatch_lines(["*baseline not written to*the run did not finish*"])
    else:  # every case ran before the stop: the measurement is complete (the -x failure still fails pytest)
        assert report["run"]["interrupted"] is False and (project.path / "baseline.json").exists()


COLLECT_ERROR = "server: {tools_file: tools.json}\ncases:\n  - {id: z, input: hi, expect: [{tool: get_mee}]}\n"


@pytest.mark.parametrize("keep_going", [[], ["--continue-on-collection-errors"]], ids=["stop", "continue"])
def test_a_file_that_fails_to_collect_fails_the_gate(project: pytest.Pytester, keep_going: list[str]) -> None:
    """Its cases are in no report: the gate must not pass on the others alone (a reviewer found it did)."""
    (project.path / "b.mcpeval.yaml").write_text(COLLECT_ERROR)
    result = run(project, "--mcp-models=fake", "--mcp-record=off", "--mcp-report=report.json",
                 "--mcp-min-accuracy=0.5", "--mcp-save-baseline=baseline.json", *keep_going)
    assert result.ret != pytest.ExitCode.OK
    report = read_report(project)
    assert report["run"]["collect_errors"] == ["b.mcpeval.yaml"]
    assert not report["gate"]["passed"]
    assert any(f.startswith("1 benchmark file could not be collected (b.mcpeval.yaml)")
               for f in report["gate"]["failures"])
    assert not (project.path / "baseline.json").exists()
    result.stdout.no_fnmatch_line("*gate passed*")
    if keep_going:
        assert len(report["cases"]) == 4 and report["run"]["interrupted"] is False  # a.mcpeval.yaml ran
    else:
        assert report["run"]["stopped"] == "stopped by errors during collection"


def test_ctrl_c_exits_at_once_keeps_what_was_paid_for_and_never_passes(project: pytest.Pytester,
                                                                      model_server: ScriptedModelServer,
                                                                      xdist_args: list[str]) -> None:
    """SIGINT to a real pytest process with 30 calls in flight (each would take 60 s) and 10 answered."""
    (project.path / "a.mcpeval.yaml").write_text(get_me_cases(40))
    for i in range(10, 40):
        model_server.script(f"q question {i}", dict(GET_ME, delay=60))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--mcp-models=fake", "--mcp-concurrency=40",
         "--mcp-report=report.json", "--mcp-save-baseline=baseline.json", "--mcp-min-accuracy=0.5", "-v",
         *xdist_args],
        cwd=project.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(process.stdout.readline, "")), daemon=True)
    reader.start()
    cache = project.path / ".mcpeval" / "cache"
    deadline = time.monotonic() + 90
    # the first 10 items have passed (reported to the controller under xdist); the 11th waits for its call
    while sum("PASSED" in line for line in list(lines)) < 10 or len(model_server.requests) < 40:
        assert time.monotonic() < deadline, "the run did not get its calls going:\n" + "".join(lines)
        assert process.poll() is None, "".join(lines)
        time.sleep(0.1)
    signalled = time.monotonic()
    process.send_signal(signal.SIGINT)
    process.wait(timeout=60)
    exited = time.monotonic() - signalled
    reader.join(timeout=10)
    output = "".join(lines)
    print(output[-3000:])
    print(f"exited {exited:.1f} s after SIGINT")
    # measured: 2.5 s without xdist, 4-9 s with -n 2 (the workers stop too) on a loaded machine; the calls in
    # flight would take 60 s each
    assert exited < (20 if xdist_args else 10), "in-flight calls were awaited"
    assert process.returncode == pytest.ExitCode.INTERRUPTED
    report = read_report(project)
    cases = assert_each_case_once(report, [f"q{i}" for i in range(40)])
    assert sum(1 for c in cases.values() if c["passed"]) == 10
    assert all(cases[f"q{i}"]["error"].startswith("not run: the session was interrupted") for i in range(10, 40))
    assert report["run"]["interrupted"] is True
    assert not report["gate"]["passed"] and "gate passed" not in output
    assert not (project.path / "baseline.json").exists()
    assert len(list(cache.rglob("*.json"))) == 10  # every answered call is cached; nothing half-written
    assert not list(cache.rglob("*.tmp"))


# -- what we write -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("option", ["--mcp-report", "--mcp-markdown", "--mcp-save-baseline"])
def test_an_unwritable_output_path_is_a_usage_error_before_any_call(project: pytest.Pytester,
                                                                    model_server: ScriptedModelServer,
                                                                    option: str) -> None:
    (project.path / "afile").write_text("not a directory")
    result = run(project, "--mcp-models=fake", "--mcp-record=off", f"{option}=afile/out.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{option}=*afile/out.json: cannot create a directory under *afile: it is a file*"])
    assert not model_server.requests
    (project.path / "adir").mkdir()
    result = run(project, "--mcp-models=fake", "--mcp-record=off", f"{option}=adir")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{option}=*adir: is a directory; give a file name*"])


BLOCK_REPORT = """\
import os


def pytest_mcpeval_report(config, report):
    os.makedirs("report.json", exist_ok=True)  # the path turns into a directory while the run ends
"""


def test_a_report_that_cannot_be_written_fails_the_run_with_one_line(project: pytest.Pytester) -> None:
    (project.path / "conftest.py").write_text(BLOCK_REPORT)
    result = run(project, "--mcp-models=fake", "--mcp-record=off", "--mcp-report=report.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*GATE FAILED could not write --mcp-report=*report.json: Is a directory*"])
    result.stdout.no_fnmatch_line("*report written to*")
    result.stdout.no_fnmatch_line("*Traceback*")
    assert not list(project.path.glob(".report.json.*"))  # no temporary file left


def test_a_lone_surrogate_in_a_reply_reaches_the_report_intact(project: pytest.Pytester,
                                                              model_server: ScriptedModelServer) -> None:
    model_server.script("q question 1", {"content": "smile \ud83d"})  # legal JSON, no UTF-8 form
    result = run(project, "--mcp-models=fake", "--mcp-record=off", "--mcp-report=report.json",
                 "--mcp-markdown=summary.md")
    assert result.ret == pytest.ExitCode.OK
    report = read_report(project)
    cases = assert_each_case_once(report, ["q0", "q1", "q2", "q3"])
    # litellm may hand the surrogate on or replace it (U+FFFD); either way the case is there and scored
    assert cases["q1"]["content"] in ("smile \ud83d", "smile \ufffd") and cases["q1"]["passed"] is False
    assert (project.path / "summary.md").is_file()
    assert not list(project.path.glob(".*.tmp"))


# -- secrets -------------------------------------------------------------------------------------------------

KEY = "sk-test-4f9a8b7c6d5e4f3a2b1c"
SESSION = "sess-7d1e2f3a4b5c6d7e"
URL_TOKEN = "tok-0a9b8c7d6e5f"
ENV_SECRET = "envsecret-55aa66bb77cc"


def test_no_secret_reaches_an_artifact(pytester: pytest.Pytester, model_server: ScriptedModelServer,
                                       monkeypatch: pytest.MonkeyPatch, xdist_args: list[str]) -> None:
    """A key echoed by the provider, a secret in extra_body, a token in a server URL, an environment secret
    in a URL a fixture builds: none of them in the report, baseline, Markdown, junit XML or terminal.  The
    results are masked where they are made, so with xdist on the workers."""
    monkeypatch.setenv("MCP_SERVICE_KEY", ENV_SECRET)
    params = {"api_base": model_server.api_base, "api_key": KEY, "extra_body": {"session_auth": SESSION}}
    (pytester.path / "pytest.ini").write_text(
        f"[pytest]\nmcp_model_aliases = fake = openai/fake\nmcp_model_params = fake = {json.dumps(params)}\n")
    (pytester.path / "tools.json").write_text(GITHUB_TOOLS.read_text())
    (pytester.path / "a.mcpeval.yaml").write_text(get_me_cases(3))
    (pytester.path / "b.mcpeval.yaml").write_text(  # unreachable: the error names the URL
        f"server: {{url: 'http://127.0.0.1:9/mcp?token={URL_TOKEN}&team=core'}}\ncases:\n"
        "  - {id: b0, input: hi, expect: [{tool: get_me}]}\n")
    sub = pytester.path / "env"
    sub.mkdir()
    (sub / "conftest.py").write_text(
        "import os, pytest\n\n@pytest.fixture(scope='session')\ndef mcp_server():\n"
        "    return f\"http://127.0.0.1:9/mcp?team=core&k={os.environ['MCP_SERVICE_KEY']}\"\n")
    (sub / "c.mcpeval.yaml").write_text("cases:\n  - {id: c0, input: hi, expect: [{tool: get_me}]}\n")
    model_server.script("*", GET_ME)
    model_server.script("q question 1", {"status": 401, "error": f"Incorrect API key provided: {KEY}. "
                                                                 f"Session {SESSION} rejected."})
    result = run(pytester, "--mcp-models=fake", "--mcp-record=off", "--mcp-report=report.json",
                 "--mcp-markdown=summary.md", "--mcp-save-baseline=baseline.json", "--junitxml=junit.xml",
                 "--mcp-connect-timeout=5", "-rA", "-v", "--mcp-no-preflight", *xdist_args)  # the servers' errors
    report = read_report(pytester)
    cases = assert_each_case_once(report, ["q0", "q1", "q2", "b0", "c0"])
    assert "API key" in cases["q1"]["error"] and "REDACTED" in cases["q1"]["error"]
    assert "token=REDACTED" in cases["b0"]["error"]
    assert "k=REDACTED" in cases["c0"]["error"] or "REDACTED" in cases["c0"]["error"]
    assert report["run"]["models"]["fake"]["params"]["extra_body"] == {"session_auth": "REDACTED"}
    artifacts = {name: (pytester.path / name).read_text() for name in
                 ("report.json", "summary.md", "junit.xml", "baseline.json")}
    artifacts["terminal"] = "\n".join(result.stdout.lines + result.stderr.lines)
    found = {name: [s for s in (KEY, SESSION, URL_TOKEN, ENV_SECRET) if s in text] for name, text in artifacts.items()}
    assert found == {name: [] for name in artifacts}


SKIPPING = """server: {tools_file: tools.json}
cases:
  - {id: runs, input: who am I, expect: [{tool: get_me, args: {}}]}
  - {id: later, input: not yet, expect: [{tool: get_me, args: {}}], skip: "waiting for issue 12"}
  - {id: parked, input: parked, expect: [{tool: get_me, args: {}}], skip: true}
"""
SKIPPING_CONFTEST = """
import pytest
def pytest_collection_modifyitems(items):
    for item in items:
        if item.name == "runs[fake]":
            item.add_marker(pytest.mark.skip(reason="a user's own skip, see https://ci.test/run?token=abcdefgh12345"))
"""


@pytest.mark.parametrize("users_skip", [False, True], ids=["file", "file-and-conftest"])
def test_a_skipped_case_is_listed_in_the_report_once_and_never_scored(pytester: pytest.Pytester,
                                                                     model_server: ScriptedModelServer,
                                                                     xdist_args: list[str], users_skip: bool) -> None:
    """Every selected case ends in the report exactly once: one that pytest skipped (``skip:`` in the file, a
    user's skip mark) is listed under ``skipped`` with its reason, masked, and is in no metric."""
    make_project(pytester, model_server, {"bench.mcpeval.yaml": SKIPPING}, tools=json.loads(GITHUB_TOOLS.read_text()))
    if users_skip:
        (pytester.path / "conftest.py").write_text(SKIPPING_CONFTEST)
    model_server.call("who am I", "get_me")
    result = run(pytester, "--mcp-models=fake", "--mcp-report=report.json", "--mcp-markdown=summary.md", "-rs",
                 *xdist_args)
    assert result.ret == 0  # -rs folds the skips by their (path, line, reason): the masking kept that shape
    assert "token=abcdefgh12345" not in result.stdout.str()
    report = read_report(pytester)
    later = {"file": "bench.mcpeval.yaml", "line": 4, "id": "later", "model": "fake", "reason": "waiting for issue 12"}
    off = {"file": "bench.mcpeval.yaml", "line": 5, "id": "parked", "model": "fake",
           "reason": "skip: true in the benchmark file"}
    if users_skip:
        mine = {"file": "bench.mcpeval.yaml", "line": 3, "id": "runs", "model": "fake",
                "reason": "a user's own skip, see https://ci.test/run?token=REDACTED"}
        assert report["skipped"] == [mine, later, off]
        assert report["cases"] == [] and model_server.requests == []
    else:
        assert report["skipped"] == [later, off]
        assert [(c["id"], c["passed"]) for c in report["cases"]] == [("runs", True)]
        assert report["models"]["fake"]["scored"] == 1
    summary = (pytester.path / "summary.md").read_text()
    assert f"### Skipped ({len(report['skipped'])}: not run, not in the metrics)" in summary
    assert "- waiting for issue 12 (1x)" in summary


def test_without_a_model_every_case_is_listed_as_skipped(pytester: pytest.Pytester,
                                                         model_server: ScriptedModelServer) -> None:
    make_project(pytester, model_server, {"bench.mcpeval.yaml": SKIPPING}, tools=json.loads(GITHUB_TOOLS.read_text()))
    (pytester.path / "pytest.ini").write_text("[pytest]\n")
    assert run(pytester, "--mcp-report=report.json").ret == 0
    skipped = read_report(pytester)["skipped"]
    assert [(s["id"], s["model"]) for s in skipped] == [("runs", None), ("later", None), ("parked", None)]
    assert skipped[0]["reason"].startswith("no model configured: pass --mcp-models=")
    assert skipped[1]["reason"] == "waiting for issue 12"  # the case's own reason comes first


SKIP_WHILE_RUNNING = """
import pytest

@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    if item.name == "runs[fake]":
        pytest.skip("skipped by a hook while the case ran")
    return (yield)
"""
XFAIL_BROKEN_SERVER = """
import pytest

@pytest.fixture(scope="session")
def mcp_server():
    raise RuntimeError("the server is down")

def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.xfail(reason="known flaky server"))
"""


def test_a_case_skipped_while_it_ran_is_listed_as_skipped(pytester: pytest.Pytester,
                                                          model_server: ScriptedModelServer) -> None:
    make_project(pytester, model_server, {"bench.mcpeval.yaml": SKIPPING}, tools=json.loads(GITHUB_TOOLS.read_text()))
    (pytester.path / "conftest.py").write_text(SKIP_WHILE_RUNNING)
    result = run(pytester, "--mcp-models=fake", "--mcp-report=report.json", "-rs")
    assert result.ret == 0 and "GATE FAILED" not in result.stdout.str()
    report = read_report(pytester)
    assert report["cases"] == []
    assert [(s["id"], s["reason"]) for s in report["skipped"]] == [
        ("runs", "skipped by a hook while the case ran"), ("later", "waiting for issue 12"),
        ("parked", "skip: true in the benchmark file")]


def test_an_xfail_mark_does_not_turn_a_broken_server_into_a_skip(pytester: pytest.Pytester,
                                                                  model_server: ScriptedModelServer) -> None:
    """pytest reports a failure under an xfail mark as skipped; the case is still an error of the report (its
    server is down), never listed as skipped and never a pass."""
    make_project(pytester, model_server, {"bench.mcpeval.yaml": SKIPPING}, tools=json.loads(GITHUB_TOOLS.read_text()))
    (pytester.path / "conftest.py").write_text(XFAIL_BROKEN_SERVER)
    result = run(pytester, "--mcp-models=fake", "--mcp-report=report.json")
    report = read_report(pytester)
    (case,) = report["cases"]
    assert case["id"] == "runs"
    assert case["error"].startswith("setup of the case failed (RuntimeError: the server is down)")
    assert [s["id"] for s in report["skipped"]] == ["later", "parked"]
    assert "GATE FAILED" in result.stdout.str() and result.ret != 0
