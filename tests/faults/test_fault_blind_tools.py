"""A drop gate that cannot see (issue 31): a tool with fewer than six single-call cases can fall from F1 1.0 to 0.0
and the gate stays green, and nothing said so.  Now every summary says how many tools are blind, and
``--mcp-min-detectable-drop=X`` fails the run naming the expected tools whose drop of X the gate could not flag;
a value outside (0, 1] is one usage line."""

from __future__ import annotations

import json

import pytest
from conftest import make_project, run

from pytest_mcpeval.testing import ScriptedModelServer

NAMES = ["get_me", "list_issues", "search_issues"]
TOOLS = [{"name": n, "description": f"The {n} tool.", "inputSchema": {"type": "object"}} for n in NAMES]
CASES = [(f"list{i}", "list_issues") for i in range(8)] + [("me", "get_me")]  # search_issues: no case
BENCH = "server: {tools_file: tools.json}\ncases:\n" + "".join(
    f"  - id: {case}\n    input: {case}?\n    expect: [{{tool: {tool}}}]\n" for case, tool in CASES)


def _project(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    make_project(pytester, model_server, {"bench.mcpeval.yaml": BENCH}, tools=TOOLS)
    for case, tool in CASES:
        model_server.call(f"{case}?", tool)


def test_the_summary_says_which_tools_the_gate_is_blind_to(pytester: pytest.Pytester,
                                                           model_server: ScriptedModelServer) -> None:
    _project(pytester, model_server)
    result = run(pytester, "--mcp-models=fake", "--mcp-record=off", "--mcp-report=report.json")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "  the drop gate cannot see drops on 2 of 3 tools: fewer than 6 single-call cases each (1 has none; "
        "level 0.05)",
        "  smallest detectable drops: accuracy 67% (6 of 9 cases), macro F1 67% (6 of 9 cases)",
    ])
    power = json.loads((pytester.path / "report.json").read_text())["models"]["fake"]["power"]
    assert (power["blind"], power["untested"], power["detectable"]) == (["get_me"], ["search_issues"],
                                                                        {"list_issues": 0.75})


def test_min_detectable_drop_fails_the_gate_naming_the_tools(pytester: pytest.Pytester,
                                                            model_server: ScriptedModelServer) -> None:
    _project(pytester, model_server)
    result = run(pytester, "--mcp-models=fake", "--mcp-record=off", "--mcp-min-detectable-drop=0.5")
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines([
        "GATE FAILED --mcp-min-detectable-drop=0.5: fake: the drop gate cannot flag a fall of 50% in the recall of "
        "2 tools (a tool needs at least 12 single-call cases at level 0.05): get_me (blind: 1 case), list_issues "
        "(75.0%)",
    ])
    assert "search_issues" not in result.stdout.str().split("GATE FAILED")[1]  # untested: the lint's business


def test_min_detectable_drop_passes_when_every_expected_tool_is_held(pytester: pytest.Pytester,
                                                                    model_server: ScriptedModelServer) -> None:
    _project(pytester, model_server)
    (pytester.path / "bench.mcpeval.yaml").write_text(BENCH.replace("  - id: me\n    input: me?\n    expect: "
                                                                    "[{tool: get_me}]\n", ""))
    result = run(pytester, "--mcp-models=fake", "--mcp-record=off", "--mcp-min-detectable-drop=0.75")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["gate passed: the drop gate can flag a fall of 75% in the recall of every tool a "
                                 "case expects"])


@pytest.mark.parametrize(("value", "message"), [
    ("0", "'0' is not above 0 (a fall of a share in (0, 1], e.g. 0.2)"),
    ("1.5", "'1.5' is not between 0 and 1"),
    ("half", "'half' is not a number between 0 and 1"),
])
def test_a_bad_min_detectable_drop_is_one_usage_line(pytester: pytest.Pytester, model_server: ScriptedModelServer,
                                                     value: str, message: str) -> None:
    _project(pytester, model_server)
    result = run(pytester, "--mcp-models=fake", f"--mcp-min-detectable-drop={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*error: argument --mcp-min-detectable-drop: {message}"])
    assert "Traceback" not in result.stderr.str()
