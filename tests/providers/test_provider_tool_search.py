"""Native tool search through the Anthropic fake (issue 34): the whole catalog sent deferred with Anthropic's search
tool, the searches read back from the reply's ``server_tool_use`` / ``tool_search_tool_result`` blocks into the same
``search`` view and diagnoses as the client-side methods, replayed from the cache alike; a model whose provider does
not search is one clear error.  And two gaps of the client-side search, through the same fake: a blocked reply keeps
``blocked``, an error after a search keeps the search.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import read_report, run
from fakes import TOOL_SEARCH_BETA, AnthropicFake, OpenAIFake
from test_provider_smoke import TOOLS

ZAP = {"name": "zap_widget", "description": "Frobnicate the thing.",
       "inputSchema": {"type": "object", "properties": {}}}
BENCH = """\
server: {tools_file: tools.json}
cases:
  - id: single
    input: Show me WEB-12.
    expect: [{tool: get_issue, args: {issue_key: WEB-12}}]
"""
FLOW = """\
  - id: flow
    input: Who opened WEB-12?
    expect: [{tool: get_issue}]
    mocks:
      get_issue: [{result: {text: carol}}]
"""
ASK = "Show me WEB-12."
GET_ISSUE = {"name": "get_issue", "arguments": {"issue_key": "WEB-12"}}
BM25 = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}


def project(pytester: pytest.Pytester, fake: AnthropicFake | OpenAIFake, bench: str = BENCH) -> None:
    (pytester.path / "pytest.ini").write_text(fake.ini("claude"))
    (pytester.path / "tools.json").write_text(json.dumps([*TOOLS, ZAP]))
    (pytester.path / "cases.mcpeval.yaml").write_text(bench)


def evaluate(pytester: pytest.Pytester, *args: str, method: str = "native") -> dict[str, Any]:
    result = run(pytester, "--mcp-models=claude", "--mcp-report=report.json", "--mcp-retries=0",
                 f"--mcp-tool-search={method}", *args)
    assert result.ret in (0, 1), result.stdout.str()
    return {case["id"]: case for case in read_report(pytester)["cases"]}


def test_found_and_chosen_sends_the_catalog_deferred_and_replays_the_same(pytester: pytest.Pytester) -> None:
    """One request: the search tool first, every catalog tool deferred, the beta header litellm adds; the search read
    from the reply's blocks; a replay (no call) gives the same case."""
    with AnthropicFake() as fake:
        project(pytester, fake)
        fake.script(ASK, {"content": "Searching.", "searches": [{"query": "issue key", "tools": ["get_issue",
                                                                                                 "get_user"]}],
                          "tool_calls": [GET_ISSUE]})
        case = evaluate(pytester)["single"]
        assert fake.refusals == [] and len(fake.requests) == 1
        body, headers = fake.requests[0]["body"], fake.requests[0]["headers"]
        replayed = evaluate(pytester, "--mcp-record=none")["single"]
        assert len(fake.requests) == 1  # the replay called nothing
    assert body["tools"][0] == BM25
    assert [(t["name"], t.get("defer_loading")) for t in body["tools"][1:]] == [
        ("get_issue", True), ("get_user", True), ("zap_widget", True)]
    assert TOOL_SEARCH_BETA in headers["anthropic-beta"]
    assert case["error"] is None and case["passed"] is True and case["diagnosis"] is None
    assert case["search"] == {"method": "native", "queries": ["issue key"], "surfaced": ["get_issue", "get_user"],
                              "found": {"get_issue": 1}}
    assert case["search_recall"] == 1.0 and case["turns"] == 1 and case["called_label"] == "get_issue"
    assert case["content"] == "Searching."
    assert case["usage"]["cached"] is False and replayed["usage"]["cached"] is True
    strip = ("usage", "latency_s")
    assert {k: v for k, v in replayed.items() if k not in strip} == {k: v for k, v in case.items() if k not in strip}


