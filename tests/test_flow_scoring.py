"""score_flow / bind / flow_metrics / claims_metrics on hand-built trajectories: order modes, forbid, references,
coverage, every diagnosis, multi-label metrics against scikit-learn, thresholds on the flow metrics."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import pytest
from sklearn.metrics import f1_score, precision_recall_fscore_support
from sklearn.preprocessing import MultiLabelBinarizer

from pytest_mcpeval.benchmark.matchers import compile_args
from pytest_mcpeval.benchmark.schema import OrderMode
from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.gate.thresholds import ThresholdError, evaluate, parse_threshold
from pytest_mcpeval.results import CaseResult, ClaimView, ModelMetrics, TrajectoryCall, TrajectoryTurn
from pytest_mcpeval.scoring.case import Expectation, max_matching, parse_call
from pytest_mcpeval.scoring.flow import FLOW_DIAGNOSES, FlowScore, bind, in_order_assignment, score_flow
from pytest_mcpeval.scoring.flows import claims_metrics, flow_metrics
from pytest_mcpeval.text import canonical_json

CATALOG = Catalog(
    [
        {"name": "search_issues", "inputSchema": {"type": "object", "properties": {
            "query": {"type": "string"}, "owner": {"type": "string"}, "repo": {"type": "string"}},
            "required": ["query"]}},
        {"name": "issue_read", "inputSchema": {"type": "object", "properties": {
            "owner": {"type": "string"}, "repo": {"type": "string"}, "method": {"type": "string"},
            "issue_number": {"type": "number"}}, "required": ["owner", "repo", "method", "issue_number"]}},
        {"name": "list_issues", "inputSchema": {"type": "object", "properties": {
            "owner": {"type": "string"}, "repo": {"type": "string"}, "state": {"type": "string"}},
            "required": ["owner", "repo"]}},
        {"name": "get_me", "inputSchema": {"type": "object"}},
        {"name": "delete_repository", "inputSchema": {"type": "object", "properties": {
            "owner": {"type": "string"}, "repo": {"type": "string"}}, "required": ["owner", "repo"]}},
    ]
)
ORDERS: tuple[OrderMode, ...] = ("strict", "in_order", "unordered", "superset", "subset")


def exp(tool: str, args: dict[str, Any] | None = None, extra_args: str = "forbid") -> Expectation:
    return Expectation(tool, compile_args(args) if args is not None else None, extra_args)


def ref(path: str, offset: int = 0, tool: str = "search_issues") -> dict[str, Any]:
    return {"from_result": {"tool": tool, "path": path, **({"offset": offset} if offset else {})}}


SEARCH = exp("search_issues", {"query": {"regex": "(?i).*login.*"}}, extra_args="allow")
LIST = exp("list_issues", {"owner": "acme", "repo": "web"})
READ = exp("issue_read", {"owner": "acme", "repo": "web", "method": "get", "issue_number": ref("items.0.number")})
FOUND = {"total_count": 1, "items": [{"number": 42, "title": "Login timeout on Safari"}]}


def call(tool: str, args: dict[str, Any] | str | None = None, *, structured: Any = None, text: str | None = None,
         error: str | None = None, source: str = "mock") -> TrajectoryCall:
    """A call as the engine records it, answered by ``structured`` / ``text`` / ``error`` (default: text "ok")."""
    parsed = parse_call(tool, args if isinstance(args, str) else json.dumps(args or {}), CATALOG)
    answer: dict[str, Any] = {"source": source, "is_error": error is not None}
    if error is not None:
        answer["text"] = error
    elif structured is not None:
        answer["text"], answer["structured"] = canonical_json(structured), structured
    else:
        answer["text"] = "ok" if text is None else text
    return cast(TrajectoryCall, {"id": "", **parsed, "answer": answer})


def search(query: str = "login timeout", result: Any = None, **answer: Any) -> TrajectoryCall:
    return call("search_issues", {"query": query}, structured=FOUND if result is None and not answer else result,
                **answer)


def lst(*, error: str | None = None, source: str = "mock", **args: Any) -> TrajectoryCall:
    return call("list_issues", {"owner": "acme", "repo": "web", **args}, error=error, source=source)


def read(number: Any = 42, **answer: Any) -> TrajectoryCall:
    return call("issue_read", {"owner": "acme", "repo": "web", "method": "get", "issue_number": number},
                structured={"number": number, "user": {"login": "alice"}}, **answer)


def flow(*turns: TrajectoryCall | list[TrajectoryCall], answer: str | None = "done") -> list[TrajectoryTurn]:
    """One turn per argument (a list = parallel calls); then the final answer (``None``: stopped at the limit)."""
    out: list[TrajectoryTurn] = [{"calls": t if isinstance(t, list) else [t], "content": None} for t in turns]
    if answer is not None:
        out.append({"calls": [], "content": answer})
    return out


def claim(score: float) -> ClaimView:
    verdict = {1.0: "fulfilled", 0.5: "partially_fulfilled", 0.0: "not_fulfilled"}[score]
    return cast(ClaimView, {"claim": "c", "method": "check", "score": score, "verdict": verdict, "justification": ""})


def score(expects: list[Expectation], trajectory: list[TrajectoryTurn], order: OrderMode = "in_order",
          forbid: tuple[str, ...] = (), claims: tuple[float, ...] = (), threshold: float = 0.75) -> FlowScore:
    turn_limit = not trajectory or bool(trajectory[-1]["calls"])
    result = score_flow(expects, order, list(forbid), trajectory, CATALOG, turn_limit=turn_limit,
                        claims=[claim(s) for s in claims], claims_threshold=threshold)
    assert json.loads(json.dumps(result)) == result  # builtin-only: it crosses xdist
    assert (result["diagnosis"] is None) is result["passed"]
    assert result["diagnosis"] is None or result["diagnosis"] in FLOW_DIAGNOSES
    return result


# ----------------------------------------------------------------------------------------------- order modes

A, B = search, lst


def X() -> TrajectoryCall:  # a tool no expectation names
    return call("get_me")


ORDER_TABLE = [  # the same expect [search_issues, list_issues]; pass (1) / fail (0) per mode
    # transcript                strict in_order unordered superset subset
    ("A B", [A(), B()], (1, 1, 1, 1, 1)),
    ("B A", [B(), A()], (0, 0, 1, 1, 1)),
    ("A X B", [A(), X(), B()], (0, 1, 0, 1, 0)),
    ("A", [A()], (0, 0, 0, 0, 1)),
    ("A B A", [A(), B(), A()], (0, 1, 0, 1, 0)),
    ("B X A", [B(), X(), A()], (0, 0, 0, 1, 0)),
    ("(nothing)", [], (0, 0, 0, 0, 1)),
    ("X", [X()], (0, 0, 0, 0, 0)),
    ("[A B] parallel", [[A(), B()]], (1, 1, 1, 1, 1)),
    ("[B A] parallel", [[B(), A()]], (0, 0, 1, 1, 1)),
]


@pytest.mark.parametrize(("name", "turns", "table"), ORDER_TABLE, ids=[row[0] for row in ORDER_TABLE])
def test_order_modes_on_the_same_transcript(name: str, turns: list[Any], table: tuple[int, ...]) -> None:
    got = tuple(int(score([SEARCH, LIST], flow(*turns), order)["passed"] is True) for order in ORDERS)
    assert got == table, f"{name}: {dict(zip(ORDERS, got, strict=True))}"
    for order in ORDERS:  # order_ok is the mode alone (no claims, forbid or limit here)
        result = score([SEARCH, LIST], flow(*turns), order)
        assert result["order_ok"] is result["passed"]


def test_matches_name_the_calls() -> None:
    result = score([SEARCH, LIST], flow(A(), X(), B()), "in_order")
    assert result["matches"] == [{"call": 0, "problems": []}, {"call": 2, "problems": []}]
    assert [c["tool"] for c in result["called"]] == ["search_issues", "get_me", "list_issues"]
    assert (result["expected_label"], result["called_label"], result["correct"]) == ("search_issues",) * 2 + (True,)
    assert result["arguments"] is not None and result["arguments"]["exact"] is True
    out_of_order = score([SEARCH, LIST], flow(B(), A()), "in_order")
    assert out_of_order["matches"][0] == {"call": 1, "problems": []}
    assert out_of_order["matches"][1] == {"call": None, "problems": ["call #0 meets it but is out of order (in_order)"]}
    assert out_of_order["correct"] is False and out_of_order["arguments"] is None
    strict = score([SEARCH, LIST], flow(B(), A()), "strict")["matches"]
    assert strict[0]["call"] is None and strict[0]["problems"][0] == "strict: call #0 is list_issues"


def test_one_to_one_needs_a_real_matching_not_first_fit() -> None:
    """Expectation 0 takes any query, expectation 1 only `login`: first fit would give call 0 to expectation 0
    and leave expectation 1 nothing; a maximum matching pairs 0->1 and 1->0."""
    anything = exp("search_issues", {"query": {"ignore": True}})
    login = exp("search_issues", {"query": "login"})
    calls = flow(search("login"), search("other"))
    for order in ("unordered", "superset", "subset"):
        result = score([anything, login], calls, order)
        assert result["passed"] is True, order
        assert [m["call"] for m in result["matches"]] == [1, 0]
    assert score([anything, login], calls, "in_order")["passed"] is False  # login must come second: it does not
    assert score([login, anything], calls, "in_order")["passed"] is True


def brute_subsequence(ok: list[list[bool]]) -> bool:
    rows, cols = len(ok), len(ok[0]) if ok else 0
    return any(all(ok[j][c] for j, c in enumerate(combo)) for combo in itertools.combinations(range(cols), rows))


def brute_matching(ok: list[list[bool]]) -> int:
    rows, cols = len(ok), len(ok[0]) if ok else 0
    best = 0
    for size in range(min(rows, cols), 0, -1):
        for rs in itertools.combinations(range(rows), size):
            columns = itertools.permutations(range(cols), size)
            if any(all(ok[r][c] for r, c in zip(rs, cs, strict=True)) for cs in columns):
                return size
    return best


@pytest.mark.parametrize("seed", range(40))
def test_assignments_against_brute_force(seed: int) -> None:
    """in_order's greedy earliest match finds an increasing assignment exactly when one exists, and the
    matching is maximum, on random fixed boolean matrices (which is what references leave: module docstring)."""
    rng = np.random.default_rng(seed)
    for _ in range(25):
        rows, cols = int(rng.integers(0, 5)), int(rng.integers(0, 6))
        ok = [[bool(v) for v in row] for row in rng.random((rows, cols)) < rng.uniform(0.15, 0.7)]
        greedy = in_order_assignment(ok)
        assert (None not in greedy) is brute_subsequence(ok)
        placed = [c for c in greedy if c is not None]
        assert placed == sorted(set(placed)) and all(ok[j][c] for j, c in enumerate(greedy) if c is not None)
        pairs = max_matching(ok)
        used = [c for c in pairs if c is not None]
        assert len(used) == len(set(used)) == brute_matching(ok)
        assert all(ok[j][c] for j, c in enumerate(pairs) if c is not None)


def test_empty_expect_means_no_tool_in_every_mode() -> None:
    for order in ORDERS:
        assert score([], flow(), order)["passed"] is True
        result = score([], flow(X()), order)
        assert (result["passed"], result["diagnosis"]) == (False, "tool_use_not_expected")
        assert (result["expected_label"], result["called_label"]) == ("(none)", "get_me")


def test_subset_accepts_no_call_but_not_a_short_answer() -> None:
    assert score([SEARCH, LIST], flow(), "subset")["passed"] is True
    short = score([SEARCH, LIST], flow(), "subset", claims=(1.0, 0.0))
    assert (short["order_ok"], short["passed"], short["diagnosis"]) == (True, False, "answer_incomplete")


# ------------------------------------------------------------------------------------------------------ forbid


@pytest.mark.parametrize("order", ORDERS)
def test_forbidden_call_fails_every_mode(order: OrderMode) -> None:
    delete = call("delete_repository", {"owner": "acme", "repo": "web"})
    result = score([SEARCH], flow(A(), delete, delete), order, forbid=("delete_repository", "get_me"))
    assert (result["passed"], result["forbidden_called"], result["diagnosis"]) == (
        False, ["delete_repository"], "forbidden_tool")
    clean = score([SEARCH], flow(A()), order, forbid=("delete_repository",))
    assert (clean["passed"], clean["forbidden_called"]) == (True, [])


# -------------------------------------------------------------------------------------------------- references


def test_reference_hit() -> None:
    result = score([SEARCH, READ], flow(search(), read(42)))
    assert result["passed"] is True and result["matches"][1] == {"call": 1, "problems": []}


def test_reference_read_from_json_text_without_structured_content() -> None:
    as_text = search(text=json.dumps(FOUND))
    assert "structured" not in as_text["answer"]
    assert score([SEARCH, READ], flow(as_text, read(42)))["passed"] is True
    not_json = search(text="Found issue 42")
    result = score([SEARCH, READ], flow(not_json, read(42)))
    assert result["passed"] is False and result["diagnosis"] == "wrong_argument_value"
    assert ("call #1: `issue_number`: from_result search_issues `items.0.number`: the result of call #0 has no "
            "structured content and its text is not JSON") in result["matches"][1]["problems"]


def test_reference_wrong_value_is_a_mismatch() -> None:
    result = score([SEARCH, READ], flow(search(), read(7)))
    assert (result["passed"], result["diagnosis"]) == (False, "wrong_argument_value")
    assert result["matches"][1]["problems"] == ["call #1: `issue_number` = 7, expected 42"]


def test_reference_missing_path() -> None:
    deep = exp("issue_read", {"owner": "acme", "repo": "web", "method": "get", "issue_number": ref("items.1.number")})
    result = score([SEARCH, deep], flow(search(), read(42)))
    assert (result["passed"], result["diagnosis"]) == (False, "wrong_argument_value")
    problems = result["matches"][1]["problems"]
    assert problems[0] == ("call #1: `issue_number`: from_result search_issues `items.1.number`: not found in the "
                           "result of call #0 (index 1 of items, which has 1 item)")
    assert problems[1].startswith("call #1: `issue_number` = 42, expected {\"from_result\"")
    key = exp("issue_read", {"owner": "acme", "repo": "web", "method": "get", "issue_number": ref("hits.0")})
    assert score([SEARCH, key], flow(search(), read(42)))["matches"][1]["problems"][0] == (
        "call #1: `issue_number`: from_result search_issues `hits.0`: not found in the result of call #0 (no key "
        "`hits` in the result)")
    scalar = exp("issue_read", {"owner": "acme", "repo": "web", "method": "get", "issue_number": ref("total_count.x")})
    assert score([SEARCH, scalar], flow(search(), read(42)))["matches"][1]["problems"][0].endswith(
        "(total_count is a int, no `x` in it)")


def test_reference_missing_result() -> None:
    result = score([READ], flow(read(42)), "in_order")
    assert (result["passed"], result["diagnosis"]) == (False, "wrong_argument_value")
    assert result["matches"][0]["problems"][0] == (
        "call #0: `issue_number`: from_result search_issues `items.0.number`: no earlier result of search_issues")
    # the result must come *before* the call, also within one turn (flat order): read listed first misses it
    assert score([SEARCH, READ], flow([read(42), search()]), "unordered")["passed"] is False
    assert score([SEARCH, READ], flow([search(), read(42)]), "unordered")["passed"] is True


def test_reference_offset_and_error_results() -> None:
    """offset N = the N-th earlier *successful* result of the tool among all earlier calls (error results hold
    no data and are not counted)."""
    other = {"total_count": 1, "items": [{"number": 7}]}
    second = exp("issue_read", {"owner": "acme", "repo": "web", "method": "get",
                                "issue_number": ref("items.0.number", offset=1)})
    calls = flow(search("login", other), read(42), search("login timeout"), read(42))
    first = score([SEARCH, READ], calls)
    assert first["passed"] is False  # offset 0 = 7 at both reads
    assert first["matches"][1]["problems"] == ["call #1: `issue_number` = 42, expected 7",
                                               "call #3: `issue_number` = 42, expected 7"]
    ok = score([SEARCH, second], calls)
    assert ok["passed"] is True and ok["matches"] == [{"call": 0, "problems": []}, {"call": 3, "problems": []}]
    assert score([SEARCH, second], calls)["called"][1]["args"] == {"owner": "acme", "repo": "web", "method": "get",
                                                                    "issue_number": 42}
    too_far = exp("issue_read", {"owner": "acme", "repo": "web", "method": "get",
                                 "issue_number": ref("items.0.number", offset=2)})
    assert score([SEARCH, too_far], calls)["matches"][1]["problems"][0] == (
        "call #1: `issue_number`: from_result search_issues `items.0.number` (offset 2): 1 earlier result of "
        "search_issues")
    recovered = flow(search("login", error="rate limited, try again"), search(), read(42))
    assert score([SEARCH, READ], recovered)["passed"] is True
    failed = score([READ], flow(search(error="rate limited"), read(42)), "superset")
    assert failed["matches"][0]["problems"][0].endswith(
        "no earlier result of search_issues, 1 error result not counted")


def test_bind_at_any_depth_keeps_optional() -> None:
    matchers = compile_args({
        "n": {"from_result": {"tool": "search_issues", "path": "items.0.number"}, "optional": True},
        "filter": {"ids": [ref("items.0.number"), 1], "title": {"any_of": [ref("items.0.title"), "x"]}},
        "plain": {"regex": "a.*"},
    })
    bound, problems = bind(matchers, [search()])
    assert problems == [] and bound is not None
    assert bound["n"].kind == "literal" and bound["n"].value == 42 and bound["n"].optional is True
    assert bound["filter"].matches({"ids": [42, 1], "title": "Login timeout on Safari"})
    assert bound["filter"].matches({"ids": [42, 1], "title": "x"})
    assert not bound["filter"].matches({"ids": [7, 1], "title": "x"})
    assert bound["plain"] is matchers["plain"]
    unbound, problems = bind(matchers, [])
    assert unbound is not None and unbound["n"].kind == "from_result"
    assert [p.split(":")[0] for p in problems] == ["`n`", "`filter.ids[0]`", "`filter.title`"]
    assert bind(None, []) == (None, [])


# ---------------------------------------------------------------------------------------------------- coverage


@pytest.mark.parametrize(("scores", "passed"), [
    ((1.0, 0.5, 1.0, 0.5), True),  # 3 / 4 = 0.75 exactly: passes (>=, as MCP-Atlas's code)
    ((1.0, 1.0, 1.0, 0.0), True),  # 0.75
    ((1.0, 0.5, 0.5, 1.0, 0.5, 1.0, 0.5, 0.5), False),  # 5 / 8 = 0.625
    ((1.0, 0.5, 0.5, 1.0, 0.5, 1.0, 1.0, 0.5), True),  # 6 / 8 = 0.75
    ((1.0, 0.5, 0.5), False),  # 2 / 3
    ((0.5, 0.5, 0.5, 0.5), False),  # 0.5
    ((), True),  # no claims: calls alone
])
def test_coverage_partial_credit_at_the_threshold(scores: tuple[float, ...], passed: bool) -> None:
    result = score([SEARCH], flow(A()), claims=scores)
    assert result["coverage"] == (sum(scores) / len(scores) if scores else None)
    assert result["passed"] is passed
    assert result["diagnosis"] == (None if passed else "answer_incomplete")


def test_coverage_threshold_is_the_cases() -> None:
    assert score([SEARCH], flow(A()), claims=(1.0, 0.0), threshold=0.75)["passed"] is False
    assert score([SEARCH], flow(A()), claims=(1.0, 0.0), threshold=0.5)["passed"] is True
    assert score([SEARCH], flow(A()), claims=(1.0, 0.0), threshold=0.51)["passed"] is False
    # calls that fail are diagnosed as such, whatever the coverage
    assert score([SEARCH, LIST], flow(A()), claims=(0.0,))["diagnosis"] == "premature_stop"


# -------------------------------------------------------------------------------------------------- diagnoses

DELETE = call("delete_repository", {"owner": "acme", "repo": "web"})
DIAGNOSES: list[tuple[str, dict[str, Any]]] = [
    ("forbidden_tool", {"expects": [SEARCH], "turns": flow(A(), DELETE), "forbid": ("delete_repository",)}),
    ("tool_use_not_expected", {"expects": [], "turns": flow(X())}),
    ("no_tool_use", {"expects": [SEARCH], "turns": flow(answer="I cannot search")}),
    ("failed_error_recovery", {"expects": [SEARCH, READ], "turns": flow(search(error="rate limited"))}),  # stopped
    ("failed_error_recovery", {"expects": [SEARCH, READ],  # repeated the same failing call up to the turn limit
                               "turns": flow(search(error="rate limited"), search(error="rate limited"),
                                             search(error="rate limited"), answer=None)}),
    ("wrong_tool", {"expects": [SEARCH, LIST], "turns": flow(A(), X())}),
    ("wrong_tool", {"expects": [SEARCH], "turns": flow(call("made_up_tool", {"q": 1}, error="unknown tool",
                                                            source="unmatched"))}),
    ("malformed_call", {"expects": [SEARCH, LIST], "turns": flow(A(), call("list_issues", '{"owner": "acme"'))}),
    ("hallucinated_argument", {"expects": [SEARCH, LIST], "turns": flow(A(), lst(bogus=1))}),
    ("missing_required_argument", {"expects": [SEARCH, LIST], "turns": flow(A(), call("list_issues",
                                                                                     {"owner": "acme"}))}),
    ("wrong_argument_value", {"expects": [SEARCH, LIST], "turns": flow(A(), lst(repo="api"))}),
    ("wrong_argument_value", {"expects": [SEARCH, LIST], "turns": flow(A(), lst(state="open"))}),  # extra_args
    ("wrong_argument_value", {"expects": [SEARCH, READ], "turns": flow(search(), read(7))}),  # the reference
    ("turn_limit", {"expects": [SEARCH], "turns": flow(A(), X(), X(), answer=None)}),
    ("turn_limit", {"expects": [SEARCH, LIST], "turns": flow(A(), A("login bug"), answer=None)}),
    ("premature_stop", {"expects": [SEARCH, LIST], "turns": flow(A())}),
    ("premature_stop", {"expects": [SEARCH, LIST], "turns": flow(A(), A("login bug"))}),
    ("wrong_order", {"expects": [SEARCH, LIST], "turns": flow(B(), A())}),
    ("wrong_order", {"expects": [SEARCH, LIST], "turns": flow(B(), A(), X()), "order": "strict"}),
    ("extra_calls", {"expects": [SEARCH, LIST], "turns": flow(A(), B(), X()), "order": "strict"}),
    ("extra_calls", {"expects": [SEARCH, LIST], "turns": flow(A(), X(), B()), "order": "unordered"}),
    ("extra_calls", {"expects": [SEARCH], "turns": flow(A(), A()), "order": "subset"}),
    ("answer_incomplete", {"expects": [SEARCH], "turns": flow(A()), "claims": (1.0, 0.5, 0.0)}),
]


@pytest.mark.parametrize(("diagnosis", "spec"), DIAGNOSES, ids=[f"{d}-{i}" for i, (d, _) in enumerate(DIAGNOSES)])
def test_each_diagnosis(diagnosis: str, spec: dict[str, Any]) -> None:
    result = score(spec["expects"], spec["turns"], spec.get("order", "in_order"), spec.get("forbid", ()),
                   spec.get("claims", ()))
    assert (result["passed"], result["diagnosis"]) == (False, diagnosis)


def test_every_mode_of_the_issue_is_diagnosed() -> None:
    issue = {"no_tool_use", "tool_use_not_expected", "wrong_tool", "malformed_call", "hallucinated_argument",
             "missing_required_argument", "wrong_argument_value", "forbidden_tool", "premature_stop", "turn_limit",
             "failed_error_recovery", "wrong_order", "extra_calls", "answer_incomplete"}
    assert set(FLOW_DIAGNOSES) == issue == {d for d, _ in DIAGNOSES}


def test_diagnosis_precedence() -> None:
    # a forbidden call outranks everything
    assert score([SEARCH, LIST], flow(X(), DELETE), forbid=("delete_repository",))["diagnosis"] == "forbidden_tool"
    # a stray tool while an expected call is missing outranks a bad attempt at it
    assert score([SEARCH, LIST], flow(lst(repo="api"), X()), "superset")["diagnosis"] == "wrong_tool"
    # of two bad attempts, the first argument fault in the list: malformed, hallucinated, missing required, value
    two = flow(A(), lst(repo="api"), call("list_issues", '{"owner": "acme"'))
    assert score([SEARCH, LIST], two)["diagnosis"] == "malformed_call"
    assert score([SEARCH, LIST], flow(A(), lst(repo="api"), lst(bogus=2)))["diagnosis"] == "hallucinated_argument"
    # an error the benchmark gave, then the model stopped: failed recovery, over the argument that caused it
    designed = flow(A(), lst(repo="api", error="no repository acme/api; did you mean acme/web?"))
    assert score([SEARCH, LIST], designed)["diagnosis"] == "failed_error_recovery"
    # ... but the error a call no mock matches is a gap of the file: the argument is the diagnosis
    gap = flow(A(), lst(repo="api", error="no mock matches tool list_issues with these arguments", source="unmatched"))
    assert score([SEARCH, LIST], gap)["diagnosis"] == "wrong_argument_value"
    # repeating a failing call that the mode allows is no failure; failing the order then is wrong_order
    retried = flow(B(), A(error="rate limited"), A(error="rate limited"))
    assert score([SEARCH, LIST], retried, "superset")["passed"] is True
    assert score([SEARCH, LIST], retried, "in_order")["diagnosis"] == "wrong_order"
    # a designed error the model recovered from is no failure at all
    assert score([SEARCH, LIST], flow(A(error="rate limited"), A(), B()))["passed"] is True
    # a retry of a failing call that then succeeds is a recovery: the diagnosis is what failed afterwards
    transient = flow(A(error="try again"), A(), B(), B())
    assert score([SEARCH, LIST], transient, "unordered")["diagnosis"] == "extra_calls"
    assert score([SEARCH, LIST], flow(A(error="try again"), A(error="try again"), A(), B()), "unordered")[
        "diagnosis"] == "failed_error_recovery"
    # turn limit with everything expected done
    assert score([SEARCH], flow(A(), A(), answer=None))["diagnosis"] == "turn_limit"
    # subset: a stray call with expectations left is the wrong tool, a duplicate is an extra call
    assert score([SEARCH, LIST], flow(A(), X()), "subset")["diagnosis"] == "wrong_tool"
    assert score([SEARCH, LIST], flow(lst(repo="api")), "subset")["diagnosis"] == "wrong_argument_value"


@pytest.mark.parametrize("seed", range(12))
def test_random_transcripts_always_get_a_consistent_diagnosis(seed: int) -> None:
    rng = np.random.default_rng(seed)
    pool: list[Callable[[], TrajectoryCall]] = [
        lambda: A(), lambda: A("other"), lambda: B(), lambda: lst(repo="api"), lambda: X(), lambda: DELETE,
        lambda: A(error="boom"), lambda: call("list_issues", "{bad"), lambda: read(42), lambda: read(7),
    ]
    expectations = [SEARCH, LIST, READ, exp("get_me")]
    for _ in range(30):
        expects = [expectations[int(i)] for i in rng.integers(0, 4, size=int(rng.integers(0, 4)))]
        turns = [pool[int(i)]() for i in rng.integers(0, len(pool), size=int(rng.integers(0, 5)))]
        for order in ORDERS:
            result = score(expects, flow(*turns, answer=None if rng.random() < 0.2 and turns else "ok"), order,
                           forbid=("delete_repository",), claims=(1.0, 0.5) if rng.random() < 0.3 else ())
            d = result["diagnosis"]
            if d == "answer_incomplete":
                assert result["order_ok"] and result["coverage"] is not None and result["coverage"] < 0.75
            if d == "wrong_order":
                assert not result["order_ok"] and order in ("strict", "in_order")
            if d == "extra_calls":
                assert order in ("strict", "unordered", "subset")
            if d == "forbidden_tool":
                assert result["forbidden_called"] == ["delete_repository"]


# ------------------------------------------------------------------------------------------- per-model metrics


def flow_case(expected: list[str], called: list[str], **extra: Any) -> CaseResult:
    out: dict[str, Any] = {"flow": True, "expected": [{"tool": t} for t in expected],
                           "called": [{"tool": t, "args": {}} for t in called], "passed": True, "order_ok": True,
                           "correct": (expected[:1] or ["(none)"]) == (called[:1] or ["(none)"]), "error": None}
    out.update(extra)
    return cast(CaseResult, out)


def test_flow_metrics_worked_example() -> None:
    cases = [
        flow_case(["search_issues", "issue_read"], ["search_issues", "issue_read", "search_issues"]),
        flow_case(["search_issues", "issue_read"], ["search_issues", "list_issues"], passed=False, order_ok=False),
        flow_case(["list_issues"], ["list_issues", "list_issues"], passed=False),
        flow_case(["get_me"], [], error="model API failed"),  # excluded
        cast(CaseResult, {"expected_label": "get_me", "called_label": "get_me", "correct": True}),  # single-call
    ]
    m = flow_metrics(cases)
    assert m is not None
    assert (m["cases"], m["pass_rate"], m["order_match_rate"], m["exact_set_rate"]) == (3, 1 / 3, 2 / 3, 2 / 3)
    assert m["tools"] == {
        "issue_read": {"precision": 1.0, "recall": 0.5, "f1": pytest.approx(2 / 3), "support": 2},
        "list_issues": {"precision": 0.5, "recall": 1.0, "f1": pytest.approx(2 / 3), "support": 1},
        "search_issues": {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 2},
    }
    assert m["micro_f1"] == pytest.approx(8 / 10)  # TP 4, FP 1, FN 1
    assert m["macro_f1"] == pytest.approx((1 + 2 / 3 + 2 / 3) / 3)
    assert json.loads(json.dumps(m)) == m


def test_flow_metrics_none_and_nulls() -> None:
    assert flow_metrics([]) is None
    assert flow_metrics([flow_case(["get_me"], [], error="boom")]) is None
    assert flow_metrics([cast(CaseResult, {"expected_label": "get_me", "called_label": "get_me"})]) is None
    quiet = flow_metrics([flow_case([], [])])  # expect: [] and nothing called: no label at all
    assert quiet is not None
    assert (quiet["tools"], quiet["micro_f1"], quiet["macro_f1"], quiet["exact_set_rate"]) == ({}, None, None, 1.0)
    never = flow_metrics([flow_case(["get_me"], []), flow_case([], ["list_issues"])])
    assert never is not None
    assert never["tools"]["get_me"] == {"precision": None, "recall": 0.0, "f1": 0.0, "support": 1}
    assert never["tools"]["list_issues"] == {"precision": 0.0, "recall": None, "f1": 0.0, "support": 0}
    assert (never["micro_f1"], never["macro_f1"]) == (0.0, 0.0)


def none_nan(values: Any) -> list[float | None]:
    return [None if np.isnan(v) else float(v) for v in values]


@pytest.mark.parametrize("seed", [0, 1, 2, 7, 42, 1234, 99999])
@pytest.mark.parametrize("n", [3, 40, 300])
def test_multilabel_metrics_against_sklearn(seed: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    pool = ["search_issues", "issue_read", "list_issues", "get_me", "add_comment", "only_expected", "only_called"]
    invented = "made_up"
    cases, truth, guess = [], [], []
    for _ in range(n):
        expected = [str(t) for t in rng.choice(pool[:6], size=int(rng.integers(0, 4)))]  # duplicates on purpose
        called = [t for t in expected if rng.random() < 0.7] + [
            str(t) for t in rng.choice([*pool[:5], "only_called", invented], size=int(rng.integers(0, 3)))]
        rng.shuffle(called)
        flagged = {"hallucinated_tools": [invented]} if invented in called else {}
        cases.append(flow_case(expected, called, **flagged))
        truth.append(set(expected))
        guess.append(set(called))
    cases.append(flow_case(["only_expected"], [f"{invented}"], hallucinated_tools=[invented]))
    truth.append({"only_expected"})
    guess.append({invented})
    m = flow_metrics(cases)
    assert m is not None
    labels = sorted(set().union(*truth, *guess))
    assert list(m["tools"]) == labels
    binarizer = MultiLabelBinarizer(classes=labels)
    y_true, y_pred = binarizer.fit_transform(truth), binarizer.transform(guess)
    p, r, f, s = precision_recall_fscore_support(y_true, y_pred, zero_division=np.nan)
    ours = [m["tools"][label] for label in labels]
    assert [t["precision"] for t in ours] == pytest.approx(none_nan(p), abs=1e-12)
    assert [t["recall"] for t in ours] == pytest.approx(none_nan(r), abs=1e-12)
    assert [t["f1"] for t in ours] == pytest.approx(none_nan(f), abs=1e-12)
    assert [t["support"] for t in ours] == s.tolist()
    assert m["micro_f1"] == pytest.approx(float(f1_score(y_true, y_pred, average="micro", zero_division=np.nan)))
    real = [i for i, label in enumerate(labels) if label != invented]
    macro = f1_score(y_true[:, real], y_pred[:, real], average="macro", zero_division=np.nan)
    assert m["macro_f1"] == pytest.approx(float(macro), abs=1e-12)  # the invented name left out
    assert m["exact_set_rate"] == pytest.approx(np.mean([a == b for a, b in zip(truth, guess, strict=True)]))


def test_invented_name_counts_unless_a_case_expects_or_publishes_it() -> None:
    flagged = flow_case(["get_me"], ["get_me", "made_up"], hallucinated_tools=["made_up"])
    m = flow_metrics([flagged])
    assert m is not None and m["macro_f1"] == 1.0 and m["tools"]["made_up"]["f1"] == 0.0
    assert m["micro_f1"] == pytest.approx(2 / 3)  # the invented call is still a false positive
    m2 = flow_metrics([flagged, flow_case(["made_up"], ["made_up"])])  # another catalog publishes it
    assert m2 is not None and m2["macro_f1"] == pytest.approx((1.0 + 2 / 3) / 2)


def test_claims_metrics() -> None:
    cases = [
        flow_case(["get_me"], ["get_me"], claims=[claim(1.0)] * 2, coverage=1.0),
        flow_case(["get_me"], ["get_me"], claims=[claim(1.0), claim(0.5)], coverage=0.75, passed=True),
        flow_case(["get_me"], ["get_me"], claims=[claim(0.5), claim(0.0)], coverage=0.25, passed=False),
        flow_case(["get_me"], ["get_me"], claims=[], coverage=None),  # no claims: not counted
        flow_case(["get_me"], ["get_me"], claims=[claim(0.0)], coverage=0.0, error="judge failed"),  # error
    ]
    m = claims_metrics(cases)
    assert m == {"cases": 3, "mean_coverage": pytest.approx(2.0 / 3), "pass_rate": pytest.approx(2 / 3)}
    assert claims_metrics(cases[3:]) is None and claims_metrics([]) is None


# ------------------------------------------------------------------------------------------------- thresholds


def model(flows: Any = None, claims: Any = None, retrieval: Any = None) -> ModelMetrics:
    return cast(ModelMetrics, {"tools": {}, "flows": flows, "claims": claims, "retrieval": retrieval,
                               "arguments": {"applicable": retrieval is None}})


def test_thresholds_on_flow_metrics() -> None:
    t = parse_threshold("flow_f1[search_issues] >= 0.8", "ini mcp_thresholds")
    assert (t.metric, t.tool, t.op, t.value) == ("flow_f1", "search_issues", ">=", 0.8)
    metrics = flow_metrics([flow_case(["search_issues"], ["search_issues"]),
                            flow_case(["search_issues", "issue_read"], ["issue_read"], passed=False)])
    claims = claims_metrics([flow_case(["get_me"], ["get_me"], claims=[claim(0.5)], coverage=0.5, passed=False)])
    assert metrics is not None and metrics["tools"]["search_issues"]["f1"] == pytest.approx(2 / 3)
    models = {"m": model(metrics, claims)}
    assert evaluate([t], models) == [
        "model m: flow_f1[search_issues] = 0.667, required >= 0.8 (from ini mcp_thresholds)"]
    assert evaluate([parse_threshold("flow_f1[issue_read] >= 0.8")], models) == []
    assert evaluate([parse_threshold("flow_pass_rate >= 0.5")], models) == []
    assert evaluate([parse_threshold("flow_pass_rate >= 0.6", "--mcp-min-pass-rate")], models) == [
        "model m: flow_pass_rate = 0.500, required >= 0.6 (from --mcp-min-pass-rate)"]
    assert evaluate([parse_threshold("coverage >= 0.75", "--mcp-min-coverage")], models) == [
        "model m: coverage = 0.500, required >= 0.75 (from --mcp-min-coverage)"]
    assert evaluate([parse_threshold("flow_macro_f1 >= 0.8")], models) == []  # (2/3 + 1) / 2
    assert evaluate([parse_threshold("flow_macro_f1 >= 0.9")], models) == [
        "model m: flow_macro_f1 = 0.833, required >= 0.9"]
    assert evaluate([parse_threshold("m: flow_f1[list_issues] >= 0.1")], models) == [
        "model m: flow_f1[list_issues] was not measured (no data for `list_issues`); threshold >= 0.1"]


def test_flow_thresholds_do_not_pass_on_nothing() -> None:
    models = {"single": model(), "local/minilm": model(retrieval={"mrr": 1.0})}
    assert evaluate([parse_threshold("flow_pass_rate >= 0.5", "--mcp-min-pass-rate")], models) == [
        "model single: flow_pass_rate was not measured (no flow case was scored); threshold >= 0.5 "
        "(from --mcp-min-pass-rate)"]
    assert evaluate([parse_threshold("coverage >= 0.5")], models) == [
        "model single: coverage was not measured (no case with claims was scored); threshold >= 0.5"]
    assert evaluate([parse_threshold("flow_macro_f1 >= 0.5")], {"local/minilm": models["local/minilm"]}) == [
        "flow_macro_f1 >= 0.5 was not measured: no model it applies to ran"]


@pytest.mark.parametrize(("text", "message"), [
    ("flow_f1 >= 0.8", "`flow_f1` is per tool: write `flow_f1[TOOL]` (or use flow_macro_f1)"),
    ("flow_macro_f1[get_me] >= 0.8", "`flow_macro_f1` is not a per-tool metric"),
    ("coverage[get_me] >= 0.8", "`coverage` is not a per-tool metric"),
    ("flow_pas_rate >= 0.8", "did you mean `flow_pass_rate`"),
])
def test_bad_flow_thresholds(text: str, message: str) -> None:
    with pytest.raises(ThresholdError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        parse_threshold(text)
