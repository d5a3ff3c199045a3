"""Aggregate metrics for one model over its case results (definitions in docs/metrics.md).

These are the single-call family: a multi-step flow (``flow`` in its result) is left out of every number
here except the counts ``cases`` / ``scored`` / ``errors`` and ``diagnoses`` (scoring.flows has the flow
family).  Tool selection is multi-class classification: one class per tool plus ``(none)``; the labels are the
union of expected and called labels.  A tool name the model invented (not in the catalog it was shown:
``hallucinated_tools`` of a case) is a label of its own in the confusion matrix, counted against the
expected tool's recall and against accuracy, but macro F1 averages over the real labels only (the
catalog's tools expected or called, and ``(none)``): see :func:`invented_labels`.

A quantity with no data is ``None`` (JSON ``null``), never 0: a gate must tell "nothing measured" from
"all wrong".  Values are plain Python floats (numpy scalars do not cross the xdist channel and are not
JSON).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pytest_mcpeval.results import ArgumentRates, CaseResult, ConfusedPair, Confusion, SelectionMetrics, ToolMetrics
from pytest_mcpeval.scoring.case import NONE

ARGUMENT_METRICS = {
    "hallucination_rate": "hallucination",
    "all_expected_rate": "all_expected",
    "all_required_rate": "all_required",
    "exact_match_rate": "exact",
}


def sort_labels(labels: Iterable[str]) -> list[str]:
    """Tools alphabetically, ``(none)`` last."""
    found = set(labels)
    return sorted(found - {NONE}) + ([NONE] if NONE in found else [])


def _ratio(num: float, den: float) -> float | None:
    return float(num) / float(den) if den else None


_ARGUMENT_KEYS = tuple(ARGUMENT_METRICS.values())
_Counts = tuple[int, list[int], list[int]]  # checks evaluated, hits and totals per metric


def _argument_counts(cases: Iterable[CaseResult]) -> _Counts:
    hits = [0] * len(_ARGUMENT_KEYS)
    totals = [0] * len(_ARGUMENT_KEYS)
    evaluated = 0
    for c in cases:
        a = c.get("arguments")
        if a is None:
            continue
        evaluated += 1
        for i, key in enumerate(_ARGUMENT_KEYS):
            value = a.get(key)
            if value is not None:
                totals[i] += 1
                hits[i] += bool(value)
    return evaluated, hits, totals


def _argument_rates(counts: _Counts) -> ArgumentRates:
    evaluated, hits, totals = counts
    rates = dict(zip(ARGUMENT_METRICS, (_ratio(h, t) for h, t in zip(hits, totals, strict=True)), strict=True))
    return {"evaluated": evaluated, "hallucination_rate": rates["hallucination_rate"],
            "all_expected_rate": rates["all_expected_rate"], "all_required_rate": rates["all_required_rate"],
            "exact_match_rate": rates["exact_match_rate"]}


def argument_rates(cases: Sequence[CaseResult]) -> ArgumentRates:
    """The four argument metrics over correctly selected cases that expected a tool."""
    return _argument_rates(_argument_counts(cases))


def f1_scores(tp: Any, support: Any, predicted: Any) -> Any:
    """Per-label F1 = 2TP / (2TP + FP + FN) = 2TP / (support + predicted), NaN where undefined (a label
    neither expected nor called).  Vectorised: any array shapes that broadcast, e.g. (resamples, labels)."""
    import numpy as np

    den = np.asarray(support, dtype=float) + predicted
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, 2 * np.asarray(tp, dtype=float) / np.where(den > 0, den, 1), np.nan)


def macro_f1(f1: Any, include: Any = None) -> Any:
    """Mean F1 over the defined labels (last axis); NaN when none is defined.  ``include``, a boolean mask
    over the labels, leaves the others out (the invented tool names: :func:`invented_labels`)."""
    import numpy as np

    defined = ~np.isnan(f1)
    if include is not None:
        defined &= np.asarray(include, dtype=bool)
    count = defined.sum(axis=-1)
    total = np.where(defined, f1, 0.0).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(count > 0, total / np.where(count > 0, count, 1), np.nan)


def invented_labels(cases: Iterable[CaseResult]) -> set[str]:
    """Called labels that are tool names the model invented: called where the case's catalog lacks them
    (``hallucinated_tools``), and never expected nor called as a real tool by any of ``cases``."""
    invented: set[str] = set()
    real: set[str] = set()
    for c in cases:
        called = c.get("called_label")
        expected = c.get("expected_label")
        if expected is not None:
            real.add(expected)
        if called is not None:
            (invented if called in (c.get("hallucinated_tools") or ()) else real).add(called)
    return invented - real


def _value(x: Any) -> float | None:
    """A numpy scalar as a plain float, NaN as None (a report never holds numpy values or NaN)."""
    value = float(x)
    return None if value != value else value


def confusion(expected: Sequence[str], called: Sequence[str], labels: Sequence[str]) -> Confusion:
    """The confusion matrix, rows expected, columns called, stored sparse: the ``diagonal`` (one count per label)
    and the ``off_diagonal`` cells that are not empty, ``[row, column, count]`` in row-major order (indices into
    ``labels``).  A run over a catalog of 2,000 tools holds a few hundred such cells, not 4 million."""
    index = {label: i for i, label in enumerate(labels)}
    diagonal = [0] * len(labels)
    off: list[tuple[int, int, int]] = []
    for (e, c), count in Counter(zip(expected, called, strict=True)).items():
        i, j = index[e], index[c]
        if i == j:
            diagonal[i] = count
        else:
            off.append((i, j, count))
    off.sort()
    return {"labels": list(labels), "diagonal": diagonal, "off_diagonal": off}


def dense_matrix(confusion: Mapping[str, Any]) -> list[list[int]]:
    """The full matrix of a report's ``confusion``, rows expected, columns called: from the sparse form of report
    version 2, or the ``matrix`` that reports of version 1 held.  For reading a report; ``len(labels)`` squared
    cells, so nothing in the plugin calls it on a run's own data."""
    if "matrix" in confusion:
        return [[int(v) for v in row] for row in confusion["matrix"]]
    n = len(confusion["labels"])
    matrix = [[0] * n for _ in range(n)]
    for i, count in enumerate(confusion["diagonal"]):
        matrix[i][i] = int(count)
    for i, j, count in confusion["off_diagonal"]:
        matrix[i][j] = int(count)
    return matrix