@pytest.mark.parametrize(("reply", "search", "diagnosis"), [
    ({"searches": [{"query": "user", "tools": ["get_user"]}], "content": "No such tool."},
     {"queries": ["user"], "surfaced": ["get_user"], "found": {"get_issue": None}}, "not_found"),
    ({"searches": [{"query": "issue", "tools": ["get_issue", "get_user"]}],
      "tool_calls": [{"name": "get_user", "arguments": {"username": "WEB-12"}}]},
     {"queries": ["issue"], "surfaced": ["get_issue", "get_user"], "found": {"get_issue": 1}}, "found_not_chosen"),
    ({"content": "WEB-12 is an issue."}, {"queries": [], "surfaced": [], "found": {"get_issue": None}}, "no_search"),
], ids=["not_found", "found_not_chosen", "no_search"])
def test_each_miss_says_whether_the_search_or_the_choice_missed(pytester: pytest.Pytester, reply: dict[str, Any],
                                                                search: dict[str, Any], diagnosis: str) -> None:
    with AnthropicFake() as fake:
        project(pytester, fake)
        fake.script(ASK, reply)
        case = evaluate(pytester)["single"]
        assert fake.refusals == []
    assert case["error"] is None and case["passed"] is False
    assert case["search"] == {"method": "native", **search}
    assert case["diagnosis"] == diagnosis


def test_several_searches_in_one_reply_and_a_search_error(pytester: pytest.Pytester) -> None:
    """native-regex: the regex tool; three searches of one reply, one answered with the provider's error code."""
    with AnthropicFake() as fake:
        project(pytester, fake)
        fake.script(ASK, {"searches": [{"query": "(?i)user", "tools": ["get_user"]}, {"query": "[", "error":
                                                                                      "invalid_pattern"},
                                       {"query": "issue", "tools": ["get_issue"]}], "tool_calls": [GET_ISSUE]})
        case = evaluate(pytester, method="native-regex")["single"]
        assert fake.refusals == []
        assert fake.requests[0]["body"]["tools"][0] == {"type": "tool_search_tool_regex_20251119",
                                                        "name": "tool_search_tool_regex"}
    assert case["passed"] is True
    assert case["search"] == {"method": "native-regex", "queries": ["(?i)user", "[", "issue"],
                              "surfaced": ["get_user", "get_issue"], "found": {"get_issue": 1},
                              "errors": ["invalid_pattern"]}


def test_always_loaded_tools_are_not_deferred(pytester: pytest.Pytester) -> None:
    bench = BENCH.replace("cases:", "tool_search: {always_loaded: [get_issue]}\ncases:")
    with AnthropicFake() as fake:
        project(pytester, fake, bench)
        fake.script(ASK, {"tool_calls": [GET_ISSUE]})
        case = evaluate(pytester)["single"]
        sent = fake.requests[0]["body"]["tools"]
    assert [(t["name"], t.get("defer_loading")) for t in sent[1:]] == [
        ("get_issue", None), ("get_user", True), ("zap_widget", True)]
    assert case["passed"] is True and case["search"]["found"] == {} and case["search"]["always_loaded"] == ["get_issue"]


def test_side_by_side_the_baseline_sees_the_whole_catalog(pytester: pytest.Pytester) -> None:
    """``claude`` beside ``claude+search`` under native: two columns, two requests, only the variant's deferred."""
    with AnthropicFake() as fake:
        project(pytester, fake)
        fake.script(ASK, {"searches": [{"query": "issue", "tools": ["get_issue"]}], "tool_calls": [GET_ISSUE]})
        result = run(pytester, "--mcp-models=claude,claude+search", "--mcp-report=report.json", "--mcp-retries=0",
                     "--mcp-tool-search=native")
        assert result.ret == 0, result.stdout.str()
        sent = sorted((fake.requests[i]["body"]["tools"] for i in range(2)), key=len)
    report = read_report(pytester)
    cases = {c["model"]: c for c in report["cases"]}
    assert [t.get("defer_loading") for t in sent[0]] == [None, None, None]  # the whole catalog, nothing deferred
    assert sent[1][0] == BM25 and [t.get("defer_loading") for t in sent[1][1:]] == [True, True, True]
    assert "search" not in cases["claude"] and cases["claude"]["passed"] is True
    assert cases["claude+search"]["search"]["found"] == {"get_issue": 1} and cases["claude+search"]["passed"] is True
    assert report["models"]["claude+search"]["search"]["recall"] == 1.0 and report["models"]["claude"]["search"] is None


