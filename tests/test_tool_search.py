"""Tool search (docs/tool-search.md): the ranking, and cases run under it from the command line with scripted models
that search, then call."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from conftest import make_project, read_report, run

from pytest_mcpeval.testing import ScriptedModelServer
from pytest_mcpeval.tool_search import SEARCH_TOOL, SearchError, bm25_scores, rank, tokenize, tool_text

TOOLS: list[dict[str, Any]] = [
    {"name": "list_issues", "description": "List issues in a repository.",
     "inputSchema": {"type": "object", "properties": {"repo": {"type": "string", "description": "Repository name"}}}},
    {"name": "get_me", "description": "Details of the authenticated user.", "inputSchema": {"type": "object"}},
    {"name": "create_branch", "description": "Create a new branch in a repository.",
     "inputSchema": {"type": "object", "properties": {"branch": {"type": "string"}}}},
    {"name": "zap_widget", "description": "Frobnicate the thing.", "inputSchema": {"type": "object"}},
]


def test_bm25_worked_by_hand() -> None:
    """Two documents, "a b" and "a"; the query "b" occurs in one (df 1 of N 2): idf = ln(1 + (2-1+0.5)/(1+0.5))
    = ln 2.  Document 0 has length 2, the average is 1.5: tf-part = 1 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 2/1.5))."""
    scores = bm25_scores("b", ["a b", "a"])
    expected = math.log(2) * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 2 / 1.5))
    assert scores[0] == pytest.approx(expected) and scores[1] == 0.0
    # "a" is in both documents: idf = ln(1 + 0.5/2.5) > 0, and the shorter document scores higher
    both = bm25_scores("a", ["a b", "a"])
    assert 0 < both[0] < both[1]


def test_what_a_search_reads_and_ranks() -> None:
    assert tokenize("listIssues of my_repo-X") == ["list", "issues", "of", "my", "repo", "x"]
    assert tool_text(TOOLS[0]) == "list_issues\nList issues in a repository.\nrepo\nRepository name"
    assert rank("bm25", "issues in my repository", TOOLS)[:2] == ["list_issues", "create_branch"]
    assert rank("bm25", "weather", TOOLS) == []
    assert rank("regex", "(?i)^get_|branch", TOOLS) == ["get_me", "create_branch"]
    with pytest.raises(SearchError, match="invalid regular expression: missing \\), unterminated subpattern"):
        rank("regex", "(issue", TOOLS)


BENCH = """
server: {tools_file: tools.json}
tool_search: {method: bm25, top_k: 2}
cases:
  - id: found_chosen
    input: found chosen
    expect: [{tool: list_issues}]
  - id: not_found
    input: not found
    expect: [{tool: zap_widget}]
  - id: found_not_chosen
    input: found not chosen
    expect: [{tool: list_issues}]
  - id: no_search
    input: no search
    expect: [{tool: list_issues}]
  - id: again
    input: again
    expect: [{tool: create_branch}]
  - id: full_catalog
    input: full catalog
    tool_search: off
    expect: [{tool: get_me}]
