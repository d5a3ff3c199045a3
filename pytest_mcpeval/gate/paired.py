"""The statistics of a comparison on paired cases: per-case columns, the paired bootstrap, the exact tests of
each metric and Holm's adjustment (the method is in :mod:`pytest_mcpeval.gate.compare`'s docstring).  Each
change is a :class:`~pytest_mcpeval.results.MetricChange`, the record the report stores.  Pure."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_mcpeval.gate.significance import mcnemar_exact, permutation_test, sign_flip_test
from pytest_mcpeval.results import MetricChange
from pytest_mcpeval.results.case import NONE
from pytest_mcpeval.scoring.bootstrap import bootstrap_interval, resampled_sums
from pytest_mcpeval.scoring.metrics import f1_scores, macro_f1, sort_labels

LABEL_METRICS = ("macro_f1", "tool_f1")  # tested over the labels (label_changes); the others are means


@dataclass
class _Side:
    correct: Any  # float arrays of shape (n,)
    passed: Any
    expected: Any  # int arrays of label indices, shape (n,)
    called: Any


def _columns(side: _Side, n_labels: int) -> Any:
    """Per-case columns whose resample-weighted sums give every count: correct, passed, tp[L], support[L],
    predicted[L]."""
    import numpy as np

    eye = np.eye(n_labels)
    exp = eye[side.expected]
    cal = eye[side.called]
    tp = exp * (side.expected == side.called)[:, None]
    return np.column_stack([side.correct, side.passed, tp, exp, cal])


def _stats(counts: Any, n: int, n_labels: int, include: Any = None) -> dict[str, Any]:
    """Metric arrays of shape (rows,) or (rows, labels) from weighted count rows (see ``_columns``);
    ``include``, a boolean mask over the labels, is the labels macro F1 averages over (``None``: all)."""
    tp = counts[:, 2:2 + n_labels]
    support = counts[:, 2 + n_labels:2 + 2 * n_labels]
    predicted = counts[:, 2 + 2 * n_labels:]
    f1 = f1_scores(tp, support, predicted)
    return {"accuracy": counts[:, 0] / n, "pass_rate": counts[:, 1] / n, "macro_f1": macro_f1(f1, include),
            "f1": f1}


def case_rows(cols: Any, sizes: Sequence[int]) -> Any:
    """One row per case from one row per repeat (``cols``, the repeats of each case consecutive, ``sizes`` of
    them per case): the mean of its repeats' rows.  With one repeat per case, ``cols`` itself."""
    import numpy as np

    if all(size == 1 for size in sizes):
        return cols
    sizes_arr = np.asarray(sizes, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes_arr)[:-1]])
    return np.add.reduceat(cols, starts, axis=0) / sizes_arr[:, None]


