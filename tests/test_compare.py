"""compare: baseline files, the paired permutation test (exact McNemar for counts), the bootstrap interval
and the Markdown summary."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import make_project, read_report, run
from scipy.stats import binomtest
from sklearn.metrics import f1_score

from pytest_mcpeval.gate.baseline import BASELINE_VERSION, BaselineError, load_baseline, make_baseline
from pytest_mcpeval.gate.compare import (
    METRICS,
    SINGLE_CALL_METRICS,
    Comparison,
    changed_tools,
    compare,
    comparison_section,
)
from pytest_mcpeval.gate.paired import _columns, _f1_stat, _label_columns, _macro_stat, _Side, _stats
from pytest_mcpeval.gate.significance import mcnemar_exact, permutation_test
from pytest_mcpeval.numbers import format_p, sentence
from pytest_mcpeval.report.markdown import comparison_markdown
from pytest_mcpeval.report.model import build_report
from pytest_mcpeval.scoring.bootstrap import bootstrap_interval
from pytest_mcpeval.scoring.case import NONE
from pytest_mcpeval.scoring.metrics import invented_labels, model_metrics, sort_labels
from pytest_mcpeval.testing import ScriptedModelServer

MODEL = "gpt-5"


def case(i: int, expected: str, called: str, model: str = MODEL, repeat: int = 0, error: str | None = None,
         file: str = "github.mcpeval.yaml") -> dict[str, Any]:
    """A minimal result dict: the keys model_metrics and build_report read, plus the pairing key."""
    if error:
        return {"file": file, "id": f"case-{i:03d}", "model": model, "repeat": repeat, "error": error,
                "expected_label": None, "called_label": None, "correct": None, "passed": None,
                "arguments": None, "diagnosis": None}
    return {
        "file": file,
        "id": f"case-{i:03d}",
        "model": model,
        "repeat": repeat,
        "error": None,
        "expected_label": expected,
        "called_label": called,
        "correct": expected == called,
        "passed": expected == called,
        "arguments": None,
        "diagnosis": None if expected == called else "wrong_tool",
    }


def markdown(result: Comparison, baseline: dict[str, Any], current: dict[str, Any]) -> str:
    """The comparison's Markdown, rendered from the report it is stored in (as the session stores it)."""
    section = comparison_section(result, baseline, current, "baseline.json", result.correction)
    return comparison_markdown({**current, "comparison": section})  # type: ignore[typeddict-item]


def report(cases: list[dict[str, Any]]) -> dict[str, Any]:
    return build_report(cases, catalogs={}, model_order=[MODEL], intervals=False)  # no test here reads them


def catalog(description: str) -> dict[str, Any]:
    return {
        "list_issues": {"hash": hashlib.sha256(description.encode()).hexdigest()[:16], "description": description},
        "get_me": {"hash": "h-get-me", "description": "Get the authenticated user."},
        "search_issues": {"hash": "h-search-issues", "description": "Search issues by text."},
    }


OLD_DESCRIPTION = "List issues in a GitHub repository.\nFor pagination, use the 'after' cursor."
NEW_DESCRIPTION = "List issues in a GitHub repository.\nPrefer search_issues for text queries."


def description_change_runs() -> tuple[dict[str, Any], dict[str, Any]]:
    """40 paired cases; the new list_issues description sends 6 of its 10 cases to search_issues.

    Before: 38/40 correct (two get_me cases miss in both runs).  After: 32/40.  b = 6, c = 0.
    """
    def run(flipped: int) -> list[dict[str, Any]]:
        out = []
        for i in range(40):
            if i < 10:
                out.append(case(i, "list_issues", "search_issues" if i < flipped else "list_issues"))
            else:
                out.append(case(i, "get_me", NONE if i >= 38 else "get_me"))
        return out

    before, after = report(run(0)), report(run(6))
    before["catalogs"] = {"aaaa": catalog(OLD_DESCRIPTION)}
    after["catalogs"] = {"bbbb": catalog(NEW_DESCRIPTION)}
    return before, after


def random_cases(seed: int, n: int, labels: int = 6, flip: float = 0.3) -> list[tuple[str, str]]:
    rng = np.random.default_rng(seed)
    pool = [f"tool_{k}" for k in range(labels - 1)] + [NONE]
    expected = rng.choice(pool, size=n)
    return [(str(e), str(e) if rng.random() > flip else str(rng.choice([*pool, "only_called"]))) for e in expected]


# ---------------------------------------------------------------------------------------------- McNemar


@pytest.mark.parametrize("b,c", [(0, 1), (1, 0), (6, 0), (2, 1), (3, 5), (10, 2), (7, 7), (0, 17), (25, 40),
                                 (100, 80), (300, 250)])
def test_mcnemar_exact_matches_scipy(b: int, c: int) -> None:
    expected = binomtest(min(b, c), b + c, 0.5).pvalue
    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-12, abs=1e-300)
    assert mcnemar_exact(b, c) == mcnemar_exact(c, b)


def test_mcnemar_no_discordant_pairs() -> None:
    assert mcnemar_exact(0, 0) == 1.0


# ---------------------------------------------------------------------------------------- the gate


def test_description_change_drop_is_significant() -> None:
    before, after = description_change_runs()
    result = compare(make_baseline(before), after, metrics=("accuracy",))
    (change,) = result.changes
    assert (change["before"], change["after"], change["n"]) == (0.95, 0.8, 40)
    assert change["diff"] == pytest.approx(-0.15)
    assert change["p_value"] == 2 * 0.5**6 == 0.03125
    assert change["significant"] and change["drop"] and not change["improvement"] and change["discordant"] == 6
    assert result.failures() == [
        "model gpt-5: accuracy dropped 0.950 -> 0.800 (-0.150, 95% CI [-0.275, -0.050], p = 0.0312, "
        "6 of 40 paired cases changed)"
    ]
    assert not result.passed
    assert [f["case"] for f in result.flipped] == [f"github.mcpeval.yaml::case-{i:03d}[gpt-5]#0" for i in range(6)]
    assert all(f["before"] is True and f["after"] is False for f in result.flipped)
    assert {f["called_after"] for f in result.flipped} == {"search_issues"}


def test_description_change_default_metrics() -> None:
    before, after = description_change_runs()
    result = compare(make_baseline(before), after)
    by_metric = {c["metric"]: c for c in result.changes}
    assert list(by_metric) == ["accuracy", "macro_f1", "f1[get_me]", "f1[list_issues]", "f1[search_issues]",
                               "f1[(none)]"]
    assert by_metric["macro_f1"]["before"] == pytest.approx(before["models"][MODEL]["macro_f1"])
    assert by_metric["macro_f1"]["after"] == pytest.approx(after["models"][MODEL]["macro_f1"])
    assert by_metric["f1[list_issues]"]["drop"]
    assert not by_metric["f1[get_me]"]["significant"] and by_metric["f1[get_me]"]["p_value"] == 1.0
    new = by_metric["f1[search_issues]"]  # never expected, and called only after: not comparable
    assert (new["before"], new["after"], new["diff"], new["significant"]) == (None, 0.0, None, False)
    assert "f1[list_issues] dropped 1.000 -> 0.571" in "\n".join(result.failures())


def test_small_drop_is_not_significant() -> None:
    rng = np.random.default_rng(3)
    labels = ["list_issues", "search_issues", "get_me", NONE]
    expected = [str(x) for x in rng.choice(labels, size=20)]
    wrong = {e: labels[(labels.index(e) + 1) % len(labels)] for e in labels}
    base = [case(i, e, e if i not in (5,) else wrong[e]) for i, e in enumerate(expected)]
    # two cases flip down (0, 1), one flips up (5)
    cur = [case(i, e, wrong[e] if i in (0, 1) else e) for i, e in enumerate(expected)]
    result = compare(make_baseline(report(base)), report(cur), metrics=("accuracy", "macro_f1", "pass_rate",
                                                                          "tool_f1"))
    accuracy = result.changes[0]
    assert accuracy["metric"] == "accuracy" and accuracy["diff"] == pytest.approx(-0.05)
    assert accuracy["p_value"] == 1.0  # b = 2, c = 1
    assert not any(c["significant"] for c in result.changes)
    assert result.failures() == [] and result.passed
    assert len(result.flipped) == 3


def test_improvement_is_reported_not_failed() -> None:
    before, after = description_change_runs()
    result = compare(make_baseline(after), before, metrics=("accuracy", "macro_f1"))
    assert result.failures() == []
    assert [c["metric"] for c in result.improvements()] == ["accuracy", "macro_f1"]
    assert sentence(result.improvements()[0]).startswith("model gpt-5: accuracy rose 0.800 -> 0.950 (+0.150,")


def test_margin_keeps_significant_small_changes_from_failing() -> None:
    before, after = description_change_runs()
    result = compare(make_baseline(before), after, metrics=("accuracy",), margin=0.2)
    assert result.changes[0]["significant"] and not result.changes[0]["drop"]
    assert result.failures() == []


# ------------------------------------------------------------------ small supports: one flipped case is no evidence

OTHERS = ["git_diff"] * 4 + ["git_log"] * 4 + ["git_commit"] * 2 + [NONE] * 2
GIT_TOOLS = ["git_diff", "git_log", "git_commit"]


def tool_runs(support: int, flips: int, to: str = "git_diff", others: list[str] | None = None,
              ) -> tuple[dict[str, Any], dict[str, Any]]:
    """``git_status`` expected by ``support`` cases, all right in the baseline; now its first ``flips`` cases
    call ``to``.  The ``others`` cases (12 of other tools by default) stay right."""
    expected = ["git_status"] * support + (OTHERS if others is None else others)
    base = [case(i, e, e) for i, e in enumerate(expected)]
    cur = [case(i, e, to if i < flips else e) for i, e in enumerate(expected)]
    return make_baseline(report(base)), report(cur)


