"""A case marked ``draft: true`` runs and is reported apart, but no metric, gate, baseline or comparison sees it
(docs/drafting.md)."""

from __future__ import annotations

import json

import pytest

from pytest_mcpeval.testing import ScriptedModelServer
from tests.conftest import GITHUB_TOOLS, get_me_cases, make_project, read_report, run

DRAFTS = """
  - id: d-miss
    input: draft question one
    expect: [{tool: get_me, args: {}}]
    draft: true
  - id: d-pass
    input: draft question two
    expect: [{tool: get_me, args: {}}]
    draft: true
"""


@pytest.fixture
def project(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> pytest.Pytester:
    make_project(pytester, model_server, {"a.mcpeval.yaml": get_me_cases(3, "a") + DRAFTS})
    (pytester.path / "tools.json").write_text(GITHUB_TOOLS.read_text())
    model_server.script("*", {"tool_calls": [{"name": "get_me", "arguments": {}}]})
    model_server.script("draft question one", {"content": "No tool for that."})
    return pytester


def test_a_missed_draft_fails_no_gate_and_is_reported_apart(project: pytest.Pytester) -> None:
    result = run(project, "--mcp-models=fake", "--mcp-min-accuracy=1.0", "--mcp-strict", "--mcp-lint",
                 "--mcp-report=report.json", "--mcp-save-baseline=base.json", "--mcp-markdown=r.md",
                 "--mcp-html=r.html")
    assert result.ret == 0
    result.stdout.fnmatch_lines([
        "*2 draft cases (left out of the gate until reviewed): d-miss, d-pass",
        "2 draft cases ran (2 runs), left out of the metrics, the gate and the baseline until their `draft: true` "
        "mark is removed (docs/drafting.md)",
        "  fake: 1 passed, 1 missed",
        "    missed a.mcpeval.yaml:* d-miss: expected get_me, called (none)",
        "gate passed: accuracy >= 1*",
    ])
    report = read_report(project)
    assert report["models"]["fake"]["accuracy"] == 1.0
    assert report["models"]["fake"]["cases"] == 3
    assert report["models"]["fake"]["usage"]["calls"] == 5  # the drafts' calls were made: in the usage, not the metrics
    assert [(d["id"], d["outcome"]) for d in report["drafts"]["fake"]] == [("d-miss", "missed"), ("d-pass", "passed")]
    assert {c["id"] for c in report["cases"] if c.get("draft")} == {"d-miss", "d-pass"}  # listed, marked
    assert report["lint"]["a.mcpeval.yaml"]["drafts"] == ["d-miss", "d-pass"]
    markdown = (project.path / "r.md").read_text()
    assert "### Misses" not in markdown  # the one miss is a draft's: listed apart, not as the model's miss
    assert "### Draft cases (2: left out of the metrics, the gate and the baseline" in markdown
    assert "| `a.mcpeval.yaml::d-miss[fake]` | missed: expected get_me, called (none) |" in markdown
    assert "| `a.mcpeval.yaml::d-pass[fake]` | passed |" in markdown
    page = (project.path / "r.html").read_text()
    assert page.count('left out of the metrics and the gate">draft</span>') == 2  # each draft's row is marked
    baseline = json.loads((project.path / "base.json").read_text())
    assert sorted(c["id"] for c in baseline["cases"]) == ["a0", "a1", "a2"]


def test_drafts_are_never_paired_with_the_baseline(project: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    assert run(project, "--mcp-models=fake", "--mcp-save-baseline=base.json").ret == 0
    model_server.script("draft question 2", {"content": "No tool for that."})  # the other draft now misses
    text = (project.path / "a.mcpeval.yaml").read_text().replace("draft question two", "draft question 2")
    (project.path / "a.mcpeval.yaml").write_text(text.replace("draft: true", "draft: false", 1))  # d-miss reviewed
    result = run(project, "--mcp-models=fake", "--mcp-compare=base.json", "--mcp-fail-on-drop=0",
                 "--mcp-report=report.json")
    assert result.ret == 0, result.stdout.str()
    comparison = read_report(project)["comparison"]
    assert comparison["only_in_current"] == ["a.mcpeval.yaml::d-miss[fake]#0"]  # kept now, but not in the baseline
    assert comparison["flipped"] == []  # d-pass flipped, but as a draft it is not compared
