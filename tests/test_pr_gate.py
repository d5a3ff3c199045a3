"""Pull-request checks: baseline comparison with a significance gate, snapshots, lint, catalog tokens."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import GITHUB_TOOLS, make_project, read_report, run

from pytest_mcpeval.testing import ScriptedModelServer

TOOLS = [
    {"name": "list_issues", "description": "List issues in a repository, filtered by state and labels.",
     "inputSchema": {"type": "object", "properties": {"repo": {"type": "string"},
                                                      "state": {"type": "string", "enum": ["OPEN", "CLOSED"]}},
                     "required": ["repo"]}},
    {"name": "search_issues", "description": "Full-text search over issues.",
     "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}},
]


def bench(n: int) -> str:
    cases = "".join(f"  - id: list{i}\n    input: show the open issues of repo r{i}\n"
                    f"    expect: [{{tool: list_issues}}]\n" for i in range(n))
    return "server: {tools_file: tools.json}\ncases:\n" + cases


def project(pytester: pytest.Pytester, server: ScriptedModelServer, n: int, tools: list[dict[str, Any]]) -> None:
    make_project(pytester, server, {"bench.mcpeval.yaml": bench(n)}, tools=tools)
    for i in range(n):
        server.call(f"show the open issues of repo r{i}", "list_issues", repo=f"r{i}")


def test_description_change_that_flips_cases_fails_the_gate(pytester: pytest.Pytester,
                                                            model_server: ScriptedModelServer,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # without xdist only: the report, and so the gate, is the same under -n 2 (test_e2e checks it)
    xdist_args: list[str] = []
    summary = pytester.path / "step-summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    project(pytester, model_server, 12, TOOLS)
    result = run(pytester, "--mcp-models=fake", "--mcp-save-baseline=base.json", *xdist_args)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["baseline written to *base.json"])  # said, as the report and the HTML are
    changed = [dict(TOOLS[0], description="Search or list issues."), *TOOLS[1:]]
    (pytester.path / "tools.json").write_text(json.dumps(changed))
    for i in range(6):  # the model now reaches for search_issues on half of the cases
        model_server.call(f"show the open issues of repo r{i}", "search_issues", query=f"repo:r{i} is:open")
    result = run(pytester, "--mcp-models=fake", "--mcp-compare=base.json", "--mcp-fail-on-drop=0.02",
                 "--mcp-markdown=pr.md", "--mcp-report=report.json", *xdist_args)
    result.stdout.fnmatch_lines([
        "compared with *base.json: 6 cases flipped, 0 only in the baseline, 0 only in this run",
        "GATE FAILED model fake: accuracy dropped 1.000 -> 0.500 (-0.500, 95% CI [[]*[]], p = 0.0312, "
        "6 of 12 paired cases changed)",
    ])
    assert result.ret == 1
    markdown = (pytester.path / "pr.md").read_text()
    assert "❌" in markdown and "✏️" in markdown and "list_issues" in markdown
    assert "-List issues in a repository, filtered by state and labels." in markdown
    assert "+Search or list issues." in markdown
    assert summary.read_text() == "earlier step\n" + markdown + "\n"  # appended, not overwritten
    comparison = read_report(pytester)["comparison"]
    assert len(comparison["flipped"]) == 6 and comparison["drops"]


def test_holm_correction_weighs_the_same_six_flips_against_the_number_of_metrics(
        pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    """The six flips above, with --mcp-drop-correction=holm: accuracy, macro F1 and f1[list_issues] each have
    p = 2 / 2**6 = 0.03125 over six discordant cases (f1[search_issues] is not comparable: the baseline never
    expected or called it); Holm over those three gives 3 x 0.03125 = 0.09375 each, so the gate passes and says
    so with both p-values."""
    project(pytester, model_server, 12, TOOLS)
    assert run(pytester, "--mcp-models=fake", "--mcp-save-baseline=base.json").ret == 0
    for i in range(6):
        model_server.call(f"show the open issues of repo r{i}", "search_issues", query=f"repo:r{i} is:open")
    result = run(pytester, "--mcp-models=fake", "--mcp-compare=base.json", "--mcp-fail-on-drop=0.02",
                 "--mcp-drop-correction=holm", "--mcp-markdown=pr.md", "--mcp-report=report.json", "--mcp-record=off")
    assert "GATE FAILED" not in result.stdout.str() and result.ret == 0
    comparison = read_report(pytester)["comparison"]
    assert comparison["correction"] == "holm" and comparison["drops"] == []
    adjusted = {c["metric"]: c["p_adjusted"] for c in comparison["changes"] if c["discordant"] >= 6}
    assert adjusted == pytest.approx({"accuracy": 0.09375, "macro_f1": 0.09375, "f1[list_issues]": 0.09375,
                                      "f1[search_issues]": 1.0})
    assert "0.0312 (Holm 0.0938)" in (pytester.path / "pr.md").read_text()
    result = run(pytester, "--mcp-models=fake", "--mcp-compare=base.json", "--mcp-drop-correction=bonferroni")
    result.stderr.fnmatch_lines(["*--mcp-drop-correction: invalid choice: 'bonferroni' (choose from *none*holm*)"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_a_small_random_drop_is_not_significant(pytester: pytest.Pytester,
                                                model_server: ScriptedModelServer) -> None:
    project(pytester, model_server, 20, TOOLS)
    assert run(pytester, "--mcp-models=fake", "--mcp-save-baseline=base.json").ret == 0
    model_server.call("show the open issues of repo r3", "search_issues", query="r3")
    result = run(pytester, "--mcp-models=fake", "--mcp-compare=base.json", "--mcp-fail-on-drop=0.02",
                 "--mcp-report=report.json", "--mcp-record=off",  # a fresh answer, not the recorded one
                 "--mcp-html=report.html", "--mcp-markdown=summary.md")
    result.stdout.fnmatch_lines(["compared with *: 1 case flipped*"])
    assert "GATE FAILED" not in result.stdout.str()
    assert result.ret == 0
    # every rendering states the same gate: the drop gate, not "nothing gated" (issue 32 item 1)
    gated = "no significant drop against the baseline (margin 0.02, level 0.05)"
    result.stdout.fnmatch_lines([f"gate passed: {gated}"])
    page = (pytester.path / "report.html").read_text()
    assert f'<div class="gate pass"><b>Gate passed</b>: {gated}</div>' in page and "nothing gated" not in page
    markdown = (pytester.path / "summary.md").read_text()  # with a baseline: the comparison's page
    assert "✅ **No significant drop** (margin 0.02, level 0.05)" in markdown and "nothing gated" not in markdown
    assert read_report(pytester)["gate"]["checks"] == [gated]
    accuracy = next(c for c in read_report(pytester)["comparison"]["changes"] if c["metric"] == "accuracy")
    assert accuracy["diff"] == pytest.approx(-0.05) and accuracy["p_value"] == 1.0  # McNemar b=1, c=0


def test_cases_only_in_one_run_are_listed(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    project(pytester, model_server, 5, TOOLS)
    assert run(pytester, "--mcp-models=fake", "--mcp-save-baseline=base.json").ret == 0
    (pytester.path / "bench.mcpeval.yaml").write_text(bench(4))
    result = run(pytester, "--mcp-models=fake", "--mcp-compare=base.json", "--mcp-report=report.json")
    result.stdout.fnmatch_lines(["*0 cases flipped, 1 only in the baseline, 0 only in this run"])
    assert read_report(pytester)["comparison"]["only_in_baseline"] == ["bench.mcpeval.yaml::list4[fake]#0"]


def test_bad_baseline_is_a_usage_error(pytester: pytest.Pytester) -> None:
    (pytester.path / "base.json").write_text("{not json")
    result = run(pytester, "--mcp-compare=base.json")
    result.stderr.fnmatch_lines(["*--mcp-compare: *"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result = run(pytester, "--mcp-fail-on-drop=0.02")
    result.stderr.fnmatch_lines(["*--mcp-fail-on-drop needs --mcp-compare=BASELINE"])


LINT_BENCH = """server: {tools_file: tools.json}
cases:
  - id: ok
    input: a
    expect: [{tool: list_issues, args: {repo: r}}]
  - id: bad
    input: b
    expect:
      - tool: list_issues
        args:
          repo: 7
          state: open
          labelz: [bug]
  - id: missing
    input: c
    expect: [{tool: search_issues, args: {}}]