"""


def search(query: str) -> list[dict[str, Any]]:
    return [{"name": SEARCH_TOOL, "arguments": {"query": query}}]


def test_search_then_call_scored_and_diagnosed(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    make_project(pytester, model_server, {"bench.mcpeval.yaml": BENCH}, tools=TOOLS)
    model_server.flow("found chosen", search("issues repository"), [{"name": "list_issues", "arguments": {}}])
    model_server.flow("not found", search("gizmo"), search("gadget"), "I found nothing useful.")
    model_server.flow("found not chosen", search("list issues"), [{"name": "get_me", "arguments": {}}])
    model_server.flow("no search", "I can answer without tools.")
    model_server.flow("again", search("weather"), search("new branch"), [{"name": "create_branch", "arguments": {}}])
    model_server.call("full catalog", "get_me")
    result = run(pytester, "--mcp-models=fake", "--mcp-report=report.json", "--mcp-markdown=report.md",
                 "--mcp-html=report.html")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["  tool search (5 cases): findability 60.0%, 1.2 searches and * tokens per case",
                                 "  hard to find: zap_widget * found 0/1 (0.0%), mean rank *, selection recall 0.000",
                                 "  hard to find: list_issues * found 2/3 (66.7%), mean rank 1.000, selection "
                                 "recall 0.333"])
    result.stdout.fnmatch_lines(["*::not_found?fake?  not_found", "  - expected zap_widget", "  + called   (none)",
                                 "    searched (bm25, top 2) for 'gizmo', 'gadget': surfaced no tool"])
    result.stdout.fnmatch_lines(["*::no_search?fake?  no_search", "  - expected *", "  + called   (none)",
                                 "    never called the search tool (bm25, top 2)"])
    markdown = (pytester.path / "report.md").read_text()
    assert "| `zap_widget` | 1 | 0 | 0.0% | — | 0.000 |" in markdown
    assert markdown.index("`zap_widget` | 1 | 0") < markdown.index("`create_branch` | 1 | 1")  # unfindable first
    assert "<h3>Tool search</h3>" in (pytester.path / "report.html").read_text()
    cases = {c["id"]: c for c in read_report(pytester)["cases"]}
    first = cases["found_chosen"]
    assert first["passed"] is True and first["diagnosis"] is None and first["turns"] == 2
    assert first["search"] == {"method": "bm25", "top_k": 2, "queries": ["issues repository"],
                               "surfaced": ["list_issues", "create_branch"], "found": {"list_issues": 1}}
    assert cases["not_found"]["diagnosis"] == "not_found"
    assert cases["not_found"]["search"]["found"] == {"zap_widget": None}
    assert cases["not_found"]["search"]["queries"] == ["gizmo", "gadget"]
    assert cases["found_not_chosen"]["diagnosis"] == "found_not_chosen"
    assert cases["found_not_chosen"]["called_label"] == "get_me"
    assert cases["no_search"]["diagnosis"] == "no_search" and cases["no_search"]["turns"] == 1
    again = cases["again"]
    assert again["passed"] is True and again["search"]["queries"] == ["weather", "new branch"]
    assert again["search"]["found"] == {"create_branch": 1} and again["turns"] == 3
    assert "search" not in cases["full_catalog"] and cases["full_catalog"]["passed"] is True
    # what the model was shown: the search tool alone, then the tools a search loaded
    shown = {(r["messages"][0]["content"], len([m for m in r["messages"] if m["role"] == "assistant"])):
             [t["function"]["name"] for t in r["tools"]] for r in model_server.requests}
    assert shown[("found chosen", 0)] == [SEARCH_TOOL]
    assert shown[("found chosen", 1)] == [SEARCH_TOOL, "list_issues", "create_branch"]
    assert shown[("full catalog", 0)] == [t["name"] for t in TOOLS]
    answer = next(m for r in model_server.requests for m in r["messages"]
                  if m["role"] == "tool" and r["messages"][0]["content"] == "found chosen")
    assert answer["content"] == ("Tools found (now available to call):\n- list_issues: List issues in a repository.\n"
                                 "- create_branch: Create a new branch in a repository.")
    metrics = read_report(pytester)["models"]["fake"]["search"]
    assert list(metrics["tools"]) == ["zap_widget", "list_issues", "create_branch"]  # the unfindable first
    assert metrics["tokens_per_case"] > 0
    assert metrics == {"cases": 5, "recall": 0.6, "searches_per_case": 1.2, "tokens_per_case": metrics[
        "tokens_per_case"], "tools": {
        "create_branch": {"cases": 1, "found": 1, "recall": 1.0, "mean_rank": 1.0},
        "list_issues": {"cases": 3, "found": 2, "recall": 0.6667, "mean_rank": 1.0},  # not by `no_search`
        "zap_widget": {"cases": 1, "found": 0, "recall": 0.0, "mean_rank": None}}}


def test_a_bad_regex_is_an_error_result_the_model_sees(pytester: pytest.Pytester,
                                                        model_server: ScriptedModelServer) -> None:
    bench = ("server: {tools_file: tools.json}\ncases:\n  - id: bad\n    input: bad pattern\n"
             "    expect: [{tool: get_me}]\n")
    make_project(pytester, model_server, {"bench.mcpeval.yaml": bench}, tools=TOOLS)
    model_server.flow("bad pattern", search("(get"), search("get_me"), [{"name": "get_me", "arguments": {}}])
    result = run(pytester, "--mcp-models=fake", "--mcp-tool-search=regex:3", "--mcp-report=report.json")
    assert result.ret == 0, result.stdout.str()
    case = read_report(pytester)["cases"][0]
    assert case["passed"] is True
    assert case["search"]["queries"] == ["(get", "get_me"] and case["search"]["top_k"] == 3
    assert case["search"]["errors"] == ["invalid regular expression: missing ), unterminated subpattern at position 0"]
    sent = [m for m in model_server.requests[1]["messages"] if m["role"] == "tool"]
    assert sent[0]["content"] == ("search failed: invalid regular expression: missing ), unterminated subpattern at "
                                  "position 0")


def test_the_search_bound(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    bench = ("server: {tools_file: tools.json}\ncases:\n  - id: many\n    input: many\n"
             "    tool_search: {method: bm25, max_searches: 2}\n    expect: [{tool: get_me}]\n")
    make_project(pytester, model_server, {"bench.mcpeval.yaml": bench}, tools=TOOLS)
    model_server.flow("many", search("user"))  # searches forever
    result = run(pytester, "--mcp-models=fake", "--mcp-report=report.json")
    assert result.ret == 0, result.stdout.str()
    case = read_report(pytester)["cases"][0]
    assert case["turns"] == 3 and case["search"]["queries"] == ["user", "user"]
    assert [[t["function"]["name"] for t in r["tools"]] for r in model_server.requests][-1] == ["get_me"]
    assert case["called_label"] == SEARCH_TOOL and case["hallucinated_tools"] == [SEARCH_TOOL]
    assert case["diagnosis"] == "found_not_chosen"


@pytest.mark.parametrize(("value", "message"), [
    ("fuzzy", "'fuzzy' is not METHOD[:K] with METHOD one of bm25, regex, embedding, native, native-regex"),
    ("bm25:0", "'bm25:0': K must be a whole number >= 1 (the tools a search answers with)"),
])
def test_a_bad_option_is_one_line(pytester: pytest.Pytester, value: str, message: str) -> None:
    result = run(pytester, f"--mcp-tool-search={value}")
    assert result.ret == 4
    assert f"error: argument --mcp-tool-search: {message}\n" in result.stderr.str()


def test_an_unknown_key_is_one_line(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    bench = ("server: {tools_file: tools.json}\ntool_search: {method: bm25, topk: 2}\ncases:\n  - id: c\n"
             "    input: x\n    expect: []\n")
    make_project(pytester, model_server, {"bench.mcpeval.yaml": bench}, tools=TOOLS)
    result = run(pytester, "--mcp-models=fake")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*bench.mcpeval.yaml:2*topk*top_k*"])
    assert json.dumps  # the module's imports stay used


SIDE = """
server: {tools_file: tools.json}
cases:
  - id: issues
    input: show issues
    expect: [{tool: list_issues}]
  - id: me
    input: who am i
    expect: [{tool: get_me}]