def _tool_metrics(labels: list[str], tp: list[int], support: list[int], predicted: list[int],
                  f1_all: list[float | None], counts: dict[str, _Counts]) -> dict[str, ToolMetrics]:
    """Per label: precision, recall, F1, support, predicted and the argument rates of its right calls."""
    return {label: {
        "precision": _ratio(tp[i], predicted[i]),
        "recall": _ratio(tp[i], support[i]),
        "f1": f1_all[i],
        "support": support[i],
        "predicted": predicted[i],
        "arguments": _argument_rates(counts[label]),
    } for i, label in enumerate(labels)}


def confused_pairs(confusion: Confusion) -> list[ConfusedPair]:
    """Every off-diagonal cell of the confusion matrix that is not empty, most frequent first."""
    labels = confusion["labels"]
    pairs: list[ConfusedPair] = [{"expected": labels[i], "called": labels[j], "count": count}
                                 for i, j, count in confusion["off_diagonal"]]
    pairs.sort(key=lambda p: (-p["count"], p["expected"], p["called"]))
    return pairs


def model_metrics(cases: Sequence[CaseResult]) -> SelectionMetrics:
    """The single-call metrics of one model; ``cases`` are result dicts of that model (errors included).

    ``cases``, ``scored``, ``errors`` and ``diagnoses`` count both families; every other number is over the
    scored single-call cases only (multi-step flows have theirs in scoring.flows).  Plain Python: a
    replay or a gate does not import numpy for this (the bootstraps of the comparison and the HTML page do)."""
    errors = every = passed = blocked = 0
    scored: list[CaseResult] = []
    expected: list[str] = []
    called: list[str] = []
    right_by_label: dict[str, list[CaseResult]] = {}
    diagnoses: Counter[str] = Counter()
    hallucinated: Counter[str] = Counter()
    for c in cases:  # one pass: a report of 100,000 results is built in well under a second
        if c.get("error"):
            errors += 1
            blocked += 1 if c.get("blocked") else 0  # withheld by the provider's safety filter
            continue
        if c.get("correct") is None:
            continue
        every += 1
        if diagnosis := c.get("diagnosis"):
            diagnoses[diagnosis] += 1  # both families
        if c.get("flow"):
            continue
        scored.append(c)
        label = c["expected_label"] or NONE
        expected.append(label)
        called.append(c["called_label"] or NONE)
        if c.get("passed"):
            passed += 1
        if c["correct"]:
            right_by_label.setdefault(label, []).append(c)
        if invented_here := c.get("hallucinated_tools"):
            hallucinated.update(invented_here)
    invented = invented_labels(scored)
    labels = sort_labels([*expected, *called])
    matrix = confusion(expected, called, labels)
    n = len(labels)
    tp = list(matrix["diagonal"])
    support = list(tp)
    predicted = list(tp)
    for i, j, count in matrix["off_diagonal"]:
        support[i] += count
        predicted[j] += count

    counts = {label: _argument_counts(right_by_label.get(label, ())) for label in labels}  # one pass in all
    f1_all = [2.0 * tp[i] / (support[i] + predicted[i]) if support[i] + predicted[i] else None for i in range(n)]
    tools = _tool_metrics(labels, tp, support, predicted, f1_all, counts)
    total_support = sum(support)
    weighted = (sum((f1_all[i] or 0.0) * support[i] for i in range(n)) / total_support if total_support else None)
    macro = [f for f, label in zip(f1_all, labels, strict=True) if f is not None and label not in invented]
    pairs = confused_pairs(matrix)
    return {
        "cases": len(cases),
        "scored": every,
        "errors": errors,
        "blocked": blocked,
        "accuracy": _ratio(sum(tp), len(scored)),
        "pass_rate": _ratio(passed, len(scored)),
        "macro_f1": sum(macro) / len(macro) if macro else None,
        "weighted_f1": weighted,
        "tools": tools,
        "confusion": matrix,
        "confused_pairs": pairs,
        "arguments": _argument_rates((sum(n for n, _, _ in counts.values()),  # the sums of the labels' counts
                                      [sum(h[i] for _, h, _ in counts.values()) for i in range(len(_ARGUMENT_KEYS))],
                                      [sum(t[i] for _, _, t in counts.values()) for i in range(len(_ARGUMENT_KEYS))])),
        "diagnoses": dict(sorted(diagnoses.items())),
        "hallucinated_tools": dict(sorted(hallucinated.items())),
    }
