"""``python -m pytest_mcpeval draft``: each rule that keeps or drops a draft, the file it writes, the cache, the
targets it picks and its one-line usage errors (docs/drafting.md).  In-process, against the scripted model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_mcpeval.__main__ import main
from pytest_mcpeval.testing import ScriptedModelServer
from tests.conftest import GITHUB_TOOLS

TOOLS = ("get_me", "list_issues", "search_issues", "list_pull_requests", "search_pull_requests", "add_issue_reaction",
         "add_issue_comment_reaction")
BENCH = """version: 1
server: {tools_file: tools.json}
cases:
  - id: me-1
    input: Who am I logged in as?
    expect: [{tool: get_me, args: {}}]
  - id: issues-1
    input: Show the open issues of acme/webapp
    expect: [{tool: list_issues, args: {owner: acme, repo: webapp, state: OPEN}}]
  - id: search-1
    input: Find issues about the Safari login crash
    expect: [{tool: search_issues, args: {query: safari login crash}}]
"""
GOOD = {"request": "Which bugs labelled crash are still open in acme/api, newest first?",
        "arguments": {"owner": "acme", "repo": "api", "state": "OPEN", "labels": ["crash"], "direction": "DESC"}}
REPLY = {"cases": [
    GOOD,
    {"request": "Use list_issues to show the closed tickets of acme/api",
     "arguments": {"owner": "acme", "repo": "api"}},
    {"request": "Issues of acme/cli in red", "arguments": {"owner": "acme", "repo": "cli", "colour": "red"}},
    {"request": "Open tickets of acme/cli", "arguments": {"owner": "acme", "repo": "cli", "state": "opened"}},
    {"request": "What is open over at acme?", "arguments": {"owner": "acme"}},
    {"request": "Show the open issues of acme/webapp", "arguments": {"owner": "acme", "repo": "webapp"}},
    {"request": "Which bugs labelled crash are still open in acme/api, newest first please?",
     "arguments": {"owner": "acme", "repo": "api"}},
    {"request": 5, "arguments": {}},
    {"request": "LIST_ISSUES", "arguments": {"owner": "acme", "repo": "api"}},  # its description, word for word
    {"request": "Anything updated since Monday in acme/docs?", "arguments": {"owner": "acme", "repo": "docs"}},
]}


def _tools() -> list[dict[str, Any]]:
    data = json.loads(GITHUB_TOOLS.read_text())
    return [t for t in (data if isinstance(data, list) else data["tools"]) if t["name"] in TOOLS]


def _described(name: str) -> str:
    return " ".join(next(t["description"] for t in _tools() if t["name"] == name).split())


def asked_for(text: str) -> str:
    """The tool a drafter's request is about (the prompt shows its description, not its name)."""
    return next(t["name"] for t in _tools() if text.startswith(f"The tool: {' '.join(t['description'].split())}"))