def test_all_tools_deferred_without_a_search_tool_is_refused_as_anthropic_does() -> None:
    """The fake's refusal (Anthropic's 400), through litellm: every tool deferred and no search tool."""
    import litellm

    from pytest_mcpeval.catalog import Catalog

    tools = [{**t, "defer_loading": True} for t in Catalog(TOOLS).openai_tools]
    with AnthropicFake() as fake, pytest.raises(litellm.BadRequestError) as raised:
        litellm.completion(model=fake.model, api_base=fake.api_base, api_key="k", messages=[{"role": "user",
                                                                                            "content": ASK}],
                           tools=tools, extra_headers={"anthropic-beta": TOOL_SEARCH_BETA})
    assert "All tools have defer_loading set. At least one tool must be non-deferred." in str(raised.value)


def test_a_model_whose_provider_does_not_search_is_one_clear_error(pytester: pytest.Pytester) -> None:
    """Before any call: the pre-flight line; without the check, the case's error; never a traceback."""
    with OpenAIFake() as fake:
        project(pytester, fake)
        fake.call(ASK, "get_issue", issue_key="WEB-12")
        result = run(pytester, "--mcp-models=claude", "--mcp-tool-search=native")
        assert result.ret == 4
        assert fake.requests == []
    line = (f"model claude ({fake.model}): native tool search is the provider's own, run by Anthropic "
            "(anthropic/..., and litellm's azure_ai/, vertex_ai/ and bedrock/invoke/ Claude routes), not by this "
            "model's provider: use --mcp-tool-search=bm25 (the same search on the client side, with any model)")
    assert result.stderr.lines == ["ERROR: pre-flight check failed, no model was called (--mcp-no-preflight skips "
                                   "the check):", f"  {line}", ""]
    case = evaluate(pytester, "--mcp-no-preflight")["single"]
    assert case["error"] == f"cases.mcpeval.yaml:3: case `single`: {line}"
    assert "search" not in case


def test_native_k_and_a_flow_under_native_are_refused(pytester: pytest.Pytester) -> None:
    result = run(pytester, "--mcp-tool-search=native:3")
    assert result.ret == 4
    assert ("'native:3': K does not apply to native: the provider decides how many tools each search surfaces "
            "(use native)") in result.stderr.str()
    with AnthropicFake() as fake:
        project(pytester, fake, BENCH + FLOW)
        fake.call(ASK, "get_issue", issue_key="WEB-12")
        cases = evaluate(pytester, "-k", "flow")
        assert fake.requests == []
    assert cases["flow"]["error"] == ("cases.mcpeval.yaml:6: case `flow`: native tool search runs single-call cases: "
                                      "the provider's search is not carried from one turn of a flow to the next; a "
                                      "flow searches with bm25, regex or embedding")


@pytest.mark.parametrize("method", ["native", "bm25"])
def test_a_blocked_reply_under_search_records_blocked(pytester: pytest.Pytester, method: str) -> None:
    """Anthropic's refusal under search is an error with ``blocked``, as a single call's is."""
    with AnthropicFake() as fake:
        project(pytester, fake)
        search = {"tool_calls": [{"name": "tool_search", "arguments": {"query": "issue"}}]}
        fake.flow(ASK, *([] if method == "native" else [search]), {"content": "", "finish": "refusal"})
        case = evaluate(pytester, method=method)["single"]
    assert case["blocked"] == "refusal"
    assert case["finish_reason"] == "content_filter" and case["provider_finish_reason"] == "refusal"
    turn = "" if method == "native" else " on turn 2"
    assert case["error"] == (f"model claude (anthropic/claude-sonnet-4-5): blocked by the provider's safety filter "
                             f"(refusal){turn}: the provider withheld the reply, so there is no choice of the model "
                             "to score")
    if method == "bm25":  # the search made before the block is kept
        assert case["search"]["queries"] == ["issue"]


def test_an_error_after_a_search_keeps_the_search(pytester: pytest.Pytester) -> None:
    with AnthropicFake() as fake:
        project(pytester, fake)
        fake.flow(ASK, [{"name": "tool_search", "arguments": {"query": "issue"}}],
                  {"status": 500, "error": "the server broke"})
        case = evaluate(pytester, method="bm25")["single"]
    assert case["error"] is not None and "the server broke" in case["error"]
    assert case["search"] == {"method": "bm25", "top_k": 5, "queries": ["issue"], "surfaced": ["get_issue"],
                              "found": {"get_issue": 1}}
    assert "search_recall" not in case and case["passed"] is None