def model_runs(support: int, flips: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """A model with ``support`` paired cases over three tools, all right in the baseline; now its first
    ``flips`` cases call the next tool of the three."""
    expected = [GIT_TOOLS[i % 3] for i in range(support)]
    base = [case(i, e, e) for i, e in enumerate(expected)]
    cur = [case(i, e, GIT_TOOLS[(GIT_TOOLS.index(e) + 1) % 3] if i < flips else e) for i, e in enumerate(expected)]
    return make_baseline(report(base)), report(cur)


def by_metric(result: Comparison) -> dict[str, Any]:
    return {c["metric"]: c for c in result.changes}


@pytest.mark.parametrize("to", ["git_diff", NONE, "git_add"])
def test_one_flipped_case_of_a_one_case_tool_is_not_significant(to: str) -> None:
    """The issue: 13 paired cases, git_status has one case, it flips.  The bootstrap used to say
    ``f1[git_status] dropped 1.000 -> 0.000 (95% CI [-1.000, -1.000], p < 0.0001)``."""
    baseline, current = tool_runs(1, 1, to)
    result = compare(baseline, current, metrics=METRICS)
    assert result.paired == {MODEL: 13}
    changes = by_metric(result)
    assert {"accuracy", "macro_f1", "pass_rate", "f1[git_status]"} <= set(changes)
    assert result.passed and result.failures() == []
    assert not any(c["significant"] or c["drop"] for c in result.changes)
    assert all(c["p_value"] == 1.0 for c in result.changes)
    assert all(c["discordant"] <= 1 for c in result.changes)
    assert sentence(changes["f1[git_status]"]) == (
        "model gpt-5: f1[git_status] dropped 1.000 -> 0.000 (-1.000, 95% CI [-1.000, 0.000], p = 1.0000, "
        "1 of 13 paired cases changed)")
    for c in result.changes:  # every interval of a drop reaches 0: no interval claims more than the test
        if c["diff"] is not None and c["diff"] < 0:
            assert c["ci_low"] is not None and c["ci_high"] is not None
            assert c["ci_low"] <= c["diff"] < 0 <= c["ci_high"]


@pytest.mark.parametrize("support", [1, 2, 5])
@pytest.mark.parametrize("others", [None, []], ids=["among-other-tools", "only-this-tool"])
def test_small_supports_cannot_fail_even_when_every_case_flips(support: int, others: list[str] | None) -> None:
    baseline, current = tool_runs(support, support, others=others)
    result = compare(baseline, current, metrics=METRICS)
    assert result.passed and not any(c["significant"] for c in result.changes)
    changes = by_metric(result)
    assert changes["f1[git_status]"]["diff"] == -1.0
    for metric in ("accuracy", "pass_rate", "macro_f1", "f1[git_status]"):
        change = changes[metric]
        assert change["discordant"] == support
        assert change["p_value"] == 2 / 2**support  # the floor: the observed pattern and its mirror
    for c in result.changes:
        assert c["discordant"] <= support and c["p_value"] >= 2 / 2**5


def test_a_real_drop_fails_on_every_metric() -> None:
    baseline, current = tool_runs(10, 8)
    result = compare(baseline, current, metrics=METRICS)
    changes = by_metric(result)
    for metric in ("accuracy", "pass_rate", "macro_f1", "f1[git_status]", "f1[git_diff]"):
        assert changes[metric]["drop"], sentence(changes[metric])
        assert changes[metric]["discordant"] == 8
    assert changes["accuracy"]["p_value"] == mcnemar_exact(8, 0) == binomtest(0, 8, 0.5).pvalue == 2 / 2**8
    assert changes["f1[git_status]"]["p_value"] == 2 / 2**8
    assert sentence(changes["f1[git_status]"]) == (
        "model gpt-5: f1[git_status] dropped 1.000 -> 0.333 (-0.667, 95% CI [-1.000, -0.333], p = 0.0078, "
        "8 of 22 paired cases changed)")
    for tool in ("git_log", "git_commit", NONE):
        assert changes[f"f1[{tool}]"]["p_value"] == 1.0 and changes[f"f1[{tool}]"]["discordant"] == 0
    assert len(result.failures()) == 5


def test_a_five_case_tool_fails_when_a_sixth_case_turns_against_it() -> None:
    """The documented way a tool with fewer than six cases can fail: other cases change for it too."""
    expected = ["git_status"] * 5 + OTHERS
    base = report([case(i, e, e) for i, e in enumerate(expected)])
    cur = report([case(i, e, "git_diff" if i < 5 else "git_status" if i == 5 else e) for i, e in enumerate(expected)])
    status = by_metric(compare(make_baseline(base), cur, metrics=("tool_f1",)))["f1[git_status]"]
    assert (status["discordant"], status["p_value"], status["drop"]) == (6, 2 / 2**6, True)


def documented_table(heading: str) -> list[list[str]]:
    """The Markdown table whose header row starts with ``heading`` in docs/pull-requests.md, as cells."""
    text = (Path(__file__).parent.parent / "docs" / "pull-requests.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {heading} |"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return [rows[0], *rows[2:]]


def test_documented_flips_needed_at_each_support() -> None:
    header, *rows = documented_table("metric")
    supports = [int(h.removeprefix("support ")) for h in header[1:]]
    assert supports == [1, 2, 5, 10, 20]
    assert [row[0] for row in rows] == ["accuracy", "pass_rate", "macro_f1", "f1[TOOL]", "flow_pass_rate",
                                        "coverage"]
    for metric, *cells in rows:
        for support, cell in zip(supports, cells, strict=True):
            runs = (tool_runs if metric == "f1[TOOL]" else model_runs if metric in SINGLE_CALL_METRICS
                    else flow_runs(metric))
            name = "f1[git_status]" if metric == "f1[TOOL]" else metric

            def fails(flips: int, runs: Any = runs, name: str = name, support: int = support) -> bool:
                baseline, current = runs(support, flips)
                change = by_metric(compare(baseline, current, metrics=METRICS))[name]
                assert change["discordant"] == flips and change["p_value"] == 2 / 2**flips
                return bool(change["drop"])

            if cell == "never":
                assert not fails(support), (metric, support)
            else:
                needed = int(cell)
                assert fails(needed) and not fails(needed - 1), (metric, support)


def test_documented_opposite_flips_tolerated_for_accuracy() -> None:
    (header, values), = [documented_table("discordant cases d")]
    assert values[0] == "opposite flips tolerated"
    for span, cell in zip(header[1:], values[1:], strict=True):
        low, _, high = span.partition("\N{EN DASH}")
        for d in range(int(low), int(high or low) + 1):
            significant = [c for c in range(d + 1) if 2 * c < d and binomtest(c, d, 0.5).pvalue < 0.05]
            assert (str(max(significant)) if significant else "never significant") == cell, d
            if significant and d == int(low):  # compare agrees: that many opposite flips fail, one more does not
                assert compare_flips(d - max(significant), max(significant))["drop"]
                assert not compare_flips(d - max(significant) - 1, max(significant) + 1)["drop"]


def compare_flips(worse: int, better: int) -> Any:
    """Accuracy of a comparison where ``worse`` cases go right -> wrong and ``better`` wrong -> right (of 60)."""
    base = [case(i, "git_diff", "git_diff" if i < worse else "git_log") for i in range(60)]
    cur = [case(i, "git_diff", "git_log" if i < worse or i >= worse + better else "git_diff") for i in range(60)]
    change = compare(make_baseline(report(base)), report(cur), metrics=("accuracy",), resamples=500).changes[0]
    assert change["discordant"] == worse + better and change["p_value"] == mcnemar_exact(worse, better)
    return change


# ------------------------------------------------------------------------------------ permutation test


def count_columns(b: int, c: int, concordant: int = 5) -> tuple[Any, Any]:
    """One count column per pair: b pairs 1 -> 0, c pairs 0 -> 1, then concordant pairs (1 -> 1, 0 -> 0)."""
    before = np.array([1] * b + [0] * c + [i % 2 for i in range(concordant)], dtype=float)[:, None]
    after = np.array([0] * b + [1] * c + [i % 2 for i in range(concordant)], dtype=float)[:, None]
    return before, after


@pytest.mark.parametrize("b,c", [(0, 0), (0, 1), (1, 0), (6, 0), (2, 1), (3, 5), (10, 2), (7, 7), (0, 16), (9, 7),
                                 (5, 11), (12, 5), (25, 40), (30, 8), (100, 80), (200, 150)])
def test_exact_permutation_test_of_a_count_is_mcnemar(b: int, c: int) -> None:
    """Two types of discordant pair (+1 and -1): exact at any size, and equal to McNemar / scipy."""
    before, after = count_columns(b, c)
    p, k = permutation_test(before, after, lambda counts: counts[:, 0] / len(before))
    assert k == b + c
    expected = binomtest(min(b, c), b + c, 0.5).pvalue if b + c else 1.0
    assert p == pytest.approx(expected, rel=1e-12)
    assert p == pytest.approx(mcnemar_exact(b, c), rel=1e-12)
    if k <= 50:
        assert (p * 2**k) == round(p * 2**k)  # a share of the 2**k patterns


def random_count_rows(seed: int, n: int, changed: int) -> tuple[Any, Any, int]:
    """Count columns (see _columns) of n paired cases over 4 labels, ``changed`` of them with a new call;
    correct and passed stay 1."""
    rng = np.random.default_rng(seed)
    expected = rng.integers(0, 4, size=n)
    called = np.where(rng.random(n) < 0.6, expected, rng.integers(0, 4, size=n))
    moved = called.copy()
    moved[:changed] = rng.integers(0, 4, size=changed)
    ones = np.ones(n)
    return _columns(_Side(ones, ones, expected, called), 4), _columns(_Side(ones, ones, expected, moved), 4), 4


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_grouped_enumeration_equals_every_swap_pattern(seed: int) -> None:
    """Counting swaps per type of change gives the p-value of enumerating all 2**k patterns one by one."""
    before, after, labels = random_count_rows(seed, 30, 14)
    before, after = before[:, 2:], after[:, 2:]  # the label columns, as macro F1 reads them
    delta = (after - before)[np.any(after != before, axis=1)]
    k = len(delta)
    patterns = ((np.arange(1 << k)[:, None] >> np.arange(k)) & 1).astype(float)
    shift = patterns @ delta
    stat = _macro_stat(labels)
    observed = stat(after.sum(axis=0)[None, :])[0] - stat(before.sum(axis=0)[None, :])[0]
    diffs = stat(after.sum(axis=0) - shift) - stat(before.sum(axis=0) + shift)
    expected = np.mean(np.isnan(diffs) | (np.abs(diffs) >= abs(observed) - 1e-12))
    assert permutation_test(before, after, stat) == (expected, k)
    for i in range(labels):
        cols = [c - 2 for c in _label_columns(i, labels)]
        sub = shift[:, cols]
        f1_obs = _f1_stat(after[:, cols].sum(axis=0)[None, :])[0] - _f1_stat(before[:, cols].sum(axis=0)[None, :])[0]
        f1_diffs = _f1_stat(after[:, cols].sum(axis=0) - sub) - _f1_stat(before[:, cols].sum(axis=0) + sub)
        hits = np.isnan(f1_diffs) | (np.abs(f1_diffs) >= abs(f1_obs) - 1e-12)
        assert permutation_test(before[:, cols], after[:, cols], _f1_stat)[0] == (1.0 if np.isnan(f1_obs)
                                                                                 else np.mean(hits))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sampled_patterns_agree_with_the_exact_test(seed: int) -> None:
    """Beyond 65,536 swap outcomes the test samples patterns; forced here, it stays within sampling error."""
    before, after, labels = random_count_rows(seed, 200, 60)
    before, after = before[:, 2:], after[:, 2:]
    stat = _macro_stat(labels)
    exact, k = permutation_test(before, after, stat)
    sampled, k_sampled = permutation_test(before, after, stat, resamples=10000, seed=seed, exact_limit=0)
    assert k == k_sampled > 16
    assert sampled * 10001 == pytest.approx(round(sampled * 10001))  # (1 + hits) / (1 + resamples)
    assert abs(sampled - exact) < 4 * math.sqrt(exact * (1 - exact) / 10000) + 2 / 10001
    assert permutation_test(before, after, stat, resamples=10000, seed=seed, exact_limit=0) == (sampled, k)
    counts_b, counts_a = count_columns(40, 25)
    sampled, _ = permutation_test(counts_b, counts_a, lambda c: c[:, 0], resamples=10000, seed=seed, exact_limit=0)
    exact = mcnemar_exact(40, 25)
    assert abs(sampled - exact) < 4 * math.sqrt(exact * (1 - exact) / 10000) + 2 / 10001
    counts_b, counts_a = count_columns(1001, 0)  # more than 1,000 discordant pairs: sampled as well
    assert permutation_test(counts_b, counts_a, lambda c: c[:, 0], resamples=500, seed=seed) == (1 / 501, 1001)


def test_compare_accuracy_and_pass_rate_are_exact_mcnemar_at_any_size() -> None:
    rng = np.random.default_rng(9)
    base = [case(i, e, c) for i, (e, c) in enumerate(random_cases(9, 300, flip=0.3))]
    cur = [case(i, e, c) for i, (e, c) in enumerate(random_cases(10, 300, flip=0.3))]
    for c in cur:  # pass rate with its own flips: passed no longer follows correct
        c["passed"] = bool(c["correct"]) and rng.random() < 0.8
    result = compare(make_baseline(report(base)), report(cur), metrics=("accuracy", "pass_rate"))
    for change, key in zip(result.changes, ("correct", "passed"), strict=True):
        worse = sum(bool(b[key]) and not a[key] for b, a in zip(base, cur, strict=True))
        better = sum(not b[key] and bool(a[key]) for b, a in zip(base, cur, strict=True))
        assert worse + better > 16 and change["discordant"] == worse + better
        assert change["p_value"] == pytest.approx(binomtest(min(worse, better), worse + better, 0.5).pvalue, rel=1e-12)


def swapped_share(base: list[Any], cur: list[Any], changed: list[int], value: Callable[[list[Any]], float],
                  observed: float) -> float:
    """The share of the 2^k patterns of swapping the ``changed`` cases' two sides whose |difference| of ``value``
    reaches the observed one (an undefined difference counts): the exact two-sided swap test, by brute force."""
    hits = 0
    for pattern in itertools.product([False, True], repeat=len(changed)):
        swap = {i for i, s in zip(changed, pattern, strict=True) if s}
        before = [cur[i] if i in swap else base[i] for i in range(len(base))]
        after = [base[i] if i in swap else cur[i] for i in range(len(base))]
        diff = value(after) - value(before)
        hits += math.isnan(diff) or abs(diff) >= abs(observed) - 1e-12
    return hits / (1 << len(changed))


def swap_reference(base: list[dict[str, Any]], cur: list[dict[str, Any]], metric: str) -> float:
    """p of the swap test by brute force: swap whole cases, recompute with model_metrics."""
    def value(cases: list[dict[str, Any]]) -> float:
        m = model_metrics(cases)
        if metric == "macro_f1":
            return float(m["macro_f1"])
        tool = m["tools"].get(metric[3:-1])
        return math.nan if tool is None or tool["f1"] is None else float(tool["f1"])

    changed = [i for i, (b, a) in enumerate(zip(base, cur, strict=True)) if (b["expected_label"], b["called_label"])
               != (a["expected_label"], a["called_label"])]
    observed = value(cur) - value(base)
    if math.isnan(observed):
        return 1.0
    return swapped_share(base, cur, changed, value, observed)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_permutation_test_of_f1_equals_swapping_cases(seed: int) -> None:
    rng = np.random.default_rng(seed)
    pool = ["list_issues", "search_issues", "get_me", NONE]
    base = [case(i, e, c) for i, (e, c) in enumerate(random_cases(seed, 14, labels=4, flip=0.3))]
    cur = [dict(c) for c in base]
    for i in rng.choice(14, size=7, replace=False):
        called = str(rng.choice([*pool, "only_called"]))
        cur[i] = case(int(i), base[i]["expected_label"], called)
    result = compare(make_baseline(report(base)), report(cur), metrics=("macro_f1", "tool_f1"), resamples=500)
    assert len(result.changes) > 3
    for change in result.changes:
        metric = change["metric"]
        assert change["p_value"] == pytest.approx(swap_reference(base, cur, metric), abs=1e-12), metric


def test_swap_patterns_with_an_undefined_metric_count_as_extreme() -> None:
    # label columns (tp, support, predicted); pair A: newly expected and missed, pair B: right -> no longer there
    before = np.array([[0, 0, 0], [1, 1, 1]], dtype=float)
    after = np.array([[0, 1, 0], [0, 0, 0]], dtype=float)
    # observed f1 1 -> 0; swapping only A or only B leaves one side with no support and no calls
    assert permutation_test(before, after, _f1_stat) == (1.0, 2)
    assert permutation_test(before[:1], after[:1], _f1_stat) == (1.0, 1)  # undefined before: p = 1


def test_a_tools_test_reads_only_the_cases_that_concern_it() -> None:
    baseline, current = tool_runs(10, 8)
    alone = by_metric(compare(baseline, current, metrics=("tool_f1",)))["f1[git_status]"]
    expected = ["git_status"] * 10 + OTHERS  # and now the four git_log cases call git_commit as well
    noisy = report([case(i, e, "git_diff" if i < 8 else "git_commit" if e == "git_log" else e)
                    for i, e in enumerate(expected)])
    changes = by_metric(compare(baseline, noisy, metrics=("macro_f1", "tool_f1")))
    assert (changes["f1[git_status]"]["p_value"], changes["f1[git_status]"]["discordant"]) == (alone["p_value"], 8)
    assert changes["f1[git_log]"]["discordant"] == changes["f1[git_commit]"]["discordant"] == 4
    assert changes["f1[git_diff]"]["discordant"] == 8 and changes["f1[(none)]"]["discordant"] == 0
    assert changes["macro_f1"]["discordant"] == 12


def test_null_hypothesis_rejections_stay_within_the_level() -> None:
    """Both runs drawn from one distribution: the swap test rejects at most about 5% of the time."""
    rng = np.random.default_rng(11)
    pool = ["a", "b", "c", NONE]
    rejected = {"macro_f1": 0, "f1": 0}
    tested = {"macro_f1": 0, "f1": 0}
    for sim in range(200):
        expected = [str(e) for e in rng.choice(pool, size=30)]

        def run(expected: list[str] = expected) -> list[dict[str, Any]]:
            return [case(i, e, e if rng.random() < 0.6 else str(rng.choice(pool))) for i, e in enumerate(expected)]

        result = compare(make_baseline(report(run())), report(run()), metrics=("macro_f1", "tool_f1"),
                         resamples=200, seed=sim)
        for c in result.changes:
            if c["diff"] is not None:
                key = "macro_f1" if c["metric"] == "macro_f1" else "f1"
                tested[key] += 1
                rejected[key] += c["significant"]
    for key in tested:
        share = rejected[key] / tested[key]
        assert share <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / tested[key]), (key, rejected[key], tested[key])


# ------------------------------------------------------------------------------------------ p-values


def test_format_p() -> None:
    assert format_p(1.0) == "1.0000"
    assert format_p(0.03125) == "0.0312"
    assert format_p(0.0001) == "0.0001"
    assert format_p(0.0000999) == "< 0.0001"
    assert format_p(2 / 2**20) == "< 0.0001"


def test_p_values_print_the_same_in_sentences_and_markdown() -> None:
    baseline, current = tool_runs(20, 20)
    result = compare(baseline, current, metrics=METRICS)
    lines = markdown(result, baseline, current).splitlines()
    changes = by_metric(result)
    assert "p < 0.0001" in sentence(changes["accuracy"])  # 2 / 2**20
    assert "p = 1.0000" in sentence(changes["f1[git_log]"])
    shown = set()
    folded = next((line for line in lines if line.startswith("Tool F1 unchanged for ")), "")
    for c in result.changes:
        name = c["metric"] if not c["metric"].startswith("f1[") else f"`{c['metric'][3:-1]}`"
        if c["metric"].startswith("f1[") and c["diff"] == 0:  # no row of +0.000 and p = 1.0000: named, folded
            assert name in folded and not [line for line in lines if line.startswith(f"| {name} |")]
            continue
        (row,) = [line for line in lines if line.startswith(f"| {name} |")]
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        if c["diff"] is None:
            assert cells[5] == "—"
            continue
        text = format_p(c["p_value"])
        shown.add(text)
        assert cells[5] == text
        assert re.search(rf", p (= )?{re.escape(text)}, {c['discordant']} of {c['n']} paired cases changed\)$",
                         sentence(c))
    assert "< 0.0001" in shown and folded


# ------------------------------------------------------------------------------------------ macro F1


def resampled_metrics(cases: list[dict[str, Any]], idx: Any, labels: list[str]) -> dict[str, Any]:
    """The vectorised path the bootstrap takes, for one resample given as case indices."""
    index = {label: i for i, label in enumerate(labels)}
    side = _Side(
        correct=np.array([c["correct"] for c in cases], dtype=float),
        passed=np.array([c["passed"] for c in cases], dtype=float),
        expected=np.array([index[c["expected_label"]] for c in cases]),
        called=np.array([index[c["called_label"]] for c in cases]),
    )
    weights = np.bincount(idx, minlength=len(cases)).astype(float)[None, :]
    return _stats(weights @ _columns(side, len(labels)), len(idx), len(labels))


@pytest.mark.parametrize("seed", [0, 1, 2, 7, 42, 1234])
@pytest.mark.parametrize("n", [5, 40, 300])
def test_vectorised_f1_equals_model_metrics(seed: int, n: int) -> None:
    cases = [case(i, e, c) for i, (e, c) in enumerate(random_cases(seed, n, labels=8))]
    labels = sort_labels([x for c in cases for x in (c["expected_label"], c["called_label"])])
    rng = np.random.default_rng(seed + 1)
    for idx in [np.arange(n), *(rng.integers(0, n, size=n) for _ in range(5))]:
        reference = model_metrics([cases[i] for i in idx])
        ours = resampled_metrics(cases, idx, labels)
        assert ours["macro_f1"][0] == pytest.approx(reference["macro_f1"], abs=1e-12)
        assert ours["accuracy"][0] == pytest.approx(reference["accuracy"], abs=1e-12)
        assert ours["pass_rate"][0] == pytest.approx(reference["pass_rate"], abs=1e-12)
        for i, label in enumerate(labels):
            f1 = ours["f1"][0, i]
            expected = reference["tools"].get(label, {}).get("f1")
            if expected is None:
                assert np.isnan(f1)
            else:
                assert f1 == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 5, 11])
