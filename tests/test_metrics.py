"""model_metrics against scikit-learn, the GitHub MCP worked example, and null handling."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, confusion_matrix, f1_score, precision_recall_fscore_support

from pytest_mcpeval.benchmark.matchers import compile_args
from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.scoring.case import NONE, Expectation, parse_call, score_case
from pytest_mcpeval.scoring.metrics import argument_rates, dense_matrix, invented_labels, model_metrics, sort_labels

CATALOG = Catalog(
    [
        {"name": "list_issues", "inputSchema": {"properties": {"owner": {}, "repo": {}}, "required": ["owner"]}},
        {"name": "search_issues", "inputSchema": {"properties": {"query": {}}, "required": ["query"]}},
    ]
)


def case(expected: str, called: str, **extra: Any) -> dict[str, Any]:
    """A minimal result dict with the keys model_metrics reads."""
    out: dict[str, Any] = {
        "expected_label": expected,
        "called_label": called,
        "correct": expected == called,
        "passed": expected == called,
        "arguments": None,
        "diagnosis": None if expected == called else "wrong_tool",
    }
    out.update(extra)
    return out


def scored(expected: str | None, called: str | None, args: str = "{}", matchers: dict[str, Any] | None = None,
           ) -> dict[str, Any]:
    expects = [Expectation(expected, compile_args(matchers) if matchers is not None else None)] if expected else []
    calls = [parse_call(called, args, CATALOG)] if called else []
    return score_case(expects, calls, CATALOG)


def nan_to_none(values: Any) -> list[float | None]:
    return [None if math.isnan(v) else float(v) for v in values]


def random_labels(seed: int, n: int) -> tuple[list[str], list[str]]:
    rng = np.random.default_rng(seed)
    shared = ["create_issue", "get_me", "list_issues", "search_issues", NONE]
    expected_pool = [*shared, "only_expected"]
    called_pool = [*shared, "only_called"]
    expected = [str(x) for x in rng.choice(expected_pool, size=n)]
    called = [e if rng.random() < 0.5 and e in called_pool else str(rng.choice(called_pool)) for e in expected]
    # make sure the one-sided classes really occur
    expected += ["only_expected", "list_issues", NONE]
    called += [str(rng.choice(shared)), "only_called", str(rng.choice(called_pool))]
    return expected, called


SEEDS = [0, 1, 2, 7, 42, 1234, 99999]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n", [5, 60, 400])
def test_against_sklearn(seed: int, n: int) -> None:
    expected, called = random_labels(seed, n)
    m = model_metrics([case(e, c) for e, c in zip(expected, called, strict=True)])
    labels = m["confusion"]["labels"]
    assert labels == [*sorted((set(expected) | set(called)) - {NONE}), NONE]
    assert "only_expected" in labels and "only_called" in labels

    assert m["accuracy"] == pytest.approx(accuracy_score(expected, called), abs=1e-12)
    dense = confusion_matrix(expected, called, labels=labels)
    assert dense_matrix(m["confusion"]) == dense.tolist()
    assert m["confusion"]["diagonal"] == np.diag(dense).tolist()  # stored sparse: the diagonal, the other cells
    assert m["confusion"]["off_diagonal"] == [(i, j, dense[i, j]) for i, j in zip(*np.nonzero(dense), strict=True)
                                              if i != j]

    p, r, f, s = precision_recall_fscore_support(expected, called, labels=labels, zero_division=np.nan)
    ours = [m["tools"][label] for label in labels]
    assert [t["precision"] for t in ours] == pytest.approx(nan_to_none(p), abs=1e-12)
    assert [t["recall"] for t in ours] == pytest.approx(nan_to_none(r), abs=1e-12)
    assert [t["f1"] for t in ours] == pytest.approx(nan_to_none(f), abs=1e-12)
    assert [t["support"] for t in ours] == s.tolist()
    assert m["tools"]["only_called"]["recall"] is None and m["tools"]["only_called"]["support"] == 0
    assert m["tools"]["only_expected"]["precision"] is None and m["tools"]["only_expected"]["predicted"] == 0

    macro = f1_score(expected, called, labels=labels, average="macro", zero_division=np.nan)
    weighted = f1_score(expected, called, labels=labels, average="weighted", zero_division=np.nan)
    assert m["macro_f1"] == pytest.approx(float(macro), abs=1e-12)
    assert m["weighted_f1"] == pytest.approx(float(weighted), abs=1e-12)

    off_diagonal = sum(p["count"] for p in m["confused_pairs"])
    assert off_diagonal == sum(e != c for e, c in zip(expected, called, strict=True))
    counts = [p["count"] for p in m["confused_pairs"]]
    assert counts == sorted(counts, reverse=True)
    assert all(p["expected"] != p["called"] for p in m["confused_pairs"])


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n", [5, 60, 400])
def test_invented_tools_are_left_out_of_macro_f1(seed: int, n: int) -> None:
    """A called name the catalog lacks (flagged in ``hallucinated_tools``) is a label of the matrix and counts
    against recall and accuracy, but macro F1 is sklearn's over the real labels only."""
    expected, called = random_labels(seed, n)
    rng = np.random.default_rng(seed + 1)
    invented = ["made_up", "get_profile"]
    called = [str(rng.choice(invented)) if rng.random() < 0.2 else c for c in called]
    called[0] = "made_up"  # at least one
    cases = [case(e, c, **({"hallucinated_tools": [c]} if c in invented else {}))
             for e, c in zip(expected, called, strict=True)]
    m = model_metrics(cases)
    labels = m["confusion"]["labels"]
    assert "made_up" in labels
    real = [label for label in labels if label not in invented]
    macro = f1_score(expected, called, labels=real, average="macro", zero_division=np.nan)
    assert m["macro_f1"] == pytest.approx(float(macro), abs=1e-12)
    everything = f1_score(expected, called, labels=labels, average="macro", zero_division=np.nan)
    assert m["macro_f1"] > everything  # each invented label would add an F1 of 0
    weighted = f1_score(expected, called, labels=labels, average="weighted", zero_division=np.nan)
    assert m["weighted_f1"] == pytest.approx(float(weighted), abs=1e-12)  # invented labels have no support
    assert m["accuracy"] == pytest.approx(accuracy_score(expected, called), abs=1e-12)
    assert dense_matrix(m["confusion"]) == confusion_matrix(expected, called, labels=labels).tolist()
    assert m["hallucinated_tools"] == {name: called.count(name) for name in sorted(invented) if name in called}