def bootstrap_metrics(cols_before: Any, cols_after: Any, n_labels: int, resamples: int, seed: int,
                      include: Any = None) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Observed and resampled metrics on both sides from per-case columns (:func:`_columns`, averaged over each
    case's repeats by :func:`case_rows`): ``(observed_before, observed_after, boot_before, boot_after)``; each
    resample draws paired case indices with replacement (the same for both sides), so a case's repeats are
    resampled together.  ``include`` as in :func:`_stats`."""
    import numpy as np

    n = len(cols_before)
    cols = np.hstack([cols_before, cols_after])
    width = cols.shape[1] // 2
    observed = cols.sum(axis=0)[None, :]
    boot = resampled_sums(cols, resamples, seed)
    return (_stats(observed[:, :width], n, n_labels, include), _stats(observed[:, width:], n, n_labels, include),
            _stats(boot[:, :width], n, n_labels, include), _stats(boot[:, width:], n, n_labels, include))


def _f1_boot_diffs(before: Any, after: Any) -> Any:
    """Resampled ``f1[TOOL]`` diffs: 0 where the resample holds none of the tool's cases (undefined on both
    sides: nothing about the tool changed), NaN (left out) where it is undefined on one side only."""
    import numpy as np

    return np.where(np.isnan(before) & np.isnan(after), 0.0, after - before)


def _label_columns(i: int, n_labels: int) -> list[int]:
    """The tp, support and predicted columns of label ``i`` in ``_columns``."""
    return [2 + i, 2 + n_labels + i, 2 + 2 * n_labels + i]


def _f1_stat(counts: Any) -> Any:
    return f1_scores(counts[:, 0], counts[:, 1], counts[:, 2])


def _macro_stat(n_labels: int, include: Any = None) -> Callable[[Any], Any]:
    """Macro F1 of count rows ``tp[L], support[L], predicted[L]`` over the labels ``include`` keeps."""
    def stat(counts: Any) -> Any:
        return macro_f1(f1_scores(counts[:, :n_labels], counts[:, n_labels:2 * n_labels], counts[:, 2 * n_labels:]),
                        include)
    return stat


def _change(model: str, metric: str, before: Any, after: Any, boot_diffs: Any, n: int, margin: float,
            level: float, test: tuple[float, int]) -> MetricChange:
    """The change of one metric: its values on both sides, the interval of the resampled differences, the
    verdict of the exact test ``test`` (p-value, discordant cases)."""
    import numpy as np

    b = None if np.isnan(before) else float(before)
    a = None if np.isnan(after) else float(after)
    p, discordant = test
    if a is None or b is None:
        return _record(model, metric, b, a, None, None, None, 1.0, n, False, False, False, level, discordant)
    diff = a - b
    low, high = bootstrap_interval(boot_diffs, level)
    significant = p < level
    return _record(model, metric, b, a, diff, low, high, p, n, significant, significant and diff < -margin,
                   significant and diff > margin, level, discordant)


def _record(model: str, metric: str, before: float | None, after: float | None, diff: float | None,
            ci_low: float | None, ci_high: float | None, p_value: float, n: int, significant: bool, drop: bool,
            improvement: bool, level: float, discordant: int) -> MetricChange:
    return {"model": model, "metric": metric, "before": before, "after": after, "diff": diff, "ci_low": ci_low,
            "ci_high": ci_high, "p_value": p_value, "n": n, "significant": significant, "drop": drop,
            "improvement": improvement, "level": level, "discordant": discordant, "p_adjusted": None}


def holm(family: list[MetricChange], level: float, margin: float) -> None:
    """Holm's step-down adjustment of the p-values of ``family`` (one model's changes), in place: the ``i``-th
    smallest of the ``m`` p-values becomes ``max over j <= i of min(1, (m - j + 1) * p_j)``, and a change is
    significant when that is below ``level``.  ``m`` counts only the changes that could be significant at
    ``level`` unadjusted (``2 / 2**discordant <= level``, the best p-value of the exact tests); the others keep
    their p-value, which is above the level anyway (Tarone's screening of untestable hypotheses)."""
    testable = [c for c in family if c["diff"] is not None and 2.0 ** (1 - c["discordant"]) <= level]
    m = len(testable)
    running = 0.0
    for rank, change in enumerate(sorted(testable, key=lambda c: (c["p_value"], c["metric"]))):
        running = max(running, min(1.0, (m - rank) * change["p_value"]))
        change["p_adjusted"] = running
    for change in family:
        adjusted = change["p_adjusted"]
        if adjusted is None:
            adjusted = change["p_adjusted"] = change["p_value"]
        diff = change["diff"]
        change["significant"] = diff is not None and adjusted < level
        change["drop"] = change["significant"] and diff is not None and diff < -margin
        change["improvement"] = change["significant"] and diff is not None and diff > margin


def label_changes(model: str, model_pairs: Sequence[tuple[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]]]],
                  metrics: Sequence[str], known: set[str] | None, margin: float, level: float, resamples: int,
                  seed: int) -> dict[str, list[MetricChange]]:
    """``macro_f1`` and ``tool_f1`` of one model over its paired single-call cases (each side: the case's repeats),
    tested by the swap test over the labels: metric -> changes (``tool_f1``: one per label).  A case is one row of
    counts, the mean of its repeats' rows, so a swap moves all its repeats together."""
    import numpy as np

    out: dict[str, list[MetricChange]] = {}
    if not metrics:
        return out
    n = len(model_pairs)
    repeats = [c for pair in model_pairs for side in pair for c in side]
    labels = sort_labels(str(c.get(key) or NONE) for c in repeats for key in ("expected_label", "called_label"))
    index = {label: i for i, label in enumerate(labels)}
    expected = {str(c.get("expected_label") or NONE) for c in repeats}
    include = None if known is None else np.array([x in known or x in expected for x in labels], dtype=bool)

    def side(cases: list[Mapping[str, Any]]) -> _Side:
        return _Side(
            correct=np.array([bool(c["correct"]) for c in cases], dtype=np.float64),
            passed=np.array([bool(c.get("passed")) for c in cases], dtype=np.float64),
            expected=np.array([index[str(c.get("expected_label") or NONE)] for c in cases], dtype=np.int64),
            called=np.array([index[str(c.get("called_label") or NONE)] for c in cases], dtype=np.int64),
        )

    cols_b, cols_a = (case_rows(_columns(side([c for pair in model_pairs for c in pair[i]]), len(labels)),
                                [len(pair[i]) for pair in model_pairs]) for i in (0, 1))
    ob, oa, bb, ba = bootstrap_metrics(cols_b, cols_a, len(labels), resamples, seed, include)
    for metric in metrics:
        if metric == "macro_f1":
            test = permutation_test(cols_b[:, 2:], cols_a[:, 2:], _macro_stat(len(labels), include), resamples, seed)
            out[metric] = [_change(model, metric, ob[metric][0], oa[metric][0], ba[metric] - bb[metric], n,
                                   margin, level, test)]
        else:  # tool_f1
            out[metric] = []
            for i, label in enumerate(labels):
                cols = _label_columns(i, len(labels))
                test = permutation_test(cols_b[:, cols], cols_a[:, cols], _f1_stat, resamples, seed)
                out[metric].append(_change(model, f"f1[{label}]", ob["f1"][0, i], oa["f1"][0, i],
                                           _f1_boot_diffs(bb["f1"][:, i], ba["f1"][:, i]), n, margin, level, test))
    return out