def test_observed_values_equal_model_metrics(seed: int) -> None:
    base = [case(i, e, c) for i, (e, c) in enumerate(random_cases(seed, 150))]
    cur = [case(i, e, c) for i, (e, c) in enumerate(random_cases(seed + 100, 150))]
    before, after = report(base), report(cur)
    # the same ids but independent expectations: still a paired comparison of 150 cases
    result = compare(make_baseline(before), after, metrics=("accuracy", "macro_f1", "pass_rate", "tool_f1"),
                     resamples=500)
    for change in result.changes:
        for value, rep in ((change["before"], before), (change["after"], after)):
            m = rep["models"][MODEL]
            if change["metric"].startswith("f1["):
                tool = m["tools"].get(change["metric"][3:-1])
                assert value == (None if tool is None else pytest.approx(tool["f1"], abs=1e-12))
            else:
                assert value == pytest.approx(m[change["metric"]], abs=1e-12)


def invented_tool_run(invent_at: int, invented: str) -> list[dict[str, Any]]:
    """12 cases of a three-tool catalog; case ``invent_at`` calls ``invented``, a tool no catalog has."""
    expected = ["list_issues"] * 5 + ["get_me"] * 4 + [NONE] * 3
    cases = [case(i, e, "search_issues" if i == 2 else e) for i, e in enumerate(expected)]
    cases[invent_at] = {**case(invent_at, expected[invent_at], invented), "hallucinated_tools": [invented]}
    return cases