"""


def test_the_same_model_with_and_without_search_side_by_side(pytester: pytest.Pytester,
                                                              model_server: ScriptedModelServer) -> None:
    """`fake+search` is `fake` under search, a column of its own; `fake` beside it sees the whole catalog.  The
    scripted model answers a request by the tools it was shown: with the whole catalog it calls at once."""
    make_project(pytester, model_server, {"bench.mcpeval.yaml": SIDE}, tools=TOOLS)
    model_server.flow("show issues", search("issues repository"), [{"name": "list_issues", "arguments": {}}])
    model_server.flow("who am i", search("gizmo"), "I do not know.")
    full = {"issues": "list_issues", "me": "get_me"}
    args = ("--mcp-models=fake,fake+search", "--mcp-tool-search=bm25:1", "--mcp-report=report.json")
    result = run(pytester, *args, "--mcp-save-baseline=baseline.json", "-k", "search")
    assert result.ret == 0, result.stdout.str()
    assert {len(r["tools"]) for r in model_server.requests} == {1, 2}  # the search tool, then the tool found
    model_server.requests.clear()
    # the baseline column: one call, with every tool shown (the same scripted model: fake+search is replayed now)
    for case, tool in full.items():
        model_server.script(SIDE.split(f"id: {case}\n    input: ")[1].split("\n")[0], {"tool_calls": [
            {"name": tool, "arguments": {}}]}, model="fake")
    result = run(pytester, *args, "--mcp-compare=baseline.json", "-v")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*issues?fake? PASSED*", "*issues?fake+search? PASSED*", "*me?fake+search? *"])
    report = read_report(pytester)
    models = report["models"]
    assert list(models) == ["fake", "fake+search"]
    assert models["fake"]["search"] is None and models["fake"]["accuracy"] == 1.0
    assert models["fake+search"]["search"]["recall"] == 0.5 and models["fake+search"]["accuracy"] == 0.5
    assert {c["model"]: c.get("search", {}).get("top_k") for c in report["cases"] if c["id"] == "issues"} == {
        "fake": None, "fake+search": 1}
    assert {len(r["tools"]) for r in model_server.requests} == {len(TOOLS)}
    # the comparison pairs each case with its baseline in the same mode: fake+search with fake+search
    assert report["comparison"]["paired"] == {"fake+search": 2}
    assert report["comparison"]["only_in_current"] == ["bench.mcpeval.yaml::issues[fake]#0",
                                                       "bench.mcpeval.yaml::me[fake]#0"]


def test_the_drop_gate_on_findability(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    """A rewrite that makes a tool unfindable by the words the model searches with fails the gate, tool by tool."""
    cases = "".join(f"  - id: zap{j}\n    input: zap {j}\n    expect: [{{tool: zap_widget}}]\n" for j in range(6))
    bench = f"server: {{tools_file: tools.json}}\ntool_search: {{method: bm25}}\ncases:\n{cases}"
    make_project(pytester, model_server, {"bench.mcpeval.yaml": bench}, tools=TOOLS)
    model_server.flow("zap *", search("frobnicate"), [{"name": "zap_widget", "arguments": {}}])
    result = run(pytester, "--mcp-models=fake", "--mcp-save-baseline=baseline.json")
    assert result.ret == 0, result.stdout.str()
    rewritten = [{**t, "description": "Zap the gadget."} if t["name"] == "zap_widget" else t for t in TOOLS]
    (pytester.path / "tools.json").write_text(json.dumps(rewritten))
    model_server.flow("zap *", search("frobnicate"), "Nothing fits.")
    result = run(pytester, "--mcp-models=fake", "--mcp-compare=baseline.json", "--mcp-fail-on-drop=0",
                 "--mcp-drop-metrics=search_recall,tool_findability", "--mcp-report=report.json")
    assert result.ret == 1, result.stdout.str()
    changes = {c["metric"]: c for c in read_report(pytester)["comparison"]["changes"]}
    assert set(changes) == {"search_recall", "findability[zap_widget]"}
    for change in changes.values():
        assert (change["before"], change["after"], change["n"], change["drop"]) == (1.0, 0.0, 6, True)
        assert change["p_value"] == pytest.approx(2 / 64)
    result.stdout.fnmatch_lines([
        "GATE FAILED model fake: search_recall dropped 1.000 -> 0.000 (-1.000, 95% CI *, p = 0.0312, 6 of 6 paired "
        "cases under search changed)",
        "GATE FAILED model fake: findability?zap_widget? dropped 1.000 -> 0.000 (-1.000, 95% CI *, p = 0.0312, 6 of 6 "
        "paired cases changed)"])


def test_embedding_search_ranks_with_the_local_model(pytester: pytest.Pytester, model_server: ScriptedModelServer,
                                                     minilm: object) -> None:
    bench = ("server: {tools_file: tools.json}\ntool_search: {method: embedding, top_k: 1, always_loaded: [get_me]}\n"
             "cases:\n  - id: branch\n    input: branch\n    expect: [{tool: create_branch}]\n")
    make_project(pytester, model_server, {"bench.mcpeval.yaml": bench}, tools=TOOLS)
    model_server.flow("branch", search("make a new git branch"), [{"name": "create_branch", "arguments": {}}])
    result = run(pytester, "--mcp-models=fake", "--mcp-report=report.json")  # the model loaded here (`minilm`)
    assert result.ret == 0, result.stdout.str()
    case = read_report(pytester)["cases"][0]
    assert case["passed"] is True
    assert case["search"] == {"method": "embedding", "top_k": 1, "queries": ["make a new git branch"],
                              "surfaced": ["create_branch"], "found": {"create_branch": 1},
                              "always_loaded": ["get_me"]}
    assert [t["function"]["name"] for t in model_server.requests[0]["tools"]] == [SEARCH_TOOL, "get_me"]


def test_cases_that_cannot_search_are_errors(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    bench = ("server: {tools_file: tools.json}\ncases:\n  - id: typo\n    input: typo\n"
             "    tool_search:\n      method: bm25\n      always_loaded: [get_me, get_mee]\n"
             "    expect: [{tool: get_me}]\n")
    make_project(pytester, model_server, {"bench.mcpeval.yaml": bench}, tools=TOOLS)
    result = run(pytester, "--mcp-models=fake", "--mcp-report=report.json")
    assert result.ret == 1
    assert read_report(pytester)["cases"][0]["error"] == (
        "bench.mcpeval.yaml:7: case `typo`: tool_search.always_loaded names `get_mee`, which the server does not "
        "publish; did you mean `get_me`?")
    (pytester.path / "bench.mcpeval.yaml").write_text(bench.replace(", get_mee", ""))
    result = run(pytester, "--mcp-models=local/minilm+search", "--mcp-report=report.json")
    assert result.ret == 1
    assert read_report(pytester)["cases"][0]["error"] == (
        "bench.mcpeval.yaml:3: case `typo`: model local/minilm+search ranks tools and cannot search: tool search "
        "needs a model that calls tools with arguments")


FLOW = """
server: {tools_file: tools.json}
tool_search: {method: bm25, top_k: 1}
cases:
  - id: flow
    input: branch flow
    mocks:
      create_branch: [{result: {text: created}}]
    expect: [{tool: create_branch}]
  - id: lost
    input: lost flow
    mocks:
      zap_widget: [{result: {text: zapped}}]
    expect: [{tool: zap_widget}]
