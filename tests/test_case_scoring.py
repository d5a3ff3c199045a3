"""score_case / check_arguments / parse_call: outcomes, argument checks and diagnoses."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_mcpeval.benchmark.matchers import compile_args
from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.scoring.case import NONE, Expectation, check_arguments, diagnose, parse_call, score_case
from pytest_mcpeval.scoring.flow import FLOW_DIAGNOSES

CATALOG = Catalog(
    [
        {
            "name": "search_issues",
            "inputSchema": {
                "type": "object",
                "properties": {"query": {"type": "string"}, "owner": {"type": "string"}, "page": {"type": "number"}},
                "required": ["query"],
            },
        },
        {
            "name": "list_issues",
            "inputSchema": {
                "type": "object",
                "properties": {"owner": {"type": "string"}, "repo": {"type": "string"}, "state": {"type": "string"}},
                "required": ["owner", "repo"],
            },
        },
        {"name": "get_me", "inputSchema": {"type": "object"}},
        {"name": "ns.get file", "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}},
    ]
)


def exp(tool: str, args: dict[str, Any] | None = None, extra_args: str = "forbid") -> Expectation:
    return Expectation(tool, compile_args(args) if args is not None else None, extra_args)


def call(tool: str, args: dict[str, Any] | str) -> dict[str, Any]:
    return parse_call(tool, args if isinstance(args, str) else json.dumps(args), CATALOG)


SEARCH = exp("search_issues", {"query": {"text": "memory leak"}})
LIST = exp("list_issues", {"owner": "octo", "repo": "hello", "state": {"any_of": ["open", "OPEN"], "optional": True}})


def test_correct_call_with_exact_args_passes() -> None:
    result = score_case([SEARCH], [call("search_issues", {"query": "Memory-Leak"})], CATALOG)
    assert result["passed"] is True
    assert result["correct"] is True
    assert result["diagnosis"] is None
    assert result["expected_label"] == result["called_label"] == "search_issues"
    assert result["expected"] == [{"tool": "search_issues", "args": {"query": {"text": "memory leak"}}}]
    args = result["arguments"]
    assert args == {
        "malformed": None, "hallucinated": [], "missing_required": [], "missing_expected": [], "unexpected": [],
        "mismatched": [], "hallucination": False, "all_required": True, "all_expected": True, "exact": True,
    }
    json.dumps(result)  # builtin-only


def test_optional_argument_may_be_absent_or_match() -> None:
    ok = [
        call("list_issues", {"owner": "octo", "repo": "hello"}),
        call("list_issues", {"owner": "octo", "repo": "hello", "state": "OPEN"}),
    ]
    for c in ok:
        assert score_case([LIST], [c], CATALOG)["passed"] is True
    bad = score_case([LIST], [call("list_issues", {"owner": "octo", "repo": "hello", "state": "closed"})], CATALOG)
    assert bad["passed"] is False
    assert bad["diagnosis"] == "wrong_argument_value"
    assert bad["arguments"]["mismatched"] == [
        {"name": "state", "expected": {"any_of": ["open", "OPEN"], "optional": True}, "got": "closed"}
    ]
    assert bad["arguments"]["exact"] is False
    assert bad["arguments"]["all_expected"] is True


def test_wrong_tool() -> None:
    result = score_case([SEARCH], [call("list_issues", {"owner": "o", "repo": "r"})], CATALOG)
    assert (result["correct"], result["passed"], result["diagnosis"]) == (False, False, "wrong_tool")
    assert result["called_label"] == "list_issues"
    assert result["arguments"] is None


def test_no_tool_use() -> None:
    result = score_case([SEARCH], [], CATALOG)
    assert result["called_label"] == NONE
    assert (result["correct"], result["passed"], result["diagnosis"]) == (False, False, "no_tool_use")


def test_tool_use_not_expected() -> None:
    result = score_case([], [call("get_me", {})], CATALOG)
    assert result["expected_label"] == NONE
    assert (result["correct"], result["passed"], result["diagnosis"]) == (False, False, "tool_use_not_expected")


def test_no_call_when_none_expected_passes() -> None:
    result = score_case([], [], CATALOG)
    assert result["expected_label"] == result["called_label"] == NONE
    assert (result["correct"], result["passed"], result["diagnosis"], result["arguments"]) == (True, True, None, None)


@pytest.mark.parametrize("matchers", [{"query": "x"}, None])
def test_malformed_json(matchers: dict[str, Any] | None) -> None:
    c = call("search_issues", '{"query": "x"')
    assert c["args"] is None and c["raw"] == '{"query": "x"' and c["malformed"].startswith("invalid JSON: ")
    result = score_case([exp("search_issues", matchers)], [c], CATALOG)
    assert (result["correct"], result["passed"], result["diagnosis"]) == (True, False, "malformed_call")
    args = result["arguments"]
    assert args["malformed"] == c["malformed"]
    assert args["all_required"] is False and args["missing_required"] == ["query"]
    assert args["hallucination"] is False
    expect_value = None if matchers is None else False
    assert args["exact"] is expect_value and args["all_expected"] is expect_value
    assert args["missing_expected"] == sorted(matchers or {})


@pytest.mark.parametrize(
    ("raw", "malformed"),
    [("[1, 2]", "arguments are not a JSON object"), ("null", "arguments are not a JSON object"),
     ('"q"', "arguments are not a JSON object"), ("42", "arguments are not a JSON object"),
     ("{bad}", "invalid JSON: "), ("{'a': 1}", "invalid JSON: ")],
)
def test_parse_call_non_object(raw: str, malformed: str) -> None:
    c = parse_call("search_issues", raw, CATALOG)
    assert c["tool"] == "search_issues" and c["args"] is None and c["raw"] == raw
    assert c["malformed"].startswith(malformed)


@pytest.mark.parametrize("raw", ["", "   ", "{}", " {} "])
def test_parse_call_empty_is_empty_object(raw: str) -> None:
    assert parse_call("get_me", raw, CATALOG) == {"tool": "get_me", "args": {}}


def test_parse_call_maps_api_name_back() -> None:
    assert parse_call("ns_get_file", '{"path": "a"}', CATALOG) == {"tool": "ns.get file", "args": {"path": "a"}}
    assert parse_call("unknown", "{}", CATALOG)["tool"] == "unknown"


def test_hallucinated_argument() -> None:
    result = score_case([SEARCH], [call("search_issues", {"query": "memory leak", "labels": ["bug"]})], CATALOG)
    assert result["correct"] is True and result["passed"] is False
    assert result["diagnosis"] == "hallucinated_argument"
    args = result["arguments"]
    assert args["hallucination"] is True and args["hallucinated"] == ["labels"]
    assert args["unexpected"] == ["labels"]


def test_hallucination_even_when_extra_args_allowed() -> None:
    e = exp("search_issues", {"query": "x"}, extra_args="allow")
    result = score_case([e], [call("search_issues", {"query": "x", "zzz": 1})], CATALOG)
    assert result["arguments"]["hallucinated"] == ["zzz"] and result["arguments"]["unexpected"] == []
    assert result["arguments"]["exact"] is True
    assert result["passed"] is False


def test_missing_required() -> None:
    e = exp("list_issues", {"owner": "octo"}, extra_args="allow")
    result = score_case([e], [call("list_issues", {"owner": "octo"})], CATALOG)
    args = result["arguments"]
    assert args["missing_required"] == ["repo"] and args["all_required"] is False
    assert args["exact"] is True
    assert (result["passed"], result["diagnosis"]) == (False, "missing_required_argument")


def test_missing_expected() -> None:
    result = score_case([LIST], [call("list_issues", {"owner": "octo", "state": "open"})], CATALOG)
    args = result["arguments"]
    assert args["missing_expected"] == ["repo"] and args["missing_required"] == ["repo"]
    assert args["all_expected"] is False and args["exact"] is False
    # repo is also required, and a missing required argument comes before a wrong value
    assert result["diagnosis"] == "missing_required_argument"


def test_args_omitted_in_expectation_still_checks_schema() -> None:
    e = exp("list_issues")
    ok = score_case([e], [call("list_issues", {"owner": "anything", "repo": "x", "state": "closed"})], CATALOG)
    assert ok["passed"] is True
    assert ok["arguments"]["exact"] is None and ok["arguments"]["all_expected"] is None
    assert ok["expected"] == [{"tool": "list_issues"}]
    missing = score_case([e], [call("list_issues", {"owner": "o"})], CATALOG)
    assert missing["arguments"]["missing_required"] == ["repo"] and missing["arguments"]["exact"] is None
    assert (missing["passed"], missing["diagnosis"]) == (False, "missing_required_argument")
    halluc = score_case([e], [call("list_issues", {"owner": "o", "repo": "r", "sort": "new"})], CATALOG)
    assert halluc["arguments"]["hallucinated"] == ["sort"] and halluc["arguments"]["unexpected"] == []
    assert (halluc["passed"], halluc["diagnosis"]) == (False, "hallucinated_argument")


def test_tool_without_properties_hallucinates_every_arg() -> None:
    result = score_case([exp("get_me")], [call("get_me", {"x": 1})], CATALOG)
    assert result["arguments"]["hallucinated"] == ["x"] and result["passed"] is False
    assert score_case([exp("get_me", {})], [call("get_me", {})], CATALOG)["passed"] is True


@pytest.mark.parametrize(("extra_args", "passed", "unexpected"), [("allow", True, []), ("forbid", False, ["page"])])
def test_extra_args(extra_args: str, passed: bool, unexpected: list[str]) -> None:
    e = exp("search_issues", {"query": "x"}, extra_args=extra_args)
    result = score_case([e], [call("search_issues", {"query": "x", "page": 2})], CATALOG)
    assert result["passed"] is passed
    assert result["arguments"]["unexpected"] == unexpected
    assert result["arguments"]["hallucination"] is False
    assert result["diagnosis"] == (None if passed else "wrong_argument_value")


def test_two_expected_calls_matched_order_independently() -> None:
    expects = [exp("search_issues", {"query": "a"}), exp("search_issues", {"query": "b"})]
    in_order = [call("search_issues", {"query": "a"}), call("search_issues", {"query": "b"})]
    swapped = in_order[::-1]
    assert score_case(expects, in_order, CATALOG)["passed"] is True
    result = score_case(expects, swapped, CATALOG)
    assert result["passed"] is True and result["diagnosis"] is None
    # argument metrics compare the first expected call with the first call made (documented rule)
    assert result["arguments"]["exact"] is False


def test_same_call_cannot_satisfy_two_expectations() -> None:
    expects = [exp("search_issues", {"query": {"regex": "a.*"}}), exp("search_issues", {"query": "ab"})]
    calls = [call("search_issues", {"query": "ab"}), call("search_issues", {"query": "zz"})]
    result = score_case(expects, calls, CATALOG)
    # "ab" fits both expectations, "zz" neither: no argument fault but a value
    assert result["passed"] is False and result["diagnosis"] == "wrong_argument_value"
    # backtracking: "ab" must go to the exact expectation, "axe" to the regex one
    calls = [call("search_issues", {"query": "ab"}), call("search_issues", {"query": "axe"})]
    assert score_case(expects, calls, CATALOG)["passed"] is True


def test_mixed_tools_parallel() -> None:
    expects = [exp("search_issues", {"query": "a"}), exp("get_me", {})]
    calls = [call("search_issues", {"query": "a"}), call("get_me", {})]
    assert score_case(expects, calls, CATALOG)["passed"] is True
    # several expected calls pass in any order (BFCL parallel), but the selection label stays the first
    # call, so the classification metrics still count a different first tool as a wrong selection
    swapped = score_case(expects, calls[::-1], CATALOG)
    assert (swapped["correct"], swapped["passed"], swapped["diagnosis"]) == (False, True, None)
    wrong_second = score_case(expects, [calls[0], call("search_issues", {"query": "b"})], CATALOG)
    assert (wrong_second["passed"], wrong_second["diagnosis"]) == (False, "wrong_tool")


def test_extra_calls() -> None:
    c = call("search_issues", {"query": "memory leak"})
    result = score_case([SEARCH], [c, c], CATALOG)
    assert result["correct"] is True and result["passed"] is False
    assert result["arguments"]["exact"] is True
    assert result["diagnosis"] == "extra_calls"


def test_premature_stop() -> None:
    expects = [exp("search_issues", {"query": "a"}), exp("search_issues", {"query": "b"})]
    result = score_case(expects, [call("search_issues", {"query": "a"})], CATALOG)
    assert (result["passed"], result["diagnosis"]) == (False, "premature_stop")


def test_check_arguments_direct() -> None:
    e = exp("list_issues", {"owner": {"regex": "oct.*"}, "repo": "hello"})
    out = check_arguments(e, {"tool": "list_issues", "args": {"owner": "octo", "repo": "world", "x": 1}}, CATALOG)
    assert out["mismatched"] == [{"name": "repo", "expected": "hello", "got": "world"}]
    assert out["hallucinated"] == ["x"] and out["unexpected"] == ["x"] and out["exact"] is False


A, B, ME = exp("search_issues", {"query": "a"}), exp("search_issues", {"query": "b"}), exp("get_me", {})
CALL_A = call("search_issues", {"query": "a"})


@pytest.mark.parametrize(
    ("expects", "calls", "diagnosis"),
    [
        pytest.param([], [call("get_me", {})], "tool_use_not_expected", id="tool_use_not_expected"),
        pytest.param([A], [], "no_tool_use", id="no_tool_use"),
        pytest.param([A], [call("get_me", {})], "wrong_tool", id="wrong_tool"),
        pytest.param([A], [call("search_issues", '{"query"')], "malformed_call", id="malformed_call"),
        pytest.param([A], [call("search_issues", {"query": "a", "labels": []})], "hallucinated_argument",
                     id="hallucinated_argument"),
        pytest.param([A], [call("search_issues", {"owner": "o"})], "missing_required_argument",
                     id="missing_required_argument"),
        pytest.param([A], [call("search_issues", {"query": "z"})], "wrong_argument_value", id="wrong_argument_value"),
        # the first call's argument fault comes before the count of calls
        pytest.param([A, B], [call("search_issues", {"query": "z"})], "wrong_argument_value", id="first-call-first"),
        pytest.param([A], [CALL_A, CALL_A], "extra_calls", id="extra_calls"),
        pytest.param([A, B], [CALL_A], "premature_stop", id="premature_stop"),
        pytest.param([A, ME], [CALL_A, call("search_issues", {"query": "b"})], "wrong_tool", id="tool-sets-differ"),
        # fallback: first call right, as many calls as expected, same tools, no one-to-one pairing
        pytest.param([A, B], [CALL_A, call("search_issues", '{"query"')], "malformed_call", id="pairing-malformed"),
        pytest.param([A, B], [CALL_A, call("search_issues", {"query": "b", "labels": []})], "hallucinated_argument",
                     id="pairing-hallucinated"),
        pytest.param([A, B], [CALL_A, call("search_issues", {"owner": "o"})], "missing_required_argument",
                     id="pairing-missing-required"),
        pytest.param([A, B], [CALL_A, call("search_issues", {"query": "z"})], "wrong_argument_value",
                     id="pairing-value"),
        pytest.param([A, B], [CALL_A, CALL_A], "wrong_argument_value", id="pairing-both-fit-one"),
        # the worst fault among the calls: hallucinated (get_me has no properties) before missing required
        pytest.param([A, B, ME], [CALL_A, call("search_issues", {"owner": "o"}), call("get_me", {"x": 1})],
                     "hallucinated_argument", id="pairing-worst"),
    ],
)
def test_diagnose(expects: list[Expectation], calls: list[dict[str, Any]], diagnosis: str) -> None:
    result = score_case(expects, calls, CATALOG)
    assert (result["passed"], result["diagnosis"]) == (False, diagnosis)
    # one taxonomy: every single-call diagnosis is one of the flows' modes
    assert diagnosis in FLOW_DIAGNOSES


def test_diagnose_passed_is_none() -> None:
    assert diagnose([A], [CALL_A], check_arguments(A, CALL_A, CATALOG), True, CATALOG) is None


def test_a_schema_open_to_other_names_has_no_hallucinated_arguments() -> None:
    """`additionalProperties: true` (what an importer writes for a schema inferred from recorded calls) says the
    listed names are not all there is: an unlisted name is not hallucinated; without it, it is."""
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    for open_, hallucinated in ((True, []), (False, ["limit"])):
        catalog = Catalog([{"name": "find", "inputSchema": {**schema, "additionalProperties": open_}}])
        call = parse_call("find", json.dumps({"q": "x", "limit": 5}), catalog)
        args = check_arguments(exp("find", {"q": "x"}, extra_args="allow"), call, catalog)
        assert args["hallucinated"] == hallucinated and args["hallucination"] is bool(hallucinated)