def test_macro_f1_of_invented_tools_equals_the_report() -> None:
    tools = catalog(OLD_DESCRIPTION)
    catalogs: Any = {"aaaa": {"server": "github", "tools": {t: {**v, "tokens": 10} for t, v in tools.items()},
                              "tokens": 30}}
    base, cur = invented_tool_run(0, "delete_repo"), invented_tool_run(6, "whoami")
    before, after = build_report(base, catalogs, [MODEL]), build_report(cur, catalogs, [MODEL])
    result = compare(make_baseline(before), after, metrics=("macro_f1", "tool_f1"), resamples=500)
    by_metric = {c["metric"]: c for c in result.changes}
    macro = by_metric["macro_f1"]
    for cases, rep, value in ((base, before, macro["before"]), (cur, after, macro["after"])):
        y_true = [c["expected_label"] for c in cases]
        y_pred = [c["called_label"] for c in cases]
        invented = invented_labels(cases)
        assert len(invented) == 1
        real = [x for x in sort_labels([*y_true, *y_pred]) if x not in invented]
        reference = f1_score(y_true, y_pred, labels=real, average="macro")
        assert rep["models"][MODEL]["macro_f1"] == pytest.approx(reference, abs=1e-12)
        assert value == pytest.approx(reference, abs=1e-12)
        everything = f1_score(y_true, y_pred, average="macro")  # what averaging over every label gives
        assert abs(value - everything) > 0.01
    # the invented names keep their own f1 rows (0: never right)
    assert (by_metric["f1[delete_repo]"]["before"], by_metric["f1[whoami]"]["after"]) == (0.0, 0.0)
    # the exact test swaps cases under the same statistic (model_metrics, hallucinated_tools riding along)
    assert by_metric["macro_f1"]["p_value"] == pytest.approx(swap_reference(base, cur, "macro_f1"), abs=1e-12)


# ---------------------------------------------------------------------------------------- bootstrap


def test_bootstrap_is_deterministic_and_covers_the_observed_diff() -> None:
    base = [case(i, e, c) for i, (e, c) in enumerate(random_cases(4, 200, flip=0.2))]
    cur = [case(i, e, c) for i, (e, c) in enumerate(random_cases(4, 200, flip=0.35))]
    first = compare(make_baseline(report(base)), report(cur), seed=7, resamples=2000)
    again = compare(make_baseline(report(base)), report(cur), seed=7, resamples=2000)
    other = compare(make_baseline(report(base)), report(cur), seed=8, resamples=2000)
    assert first == again
    assert [(c["ci_low"], c["ci_high"]) for c in first.changes] != [(c["ci_low"], c["ci_high"]) for c in other.changes]
    for change in first.changes:
        if change["metric"] in ("accuracy", "macro_f1"):
            assert change["diff"] is not None and change["ci_low"] is not None and change["ci_high"] is not None
            assert change["ci_low"] <= change["diff"] <= change["ci_high"]
            assert change["ci_low"] < change["ci_high"]


def test_bootstrap_interval() -> None:
    assert bootstrap_interval(np.zeros(100), 0.05) == (0.0, 0.0)
    assert bootstrap_interval(np.full(10, np.nan), 0.05) == (None, None)
    diffs = np.array([-0.3] * 90 + [0.1] * 10 + [np.nan] * 50)
    low, high = bootstrap_interval(diffs, 0.05)
    assert low == pytest.approx(-0.3) and high == pytest.approx(0.1)
    assert bootstrap_interval(diffs, 0.05) == tuple(np.percentile(diffs[:100], [2.5, 97.5]))


def test_large_comparison_runs() -> None:
    labels = [f"tool_{k:02d}" for k in range(39)] + [NONE]
    rng = np.random.default_rng(0)
    expected = [str(x) for x in rng.choice(labels, size=1000)]
    base = [case(i, e, e if rng.random() < 0.8 else str(rng.choice(labels))) for i, e in enumerate(expected)]
    cur = [case(i, e, e if rng.random() < 0.8 else str(rng.choice(labels))) for i, e in enumerate(expected)]
    baseline, current = make_baseline(report(base)), report(cur)
    start = time.process_time()
    result = compare(baseline, current, metrics=METRICS, resamples=10000)
    cpu = time.process_time() - start
    assert len(result.changes) == 3 + 40
    assert result.paired == {MODEL: 1000}
    worse = sum(b["correct"] and not a["correct"] for b, a in zip(base, cur, strict=True))
    better = sum(a["correct"] and not b["correct"] for b, a in zip(base, cur, strict=True))
    assert result.changes[0]["p_value"] == mcnemar_exact(worse, better) and result.changes[0]["discordant"] > 16
    assert cpu < 3.0  # about 0.2 s of CPU on one core; a loose guard against a slow path


# ------------------------------------------------------------------ repeats: the case is the unit (issue 31)


def repeated(outcomes: list[list[bool]], expected: str = "list_issues", wrong: str = "search_issues",
             first: int = 0) -> list[dict[str, Any]]:
    """One result per repeat: ``outcomes[i][r]`` says whether repeat ``r`` of case ``first + i`` was correct."""
    return [case(first + i, expected, expected if right else wrong, repeat=r)
            for i, repeats in enumerate(outcomes) for r, right in enumerate(repeats)]


def cluster_runs(flipping: int, stable: int, repeats: int = 3) -> tuple[dict[str, Any], dict[str, Any]]:
    """``flipping`` cases whose every repeat goes from correct to wrong, ``stable`` cases correct in both runs."""
    before = repeated([[True] * repeats] * (flipping + stable))
    after = repeated([[False] * repeats] * flipping + [[True] * repeats] * stable)
    return make_baseline(report(before)), report(after)