"""


def test_a_flow_searches_as_turns_of_its_conversation(pytester: pytest.Pytester,
                                                       model_server: ScriptedModelServer) -> None:
    make_project(pytester, model_server, {"bench.mcpeval.yaml": FLOW}, tools=TOOLS)
    model_server.flow("branch flow", search("branch"), [{"name": "create_branch", "arguments": {}}], "Done.")
    model_server.flow("lost flow", search("gizmo"), "I cannot.")
    result = run(pytester, "--mcp-models=fake", "--mcp-report=report.json")
    assert result.ret == 0, result.stdout.str()
    cases = {c["id"]: c for c in read_report(pytester)["cases"]}
    flow = cases["flow"]
    assert flow["passed"] is True and flow["turns"] == 3 and flow["search_recall"] == 1.0
    assert flow["search"]["found"] == {"create_branch": 1} and flow["called"] == [{"tool": "create_branch", "args": {}}]
    first = flow["trajectory"][0]["calls"][0]
    assert (first["tool"], first["args"], first["answer"]["source"]) == (SEARCH_TOOL, {"query": "branch"}, "search")
    assert first["answer"]["text"].startswith("Tools found (now available to call):\n- create_branch: ")
    lost = cases["lost"]
    assert lost["passed"] is False and lost["diagnosis"] == "not_found" and lost["search_recall"] == 0.0
    requests = [r for r in model_server.requests if r["messages"][0]["content"] == "branch flow"]
    assert [[t["function"]["name"] for t in r["tools"]] for r in requests] == [
        [SEARCH_TOOL], [SEARCH_TOOL, "create_branch"], [SEARCH_TOOL, "create_branch"]]


def test_a_keyword_model_chooses_by_the_descriptions_it_is_sent(pytester: pytest.Pytester,
                                                                 model_server: ScriptedModelServer) -> None:
    """`{"best_match": true}` reads the tools of each request: with the whole catalog it calls the best match at once;
    under search it searches with the user's words, then calls the best of the tools found."""
    make_project(pytester, model_server, {"bench.mcpeval.yaml": SIDE}, tools=TOOLS)
    model_server.script("*", {"best_match": True})
    result = run(pytester, "--mcp-models=fake,fake+search", "--mcp-report=report.json")
    assert result.ret == 0, result.stdout.str()
    cases = {(c["id"], c["model"]): c for c in read_report(pytester)["cases"]}
    assert cases[("issues", "fake")]["called_label"] == "list_issues" and "search" not in cases[("issues", "fake")]
    searched = cases[("issues", "fake+search")]
    assert searched["search"]["queries"] == ["show issues"] and searched["called_label"] == "list_issues"
    me = cases[("me", "fake+search")]  # "who am i" shares no word with any description: nothing found, no call
    assert (me["search"]["surfaced"], me["diagnosis"]) == ([], "not_found")


