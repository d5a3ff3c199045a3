"""The gate's power figures against a hand-worked table (docs/metrics.md, "What the gate can see")."""

from __future__ import annotations

from typing import Any, cast

import pytest

from pytest_mcpeval.gate.power import detectable_drop, detectable_failures, min_changed
from pytest_mcpeval.gate.significance import mcnemar_exact
from pytest_mcpeval.report.model import build_report
from pytest_mcpeval.report.tool_rows import detects, power_lines


# level, tests (Holm's m), fewest changed cases: 2 / 2**k * m < level, worked by hand
# 0.05, 1: 2/32 = 0.0625 >= 0.05, 2/64 = 0.03125 < 0.05 -> 6
# 0.01, 1: 2/128 = 0.0156 >= 0.01, 2/256 = 0.0078 < 0.01 -> 8
# 0.05, 5: 5 * 2/128 = 0.078 >= 0.05, 5 * 2/256 = 0.039 < 0.05 -> 8
# 0.01, 5: 5 * 2/512 = 0.0195 >= 0.01, 5 * 2/1024 = 0.0098 < 0.01 -> 10
# 0.0625, 1: 2/32 = 0.0625 is not below 0.0625 -> 6 (p < level, strictly)
@pytest.mark.parametrize(("level", "tests", "expected"), [
    (0.05, 1, 6), (0.01, 1, 8), (0.05, 5, 8), (0.01, 5, 10), (0.0625, 1, 6), (0.1, 1, 5), (0.05, 2, 7),
])
def test_min_changed_matches_the_hand_worked_table(level: float, tests: int, expected: int) -> None:
    assert min_changed(level, tests) == expected


@pytest.mark.parametrize("level", [0.05, 0.01, 0.1])
def test_min_changed_is_where_the_exact_test_first_fires(level: float) -> None:
    k = min_changed(level)
    assert mcnemar_exact(k, 0) < level <= mcnemar_exact(k - 1, 0)


def test_detectable_drop_is_the_share_of_the_support_and_none_when_blind() -> None:
    assert detectable_drop(12, 6) == 0.5
    assert detectable_drop(6, 6) == 1.0
    assert detectable_drop(5, 6) is None
    assert detectable_drop(0, 6) is None


@pytest.mark.parametrize(("level", "tests"), [(0.0, 1), (1.0, 1), (float("nan"), 1), (0.05, 0)])
def test_min_changed_refuses_what_is_not_a_level(level: float, tests: int) -> None:
    with pytest.raises(ValueError):
        min_changed(level, tests)


# ---------------------------------------------------------------------------------- the figures in the report
# One model, single calls: 12 cases expect `a`, 7 expect `b`, 3 expect `c`, 2 expect no tool (24 in all); one flow
# expects `f` only; the catalog publishes `x`, which no case expects.  Worked by hand:
#   0.05, none: min_changed 6          -> a 6/12 = 0.5, b 6/7, c blind (3 < 6); accuracy 6/24
#   0.01, none: min_changed 8          -> a 8/12, b blind (7 < 8), c blind; accuracy 8/24
#   0.05, Holm: testable at 6 = accuracy (24), macro_f1 (24), f1[a] (12), f1[b] (7) -> m = 4;
#               4 * 2/2**7 = 0.0625 >= 0.05, 4 * 2/2**8 = 0.031 < 0.05 -> 8: a 8/12, b blind, c blind; acc. 8/24
#   0.01, Holm: testable at 8 = accuracy, macro_f1, f1[a] (b: 7 < 8) -> m = 3;
#               3 * 2/2**9 = 0.0117 >= 0.01, 3 * 2/2**10 = 0.0059 < 0.01 -> 10: a 10/12, b, c blind; acc. 10/24
# (the flow: flow_pass_rate over 1 flow is blind at every level, and untestable, so it never counts in m)
POWER_TABLE = [
    (0.05, "none", 1, 6, 6 / 12, 6 / 7, 6 / 24, ["c", "f"]),
    (0.01, "none", 1, 8, 8 / 12, None, 8 / 24, ["b", "c", "f"]),
    (0.05, "holm", 4, 8, 8 / 12, None, 8 / 24, ["b", "c", "f"]),
    (0.01, "holm", 3, 10, 10 / 12, None, 10 / 24, ["b", "c", "f"]),
]


def _case(i: int, tool: str, repeat: int = 0, flow: bool = False) -> dict[str, Any]:
    return {"file": "b.mcpeval.yaml", "id": f"c{i}", "model": "m", "repeat": repeat, "correct": True, "passed": True,
            "expected_label": tool, "called_label": tool, "catalog": "d", "flow": flow,
            "expected": [] if tool == "(none)" else [{"tool": tool}]}


def _cases(repeats: int = 1) -> list[dict[str, Any]]:
    tools = ["a"] * 12 + ["b"] * 7 + ["c"] * 3 + ["(none)"] * 2
    return ([_case(i, tool, r) for i, tool in enumerate(tools) for r in range(repeats)]
            + [_case(99, "f", r, flow=True) for r in range(repeats)])


