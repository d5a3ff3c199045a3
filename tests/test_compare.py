"""compare: baseline files, paired tests (exact McNemar, paired bootstrap) and the Markdown summary."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import binomtest

from pytest_mcpeval.compare import (
    BASELINE_VERSION,
    BaselineError,
    Comparison,
    _columns,
    _Side,
    _stats,
    bootstrap_summary,
    changed_tools,
    compare,
    load_baseline,
    make_baseline,
    markdown,
    mcnemar_exact,
)
from pytest_mcpeval.report.model import build_report
from pytest_mcpeval.scoring.case import NONE
from pytest_mcpeval.scoring.metrics import model_metrics, sort_labels

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


def report(cases: list[dict[str, Any]]) -> dict[str, Any]:
    return build_report(cases, catalogs={}, model_order=[MODEL])


def catalog(description: str) -> dict[str, Any]:
    return {
        "list_issues": {"hash": hashlib.sha256(description.encode()).hexdigest()[:16], "description": description},
        "get_me": {"hash": "h-get-me", "description": "Get the authenticated user."},
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
    assert (change.before, change.after, change.n) == (0.95, 0.8, 40)
    assert change.diff == pytest.approx(-0.15)
    assert change.p_value == 2 * 0.5**6 == 0.03125
    assert change.significant and change.drop and not change.improvement
    assert result.failures() == [
        "model gpt-5: accuracy dropped 0.950 -> 0.800 (-0.150, 95% CI [-0.275, -0.050], p = 0.0312, "
        "n = 40 paired cases)"
    ]
    assert not result.passed
    assert [f["case"] for f in result.flipped] == [f"github.mcpeval.yaml::case-{i:03d}[gpt-5]#0" for i in range(6)]
    assert all(f["before"] is True and f["after"] is False for f in result.flipped)
    assert {f["called_after"] for f in result.flipped} == {"search_issues"}


def test_description_change_default_metrics() -> None:
    before, after = description_change_runs()
    result = compare(make_baseline(before), after)
    by_metric = {c.metric: c for c in result.changes}
    assert list(by_metric) == ["accuracy", "macro_f1", "f1[get_me]", "f1[list_issues]", "f1[search_issues]",
                               "f1[(none)]"]
    assert by_metric["macro_f1"].before == pytest.approx(before["models"][MODEL]["macro_f1"])
    assert by_metric["macro_f1"].after == pytest.approx(after["models"][MODEL]["macro_f1"])
    assert by_metric["f1[list_issues]"].drop
    assert not by_metric["f1[get_me]"].significant and by_metric["f1[get_me]"].p_value == 1.0
    new = by_metric["f1[search_issues]"]  # never expected, and called only after: not comparable
    assert (new.before, new.after, new.diff, new.significant) == (None, 0.0, None, False)
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
    assert accuracy.metric == "accuracy" and accuracy.diff == pytest.approx(-0.05)
    assert accuracy.p_value == 1.0  # b = 2, c = 1
    assert not any(c.significant for c in result.changes)
    assert result.failures() == [] and result.passed
    assert len(result.flipped) == 3


def test_improvement_is_reported_not_failed() -> None:
    before, after = description_change_runs()
    result = compare(make_baseline(after), before, metrics=("accuracy", "macro_f1"))
    assert result.failures() == []
    assert [c.metric for c in result.improvements()] == ["accuracy", "macro_f1"]
    assert result.improvements()[0].sentence().startswith("model gpt-5: accuracy rose 0.800 -> 0.950 (+0.150,")


def test_margin_keeps_significant_small_changes_from_failing() -> None:
    before, after = description_change_runs()
    result = compare(make_baseline(before), after, metrics=("accuracy",), margin=0.2)
    assert result.changes[0].significant and not result.changes[0].drop
    assert result.failures() == []


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
        for value, rep in ((change.before, before), (change.after, after)):
            m = rep["models"][MODEL]
            if change.metric.startswith("f1["):
                tool = m["tools"].get(change.metric[3:-1])
                assert value == (None if tool is None else pytest.approx(tool["f1"], abs=1e-12))
            else:
                assert value == pytest.approx(m[change.metric], abs=1e-12)


# ---------------------------------------------------------------------------------------- bootstrap


def test_bootstrap_is_deterministic_and_covers_the_observed_diff() -> None:
    base = [case(i, e, c) for i, (e, c) in enumerate(random_cases(4, 200, flip=0.2))]
    cur = [case(i, e, c) for i, (e, c) in enumerate(random_cases(4, 200, flip=0.35))]
    first = compare(make_baseline(report(base)), report(cur), seed=7, resamples=2000)
    again = compare(make_baseline(report(base)), report(cur), seed=7, resamples=2000)
    other = compare(make_baseline(report(base)), report(cur), seed=8, resamples=2000)
    assert first == again
    assert [(c.ci_low, c.ci_high) for c in first.changes] != [(c.ci_low, c.ci_high) for c in other.changes]
    for change in first.changes:
        if change.metric in ("accuracy", "macro_f1"):
            assert change.diff is not None and change.ci_low is not None and change.ci_high is not None
            assert change.ci_low <= change.diff <= change.ci_high
            assert change.ci_low < change.ci_high


def test_bootstrap_summary() -> None:
    assert bootstrap_summary(np.zeros(100), 0.05) == (0.0, 0.0, 1.0)
    assert bootstrap_summary(np.full(10, np.nan), 0.05) == (None, None, 1.0)
    diffs = np.array([-0.3] * 90 + [0.1] * 10)
    low, high, p = bootstrap_summary(diffs, 0.05)
    assert low == pytest.approx(-0.3) and high == pytest.approx(0.1)
    assert p == pytest.approx(0.2)  # 2 * share >= 0
    assert bootstrap_summary(np.full(50, -0.1), 0.05)[2] == 0.0


def test_large_comparison_runs() -> None:
    labels = [f"tool_{k:02d}" for k in range(39)] + [NONE]
    rng = np.random.default_rng(0)
    expected = [str(x) for x in rng.choice(labels, size=1000)]
    base = [case(i, e, e if rng.random() < 0.8 else str(rng.choice(labels))) for i, e in enumerate(expected)]
    cur = [case(i, e, e if rng.random() < 0.8 else str(rng.choice(labels))) for i, e in enumerate(expected)]
    result = compare(make_baseline(report(base)), report(cur), resamples=10000)
    assert len(result.changes) == 2 + 40
    assert result.paired == {MODEL: 1000}


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
    assert {c.n for c in result.changes} == {4}
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
    assert set(baseline["models"][MODEL]) == {"accuracy", "macro_f1", "pass_rate", "tools"}
    assert set(baseline["cases"][0]) == {"file", "id", "model", "repeat", "correct", "passed", "expected_label",
                                         "called_label", "error"}
    assert baseline["catalogs"] == before["catalogs"]
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(baseline), encoding="utf-8")
    loaded = load_baseline(path)
    assert loaded == baseline
    assert compare(loaded, after) == compare(baseline, after) == compare(before, after)
    same = compare(loaded, before)
    assert same.passed and not same.flipped and all(c.p_value == 1.0 for c in same.changes)


@pytest.mark.parametrize(
    "content,message",
    [
        (None, "baseline file not found: "),
        ("{not json", "is not valid JSON: Expecting property name enclosed in double quotes (line 1 column 2)"),
        ("[1, 2]", "expected a JSON object of kind 'pytest-mcpeval-baseline', found list"),
        ('{"version": 1, "models": {}, "cases": []}', "expected kind 'pytest-mcpeval-baseline', found None"),
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
    assert changed_tools(baseline, after) == {"list_issues": (OLD_DESCRIPTION, NEW_DESCRIPTION)}
    text = markdown(result, baseline, after)
    lines = text.splitlines()
    assert lines[2].startswith("❌ **3 significant drops**")
    assert f"- {result.failures()[0]}" in lines
    assert "| metric | before | after | change | 95% CI | p | |" in lines
    assert "| accuracy | 0.950 | 0.800 | -0.150 | [-0.275, -0.050] | 0.0312 | 🔻 |" in lines
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
    assert "| metric | before | after | change | 90% CI | p | |" in text
    assert "90% CI [" in result.failures()[0]
    assert "definition of get_me changed (description unchanged" in text
    assert "description of list_issues changed" not in text
    assert "| ✏️ `get_me` |" in text


def test_changed_tools_reads_the_server_tools_tokens_form() -> None:
    before, after = description_change_runs()
    before["catalogs"] = {"aaaa": {"server": "github", "tools": catalog(OLD_DESCRIPTION), "tokens": 120}}
    after["catalogs"] = {"bbbb": {"server": "github", "tools": catalog(NEW_DESCRIPTION), "tokens": 118}}
    assert changed_tools(make_baseline(before), after) == {"list_issues": (OLD_DESCRIPTION, NEW_DESCRIPTION)}
    assert changed_tools(before, before) == {}