def mean_change(model: str, metric: str, kind: str, values: list[list[float]], margin: float, level: float,
                resamples: int, seed: int, clustered: bool = False) -> MetricChange:
    """A metric that is a mean over paired cases (the registry's ``Paired``), ``values`` one ``[before, after]``
    per case (each the mean over the case's repeats): 0/1 outcomes tested by the exact McNemar test
    (``kind="mcnemar"``: accuracy, pass_rate, flow_pass_rate) or a continuous value by the exact sign-flip test of
    the per-case differences (``"sign_flip"``: coverage); the interval from the paired bootstrap over cases.
    ``clustered`` (some case has more than one repeat): the per-case outcomes are shares, so McNemar's closed
    form gives way to the sign-flip test, which on 0/1 values gives the same p-value."""
    import numpy as np

    cols = np.array(values, dtype=np.float64).reshape(len(values), 2)
    n = len(cols)
    if kind == "mcnemar" and not clustered:
        worse = int(np.sum((cols[:, 0] == 1) & (cols[:, 1] == 0)))
        better = int(np.sum((cols[:, 0] == 0) & (cols[:, 1] == 1)))
        test = (mcnemar_exact(worse, better), worse + better)
    else:
        test = sign_flip_test(cols[:, 0], cols[:, 1], resamples, seed)
    boot = resampled_sums(cols, resamples, seed) / n
    observed = cols.sum(axis=0) / n
    return _change(model, metric, observed[0], observed[1], boot[:, 1] - boot[:, 0], n, margin, level, test)
