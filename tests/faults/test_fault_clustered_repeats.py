"""Repeats counted as evidence (issue 31): with ``--mcp-repeat=3`` two cases that flipped made six discordant pairs,
and the drop gate failed on them (``6 of 36 paired cases changed``, p = 0.0312), while the power figures, counting
distinct cases, said six *cases* were needed.  The case is the unit now: two cases flipping in all three repeats
are two discordant cases (p = 0.5), the gate stays green, and the flipped cases read one line per case."""

from __future__ import annotations

import json

import pytest
from conftest import make_project, read_report, run

from pytest_mcpeval.testing import ScriptedModelServer

TOOLS = [
    {"name": "list_issues", "description": "List issues in a repository.",
     "inputSchema": {"type": "object", "properties": {"repo": {"type": "string"}}, "required": ["repo"]}},
    {"name": "search_issues", "description": "Full-text search over issues.",
     "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}},
]
BENCH = "server: {tools_file: tools.json}\ncases:\n" + "".join(
    f"  - id: list{i}\n    input: show the open issues of repo r{i}\n    expect: [{{tool: list_issues}}]\n"
    for i in range(12))


def test_two_cases_flipping_in_every_repeat_do_not_fail_the_gate(pytester: pytest.Pytester,
                                                                  model_server: ScriptedModelServer) -> None:
    make_project(pytester, model_server, {"bench.mcpeval.yaml": BENCH}, tools=TOOLS)
    for i in range(12):
        model_server.call(f"show the open issues of repo r{i}", "list_issues", repo=f"r{i}")
    assert run(pytester, "--mcp-models=fake", "--mcp-repeat=3", "--mcp-save-baseline=base.json").ret == 0
    (pytester.path / "tools.json").write_text(json.dumps([dict(TOOLS[0], description="Search or list issues."),
                                                          TOOLS[1]]))
    for i in range(2):  # every repeat of these two cases now calls search_issues
        model_server.call(f"show the open issues of repo r{i}", "search_issues", query=f"repo:r{i} is:open")
    result = run(pytester, "--mcp-models=fake", "--mcp-repeat=3", "--mcp-compare=base.json",
                 "--mcp-fail-on-drop=0.02", "--mcp-markdown=pr.md", "--mcp-report=report.json")
    result.stdout.fnmatch_lines([
        "compared with *base.json: 2 cases flipped, 0 only in the baseline, 0 only in this run",
        "calls that moved (2 cases, passed or missed): list_issues +0 -2, search_issues +2 -0",
    ])
    assert result.ret == 0, result.stdout.str()  # main: GATE FAILED ... p = 0.0312, 6 of 36 paired cases changed
    assert "GATE FAILED" not in result.stdout.str()
    comparison = read_report(pytester)["comparison"]
    accuracy = next(c for c in comparison["changes"] if c["metric"] == "accuracy")
    assert (accuracy["n"], accuracy["discordant"], accuracy["p_value"], accuracy["drop"]) == (12, 2, 0.5, False)
    assert accuracy["before"] == 1.0 and accuracy["after"] == pytest.approx(10 / 12)
    assert [f["case"] for f in comparison["flipped"]] == [f"bench.mcpeval.yaml::list{i}[fake]" for i in range(2)]
    assert [(f["repeats_before"], f["share_after"]) for f in comparison["flipped"]] == [(3, 0.0), (3, 0.0)]
    assert "| `bench.mcpeval.yaml::list0[fake]` | `list_issues` | 3/3 `list_issues` | 0/3 `search_issues` |" in (
        pytester.path / "pr.md").read_text()
