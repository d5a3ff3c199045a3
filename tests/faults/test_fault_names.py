"""Odd names and hostile text: a case is named by data, never by parsing its node id back, and nothing
printed to the terminal carries a control sequence from untrusted text.

A file named ``x::y.mcpeval.yaml`` or a model alias ``we]ird::na[me`` made the xdist controller misread the
node ids it knows the selected cases by: a run stopped by ``-x`` lost that file's cases from the report, and
the alias came back as model ``me``.  Tool names a model invents, tool descriptions (``--mcp-tools``) and a
server's stderr reach the terminal: an escape sequence there could retitle, clear or rewrite it.
"""

from __future__ import annotations

import json
import sys

import pytest
from conftest import GITHUB_TOOLS, get_me_cases, read_report, run

from pytest_mcpeval.testing import ScriptedModelServer

GET_ME = {"tool_calls": [{"name": "get_me", "arguments": {}}]}


def odd_project(pytester: pytest.Pytester, server: ScriptedModelServer, alias: str) -> None:
    params = json.dumps({"api_base": server.api_base, "api_key": "not-a-key"})
    (pytester.path / "pytest.ini").write_text(
        f"[pytest]\nmcp_model_aliases = {alias} = openai/fake\nmcp_model_params = {alias} = {params}\n")
    (pytester.path / "tools.json").write_text(GITHUB_TOOLS.read_text())
    (pytester.path / "x::y.mcpeval.yaml").write_text(get_me_cases(9))


@pytest.mark.parametrize("alias", ["we]ird::na[me"])  # with the file's name: both ways of misreading a node id
def test_odd_file_and_model_names_keep_every_case_under_xdist(pytester: pytest.Pytester,
                                                              model_server: ScriptedModelServer,
                                                              xdist_args: list[str], alias: str) -> None:
    odd_project(pytester, model_server, alias)
    model_server.script("*", GET_ME)
    model_server.script("q question 1", {"content": "no tool"})  # a miss; --mcp-strict fails it; -x stops
    result = run(pytester, f"--mcp-models={alias}", "--mcp-record=off", "--mcp-report=report.json",
                 "--mcp-strict", "-x", *xdist_args)
    assert result.ret in (pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERRUPTED)
    report = read_report(pytester)
    ids = sorted(c["id"] for c in report["cases"])
    assert ids == sorted(f"q{i}" for i in range(9)), ids  # every case once, those not reached as errors
    assert {c["model"] for c in report["cases"]} == {alias}
    assert {c["file"] for c in report["cases"]} == {"x::y.mcpeval.yaml"}
    not_run = [c for c in report["cases"] if (c["error"] or "").startswith("not run:")]
    assert not_run  # -x stopped the run before its end (the miss is the second case of nine)
    assert {c["line"] for c in not_run} != {0}  # named as the worker built them, lines included
    assert report["run"]["interrupted"] is True and not report["gate"]["passed"]


# -- control characters ------------------------------------------------------------------------------------

OSC_TITLE = "\x1b]0;pwned\x07"  # sets the terminal's title
CLEAR = "\x1b[2J\x1b[H"  # clears the screen
BIDI = "\u202e"  # right-to-left override: text that reads other than it is


def assert_no_controls(text: str) -> None:
    for bad in ("\x1b", "\x07", "\x9b", BIDI, "\r"):
        assert bad not in text, (bad, [line for line in text.splitlines() if bad in line][:3])


def test_a_tool_name_the_model_invents_is_printed_escaped(pytester: pytest.Pytester,
                                                          model_server: ScriptedModelServer) -> None:
    xdist_args: list[str] = []  # the failure text is escaped where it is made, which a worker does alike
    odd_project(pytester, model_server, "fake")
    invented = f"get{OSC_TITLE}me{CLEAR}{BIDI}x\r"
    model_server.script("*", {"tool_calls": [{"name": invented, "arguments": {}}]})
    result = run(pytester, "--mcp-models=fake", "--mcp-record=off", "--mcp-report=report.json", "-v",
                 "--mcp-strict", *xdist_args)
    out = result.stdout.str() + result.stderr.str()
    assert_no_controls(out)
    assert "\\x1b]0;pwned\\x07" in out  # shown, as an escape a person can read
    report = read_report(pytester)
    assert report["cases"][0]["hallucinated_tools"] == [invented]  # the data keeps what the model sent


def test_tool_descriptions_and_a_servers_stderr_are_printed_escaped(pytester: pytest.Pytester,
                                                                    model_server: ScriptedModelServer) -> None:
    tools = [{"name": "get_me", "description": f"Who am I{OSC_TITLE}{CLEAR}", "inputSchema": {"type": "object"}}]
    (pytester.path / "tools.json").write_text(json.dumps(tools))
    (pytester.path / "a.mcpeval.yaml").write_text(get_me_cases(1))
    server = pytester.path / "dying.py"
    server.write_text(f"import sys\nsys.stderr.write('boom {OSC_TITLE}{CLEAR}\\n')\nsys.exit(3)\n")
    (pytester.path / "b.mcpeval.yaml").write_text(
        f"server: {{command: [{json.dumps(sys.executable)}, dying.py]}}\n"
        "cases:\n  - {id: d0, input: who, expect: [{tool: get_me}]}\n")
    params = json.dumps({"api_base": model_server.api_base, "api_key": "not-a-key"})
    (pytester.path / "pytest.ini").write_text(
        f"[pytest]\nmcp_model_aliases = fake = openai/fake\nmcp_model_params = fake = {params}\n")
    model_server.script("*", GET_ME)
    listing = run(pytester, "--mcp-tools", "a.mcpeval.yaml")
    assert_no_controls(listing.stdout.str())
    assert "Who am I\\x1b]0;pwned\\x07" in listing.stdout.str()
    result = run(pytester, "--mcp-models=fake", "--mcp-record=off", "-rA", "b.mcpeval.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # the pre-flight check's line quotes it
    assert "boom" in result.stderr.str()
    assert_no_controls(result.stdout.str() + result.stderr.str())
    result = run(pytester, "--mcp-models=fake", "--mcp-record=off", "-rA", "--mcp-no-preflight", "b.mcpeval.yaml")
    out = result.stdout.str()
    assert "boom" in out  # the server's last words are shown ...
    assert_no_controls(out)  # ... escaped