"""


def test_lint_item_finds_each_kind(pytester: pytest.Pytester, model_server: ScriptedModelServer,
                                   xdist_args: list[str]) -> None:
    make_project(pytester, model_server, {"bench.mcpeval.yaml": LINT_BENCH}, tools=TOOLS)
    result = run(pytester, "--mcp-lint", "-k", "lint", *xdist_args)
    result.stdout.fnmatch_lines([
        "*4 problems in the expected calls:*",
        "bench.mcpeval.yaml:11: case `bad`: expect[[]0[]].args.repo: *must be of type string*",
        "bench.mcpeval.yaml:12: case `bad`: expect[[]0[]].args.state: *must be one of OPEN, CLOSED (got 'open')*",
        "bench.mcpeval.yaml:13: case `bad`: expect[[]0[]].args.labelz: *",
    ])
    result.stdout.fnmatch_lines(["*case `missing`*required argument `query` of `search_issues`*"])
    result.stdout.fnmatch_lines(["lint bench.mcpeval.yaml: 4 problems, * confusable pair*"])
    assert result.ret == 1


def test_lint_on_the_github_catalog_shows_list_vs_search(pytester: pytest.Pytester,
                                                         model_server: ScriptedModelServer) -> None:
    text = "server: {tools_file: tools.json}\ncases:\n  - id: a\n    input: x\n    expect: [{tool: list_issues}]\n"
    make_project(pytester, model_server, {"bench.mcpeval.yaml": text})
    (pytester.path / "tools.json").write_text(GITHUB_TOOLS.read_text())
    assert run(pytester, "--mcp-lint", "--mcp-report=report.json", "-k", "lint").ret == 0
    pairs = read_report(pytester)["lint"]["bench.mcpeval.yaml"]["confusable"]
    assert ["list_issues", "search_issues"] in [p["tools"] for p in pairs]
    # no model needed for the catalog budget either
    result = run(pytester, "--mcp-lint", "-k", "lint", "--mcp-max-catalog-tokens=10000")
    result.stdout.fnmatch_lines(["GATE FAILED catalog of tools_file: tools.json costs * tokens per request*"])
    assert result.ret == 1


def test_catalog_tokens_are_reported_and_gated(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    text = "server: {tools_file: tools.json}\ncases:\n  - id: a\n    input: who am i\n    expect: [{tool: get_me}]\n"
    make_project(pytester, model_server, {"bench.mcpeval.yaml": text})
    (pytester.path / "tools.json").write_text(GITHUB_TOOLS.read_text())
    model_server.call("who am i", "get_me")
    result = run(pytester, "--mcp-models=fake", "--mcp-max-catalog-tokens=10000", "--mcp-report=report.json")
    result.stdout.fnmatch_lines(["catalog tools_file: tools.json: 117 tools, * tokens per request (heaviest: *)",
                                 "GATE FAILED catalog of tools_file: tools.json costs * tokens per request, above "
                                 "--mcp-max-catalog-tokens=10000 (heaviest: *)"])
    assert result.ret == 1
    report = read_report(pytester)
    (info,) = report["catalogs"].values()
    assert info["tokens"] > 10000 and len(info["tools"]) == 117
    assert report["cases"][0]["catalog"] in report["catalogs"]
    assert len(info["tools"]["get_me"]["hash"]) == 16


def test_every_call_that_moved_is_listed_by_tool_not_only_the_flips(pytester: pytest.Pytester,
                                                                     model_server: ScriptedModelServer) -> None:
    """A rewrite of search_issues fixes one case and pulls two other requests to search_issues, misses before and
    after: "Flipped cases" lists one; the calls that moved list all three, by the tool that gained or lost them
    (issue 32 item 4)."""
    cases = {"find-dark-mode": ("find issues about dark mode", "search_issues"),
             "open-in-r1": ("show the open issues of repo r1", "list_issues"),
             "closed-in-r2": ("show the closed issues of repo r2", "list_issues")}
    text = "server: {tools_file: tools.json}\ncases:\n" + "".join(
        f"  - id: {cid}\n    input: {words}\n    expect: [{{tool: {tool}}}]\n" for cid, (words, tool) in cases.items())
    make_project(pytester, model_server, {"bench.mcpeval.yaml": text}, tools=TOOLS)
    model_server.call("find issues about dark mode", "list_issues", repo="x")  # a miss
    model_server.call("show the open issues of repo r1", "list_issues", repo="r1")  # passed
    model_server.script("show the closed issues of repo r2", {"content": "Which repository?"})  # a miss: no call
    assert run(pytester, "--mcp-models=fake", "--mcp-save-baseline=base.json").ret == 0  # misses gate nothing
    for words, _ in cases.values():
        model_server.call(words, "search_issues", query=words)
    result = run(pytester, "--mcp-models=fake", "--mcp-compare=base.json", "--mcp-record=off", "--mcp-markdown=pr.md",
                 "--mcp-html=pr.html", "--mcp-report=report.json")
    result.stdout.fnmatch_lines([
        "compared with *base.json: 2 cases flipped, 0 only in the baseline, 0 only in this run",
        "calls that moved (3 cases, passed or missed): search_issues +3 -0, list_issues +0 -2, (none) +0 -1",
    ])
    moved = read_report(pytester)["comparison"]["moved"]
    assert sorted(m["case"].split("::")[1].split("[")[0] for m in moved) == sorted(cases)
    markdown = (pytester.path / "pr.md").read_text()
    assert "### Calls that moved (3 cases, passed or missed)" in markdown
    line = next(x for x in markdown.splitlines() if x.startswith("- `search_issues` gained 3: "))
    assert all(cid in line for cid in cases) and "from `(none)`" in line
    assert "- `list_issues` lost 2: " in markdown
    page = (pytester.path / "pr.html").read_text()
    assert "<h3>Calls that moved (3 cases, passed or missed)</h3>" in page


def test_unchanged_tools_fold_and_tools_without_cases_go(pytester: pytest.Pytester,
                                                         model_server: ScriptedModelServer) -> None:
    """No rows of +0.000 and p = 1.0000: a tool whose F1 did not move is named on one folded line (Markdown) or in
    a closed <details> (HTML); a tool no case expects and none called has no row and no heatmap line (issue 32
    item 5)."""
    tools = [*TOOLS, {"name": "get_me", "description": "Who am I.", "inputSchema": {"type": "object"}},
             {"name": "delete_all", "description": "Delete everything.", "inputSchema": {"type": "object"}}]
    text = ("server: {tools_file: tools.json}\ncases:\n"
            "  - {id: s, input: find dark mode, expect: [{tool: search_issues}]}\n"
            "  - {id: l, input: show open issues of r1, expect: [{tool: list_issues}]}\n"
            "  - {id: m, input: who am i, expect: [{tool: get_me}]}\n")
    make_project(pytester, model_server, {"bench.mcpeval.yaml": text}, tools=tools)
    model_server.call("find dark mode", "search_issues", query="dark mode")
    model_server.call("show open issues of r1", "list_issues", repo="r1")
    model_server.call("who am i", "get_me")
    assert run(pytester, "--mcp-models=fake", "--mcp-save-baseline=base.json").ret == 0
    model_server.call("show open issues of r1", "search_issues", query="r1")
    assert run(pytester, "--mcp-models=fake", "--mcp-compare=base.json", "--mcp-record=off", "--mcp-markdown=pr.md",
               "--mcp-html=pr.html").ret == 0
    markdown = (pytester.path / "pr.md").read_text()
    assert "| `search_issues` |" in markdown and "| `list_issues` |" in markdown  # both moved: rows
    assert "| `get_me` |" not in markdown and "Tool F1 unchanged for 1 tool: `get_me`" in markdown
    page = (pytester.path / "pr.html").read_text()
    model = page.split("<h3>Per tool (single calls)</h3>", 1)[1].split("</details>", 1)[0]
    main, folded = model.split("<details class=unchanged>", 1)
    assert "<td>list_issues" in main and "<td>get_me" not in main
    assert "1 tool with F1 unchanged since the baseline" in folded and "<td>get_me" in folded
    assert "delete_all" not in model  # no case, no call: no row
    heat = page.split("Confusion matrix", 1)[1].split("</table>", 1)[0]
    assert "delete_all" not in heat and "get_me" in heat