def test_invented_labels() -> None:
    flagged = case("get_me", "made_up", hallucinated_tools=["made_up"])
    assert invented_labels([flagged, case("get_me", "get_me")]) == {"made_up"}
    # a name one catalog lacks but another publishes (two benchmark files) is a real label
    assert invented_labels([flagged, case("made_up", "get_me")]) == set()
    assert invented_labels([flagged, case("get_me", "made_up")]) == set()
    # a later call the catalog lacks does not make the first called label invented
    assert invented_labels([case("get_me", "get_me", hallucinated_tools=["made_up"])]) == set()
    m = model_metrics([flagged, case("get_me", "get_me")])
    assert m["macro_f1"] == pytest.approx(2 / 3)  # get_me alone: 2·1 / (2 + 1)
    assert m["tools"]["made_up"] == {"precision": 0.0, "recall": None, "f1": 0.0, "support": 0, "predicted": 1,
                                     "arguments": argument_rates([])}
    assert m["hallucinated_tools"] == {"made_up": 1} and model_metrics(github_cases())["hallucinated_tools"] == {}


def github_cases() -> list[dict[str, Any]]:
    return [case("list_issues", "list_issues") for _ in range(10)] + [
        case("search_issues", "list_issues") for _ in range(3)
    ] + [case("search_issues", "search_issues") for _ in range(7)]


