"""The headline numbers of a model with confidence intervals (``ModelMetrics.intervals``), computed once when
the report is built: a seeded percentile bootstrap over cases, with the repeats of a case resampled together
(a *cluster* bootstrap: with ``--mcp-repeat`` the runs of one case are not independent draws).

It resamples as the comparison does (:mod:`.bootstrap`) and uses the report's own F1 definitions
(:mod:`.metrics`), so the point estimate is the report's number exactly.  ``Report.intervals`` records the
method (level, resamples, seed).  Pure: no pytest, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_mcpeval.defaults import DEFAULT_DROP_LEVEL
from pytest_mcpeval.results import CaseResult, Interval
from pytest_mcpeval.results.case import NONE
from pytest_mcpeval.scoring.bootstrap import bootstrap_interval, resampled_sums
from pytest_mcpeval.scoring.metrics import f1_scores, invented_labels, macro_f1, sort_labels

RESAMPLES = 2000  # bootstrap resamples of the headline intervals (as the HTML page always had)
SEED = 0


def _cluster_sums(rows: Sequence[Mapping[str, Any]], cols: Any) -> Any:
    """``cols`` (one row per case result) summed per case (file, id): the repeats of a case are one cluster."""
    import numpy as np

    index: dict[tuple[str, str], int] = {}
    keys = np.fromiter((index.setdefault((str(r.get("file", "")), str(r.get("id", ""))), len(index)) for r in rows),
                       dtype=np.int64, count=len(rows))
    sums = np.zeros((len(index), cols.shape[1]), dtype=np.float64)
    np.add.at(sums, keys, cols)
    return sums


def _estimate(observed: Any, boot: Any, n: int, clusters: int, level: float) -> Interval:
    value = float(observed)
    if value != value:  # NaN: undefined (e.g. macro F1 with no real label)
        return {"value": None, "low": None, "high": None, "n": n, "clusters": clusters}
    low, high = bootstrap_interval(boot, level)
    return {"value": value, "low": low, "high": high, "n": n, "clusters": clusters}


def headline(cases: Sequence[CaseResult], level: float = DEFAULT_DROP_LEVEL, resamples: int = RESAMPLES,
             seed: int = SEED) -> dict[str, Interval]:
    """One model's headline numbers with ``1 - level`` percentile intervals: ``accuracy``, ``pass_rate`` and
    ``macro_f1`` over its scored single calls, ``flow_pass_rate`` over its scored flows and ``coverage`` over
    its flows with claims (each present only when it has such cases).  Seeded: the same cases give the same
    intervals."""
    import numpy as np

    scored = [c for c in cases if not c.get("error") and c.get("correct") is not None]
    single = [c for c in scored if not c.get("flow")]
    flows = [c for c in scored if c.get("flow")]
    out: dict[str, Interval] = {}
    if single:
        expected = [c.get("expected_label") or NONE for c in single]
        called = [c.get("called_label") or NONE for c in single]
        labels = sort_labels([*expected, *called])
        at = {label: i for i, label in enumerate(labels)}
        eye = np.eye(len(labels))
        exp = eye[[at[x] for x in expected]]
        cal = eye[[at[x] for x in called]]
        right = np.array([e == c for e, c in zip(expected, called, strict=True)], dtype=np.float64)
        cols = np.column_stack([np.ones(len(single)), right,
                                np.array([bool(c.get("passed")) for c in single], dtype=np.float64),
                                exp * right[:, None], exp, cal])
        sums = _cluster_sums(single, cols)
        observed, boot = sums.sum(axis=0)[None, :], resampled_sums(sums, resamples, seed)
        invented = invented_labels(single)
        include = np.array([label not in invented for label in labels], dtype=bool)
        k = len(labels)

        def macro(counts: Any) -> Any:
            f1 = f1_scores(counts[:, 3:3 + k], counts[:, 3 + k:3 + 2 * k], counts[:, 3 + 2 * k:])
            return macro_f1(f1, include) if include.any() else np.full(len(counts), np.nan)

        n, clusters = len(single), len(sums)
        out["accuracy"] = _estimate(observed[0, 1] / observed[0, 0], boot[:, 1] / boot[:, 0], n, clusters, level)
        out["pass_rate"] = _estimate(observed[0, 2] / observed[0, 0], boot[:, 2] / boot[:, 0], n, clusters, level)
        out["macro_f1"] = _estimate(macro(observed)[0], macro(boot), n, clusters, level)
    with_claims = [c for c in flows if c.get("coverage") is not None]
    for name, rows, values in (("flow_pass_rate", flows, [float(bool(c.get("passed"))) for c in flows]),
                               ("coverage", with_claims, [float(c.get("coverage") or 0.0) for c in with_claims])):
        if not rows:
            continue
        cols = np.column_stack([np.ones(len(rows)), np.array(values, dtype=np.float64)])
        sums = _cluster_sums(rows, cols)
        boot = resampled_sums(sums, resamples, seed)
        total = sums.sum(axis=0)
        out[name] = _estimate(total[1] / total[0], boot[:, 1] / boot[:, 0], len(rows), len(sums), level)
    return out