CATALOG = {"d": {"server": "s", "tools": {t: {"hash": t, "description": t, "tokens": 1} for t in "abcfx"},
                 "tokens": 5}}


@pytest.mark.parametrize(("level", "correction", "tests", "need", "a", "b", "accuracy", "blind"), POWER_TABLE)
def test_the_report_states_what_the_gate_can_see_against_the_hand_worked_table(
        level: float, correction: str, tests: int, need: int, a: float, b: float | None, accuracy: float,
        blind: list[str]) -> None:
    report = build_report(cast(Any, _cases()), cast(Any, CATALOG), ["m"], drop_level=level, correction=correction)
    m = report["models"]["m"]
    power = m["power"]
    assert (power["level"], power["correction"], power["tests"], power["min_changed"]) == (level, correction, tests,
                                                                                          need)
    assert power["min_changed_alone"] == min_changed(level)
    assert power["blind"] == blind
    assert power["untested"] == ["x"]
    assert power["no_single_call"] == ["f"]
    assert power["detectable"] == ({"a": a} if b is None else {"a": a, "b": b})
    assert power["headline"]["accuracy"] == {"n": 24, "min_changed": need, "detectable_drop": accuracy}
    assert power["headline"]["macro_f1"] == power["headline"]["accuracy"]
    assert power["headline"]["flow_pass_rate"] == {"n": 1, "min_changed": need, "detectable_drop": None}
    assert "coverage" not in power["headline"]  # no flow has claims
    assert {t: (v["cases"], v["min_changed"], v["detectable_drop"]) for t, v in m["tools"].items()} == {
        "a": (12, need, a), "b": (7, need, b), "c": (3, need, None), "(none)": (2, need, None)}


def test_repeats_count_once_and_a_report_says_so() -> None:
    once = build_report(cast(Any, _cases()), cast(Any, CATALOG), ["m"])["models"]["m"]
    thrice = build_report(cast(Any, _cases(3)), cast(Any, CATALOG), ["m"])["models"]["m"]
    assert thrice["tools"]["a"]["support"] == 36  # the results, repeats included
    assert thrice["tools"]["a"]["cases"] == 12  # the unit of the figures
    assert {k: v for k, v in thrice["power"].items() if k != "repeats"} == {
        k: v for k, v in once["power"].items() if k != "repeats"}
    assert (once["power"]["repeats"], thrice["power"]["repeats"]) == (1, 3)
    assert next(iter(power_lines(thrice["power"]))) == (
        "the drop gate cannot see drops on 3 of 5 tools: fewer than 6 single-call cases each (2 have none; level "
        "0.05; the repeats of a case count once)")


def test_the_lines_every_rendering_shows() -> None:
    report = build_report(cast(Any, _cases()), cast(Any, CATALOG), ["m"], drop_level=0.05, correction="holm")
    assert list(power_lines(report["models"]["m"]["power"])) == [
        "the drop gate cannot see drops on 4 of 5 tools: fewer than 8 single-call cases each (2 have none; level "
        "0.05, Holm over 4 testable metrics; a drop confined to one metric needs 6)",
        "smallest detectable drops: accuracy 33% (8 of 24 cases), macro F1 33% (8 of 24 cases), flows passed "
        "blind (1 case)",
    ]
    assert detects(report["models"]["m"]["tools"]["a"]) == "67%"
    assert detects(report["models"]["m"]["tools"]["b"]) == "blind"


def test_the_min_detectable_drop_gate_names_the_tools_it_cannot_hold() -> None:
    models = build_report(cast(Any, _cases()), cast(Any, CATALOG), ["m"])["models"]
    assert detectable_failures(models, None) == []
    assert detectable_failures(models, 0.9) == [
        "--mcp-min-detectable-drop=0.9: m: the drop gate cannot flag a fall of 90% in the recall of 2 tools (a tool "
        "needs at least 7 single-call cases at level 0.05): c (blind: 3 cases), f (blind: 0 cases)"]
    assert detectable_failures(models, 0.5) == [
        "--mcp-min-detectable-drop=0.5: m: the drop gate cannot flag a fall of 50% in the recall of 3 tools (a tool "
        "needs at least 12 single-call cases at level 0.05): c (blind: 3 cases), f (blind: 0 cases), b (85.7%)"]


def test_the_page_shows_the_figure_next_to_f1_and_dims_blind_tools() -> None:
    from pytest_mcpeval.report.html import render

    page = render(build_report(cast(Any, _cases()), cast(Any, CATALOG), ["m"]))
    assert "<th>F1<th>support<th>predicted<th>detects<th>F1 change" in page
    assert '<td class=n>12<td class=n>12<td class=n data-v="0.5">50%<td' in page  # a: 6 of 12
    assert "<tr class=blind><td>c<td" in page and "<tr><td>a<td" in page
    assert "The drop gate cannot see drops on 3 of 5 tools: fewer than 6 single-call cases each (2 have none; " \
           "level 0.05).</p>" in page