def test_two_cases_of_three_repeats_flipping_are_two_discordant_cases_not_six() -> None:
    """Two clusters: the swap test has 2**2 patterns, the observed one and its mirror reach it: p = 2/4."""
    result = compare(*cluster_runs(2, 10))
    accuracy = by_metric(result)["accuracy"]
    assert (accuracy["before"], accuracy["after"], accuracy["n"], accuracy["discordant"]) == (1.0, 10 / 12, 12, 2)
    assert accuracy["p_value"] == 0.5 and not accuracy["drop"]  # on main: 6 discordant pairs, p = 0.03125, a drop
    assert result.passed and result.paired == {MODEL: 12}
    assert {c["n"] for c in result.changes} == {12} and {c["discordant"] for c in result.changes} == {2}
    assert [f["case"] for f in result.flipped] == [f"github.mcpeval.yaml::case-{i:03d}[gpt-5]" for i in range(2)]
    assert result.flipped[0] | {} == {
        "case": "github.mcpeval.yaml::case-000[gpt-5]", "model": MODEL, "expected_label": "list_issues",
        "before": True, "after": False, "called_before": "list_issues", "called_after": "search_issues",
        "passed_before": True, "passed_after": False, "share_before": 1.0, "share_after": 0.0,
        "repeats_before": 3, "repeats_after": 3}
    assert [m["case"] for m in result.moved] == [f["case"] for f in result.flipped]  # one move per case, too
    text = markdown(result, *cluster_runs(2, 10))
    assert "### Flipped cases (2)" in text
    row = "| `github.mcpeval.yaml::case-000[gpt-5]` | `list_issues` | 3/3 `list_issues` | 0/3 `search_issues` |"
    assert row in text
    from pytest_mcpeval.report.html import render

    baseline, current = cluster_runs(2, 10)
    page = render({**current, "comparison": comparison_section(result, baseline, current, "b.json", "none")})
    assert "<td>3/3 list_issues<td>0/3 search_issues</tr>" in page


def test_six_cases_of_three_repeats_flipping_are_significant() -> None:
    result = compare(*cluster_runs(6, 6))
    accuracy = by_metric(result)["accuracy"]
    assert accuracy["p_value"] == 2 / 64 and accuracy["discordant"] == 6 and accuracy["n"] == 12
    assert accuracy["drop"] and not result.passed
    assert result.failures()[0].endswith("p = 0.0312, 6 of 12 paired cases changed)")


def test_a_case_with_mixed_repeats_is_one_case_with_a_fractional_difference() -> None:
    """Case 0 goes from 2 of 3 repeats correct to 1 of 3; case 1 stays right: accuracy is the mean of the
    per-case shares, (2/3 + 1) / 2 -> (1/3 + 1) / 2, and one case changed (p = 1: two sign patterns, both reach)."""
    before = repeated([[True, True, False], [True, True, True]])
    after = repeated([[True, False, False], [True, True, True]])
    result = compare(make_baseline(report(before)), report(after), metrics=("accuracy", "pass_rate"))
    for change in result.changes:
        assert change["before"] == pytest.approx(5 / 6) and change["after"] == pytest.approx(2 / 3)
        assert (change["n"], change["discordant"], change["p_value"]) == (2, 1, 1.0)
    flip = result.flipped
    assert len(flip) == 1 and flip[0]["case"] == "github.mcpeval.yaml::case-000[gpt-5]"
    assert (flip[0]["share_before"], flip[0]["share_after"], flip[0]["before"], flip[0]["after"]) == (
        pytest.approx(2 / 3), pytest.approx(1 / 3), True, False)
    # the most frequent call: list_issues before (2 of 3), search_issues after (2 of 3): the case moved, once
    assert flip[0]["called_before"] == "list_issues" and flip[0]["called_after"] == "search_issues"
    assert [m["case"] for m in result.moved] == [flip[0]["case"]]


def test_a_case_pairs_on_its_mean_whatever_the_repeats_of_each_side() -> None:
    """A baseline of three repeats, a run of one: the case pairs (its extra repeats are listed as only in the
    baseline); the values are means of per-case means, each case weighing one."""
    before = repeated([[True, True, False], [True, True, True]])
    after = repeated([[False], [True]])
    result = compare(make_baseline(report(before)), report(after), metrics=("accuracy",))
    accuracy = by_metric(result)["accuracy"]
    assert accuracy["before"] == pytest.approx(5 / 6) and accuracy["after"] == 0.5 and accuracy["n"] == 2
    assert result.only_in_baseline == [f"github.mcpeval.yaml::case-{i:03d}[gpt-5]#{r}" for i in (0, 1) for r in (1, 2)]
    assert result.flipped[0]["case"] == "github.mcpeval.yaml::case-000[gpt-5]"
    assert (result.flipped[0]["repeats_before"], result.flipped[0]["repeats_after"]) == (3, 1)


def test_an_errored_repeat_is_left_out_of_its_case_alone() -> None:
    before = repeated([[True, True, True], [True, True, True]])
    after = repeated([[False, False, False], [True, True, True]])
    after[1] = case(0, "", "", repeat=1, error="rate limited")
    result = compare(make_baseline(report(before)), report(after), metrics=("accuracy",))
    assert result.excluded == ["github.mcpeval.yaml::case-000[gpt-5]#1"] and result.paired == {MODEL: 2}
    assert result.flipped[0]["repeats_after"] == 2 and result.flipped[0]["share_after"] == 0.0


def cluster_reference(base: list[list[dict[str, Any]]], cur: list[list[dict[str, Any]]], metric: str) -> float:
    """p of the cluster swap test by brute force: swap whole cases (all their repeats), recompute with
    model_metrics over every repeat (equal repeats per case: the mean over repeats is the mean of case means)."""
    def value(cases: list[list[dict[str, Any]]]) -> float:
        m = model_metrics([c for repeats in cases for c in repeats])
        if metric in ("accuracy", "macro_f1"):
            return float(m[metric])  # type: ignore[literal-required]
        tool = m["tools"].get(metric[3:-1])
        return math.nan if tool is None or tool["f1"] is None else float(tool["f1"])

    def calls(repeats: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
        return [(c["expected_label"], c["called_label"]) for c in repeats]

    changed = [i for i, (b, a) in enumerate(zip(base, cur, strict=True)) if sorted(calls(b)) != sorted(calls(a))]
    observed = value(cur) - value(base)
    if math.isnan(observed):
        return 1.0
    return swapped_share(base, cur, changed, value, observed)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_cluster_swap_test_equals_swapping_whole_cases(seed: int) -> None:
    rng = np.random.default_rng(seed)
    pool = ["list_issues", "search_issues", "get_me", NONE]
    n, repeats = 10, 3
    expected = [str(rng.choice(pool)) for _ in range(n)]

    def draw(e: str, flip: float) -> str:
        return e if rng.random() > flip else str(rng.choice([*pool, "only_called"]))

    base = [[case(i, e, draw(e, 0.2), repeat=r) for r in range(repeats)] for i, e in enumerate(expected)]
    cur = [[dict(c) for c in repeats_of] for repeats_of in base]
    for i in rng.choice(n, size=7, replace=False):
        cur[i] = [case(int(i), expected[i], draw(expected[i], 0.6), repeat=r) for r in range(repeats)]
    flat = [c for repeats_of in base for c in repeats_of], [c for repeats_of in cur for c in repeats_of]
    result = compare(make_baseline(report(flat[0])), report(flat[1]), metrics=("accuracy", "macro_f1", "tool_f1"),
                     resamples=500)
    assert len(result.changes) > 3 and {c["n"] for c in result.changes} == {n}
    for change in result.changes:
        metric = change["metric"]
        assert change["p_value"] == pytest.approx(cluster_reference(base, cur, metric), abs=1e-12), metric


def test_the_interval_resamples_cases_not_repeats() -> None:
    """Two cases of three repeats, one flipping: a resample of two cases holds it 0, 1 or 2 times, so every
    resampled difference is 0, -1/2 or -1 (a quarter of them -1); resampling the six repeats would give sixths."""
    before = repeated([[True] * 3, [True] * 3])
    after = repeated([[False] * 3, [True] * 3])
    accuracy = by_metric(compare(make_baseline(report(before)), report(after), metrics=("accuracy",)))["accuracy"]
    assert (accuracy["diff"], accuracy["ci_low"], accuracy["ci_high"]) == (-0.5, -1.0, 0.0)


# ------------------------------------------------------------------------------------------- pairing


def test_cases_only_in_one_run_and_errors() -> None:
    base = [case(i, "get_me", "get_me") for i in range(6)]
    base.append(case(10, "get_me", "get_me", file="old.mcpeval.yaml"))
    base[2] = case(2, "", "", error="server unreachable")
    base.append(case(0, "get_me", "get_me", repeat=1))
    cur = [case(i, "get_me", "get_me") for i in range(6)]
    cur[4] = case(4, "", "", error="rate limited")
    cur.append(case(0, "get_me", "get_me", model="other"))
    result = compare(make_baseline(report(base)), build_report(cur, {}, [MODEL, "other"]))
    assert result.only_in_baseline == ["github.mcpeval.yaml::case-000[gpt-5]#1", "old.mcpeval.yaml::case-010[gpt-5]#0"]
    assert result.only_in_current == ["github.mcpeval.yaml::case-000[other]#0"]
    assert result.excluded == ["github.mcpeval.yaml::case-002[gpt-5]#0", "github.mcpeval.yaml::case-004[gpt-5]#0"]
    assert result.paired == {MODEL: 4}
    assert {c["n"] for c in result.changes} == {4}
    text = markdown(result, make_baseline(report(base)), build_report(cur, {}, [MODEL, "other"]))
    assert "### Only in the baseline (2)" in text and "`old.mcpeval.yaml::case-010[gpt-5]#0`" in text
    assert "### Only in this run (1)" in text
    assert "### Left out (error on either side) (2)" in text


def test_compare_rejects_unknown_metrics() -> None:
    before, after = description_change_runs()
    with pytest.raises(ValueError, match=r"unknown metric.*'recall'"):
        compare(before, after, metrics=("accuracy", "recall"))


# ------------------------------------------------------------------------------------------ baseline


def test_make_baseline_round_trip(tmp_path: Path) -> None:
    before, after = description_change_runs()
    baseline = make_baseline(before)
    assert baseline["version"] == BASELINE_VERSION == 1
    assert baseline["kind"] == "pytest-mcpeval-baseline"
    assert baseline["models"][MODEL]["accuracy"] == 0.95
    assert baseline["models"][MODEL]["tools"]["list_issues"] == 1.0
    assert set(baseline["models"][MODEL]) == {"accuracy", "macro_f1", "pass_rate", "tools", "flow_pass_rate",
                                              "coverage"}
    assert baseline["models"][MODEL]["flow_pass_rate"] is None and baseline["models"][MODEL]["coverage"] is None
    assert set(baseline["cases"][0]) == {"file", "id", "model", "repeat", "correct", "passed", "expected_label",
                                         "called_label", "error"}  # a single call: no flow fields
    assert baseline["catalogs"] == before["catalogs"]
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(baseline), encoding="utf-8")
    loaded = load_baseline(path)
    assert loaded == baseline
    assert compare(loaded, after) == compare(baseline, after) == compare(before, after)
    same = compare(loaded, before)
    assert same.passed and not same.flipped and all(c["p_value"] == 1.0 for c in same.changes)