@pytest.fixture
def project(tmp_path: Path, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tools.json").write_text(json.dumps(_tools()))
    (tmp_path / "bench.mcpeval.yaml").write_text(BENCH)
    text = json.dumps(REPLY).replace("LIST_ISSUES", _described("list_issues").replace('"', "'"))
    fenced = {"content": "```json\n" + text + "\n```"}
    model_server.script("The tool: List issues in a GitHub repository.*", fenced)
    return tmp_path


def draft(server: ScriptedModelServer, *args: str) -> int:
    params = json.dumps({"api_base": server.api_base, "api_key": "not-a-key"})
    return main(["draft", *args, "--model=openai/drafter", f"--model-params={params}"])


def test_every_rule_drops_its_drafts_and_the_kept_ones_are_written(project: Path, model_server: ScriptedModelServer,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert draft(model_server, "bench.mcpeval.yaml", "--tools=list_issues", "--per-tool=8") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("draft: 1 of 10 drafts kept for 1 target (1 tool with a kept draft); 1 drafter call(s), "
                      "0 replayed from the cache")
    copies = [line for line in out if line.startswith("  dropped 1: copies the description (e.g. \"List issues in "
                                                      "a GitHub repository. For pagination, ")]
    assert len(copies) == 1
    assert sorted(line for line in out[1:-1] if line not in copies) == sorted([
        "  dropped 1: names its tool (e.g. Use list_issues to show the closed tickets of acme/api)",
        "  dropped 1: lint: unknown_argument (e.g. `list_issues` has no argument `colour`; request 'Issues of acme/cli "
        "in red')",
        "  dropped 1: lint: enum_violation (e.g. `state` must be one of OPEN, CLOSED (got 'opened'); request 'Open "
        "tickets of acme/cli')",
        "  dropped 1: lint: missing_required (e.g. required argument `repo` of `list_issues` is not in the expected "
        "args; request 'What is open over at acme?')",
        "  dropped 1: near-duplicate of a case (e.g. 'Show the open issues of acme/webapp' ~ 'Show the open issues "
        "of acme/webapp' (1.00))",
        "  dropped 1: near-duplicate of a draft (e.g. 'Which bugs labelled crash are still open in acme/api, newest "
        "first please?' ~ 'Which bugs labelled crash are still open in acme/api, newest first?' (0.92))",
        "  dropped 1: malformed",
        "  dropped 1: beyond --per-tool",
    ])
    assert out[-1] == ("written to drafts.mcpeval.yaml: review each case, then remove its `draft: true` "
                       "(docs/drafting.md)")
    written = yaml.safe_load((project / "drafts.mcpeval.yaml").read_text())
    assert written["server"] == {"tools_file": "tools.json"}
    assert written["cases"] == [{"id": "draft-list_issues-1", "input": GOOD["request"],
                                 "expect": [{"tool": "list_issues", "args": GOOD["arguments"]}], "draft": True}]


def test_a_rerun_asks_nothing_and_rewrites_its_own_drafts(project: Path, model_server: ScriptedModelServer,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert draft(model_server, ".", "--tools=list_issues") == 0
    first = (project / "drafts.mcpeval.yaml").read_text()
    asked = len(model_server.requests)
    assert draft(model_server, ".", "--tools=list_issues") == 0  # the folder holds drafts.mcpeval.yaml now
    assert len(model_server.requests) == asked
    assert "0 drafter call(s), 1 replayed from the cache" in capsys.readouterr().out
    assert (project / "drafts.mcpeval.yaml").read_text() == first  # its own drafts are not duplicates of themselves


def test_blind_tools_come_first_and_the_drafter_sees_the_tool(project: Path, model_server: ScriptedModelServer,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert draft(model_server, "bench.mcpeval.yaml", "--tools=blind", "--per-tool=2") == 0
    asked = [r["messages"][-1]["content"] for r in model_server.requests]
    assert [asked_for(text) for text in asked] == [
        "add_issue_comment_reaction", "add_issue_reaction", "list_pull_requests", "search_pull_requests", "get_me",
        "list_issues", "search_issues",
    ]  # no case first, then one case each, by name
    issues = asked[5]
    assert "list_issues" not in issues  # its name is not shown: a small drafter copies it into its requests
    assert "- owner (string, required): " in issues
    assert "- state (string, one of \"OPEN\", \"CLOSED\"): " in issues
    assert "- Show the open issues of acme/webapp" in issues  # the benchmark's own, not to repeat
    assert issues.endswith("Write 2 new requests that need this tool, each with its arguments.")
    err = capsys.readouterr().err
    assert ("draft: blind tools: 7 of 7 (fewer than 6 single-call cases each, so the drop gate at level 0.05 cannot "
            "see them fall; 4 with none)") in err


def test_confused_pairs_are_drafted_contrastively(project: Path, model_server: ScriptedModelServer) -> None:
    report = {"models": {"m": {"confused_pairs": [{"expected": "list_issues", "called": "search_issues",
                                                   "count": 3}]}}}
    (project / "report.json").write_text(json.dumps(report))
    assert draft(model_server, "bench.mcpeval.yaml", "--tools=confused", "--report=report.json") == 0
    asked = [r["messages"][-1]["content"] for r in model_server.requests]
    assert [asked_for(text) for text in asked[:2]] == ["list_issues", "search_issues"]
    assert "Another tool, easily confused with it: Search issues using natural-language semantic" in asked[0]
    assert "Requests that need the other tool:\n- Find issues about the Safari login crash" in asked[0]
    assert asked[0].endswith("Write 3 new requests that read like requests for the other tool but that only this "
                             "tool answers, each with the arguments of this tool.")
    # then the lint's similar pairs (TF-IDF >= 0.7: list_pull_requests ~ search_pull_requests, 0.51, is not), both ways
    assert [asked_for(text) for text in asked[2:]] == ["add_issue_comment_reaction", "add_issue_reaction"]
    assert "Another tool, easily confused with it: Add a reaction to an issue or pull request." in asked[2]


@pytest.mark.parametrize(("args", "message"), [
    (["bench.mcpeval.yaml", "--model-params={}"], "no model: give --model MODEL (e.g. local/qwen2.5-coder-0.5b)"),
    (["bench.mcpeval.yaml", "--model=m", "--tools=list_isues"],
     "--tools: `list_isues` is not a tool of the catalog nor one of blind, confused; did you mean `list_issues`?"),
    (["bench.mcpeval.yaml", "--model=m", "--per-tool=0"], "--per-tool=0: expected a number of drafts of 1 or more"),
    (["nothere.mcpeval.yaml", "--model=m"], "nothere.mcpeval.yaml: no such file or folder"),
    (["bench.mcpeval.yaml", "--model=m", "--report=report.json"], "--report=report.json: no such file"),
    (["bench.mcpeval.yaml", "--model=m", "--out=drafts.yaml"],
     "--out=drafts.yaml: a benchmark file's name ends .mcpeval.yaml or .mcpeval.yml (pytest collects only those)"),
    (["bench.mcpeval.yaml", "--model=m", "--out=bench.mcpeval.yaml"],
     "--out=bench.mcpeval.yaml: holds 3 reviewed case(s) (no `draft: true`: me-1, issues-1, search-1); move them to "
     "another benchmark file or give another --out"),
    (["bench.mcpeval.yaml", "--model=m", "--per-tool=x"], "argument --per-tool: invalid int value: 'x'"),
    (["bench.mcpeval.yaml", "--model=m", "--model-params=[1]"], "--model-params: expected a JSON object"),
    (["bench.mcpeval.yaml", "--model=m", "--max-targets=0"],
     "--max-targets=0: expected a number of targets of 1 or more"),
])
def test_a_user_mistake_is_one_line_and_exit_4(project: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                               message: str) -> None:
    try:
        status: Any = main(["draft", *args])
    except SystemExit as exit_:
        status = exit_.code
    assert status == 4
    captured = capsys.readouterr()
    assert captured.err == f"python -m pytest_mcpeval draft: {message}\n"
    assert not (project / "drafts.mcpeval.yaml").exists()