def test_search_results_cross_xdist(pytester: pytest.Pytester, model_server: ScriptedModelServer,
                                    xdist_args: list[str]) -> None:
    make_project(pytester, model_server, {"bench.mcpeval.yaml": SIDE}, tools=TOOLS)
    model_server.script("*", {"best_match": True})
    result = run(pytester, "--mcp-models=fake+search", "--mcp-report=report.json", *xdist_args)
    assert result.ret == 0, result.stdout.str()
    report = read_report(pytester)
    assert {c["id"]: c["search"]["found"] for c in report["cases"]} == {"issues": {"list_issues": 1},
                                                                       "me": {"get_me": None}}
    assert report["models"]["fake+search"]["search"]["recall"] == 0.5


def test_what_the_gate_can_see_of_search(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    cases = "".join(f"  - id: zap{j}\n    input: zap {j}\n    expect: [{{tool: zap_widget}}]\n" for j in range(6))
    make_project(pytester, model_server, {"bench.mcpeval.yaml": f"server: {{tools_file: tools.json}}\ncases:\n{cases}"},
                 tools=TOOLS)
    model_server.script("*", {"best_match": True})
    result = run(pytester, "--mcp-models=fake+search", "--mcp-report=report.json", "--mcp-drop-correction=holm")
    assert result.ret == 0, result.stdout.str()
    power = read_report(pytester)["models"]["fake+search"]["power"]
    assert power["headline"]["search_recall"] == {"n": 6, "min_changed": 8, "detectable_drop": None}
    assert power["tests"] == 5  # accuracy, macro F1, f1[zap_widget], search_recall, findability[zap_widget]


def test_which_search_a_case_runs_under() -> None:
    from pytest_mcpeval.benchmark.schema import ToolSearch
    from pytest_mcpeval.models.config import ModelRegistry
    from pytest_mcpeval.run.searching import SearchConfig, config_for, resolve

    file_key = ToolSearch(top_k=2, always_loaded=["get_me"])
    assert resolve(None, file_key, None) is None  # no method anywhere: no search
    assert resolve(("regex", None), file_key, None) == SearchConfig("regex", 2, 3, ("get_me",))
    assert resolve(("regex", 7), ToolSearch(method="bm25"), ToolSearch(max_searches=1)) == SearchConfig("bm25", 7, 1)
    assert resolve(("bm25", None), file_key, "off") is None
    registry = ModelRegistry(aliases={"m": "openai/m"})
    plain, variant = registry.resolve("m"), registry.resolve("m+search")
    assert (variant.name, variant.target, variant.search) == ("m+search", "openai/m", True)
    assert config_for(variant, None, None, None, {"m", "m+search"}) == SearchConfig("bm25")
    assert config_for(plain, ("regex", 4), None, None, {"m", "m+search"}) is None  # the baseline column
    assert config_for(plain, ("regex", 4), None, None, {"m"}) == SearchConfig("regex", 4)
    assert config_for(variant, None, None, "off", {"m+search"}) is None


def test_thresholds_on_findability(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    make_project(pytester, model_server, {"bench.mcpeval.yaml": SIDE}, tools=TOOLS,
                 ini_extra="mcp_thresholds =\n    search_recall >= 0.9\n    findability[list_issues] >= 1\n")
    model_server.script("*", {"best_match": True})
    result = run(pytester, "--mcp-models=fake+search")
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines(["GATE FAILED model fake+search: search_recall = 0.500, required >= 0.9 (from ini "
                                 "mcp_thresholds)"])
    assert "findability[list_issues]" not in "".join(line for line in result.stdout.lines if "GATE FAILED" in line)