def test_github_worked_example() -> None:
    m = model_metrics(github_cases())
    assert m["tools"]["list_issues"]["precision"] == 10 / 13
    assert m["tools"]["list_issues"]["recall"] == 1.0
    assert m["tools"]["search_issues"]["precision"] == 1.0
    assert m["tools"]["search_issues"]["recall"] == 0.7
    assert m["tools"]["list_issues"]["support"] == 10 and m["tools"]["search_issues"]["support"] == 10
    assert m["tools"]["list_issues"]["predicted"] == 13 and m["tools"]["search_issues"]["predicted"] == 7
    assert m["confusion"] == {"labels": ["list_issues", "search_issues"], "diagonal": [10, 7],
                              "off_diagonal": [(1, 0, 3)]}
    assert dense_matrix(m["confusion"]) == [[10, 0], [3, 7]]
    assert m["accuracy"] == 17 / 20
    assert m["tools"]["list_issues"]["f1"] == pytest.approx(20 / 23)
    assert m["tools"]["search_issues"]["f1"] == pytest.approx(14 / 17)
    assert m["macro_f1"] == pytest.approx((20 / 23 + 14 / 17) / 2)
    assert m["weighted_f1"] == pytest.approx((20 / 23 + 14 / 17) / 2)
    assert m["confused_pairs"] == [{"expected": "search_issues", "called": "list_issues", "count": 3}]
    assert m["diagnoses"] == {"wrong_tool": 3}
    assert (m["cases"], m["scored"], m["errors"], m["pass_rate"]) == (20, 20, 0, 17 / 20)


def test_a_version_1_reports_dense_matrix_reads_the_same() -> None:
    m = model_metrics(github_cases())
    version_1 = {"labels": m["confusion"]["labels"], "matrix": [[10, 0], [3, 7]]}
    assert dense_matrix(version_1) == dense_matrix(m["confusion"])


def test_github_example_via_score_case() -> None:
    cases = [scored("list_issues", "list_issues", '{"owner": "o"}') for _ in range(10)]
    cases += [scored("search_issues", "list_issues", '{"owner": "o"}') for _ in range(3)]
    cases += [scored("search_issues", "search_issues", '{"query": "q"}') for _ in range(7)]
    m = model_metrics(cases)
    assert dense_matrix(m["confusion"]) == [[10, 0], [3, 7]]
    assert m["tools"]["list_issues"]["precision"] == 10 / 13 and m["tools"]["search_issues"]["recall"] == 0.7
    assert m["arguments"]["evaluated"] == 17


def test_plain_json_types() -> None:
    m = model_metrics([*github_cases(), case("list_issues", NONE), case(NONE, "search_issues")])
    read_back = json.loads(json.dumps(m))
    assert read_back["confusion"]["off_diagonal"] == [list(cell) for cell in m["confusion"]["off_diagonal"]]
    assert read_back == {**m, "confusion": read_back["confusion"]}
    floats = [m["accuracy"], m["macro_f1"], m["weighted_f1"], m["pass_rate"]]
    floats += [t[k] for t in m["tools"].values() for k in ("precision", "recall", "f1")]
    assert all(type(v) is float for v in floats)
    assert all(type(v) is int for v in m["confusion"]["diagonal"])
    assert all(type(v) is int for cell in m["confusion"]["off_diagonal"] for v in cell)
    assert m["confusion"]["labels"] == ["list_issues", "search_issues", NONE]


def test_empty_case_list() -> None:
    m = model_metrics([])
    assert (m["accuracy"], m["macro_f1"], m["weighted_f1"], m["pass_rate"]) == (None, None, None, None)
    assert (m["cases"], m["scored"], m["errors"]) == (0, 0, 0)
    assert m["tools"] == {} and m["confusion"] == {"labels": [], "diagonal": [], "off_diagonal": []}
    assert m["arguments"] == {"evaluated": 0, "hallucination_rate": None, "all_expected_rate": None,
                              "all_required_rate": None, "exact_match_rate": None}
    assert m["diagnoses"] == {} and m["confused_pairs"] == []