@pytest.mark.parametrize(
    "content,message",
    [
        (None, "baseline file not found: "),
        ("{not json", ": not valid JSON: Expecting property name enclosed in double quotes (line 1 column 2)"),
        ("[1, 2]", "expected a JSON object of kind 'pytest-mcpeval-baseline', found list"),
        ('{"version": 1, "models": {}, "cases": []}', "expected kind 'pytest-mcpeval-baseline', found None"),
        ('{"version": 2, "models": {}, "cases": [], "gate": {}}', ": this is a JSON report (--mcp-report, version 2), "
         "not a baseline: write one with --mcp-save-baseline"),
        ('{"version": 2, "kind": "pytest-mcpeval-baseline", "cases": []}', "expected version 1, found 2"),
        ('{"version": 1, "kind": "pytest-mcpeval-baseline", "cases": {}}', "expected 'cases' to be a list"),
    ],
)
def test_load_baseline_errors(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "baseline.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(BaselineError) as info:
        load_baseline(path)
    assert message in str(info.value)
    assert "\n" not in str(info.value)
    assert isinstance(info.value, ValueError)


# ------------------------------------------------------------------------------------------ markdown


def test_markdown_marks_changed_descriptions_and_the_gate() -> None:
    before, after = description_change_runs()
    baseline = make_baseline(before)
    result = compare(baseline, after)
    assert changed_tools(baseline, after) == {"list_issues": {"before": OLD_DESCRIPTION, "after": NEW_DESCRIPTION}}
    text = markdown(result, baseline, after)
    lines = text.splitlines()
    assert lines[2].startswith("❌ **3 significant drops**")
    assert f"- {result.failures()[0]}" in lines
    assert "| metric | before | after | change | 95% CI | p | cases changed | |" in lines
    assert "| accuracy | 0.950 | 0.800 | -0.150 | [-0.275, -0.050] | 0.0312 | 6 | 🔻 |" in lines
    row = next(line for line in lines if "`list_issues`" in line and line.startswith("| ✏️"))
    assert row.endswith("🔻 |")
    assert not any(line.startswith("| ✏️ `get_me`") for line in lines)
    block = ("<details><summary>description of list_issues changed</summary>\n\n```diff\n--- baseline\n"
             "+++ current\n@@ -1,2 +1,2 @@\n List issues in a GitHub repository.\n"
             "-For pagination, use the 'after' cursor.\n+Prefer search_issues for text queries.\n```\n\n</details>")
    assert block in text
    assert "### Flipped cases (6)" in text
    assert "| `github.mcpeval.yaml::case-000[gpt-5]#0` | `list_issues` | ✓ `list_issues` | ✗ `search_issues` |" in text


def test_markdown_no_drop() -> None:
    before, _ = description_change_runs()
    result = compare(make_baseline(before), before)
    text = markdown(result, make_baseline(before), before)
    assert text.splitlines()[2] == "✅ **No significant drop** (margin 0.02, level 0.05)"
    assert "✏️" not in text and "<details>" not in text and "Flipped" not in text


def test_markdown_schema_only_change_and_other_level() -> None:
    before, after = description_change_runs()
    after["catalogs"] = {"cccc": {**catalog(OLD_DESCRIPTION), "get_me": {"hash": "h-get-me-2",
                                                                         "description": "Get the authenticated user."}}}
    result: Comparison = compare(make_baseline(before), after, level=0.1, metrics=("accuracy", "tool_f1"))
    text = markdown(result, make_baseline(before), after)
    assert "| metric | before | after | change | 90% CI | p | cases changed | |" in text
    assert "90% CI [" in result.failures()[0]
    assert "definition of get_me changed (description unchanged" in text
    assert "description of list_issues changed" not in text
    assert "| ✏️ `get_me` |" in text


def test_changed_tools_reads_the_server_tools_tokens_form() -> None:
    before, after = description_change_runs()
    before["catalogs"] = {"aaaa": {"server": "github", "tools": catalog(OLD_DESCRIPTION), "tokens": 120}}
    after["catalogs"] = {"bbbb": {"server": "github", "tools": catalog(NEW_DESCRIPTION), "tokens": 118}}
    assert changed_tools(make_baseline(before), after) == {"list_issues": {"before": OLD_DESCRIPTION,
                                                                           "after": NEW_DESCRIPTION}}
    assert changed_tools(before, before) == {}


# -------------------------------------------------------------------------------------------------- flows

FLOW_FILE = "flows.mcpeval.yaml"
VERDICTS = {1.0: "fulfilled", 0.5: "partially_fulfilled", 0.0: "not_fulfilled"}


def flow(i: int, passed: bool = True, scores: list[float] | None = None, first: str = "search_issues",
         model: str = MODEL, error: str | None = None) -> dict[str, Any]:
    """A flow's result: expects search_issues then issue_read, calls ``first`` then issue_read; ``scores`` are
    its claim scores (coverage their mean; no claims when ``None``)."""
    claims = [{"claim": f"claim {k}", "method": "check", "score": score, "verdict": VERDICTS.get(score, "fulfilled"),
               "justification": ""} for k, score in enumerate(scores or [])]
    base = {"file": FLOW_FILE, "id": f"flow-{i:03d}", "model": model, "repeat": 0, "flow": True, "order": "in_order",
            "expected": [{"tool": "search_issues"}, {"tool": "issue_read"}]}
    if error:
        return {**base, "error": error, "expected_label": None, "called_label": None, "correct": None,
                "passed": None, "arguments": None, "diagnosis": None, "called": []}
    return {
        **base,
        "error": None,
        "called": [{"tool": first, "args": {}}, {"tool": "issue_read", "args": {}}],
        "expected_label": "search_issues",
        "called_label": first,
        "correct": first == "search_issues",
        "passed": passed,
        "arguments": None,
        "diagnosis": None if passed else "answer_incomplete",
        "order_ok": first == "search_issues",
        "claims": claims,
        "coverage": math.fsum(scores) / len(scores) if scores else None,
    }


def flow_runs(metric: str) -> Any:
    """``(support, flips) -> (baseline, current)``: ``support`` flows, all passing with coverage 1; now the first
    ``flips`` of them fail (``flow_pass_rate``) or have coverage 0.5 and still pass (``coverage``)."""
    def runs(support: int, flips: int) -> tuple[dict[str, Any], dict[str, Any]]:
        base = [flow(i, scores=[1.0]) for i in range(support)]
        if metric == "flow_pass_rate":
            cur = [flow(i, passed=i >= flips, scores=[1.0]) for i in range(support)]
        else:
            cur = [flow(i, scores=[0.5] if i < flips else [1.0]) for i in range(support)]
        return make_baseline(report(base)), report(cur)
    return runs


def test_flows_are_left_out_of_the_single_call_metrics() -> None:
    """12 single calls that do not change and 10 flows whose first call and outcome change: accuracy, pass rate,
    macro F1 and every f1[TOOL] see the 12 single calls only; the flows move flow_pass_rate and coverage."""
    singles = [case(i, e, e) for i, e in enumerate(["get_me"] * 6 + ["list_issues"] * 6)]
    base = singles + [flow(i, scores=[1.0, 1.0]) for i in range(10)]
    cur = singles + [flow(i, passed=i >= 8, scores=[1.0, 0.0] if i < 8 else [1.0, 1.0],
                          first="list_issues" if i < 8 else "search_issues") for i in range(10)]
    before, after = report(base), report(cur)
    result = compare(make_baseline(before), after, metrics=METRICS)
    changes = by_metric(result)
    assert list(changes) == ["accuracy", "macro_f1", "pass_rate", "f1[get_me]", "f1[list_issues]",
                             "flow_pass_rate", "coverage"]  # no f1[search_issues] / f1[issue_read]: flow tools
    assert result.paired == {MODEL: 22}
    for metric in ("accuracy", "macro_f1", "pass_rate", "f1[get_me]", "f1[list_issues]"):
        c = changes[metric]
        assert (c["n"], c["discordant"], c["p_value"], c["diff"], c["drop"]) == (12, 0, 1.0, 0.0, False), metric
    assert changes["accuracy"]["after"] == after["models"][MODEL]["accuracy"] == 1.0  # the report's: flows left out
    passed, coverage = changes["flow_pass_rate"], changes["coverage"]
    assert (passed["before"], passed["after"]) == (1.0, after["models"][MODEL]["flows"]["pass_rate"]) == (1.0, 0.2)
    assert (coverage["before"], coverage["after"]) == (1.0, after["models"][MODEL]["claims"]["mean_coverage"]) \
        == (1.0, 0.6)
    for c in (passed, coverage):
        assert (c["n"], c["discordant"], c["p_value"], c["drop"]) == (10, 8, 2 / 2**8, True)
    assert result.failures() == [sentence(passed), sentence(coverage)]
    assert sentence(passed) == ("model gpt-5: flow_pass_rate dropped 1.000 -> 0.200 (-0.800, 95% CI [-1.000, "
                                 "-0.500], p = 0.0078, 8 of 10 paired flows changed)")
    assert sentence(coverage).endswith("p = 0.0078, 8 of 10 paired flows with claims changed)")
    # a flipped flow is one whose outcome (passed) changed, marked as a flow
    assert [f["case"] for f in result.flipped] == [f"{FLOW_FILE}::flow-{i:03d}[gpt-5]#0" for i in range(8)]
    assert all(f.get("flow") is True and f["before"] and not f["after"] for f in result.flipped)


def test_a_flow_whose_outcome_changed_is_flipped_even_when_its_first_call_did_not() -> None:
    base = [case(0, "get_me", "get_me"), flow(0)]
    cur = [case(0, "get_me", NONE), flow(0, passed=False)]
    flipped = compare(make_baseline(report(base)), report(cur)).flipped
    assert [(f["case"], f["before"], f["after"], f.get("flow")) for f in flipped] == [
        (f"{FLOW_FILE}::flow-000[gpt-5]#0", True, False, True),
        ("github.mcpeval.yaml::case-000[gpt-5]#0", True, False, None),
    ]


def test_only_the_families_a_model_has_are_compared() -> None:
    flows_only = [flow(i, passed=i % 2 == 0) for i in range(6)]  # no claims: no coverage either
    result = compare(make_baseline(report(flows_only)), report(flows_only))  # the default metrics
    assert [c["metric"] for c in result.changes] == ["flow_pass_rate"]
    singles = [case(i, "get_me", "get_me") for i in range(4)]
    result = compare(make_baseline(report(singles)), report(singles), metrics=METRICS)
    assert [c["metric"] for c in result.changes] == ["accuracy", "macro_f1", "pass_rate", "f1[get_me]"]
    # coverage pairs only flows with claims on both sides
    base = [flow(i, scores=[1.0] if i < 3 else None) for i in range(6)]
    cur = [flow(i, scores=[0.5] if i in (1, 2, 3) else None) for i in range(6)]
    (coverage,) = [c for c in compare(make_baseline(report(base)), report(cur)).changes if c["metric"] == "coverage"]
    assert (coverage["n"], coverage["before"], coverage["after"], coverage["discordant"]) == (2, 1.0, 0.5, 2)


@pytest.mark.parametrize("metric", ["flow_pass_rate", "coverage"])
def test_a_flow_drop_fails_with_six_changed_flows_and_passes_with_five(metric: str) -> None:
    for flips, fails in ((6, True), (5, False)):
        baseline, current = flow_runs(metric)(12, flips)
        result = compare(baseline, current, metrics=(metric,), margin=0.02)
        (change,) = result.changes
        assert change["discordant"] == flips and change["p_value"] == 2 / 2**flips
        assert change["diff"] is not None and change["diff"] < -0.02
        assert change["drop"] is fails and result.passed is not fails
        assert result.failures() == ([sentence(change)] if fails else [])


def test_a_large_coverage_drop_on_few_flows_is_not_significant() -> None:
    base = [flow(i, scores=[1.0, 1.0]) for i in range(4)]
    cur = [flow(i, scores=[0.0, 0.0] if i < 3 else [1.0, 1.0]) for i in range(4)]
    (change,) = compare(make_baseline(report(base)), report(cur), metrics=("coverage",)).changes
    assert (change["before"], change["after"], change["discordant"], change["p_value"]) == (1.0, 0.25, 3, 0.25)
    assert change["significant"] is False and change["drop"] is False


@pytest.mark.parametrize("gain,p_value", [(0.25, 0.03125), (1.0, 0.359375)])
def test_coverage_changes_weigh_by_their_size(gain: float, p_value: float) -> None:
    """docs/pull-requests.md: six flows lose 0.5 and one gains 0.25 (significant) or 1.0 (not); McNemar on the
    same six losses and one gain says 0.125 either way."""
    start, raised = ([0.0, 0.5], [0.5, 0.5]) if gain == 0.25 else ([0.0], [1.0])  # flow 6: coverage + gain
    base = [flow(i, scores=[1.0] if i < 6 else start if i == 6 else [0.0]) for i in range(10)]
    cur = [flow(i, scores=[0.5] if i < 6 else raised if i == 6 else [0.0]) for i in range(10)]
    (change,) = compare(make_baseline(report(base)), report(cur), metrics=("coverage",)).changes
    assert change["discordant"] == 7 and change["diff"] == pytest.approx((-3 + gain) / 10)
    assert change["p_value"] == p_value == pytest.approx(coverage_swap_reference(base, cur), abs=1e-12)
    assert change["drop"] is (p_value < 0.05) and mcnemar_exact(6, 1) == 0.125


def coverage_swap_reference(base: list[dict[str, Any]], cur: list[dict[str, Any]]) -> float:
    """p of the coverage test by brute force: swap whole flows in every way, recompute the report's mean coverage
    (scoring.flows.claims_metrics) on both sides."""
    from pytest_mcpeval.scoring.flows import claims_metrics

    def value(cases: list[dict[str, Any]]) -> float:
        metrics = claims_metrics(cases)  # type: ignore[arg-type]
        assert metrics is not None and metrics["mean_coverage"] is not None
        return metrics["mean_coverage"]

    changed = [i for i, (b, a) in enumerate(zip(base, cur, strict=True)) if b["coverage"] != a["coverage"]]
    observed = value(cur) - value(base)
    hits = 0
    for pattern in itertools.product([False, True], repeat=len(changed)):
        swap = {i for i, s in zip(changed, pattern, strict=True) if s}
        before = [cur[i] if i in swap else base[i] for i in range(len(base))]
        after = [base[i] if i in swap else cur[i] for i in range(len(base))]
        hits += abs(value(after) - value(before)) >= abs(observed) - 1e-12
    return hits / (1 << len(changed))


def random_claim_flows(seed: int, n: int, changed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``n`` flows with 1-4 claims scored 1 / 0.5 / 0; the first ``changed`` get new scores in the current run."""
    rng = np.random.default_rng(seed)

    def scores() -> list[float]:
        return [float(x) for x in rng.choice([0.0, 0.5, 1.0], size=int(rng.integers(1, 5)))]

    base = [flow(i, scores=scores()) for i in range(n)]
    cur = [flow(i, scores=scores()) if i < changed else dict(base[i]) for i in range(n)]
    return base, cur


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 5])
def test_exact_coverage_test_equals_swapping_flows(seed: int) -> None:
    base, cur = random_claim_flows(seed, 16, 12)
    (change,) = compare(make_baseline(report(base)), report(cur), metrics=("coverage",), resamples=500).changes
    assert change["discordant"] == sum(b["coverage"] != a["coverage"] for b, a in zip(base, cur, strict=True))
    reference = coverage_swap_reference(base, cur)
    assert change["p_value"] == pytest.approx(reference, abs=1e-12)
    scaled = change["p_value"] * 2**change["discordant"]
    assert scaled == pytest.approx(round(scaled))


def test_coverage_test_samples_patterns_when_there_are_too_many() -> None:
    """18 flows whose coverage changes by 18 different amounts: 2**18 combinations, beyond the 65,536 the test
    enumerates, so it draws 10,000 seeded sign patterns; it agrees with the exact share within sampling error."""
    rng = np.random.default_rng(5)
    ups = rng.random(18) < 0.3
    base, cur = [], []
    for i in range(18):
        high, low = [1.0], [1.0] * i + [0.0]  # coverage 1 and i / (i + 1): all differences distinct
        b, a = (low, high) if ups[i] else (high, low)
        base.append(flow(i, scores=b))
        cur.append(flow(i, scores=a))
    (change,) = compare(make_baseline(report(base)), report(cur), metrics=("coverage",)).changes
    assert change["discordant"] == 18
    assert change["p_value"] * 10001 == pytest.approx(round(change["p_value"] * 10001))  # (1 + hits) / (1 + resamples)
    d = np.array([a["coverage"] - b["coverage"] for b, a in zip(base, cur, strict=True)])
    signs = 1 - 2 * ((np.arange(1 << 18)[:, None] >> np.arange(18)) & 1)
    exact = float(np.mean(np.abs(signs @ d) / 18 >= abs(d.sum()) / 18 - 1e-12))
    assert abs(change["p_value"] - exact) < 4 * math.sqrt(exact * (1 - exact) / 10000) + 2 / 10001
    again = compare(make_baseline(report(base)), report(cur), metrics=("coverage",)).changes[0]
    assert again["p_value"] == change["p_value"]  # seeded


def test_make_baseline_keeps_what_the_flow_comparison_needs(tmp_path: Path) -> None:
    cases = [case(0, "get_me", "get_me"), flow(0, scores=[1.0, 0.5]), flow(1, passed=False)]
    rep = report(cases)
    baseline = make_baseline(rep)
    with_claims, without, single = baseline["cases"]  # in the report's order: by file, then id
    assert single["file"] == "github.mcpeval.yaml" and with_claims["id"] == "flow-000"
    assert "flow" not in single and "coverage" not in single
    assert (with_claims["flow"], with_claims["coverage"], with_claims["passed"]) == (True, 0.75, True)
    assert (without["flow"], without["coverage"], without["passed"]) == (True, None, False)
    assert baseline["models"][MODEL]["flow_pass_rate"] == 0.5 and baseline["models"][MODEL]["coverage"] == 0.75
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(baseline), encoding="utf-8")
    assert load_baseline(path) == baseline
    assert compare(load_baseline(path), rep) == compare(rep, rep)


@pytest.mark.parametrize("field,value,message", [
    ("flow", "yes", 'cases[1].flow: expected true or false, found "yes"'),
    ("coverage", "0.5", 'cases[1].coverage: expected a number, found "0.5"'),
    ("coverage", 1.5, "cases[1].coverage: expected a number between 0 and 1 or null, found 1.5"),
    ("coverage", True, "cases[1].coverage: expected a number, found true"),
])
def test_load_baseline_rejects_bad_flow_fields(tmp_path: Path, field: str, value: Any, message: str) -> None:
    baseline: Any = make_baseline(report([case(0, "get_me", "get_me"), flow(0, scores=[1.0])]))
    baseline["cases"][1][field] = value
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(baseline), encoding="utf-8")
    with pytest.raises(BaselineError, match=re.escape(message)):
        load_baseline(path)


OLD_BASELINE_CASE_FIELDS = ("file", "id", "model", "repeat", "correct", "passed", "expected_label", "called_label",
                            "error")


def test_a_baseline_without_flow_fields_still_loads_and_its_cases_are_single_calls(tmp_path: Path) -> None:
    """A baseline written before flows were marked: its cases are single calls.  Those the current run has as
    flows are compared in neither family (listed in kind_changed); the single calls compare as always."""
    singles_before = [case(i, "get_me", "get_me" if i < 2 else NONE) for i in range(8)]
    singles_after = [case(i, "get_me", NONE) for i in range(8)]
    old_flows = [flow(i) for i in range(8)]
    old: Any = make_baseline(report(singles_before + old_flows))
    old["cases"] = [{k: c[k] for k in OLD_BASELINE_CASE_FIELDS} for c in old["cases"]]
    old["models"] = {m: {k: v[k] for k in ("accuracy", "macro_f1", "pass_rate", "tools")}
                     for m, v in old["models"].items()}
    path = tmp_path / "old-baseline.json"
    path.write_text(json.dumps(old), encoding="utf-8")
    loaded = load_baseline(path)
    assert not any("flow" in c for c in loaded["cases"])
    current = report(singles_after + [flow(i, passed=False) for i in range(8)])
    result = compare(loaded, current, metrics=METRICS)
    assert result.kind_changed == [f"{FLOW_FILE}::flow-{i:03d}[gpt-5]#0" for i in range(8)]
    assert result.paired == {MODEL: 8} and result.excluded == []
    changes = by_metric(result)
    assert "flow_pass_rate" not in changes and "coverage" not in changes
    assert (changes["accuracy"]["n"], changes["accuracy"]["before"], changes["accuracy"]["after"]) == (8, 0.25, 0.0)
    assert len(result.flipped) == 2  # the two single calls, not the flows
    # an old baseline of single calls only compares exactly as before
    only_singles: Any = make_baseline(report(singles_before))
    assert compare(only_singles, report(singles_after)).changes == compare(
        report(singles_before), report(singles_after)).changes


def test_errors_of_flows_are_left_out() -> None:
    base = [flow(i) for i in range(8)]
    cur = [flow(i, passed=False) if i else flow(0, error="judge unreachable") for i in range(8)]
    result = compare(make_baseline(report(base)), report(cur))
    assert result.excluded == [f"{FLOW_FILE}::flow-000[gpt-5]#0"]
    (change,) = result.changes
    assert (change["metric"], change["n"], change["discordant"]) == ("flow_pass_rate", 7, 7)


# ------------------------------------------------------------------------ flows through the plugin

FLOW_TOOLS = [
    {"name": "search_issues", "description": "Full-text search over issues.",
     "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}},
]


def flow_bench(n: int) -> str:
    cases = "".join(
        f"  - id: reporter{i}\n"
        f"    input: who reported the login bug of repo r{i}?\n"
        f"    expect: [{{tool: search_issues}}]\n"
        f"    mocks:\n"
        f"      search_issues:\n"
        f"        - result: {{structured: {{items: [{{number: {40 + i}, author: alice}}]}}}}\n"
        f"    claims:\n"
        f"      - {{claim: Names the reporter, check: {{contains: alice}}}}\n"
        for i in range(n))
    return "server: {tools_file: tools.json}\ncases:\n" + cases


def script_flows(server: ScriptedModelServer, n: int, wrong: int) -> None:
    """Each flow searches, then answers; the first ``wrong`` answers miss the reporter (coverage 0)."""
    for i in range(n):
        answer = "I could not tell who reported it." if i < wrong else f"alice reported issue {40 + i}."
        server.flow(f"who reported the login bug of repo r{i}?",
                    [{"name": "search_issues", "arguments": {"query": f"login repo:r{i}"}}], answer)


@pytest.mark.parametrize("wrong,fails", [(6, True), (2, False)])
def test_fail_on_drop_gates_flows(pytester: pytest.Pytester, model_server: ScriptedModelServer, wrong: int,
                                  fails: bool) -> None:
    """Through the plugin: six of eight flows losing their claim fail the gate on flow_pass_rate and coverage;
    two do not (p = 0.5)."""
    make_project(pytester, model_server, {"flows.mcpeval.yaml": flow_bench(8)}, tools=FLOW_TOOLS)
    script_flows(model_server, 8, 0)
    assert run(pytester, "--mcp-models=fake", "--mcp-save-baseline=base.json").ret == 0
    assert {c.get("flow") for c in json.loads((pytester.path / "base.json").read_text())["cases"]} == {True}
    script_flows(model_server, 8, wrong)
    result = run(pytester, "--mcp-models=fake", "--mcp-compare=base.json", "--mcp-fail-on-drop=0.02",
                 "--mcp-report=report.json", "--mcp-record=off")
    comparison = read_report(pytester)["comparison"]
    changes = {c["metric"]: c for c in comparison["changes"]}
    assert list(changes) == ["flow_pass_rate", "coverage"]  # the default metrics; no single call to compare
    after = 1 - wrong / 8
    for metric in changes:
        assert (changes[metric]["before"], changes[metric]["after"]) == (1.0, after)
        assert changes[metric]["discordant"] == wrong and changes[metric]["p_value"] == 2 / 2**wrong
    assert len(comparison["flipped"]) == wrong and all(f["flow"] for f in comparison["flipped"])
    if fails:
        result.stdout.fnmatch_lines([
            "GATE FAILED model fake: flow_pass_rate dropped 1.000 -> 0.250 (-0.750, 95% CI [[]*[]], p = 0.0312, "
            "6 of 8 paired flows changed)",
            "GATE FAILED model fake: coverage dropped 1.000 -> 0.250 (-0.750, 95% CI [[]*[]], p = 0.0312, "
            "6 of 8 paired flows with claims changed)",
        ])
        assert result.ret == 1
    else:
        assert "GATE FAILED" not in result.stdout.str() and comparison["drops"] == []
        assert result.ret == 0


# -- --mcp-drop-correction=holm: each model's changes one family, Holm's step-down, Tarone's screening ----------

def _change(metric: str, p: float, discordant: int, diff: float | None = -0.2) -> Any:
    from pytest_mcpeval.results import MetricChange

    change: MetricChange = {
        "model": MODEL, "metric": metric, "before": 0.9, "after": None if diff is None else 0.9 + diff, "diff": diff,
        "ci_low": None, "ci_high": None, "p_value": p, "n": 40, "significant": p < 0.05,
        "drop": p < 0.05 and diff is not None and diff < -0.02,
        "improvement": p < 0.05 and diff is not None and diff > 0.02,
        "level": 0.05, "discordant": discordant, "p_adjusted": None}
    return change


def test_holm_by_hand() -> None:
    """Three changes could be significant (6 or more discordant cases), one cannot (3: at best p = 0.25), one is
    not comparable.  m = 3: 0.01 -> 0.03, 0.03 -> max(0.03, 2 x 0.03) = 0.06, 0.04 -> max(0.06, 0.04) = 0.06."""
    from pytest_mcpeval.gate.compare import holm

    a, b, c = _change("accuracy", 0.01, 8), _change("macro_f1", 0.04, 7), _change("f1[x]", 0.03, 6)
    d, e = _change("f1[y]", 0.5, 3), _change("f1[z]", 1.0, 0, diff=None)
    holm([a, b, c, d, e], 0.05, 0.02)
    assert [x["p_adjusted"] for x in (a, b, c, d, e)] == pytest.approx([0.03, 0.06, 0.06, 0.5, 1.0])
    assert (a["significant"], a["drop"]) == (True, True)
    assert not any(x["significant"] or x["drop"] for x in (b, c, d, e))


def test_holm_rejects_what_the_step_down_rule_rejects() -> None:
    """Seeded: on random families the adjusted p-values below the level are exactly Holm's rejections as the
    rule states them (the i-th smallest p is compared with level / (m - i + 1), stopping at the first that is not
    below), and screening leaves out exactly the changes of fewer than six discordant cases."""
    from pytest_mcpeval.gate.compare import holm

    rng = np.random.default_rng(20261130)
    for _ in range(2_000):
        size = int(rng.integers(1, 12))
        discordant = [int(rng.integers(0, 12)) for _ in range(size)]
        drawn = [float(rng.choice([rng.uniform(0, 0.06), rng.uniform(0, 1)])) for _ in range(size)]
        family = [_change(f"f1[t{i}]", max(2.0 ** (1 - d), p), d)  # an exact test's p is at least 2 / 2**d
                  for i, (d, p) in enumerate(zip(discordant, drawn, strict=True))]
        raw = {x["metric"]: (x["p_value"], x["discordant"]) for x in family}
        holm(family, 0.05, 0.02)
        testable = sorted((p, m) for m, (p, d) in raw.items() if d >= 6)
        rejected: set[str] = set()
        for i, (p, metric) in enumerate(testable):
            if not p < 0.05 / (len(testable) - i):
                break
            rejected.add(metric)
        assert {x["metric"] for x in family if x["significant"]} == rejected
        assert all(x["p_adjusted"] == raw[x["metric"]][0] for x in family if raw[x["metric"]][1] < 6)


def test_with_holm_a_drop_seen_by_one_metric_of_many_needs_more_evidence() -> None:
    """Eight of ten git_status cases call git_diff: five changes (accuracy, pass rate, macro F1 and two tools'
    F1) each at p = 2 / 2**8.  Uncorrected all five are drops; with Holm each is adjusted to 5 x 0.0078 = 0.039,
    still drops.  Six flips: p = 0.03125 each, drops uncorrected, none after Holm (5 x 0.03125 > 0.05)."""
    baseline, current = tool_runs(10, 8)
    result = compare(baseline, current, metrics=METRICS, correction="holm")
    changes = by_metric(result)
    assert result.correction == "holm" and len(result.failures()) == 5
    assert changes["accuracy"]["p_adjusted"] == pytest.approx(5 * 2 / 2**8)
    assert sentence(changes["accuracy"]).endswith("p = 0.0078, Holm-adjusted p = 0.0391, 8 of 22 paired cases "
                                                   "changed)")
    baseline, current = tool_runs(10, 6)
    assert len(compare(baseline, current, metrics=METRICS).failures()) == 5
    held = compare(baseline, current, metrics=METRICS, correction="holm")
    assert held.passed and held.failures() == []
    assert by_metric(held)["accuracy"]["p_adjusted"] == pytest.approx(min(1.0, 5 * 2 / 2**6))
    assert all(c["p_adjusted"] is None for c in compare(baseline, current, metrics=METRICS).changes)
    with pytest.raises(ValueError, match="unknown correction 'bonferroni'"):
        compare(baseline, current, correction="bonferroni")