def test_errors_excluded_and_counted() -> None:
    broken = case("search_issues", "list_issues", error="provider timed out")
    unscored = {"error": "tool missing from catalog", "expected_label": "zzz", "called_label": NONE, "correct": None}
    m = model_metrics([*github_cases(), broken, unscored])
    assert (m["cases"], m["scored"], m["errors"]) == (22, 20, 2)
    assert dense_matrix(m["confusion"]) == [[10, 0], [3, 7]]
    assert "zzz" not in m["tools"]
    assert m["accuracy"] == 17 / 20


def test_only_errors() -> None:
    m = model_metrics([{"error": "boom"}, {"error": "bang", "correct": None}])
    assert (m["cases"], m["scored"], m["errors"], m["accuracy"], m["macro_f1"]) == (2, 0, 2, None, None)


def test_all_wrong_is_zero_not_none() -> None:
    m = model_metrics([case("list_issues", "search_issues"), case("search_issues", "list_issues")])
    assert m["accuracy"] == 0.0 and m["macro_f1"] == 0.0 and m["weighted_f1"] == 0.0
    assert m["tools"]["list_issues"]["precision"] == 0.0 and m["tools"]["list_issues"]["recall"] == 0.0
    assert m["arguments"]["evaluated"] == 0 and m["arguments"]["exact_match_rate"] is None


def test_sort_labels() -> None:
    assert sort_labels(["b", NONE, "a", "b", "_x", "Z"]) == ["Z", "_x", "a", "b", NONE]
    assert sort_labels([NONE]) == [NONE]
    assert sort_labels([]) == []


def test_none_class_metrics() -> None:
    m = model_metrics([case(NONE, NONE), case(NONE, "list_issues"), case("list_issues", NONE)])
    assert m["confusion"] == {"labels": ["list_issues", NONE], "diagonal": [0, 1],
                              "off_diagonal": [(0, 1, 1), (1, 0, 1)]}
    assert m["tools"][NONE]["precision"] == 0.5 and m["tools"][NONE]["recall"] == 0.5
    assert m["tools"]["list_issues"]["f1"] == 0.0
    assert m["diagnoses"] == {"wrong_tool": 2}


def test_argument_rates() -> None:
    cases = [
        scored("list_issues", "list_issues", '{"owner": "o", "repo": "r"}', {"owner": "o", "repo": "r"}),  # exact
        scored("list_issues", "list_issues", '{"owner": "o", "bogus": 1}', {"owner": "o"}),  # hallucinated
        scored("list_issues", "list_issues", '{"repo": "r"}', {"repo": "r"}),  # missing required
        scored("search_issues", "search_issues", '{"query": "q"}'),  # args not checked: exact None
        scored("search_issues", "search_issues", "{oops"),  # malformed
        scored("search_issues", "list_issues", '{"owner": "o"}'),  # wrong tool: not evaluated
        scored(None, None),  # correct (none): not evaluated
    ]
    m = model_metrics(cases)
    a = m["arguments"]
    assert a["evaluated"] == 5
    assert a["hallucination_rate"] == 1 / 5
    assert a["all_required_rate"] == 3 / 5
    assert a["exact_match_rate"] == 2 / 3  # exact: True, False, True; the two unchecked cases are None, excluded
    assert a["all_expected_rate"] == 1.0
    lst = m["tools"]["list_issues"]["arguments"]
    assert (lst["evaluated"], lst["hallucination_rate"], lst["exact_match_rate"]) == (3, 1 / 3, 2 / 3)
    srch = m["tools"]["search_issues"]["arguments"]
    assert (srch["evaluated"], srch["exact_match_rate"], srch["all_expected_rate"]) == (2, None, None)
    assert srch["all_required_rate"] == 0.5
    assert m["tools"][NONE]["arguments"] == argument_rates([])
    assert m["diagnoses"] == {"hallucinated_argument": 1, "malformed_call": 1, "missing_required_argument": 1,
                              "wrong_tool": 1}
    assert m["pass_rate"] == 3 / 7


def test_argument_rates_none_without_correct_selection() -> None:
    m = model_metrics([case("list_issues", "search_issues"), case("search_issues", NONE)])
    assert m["arguments"]["evaluated"] == 0
    assert all(m["arguments"][k] is None for k in
               ("hallucination_rate", "all_expected_rate", "all_required_rate", "exact_match_rate"))
    for tool in m["tools"].values():
        assert tool["arguments"]["exact_match_rate"] is None


# ------------------------------------------------------------------------------- flows: the two families apart


def flow_result(expected: str, called: str, diagnosis: str | None = None, **extra: Any) -> dict[str, Any]:
    """A scored flow case (``flow: true``), with the fields scoring.flow gives."""
    passed = diagnosis is None
    out = case(expected, called, flow=True, order="in_order", passed=passed, diagnosis=diagnosis, order_ok=passed,
               matches=[], forbidden_called=[], coverage=None, **extra)
    out.update(expected=[{"tool": expected}], called=[{"tool": called, "args": {}}])
    return out


def test_single_call_metrics_leave_flows_out() -> None:
    """Flows change no single-call number (accuracy, F1, confusion, arguments, pass rate, invented tools); the
    counts and the diagnoses cover both families."""
    single = github_cases()
    flows = [flow_result("search_issues", "list_issues", "wrong_tool", hallucinated_tools=[]),
             flow_result("list_issues", "made_up", "premature_stop", hallucinated_tools=["made_up"]),
             flow_result("search_issues", "search_issues"),
             {**flow_result("get_me", "get_me"), "error": "model API failed", "correct": None}]
    alone, mixed = model_metrics(single), model_metrics([*single, *flows])
    for key in ("accuracy", "pass_rate", "macro_f1", "weighted_f1", "tools", "confusion", "confused_pairs",
                "arguments", "hallucinated_tools"):
        assert mixed[key] == alone[key], key
    assert (mixed["cases"], mixed["scored"], mixed["errors"]) == (24, 23, 1)
    assert mixed["diagnoses"] == {"premature_stop": 1, "wrong_tool": 4}
    only_flows = model_metrics(flows)
    assert (only_flows["scored"], only_flows["accuracy"], only_flows["pass_rate"], only_flows["macro_f1"]) == (
        3, None, None, None)
    assert only_flows["diagnoses"] == {"premature_stop": 1, "wrong_tool": 1} and only_flows["tools"] == {}


def test_report_has_flow_and_claims_metrics() -> None:
    from pytest_mcpeval.report.model import build_report
    from pytest_mcpeval.results.schema import validate_report

    base = {"file": "f.mcpeval.yaml", "line": 1, "model": "m", "repeat": 0, "tags": [], "error": None}
    claims = [{"claim": "names 42", "method": "check", "score": 0.5, "verdict": "partially_fulfilled",
               "justification": "x"}]
    results = [
        {**base, "id": "one", **case("get_me", "get_me"), "expected": [{"tool": "get_me"}],
         "called": [{"tool": "get_me", "args": {}}]},
        {**base, "id": "two", **flow_result("search_issues", "search_issues"), "claims": claims * 2,
         "coverage": 0.5, "passed": False, "diagnosis": "answer_incomplete", "trajectory": [], "turns": 1},
        {**base, "id": "three", **flow_result("list_issues", "search_issues", "wrong_tool")},
    ]
    report = build_report(results, {}, ["m"])
    validate_report(json.loads(json.dumps(report)))
    m = report["models"]["m"]
    assert (m["accuracy"], m["scored"]) == (1.0, 3)
    flows = m["flows"]
    assert flows is not None
    assert (flows["cases"], flows["pass_rate"], flows["exact_set_rate"]) == (2, 0.0, 0.5)
    assert flows["tools"]["search_issues"] == {"precision": 0.5, "recall": 1.0, "f1": 2 / 3, "support": 1}
    assert m["claims"] == {"cases": 1, "mean_coverage": 0.5, "pass_rate": 0.0}
    assert m["diagnoses"] == {"answer_incomplete": 1, "wrong_tool": 1}
    assert build_report(results[:1], {}, ["m"])["models"]["m"]["flows"] is None
