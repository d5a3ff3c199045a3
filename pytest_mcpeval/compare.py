"""Compare a run against a baseline run: paired significance tests and a Markdown summary.

Cases of the two runs are paired by ``(file, id, model, repeat)``; a pair is left out when either side
is an error (or unscored).  Every metric is computed on the paired cases only, on both sides, so that
``before`` and ``after`` measure the same cases.

The p-value of every metric comes from one exact paired permutation (swap) test (:func:`permutation_test`):
under the null hypothesis the two outcomes of a paired case are exchangeable, so only the *discordant*
cases (whose outcome differs between the runs) carry evidence, and ``k`` of them can never give a p-value
below ``2 / 2**k``: at level 0.05 a drop needs at least six discordant cases, whatever the metric or the
tool's support.  For ``accuracy`` and ``pass_rate`` the test is the exact McNemar test
(:func:`mcnemar_exact`); ``macro_f1`` and ``f1[TOOL]`` (``tool_f1``) enumerate the swap patterns.  The
displayed interval is a percentile interval from a paired bootstrap over cases; it describes the
difference, the verdict comes from the p-value.

A change is a *drop* when ``diff < -margin`` and ``p < level``; drops are what a pull request gate
fails on.  Everything is seeded: the same inputs give the same output.
"""

from __future__ import annotations

import difflib
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_mcpeval.defaults import DEFAULT_DROP_LEVEL, DEFAULT_DROP_MARGIN, DEFAULT_RESAMPLES
from pytest_mcpeval.report.types import Flipped
from pytest_mcpeval.scoring.case import NONE
from pytest_mcpeval.scoring.metrics import f1_scores, macro_f1, sort_labels
from pytest_mcpeval.scoring.registry import DEFAULT_DROP_METRICS, DROP_METRICS

BASELINE_VERSION = 1
BASELINE_KIND = "pytest-mcpeval-baseline"
METRICS = DROP_METRICS  # the names --mcp-drop-metrics accepts (scoring.registry)
_CASE_FIELDS = ("file", "id", "model", "repeat", "correct", "passed", "expected_label", "called_label", "error")
_CHUNK = 1000  # resamples (or swap patterns) per matrix product: bounds memory to CHUNK x cases floats
_EXACT_OUTCOMES = 1 << 16  # swap outcomes up to which a permutation test is exact (always for 16 discordant pairs)
_EXACT_PAIRS = 1000  # ... and discordant pairs up to which it is (binomial coefficients stay cheap)
_CELLS = 1 << 20  # floats per array of swap patterns or shifted counts in one product (8 MB)
_TOLERANCE = 1e-12  # a swapped |diff| within this of the observed one counts as reaching it
_LIST_LIMIT = 20


class BaselineError(ValueError):
    """A baseline file that cannot be used; the message is one line."""


# --------------------------------------------------------------------------------------------- baseline


def make_baseline(report: Mapping[str, Any]) -> dict[str, Any]:
    """A compact, JSON-able baseline from a report: headline metrics, per-case outcomes, catalogs."""
    models: dict[str, dict[str, Any]] = {}
    for name, m in (report.get("models") or {}).items():
        models[name] = {
            "accuracy": m.get("accuracy"),
            "macro_f1": m.get("macro_f1"),
            "pass_rate": m.get("pass_rate"),
            "tools": {tool: t.get("f1") for tool, t in (m.get("tools") or {}).items()},
        }
    return {
        "version": BASELINE_VERSION,
        "kind": BASELINE_KIND,
        "plugin_version": report.get("plugin_version"),
        "models": models,
        "cases": [{k: c.get(k) for k in _CASE_FIELDS} for c in report.get("cases") or []],
        "catalogs": report.get("catalogs", {}),
    }


def load_baseline(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a baseline written from :func:`make_baseline`; :class:`BaselineError` when unusable."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BaselineError(f"baseline file not found: {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(f"cannot read baseline {p}: {exc}".replace("\n", " ")) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise BaselineError(f"baseline {p} is not valid JSON: {exc.msg} ({where})") from None
    if not isinstance(data, dict):
        raise BaselineError(f"baseline {p}: expected a JSON object of kind {BASELINE_KIND!r}, "
                            f"found {type(data).__name__}")
    if data.get("kind") != BASELINE_KIND:
        raise BaselineError(f"baseline {p}: expected kind {BASELINE_KIND!r}, found {data.get('kind')!r} "
                            "(write one with pytest_mcpeval.compare.make_baseline)")
    if data.get("version") != BASELINE_VERSION:
        raise BaselineError(f"baseline {p}: expected version {BASELINE_VERSION}, found {data.get('version')!r}")
    if not isinstance(data.get("cases"), list) or not all(isinstance(c, dict) for c in data["cases"]):
        raise BaselineError(f"baseline {p}: expected 'cases' to be a list of objects")
    return data


# ------------------------------------------------------------------------------------------ statistics


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for ``b`` and ``c`` discordant pairs (binomial test, p = 0.5).

    It is the paired permutation test of a count (accuracy, pass rate): swapping the two outcomes of a
    discordant pair turns its +1 into -1, so the swapped difference is a sum of fair coin signs.
    """
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1))
    return min(1.0, 2 * tail / (1 << n))


def _exact_share(sizes: Any, counts: Any, extreme: Any) -> float:
    """The share of the ``2**k`` swap patterns (``k = sum(sizes)``) in the rows of ``counts`` (swapped pairs of
    each type) marked ``extreme``: a row stands for the product of C(size, count) patterns.  Exact integers up
    to k = 62, correctly rounded binomial probabilities beyond."""
    import numpy as np

    if extreme.all():
        return 1.0
    k = int(sizes.sum())
    if k <= 62:  # every product of binomial coefficients is at most 2**k
        weights = np.ones(len(counts), dtype=np.int64)
        for g, m in enumerate(sizes.tolist()):
            weights *= np.array([math.comb(m, j) for j in range(m + 1)], dtype=np.int64)[counts[:, g]]
        return int(weights[extreme].sum()) / (1 << k)
    shares = np.ones(len(counts))
    for g, m in enumerate(sizes.tolist()):
        shares *= np.array([math.comb(m, j) / (1 << m) for j in range(m + 1)])[counts[:, g]]
    return min(1.0, float(shares[extreme].sum()))


def permutation_test(before: Any, after: Any, stat: Callable[[Any], Any], resamples: int = DEFAULT_RESAMPLES,
                     seed: int = 0, exact_limit: int = _EXACT_OUTCOMES) -> tuple[float, int]:
    """Two-sided paired permutation (swap) test of ``stat(after) - stat(before)``: ``(p, discordant)``.

    ``before`` and ``after`` hold one row of count columns per paired case (see ``_columns``); ``stat`` maps
    rows of summed counts, shape ``(m, w)``, to ``m`` metric values (NaN where undefined).  Under the null
    hypothesis the two outcomes of each pair are exchangeable, so each pair is swapped with probability 1/2;
    p is the share of the ``2**k`` swap patterns whose ``|diff|`` reaches the observed one (tolerance 1e-12),
    where ``k`` counts the *discordant* pairs (rows that differ): the others change nothing.  p is at least
    ``2 / 2**k``, since the observed pattern and its mirror always count.

    Pairs whose rows change by the same vector are interchangeable, so a pattern matters only through how
    many pairs of each such type it swaps: ``C(m, j)`` patterns swap ``j`` of a type's ``m`` pairs.  When
    there are at most ``exact_limit`` such combinations (always when ``k <= 16``) and ``k <= 1000``, p is
    computed exactly over all of them; otherwise from ``resamples`` seeded random swap patterns, with
    p = (1 + hits) / (1 + resamples).  A pattern under which the metric is undefined on either side counts
    as reaching the observed difference (no evidence is drawn from it); an undefined observed difference
    gives p = 1.
    """
    import numpy as np

    before = np.asarray(before, dtype=np.float64)
    after = np.asarray(after, dtype=np.float64)
    delta = after - before
    rows = np.flatnonzero(np.any(delta != 0, axis=1))
    k = int(rows.size)
    sum_b, sum_a = before.sum(axis=0)[None, :], after.sum(axis=0)[None, :]
    observed = float(stat(sum_a)[0] - stat(sum_b)[0])
    if k == 0 or math.isnan(observed):
        return 1.0, k
    types, inverse, sizes = np.unique(delta[rows], axis=0, return_inverse=True, return_counts=True)
    threshold = abs(observed) - _TOLERANCE

    def extreme(counts: Any) -> Any:  # shift = counts @ types: before' = before + shift, after' = after - shift
        shift = counts @ types
        diffs = stat(sum_a - shift) - stat(sum_b + shift)
        return np.isnan(diffs) | (np.abs(diffs) >= threshold)

    if math.prod(int(m) + 1 for m in sizes) <= exact_limit and k <= _EXACT_PAIRS:
        grid = np.meshgrid(*(np.arange(int(m) + 1) for m in sizes), indexing="ij")
        counts = np.stack([axis.ravel() for axis in grid], axis=1)
        return _exact_share(sizes, counts, extreme(counts.astype(np.float64))), k
    rng = np.random.default_rng(seed)
    order = np.argsort(inverse.ravel(), kind="stable")  # pairs grouped by type, for counting swaps per type
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    chunk = max(_CHUNK, _CELLS // (k + types.shape[1]))
    count = 0
    for start in range(0, resamples, chunk):
        size = min(chunk, resamples - start)
        bits = np.unpackbits(rng.integers(0, 256, size=(size, (k + 7) // 8), dtype=np.uint8), axis=1, count=k)
        swapped = np.add.reduceat(bits[:, order].astype(np.int64), starts, axis=1)
        count += int(np.count_nonzero(extreme(swapped.astype(np.float64))))
    return (1 + count) / (1 + resamples), k


def format_p(p: float) -> str:
    """A p-value as every rendering prints it: four decimals, ``< 0.0001`` below that."""
    return "< 0.0001" if p < 0.0001 else f"{p:.4f}"


def _p_clause(p: float) -> str:
    text = format_p(p)
    return f"p {text}" if text.startswith("<") else f"p = {text}"


def _fmt_level(level: float) -> str:
    return f"{100 * (1 - level):g}%"


@dataclass
class MetricChange:
    """One metric of one model, before (baseline) and after (current), on the paired cases.

    ``before``/``after``/``diff`` are ``None`` only for an ``f1[TOOL]`` that is undefined on one side
    (the tool was neither expected nor called there); such a change is never significant.
    ``discordant`` counts the paired cases whose outcome for this metric differs between the runs (for
    ``f1[TOOL]``: whose expected or called tool, as far as that tool is concerned); only they carry evidence.
    """

    model: str
    metric: str
    before: float | None
    after: float | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float
    n: int
    significant: bool
    drop: bool
    improvement: bool
    level: float = DEFAULT_DROP_LEVEL
    discordant: int = 0

    def sentence(self) -> str:
        """E.g. ``model gpt-5: accuracy dropped 0.900 -> 0.750 (-0.150, 95% CI [-0.250, -0.050], p = 0.0039, 9 of
        40 paired cases changed)``."""
        if self.before is None or self.after is None or self.diff is None:
            b = "—" if self.before is None else f"{self.before:.3f}"
            a = "—" if self.after is None else f"{self.after:.3f}"
            return f"model {self.model}: {self.metric} {b} -> {a} (not comparable, n = {self.n} paired cases)"
        verb = "dropped" if self.diff < 0 else "rose" if self.diff > 0 else "unchanged"
        ci = ("" if self.ci_low is None or self.ci_high is None
              else f", {_fmt_level(self.level)} CI [{self.ci_low:.3f}, {self.ci_high:.3f}]")
        return (f"model {self.model}: {self.metric} {verb} {self.before:.3f} -> {self.after:.3f} "
                f"({self.diff:+.3f}{ci}, {_p_clause(self.p_value)}, {self.discordant} of {self.n} paired cases "
                "changed)")


@dataclass
class Comparison:
    """The outcome of :func:`compare`."""

    changes: list[MetricChange]
    only_in_baseline: list[str]
    only_in_current: list[str]
    flipped: list[Flipped]
    excluded: list[str] = field(default_factory=list)  # keys in both runs left out for an error on either side
    paired: dict[str, int] = field(default_factory=dict)  # model -> paired cases
    margin: float = DEFAULT_DROP_MARGIN
    level: float = DEFAULT_DROP_LEVEL

    def failures(self) -> list[str]:
        return [c.sentence() for c in self.changes if c.drop]

    def improvements(self) -> list[MetricChange]:
        return [c for c in self.changes if c.improvement]

    @property
    def passed(self) -> bool:
        return not any(c.drop for c in self.changes)


def case_key(case: Mapping[str, Any]) -> str:
    return f"{case.get('file', '')}::{case.get('id', '')}[{case.get('model', '')}]#{case.get('repeat', 0)}"


def _pair_key(case: Mapping[str, Any]) -> tuple[str, str, str, int]:
    return (str(case.get("file", "")), str(case.get("id", "")), str(case.get("model", "")),
            int(case.get("repeat") or 0))


def _usable(case: Mapping[str, Any]) -> bool:
    return not case.get("error") and case.get("correct") is not None


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


def _stats(counts: Any, n: int, n_labels: int) -> dict[str, Any]:
    """Metric arrays of shape (rows,) or (rows, labels) from weighted count rows (see ``_columns``)."""
    tp = counts[:, 2:2 + n_labels]
    support = counts[:, 2 + n_labels:2 + 2 * n_labels]
    predicted = counts[:, 2 + 2 * n_labels:]
    f1 = f1_scores(tp, support, predicted)
    return {"accuracy": counts[:, 0] / n, "pass_rate": counts[:, 1] / n, "macro_f1": macro_f1(f1), "f1": f1}


def bootstrap_metrics(before: _Side, after: _Side, n_labels: int, resamples: int, seed: int,
                      ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Observed and resampled metrics on both sides: ``(observed_before, observed_after, boot_before,
    boot_after)``; each resample draws paired case indices with replacement (the same for both sides)."""
    import numpy as np

    n = len(before.correct)
    cols = np.hstack([_columns(before, n_labels), _columns(after, n_labels)])
    width = cols.shape[1] // 2
    observed = cols.sum(axis=0)[None, :]
    rng = np.random.default_rng(seed)
    parts = []
    for start in range(0, resamples, _CHUNK):
        rows = min(_CHUNK, resamples - start)
        idx = rng.integers(0, n, size=(rows, n))
        weights = np.bincount((idx + (np.arange(rows) * n)[:, None]).ravel(), minlength=rows * n)
        parts.append(weights.reshape(rows, n).astype(np.float64) @ cols)
    boot = np.vstack(parts)
    return (_stats(observed[:, :width], n, n_labels), _stats(observed[:, width:], n, n_labels),
            _stats(boot[:, :width], n, n_labels), _stats(boot[:, width:], n, n_labels))


def bootstrap_interval(diffs: Any, level: float) -> tuple[float | None, float | None]:
    """Percentile interval at confidence ``1 - level`` of resampled diffs (NaN resamples left out)."""
    import numpy as np

    valid = diffs[~np.isnan(diffs)]
    if valid.size == 0:
        return None, None
    low, high = np.percentile(valid, [100 * level / 2, 100 * (1 - level / 2)])
    return float(low), float(high)


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


def _macro_stat(n_labels: int) -> Callable[[Any], Any]:
    def stat(counts: Any) -> Any:
        return macro_f1(f1_scores(counts[:, :n_labels], counts[:, n_labels:2 * n_labels], counts[:, 2 * n_labels:]))
    return stat


def _change(model: str, metric: str, before: Any, after: Any, boot_diffs: Any, n: int, margin: float,
            level: float, test: tuple[float, int]) -> MetricChange:
    import numpy as np

    b = None if np.isnan(before) else float(before)
    a = None if np.isnan(after) else float(after)
    p, discordant = test
    if a is None or b is None:
        return MetricChange(model, metric, b, a, None, None, None, 1.0, n, False, False, False, level, discordant)
    diff = a - b
    low, high = bootstrap_interval(boot_diffs, level)
    significant = p < level
    return MetricChange(model, metric, b, a, diff, low, high, p, n, significant,
                        significant and diff < -margin, significant and diff > margin, level, discordant)


def compare(
    baseline: Mapping[str, Any],
    current_report: Mapping[str, Any],
    margin: float = DEFAULT_DROP_MARGIN,
    level: float = DEFAULT_DROP_LEVEL,
    metrics: Sequence[str] = DEFAULT_DROP_METRICS,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Comparison:
    """Compare the current report with a baseline (from :func:`make_baseline`, or a full report).

    ``resamples`` is the number of bootstrap resamples of the interval, and of random swap patterns of a
    permutation test too large to enumerate; ``seed`` seeds both.
    """
    import numpy as np

    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric(s) {', '.join(map(repr, unknown))}; expected some of {', '.join(METRICS)}")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level}")

    before_cases = {_pair_key(c): c for c in baseline.get("cases") or []}
    after_cases = {_pair_key(c): c for c in current_report.get("cases") or []}
    only_before = [case_key(before_cases[k]) for k in sorted(before_cases.keys() - after_cases.keys())]
    only_after = [case_key(after_cases[k]) for k in sorted(after_cases.keys() - before_cases.keys())]
    excluded: list[str] = []
    pairs: dict[str, list[tuple[Mapping[str, Any], Mapping[str, Any]]]] = {}
    for k in sorted(before_cases.keys() & after_cases.keys()):
        b, a = before_cases[k], after_cases[k]
        if _usable(b) and _usable(a):
            pairs.setdefault(k[2], []).append((b, a))
        else:
            excluded.append(case_key(a))

    flipped: list[Flipped] = [
        {
            "case": case_key(a),
            "model": str(a.get("model")),
            "expected_label": a.get("expected_label"),
            "before": bool(b["correct"]),
            "after": bool(a["correct"]),
            "called_before": b.get("called_label"),
            "called_after": a.get("called_label"),
            "passed_before": b.get("passed"),
            "passed_after": a.get("passed"),
        }
        for model_pairs in pairs.values()
        for b, a in model_pairs
        if bool(b["correct"]) != bool(a["correct"])
    ]

    order = [*(current_report.get("models") or {}), *(baseline.get("models") or {})]
    models = [m for m in dict.fromkeys(order) if m in pairs] + sorted(set(pairs) - set(order))
    changes: list[MetricChange] = []
    for model in models:
        model_pairs = pairs[model]
        n = len(model_pairs)
        labels = sort_labels(
            str(c.get(key) or NONE) for pair in model_pairs for c in pair for key in ("expected_label", "called_label")
        )
        index = {label: i for i, label in enumerate(labels)}

        def side(cases: list[Mapping[str, Any]], index: dict[str, int] = index) -> _Side:
            return _Side(
                correct=np.array([bool(c["correct"]) for c in cases], dtype=np.float64),
                passed=np.array([bool(c.get("passed")) for c in cases], dtype=np.float64),
                expected=np.array([index[str(c.get("expected_label") or NONE)] for c in cases], dtype=np.int64),
                called=np.array([index[str(c.get("called_label") or NONE)] for c in cases], dtype=np.int64),
            )

        before, after = side([b for b, _ in model_pairs]), side([a for _, a in model_pairs])
        ob, oa, bb, ba = bootstrap_metrics(before, after, len(labels), resamples, seed)
        cols_b, cols_a = _columns(before, len(labels)), _columns(after, len(labels))
        for metric in metrics:
            if metric in ("accuracy", "pass_rate"):
                column = 0 if metric == "accuracy" else 1
                worse = int(np.sum((cols_b[:, column] == 1) & (cols_a[:, column] == 0)))
                better = int(np.sum((cols_b[:, column] == 0) & (cols_a[:, column] == 1)))
                changes.append(_change(model, metric, ob[metric][0], oa[metric][0], ba[metric] - bb[metric], n,
                                       margin, level, (mcnemar_exact(worse, better), worse + better)))
            elif metric == "macro_f1":
                test = permutation_test(cols_b[:, 2:], cols_a[:, 2:], _macro_stat(len(labels)), resamples, seed)
                changes.append(_change(model, metric, ob[metric][0], oa[metric][0], ba[metric] - bb[metric], n,
                                       margin, level, test))
            else:
                for i, label in enumerate(labels):
                    cols = _label_columns(i, len(labels))
                    test = permutation_test(cols_b[:, cols], cols_a[:, cols], _f1_stat, resamples, seed)
                    changes.append(_change(model, f"f1[{label}]", ob["f1"][0, i], oa["f1"][0, i],
                                           _f1_boot_diffs(bb["f1"][:, i], ba["f1"][:, i]), n, margin, level, test))
    return Comparison(changes, only_before, only_after, flipped, excluded,
                      {m: len(pairs[m]) for m in models}, margin, level)


# ------------------------------------------------------------------------------------------- markdown


def _catalog_tools(entry: Any) -> Mapping[str, Any]:
    """The tools of one catalog entry: ``{tool: {hash, description}}``, or that under ``"tools"`` (the
    ``{server, tools, tokens}`` form)."""
    if not isinstance(entry, Mapping):
        return {}
    nested = entry.get("tools")
    if isinstance(nested, Mapping) and nested and all(isinstance(v, Mapping) for v in nested.values()):
        return nested
    return entry


def _definitions(report: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """tool -> {hash: description} over every catalog of the report (catalogs in digest order)."""
    out: dict[str, dict[str, str]] = {}
    catalogs = report.get("catalogs") or {}
    for digest in sorted(catalogs):
        for tool, info in _catalog_tools(catalogs[digest]).items():
            if isinstance(info, Mapping):
                out.setdefault(tool, {}).setdefault(str(info.get("hash")), str(info.get("description") or ""))
    return out


def changed_tools(baseline: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """Tools in both runs' catalogs whose definition hashes differ: tool -> (description before, after)."""
    before, after = _definitions(baseline), _definitions(current)
    out: dict[str, tuple[str, str]] = {}
    for tool in sorted(before.keys() & after.keys()):
        b, a = before[tool], after[tool]
        if set(b) != set(a):
            old = [d for h, d in b.items() if h not in a] or list(b.values())
            new = [d for h, d in a.items() if h not in b] or list(a.values())
            out[tool] = (old[0], new[0])
    return out


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _fmt(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "—"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def _marker(change: MetricChange) -> str:
    return "🔻" if change.drop else "🔺" if change.improvement else ""


def _row(name: str, c: MetricChange) -> str:
    ci = "—" if c.ci_low is None or c.ci_high is None else f"[{c.ci_low:+.3f}, {c.ci_high:+.3f}]"
    p = "—" if c.diff is None else format_p(c.p_value)
    return (f"| {name} | {_fmt(c.before)} | {_fmt(c.after)} | {_fmt(c.diff, signed=True)} | {ci} | {p} "
            f"| {c.discordant} | {_marker(c)} |")


def markdown(comparison: Comparison, baseline: Mapping[str, Any], current: Mapping[str, Any]) -> str:
    """A pull request summary of the comparison: gate result, metric and tool tables, flipped cases."""
    conf = _fmt_level(comparison.level)
    changed = changed_tools(baseline, current)
    lines = ["## pytest-mcpeval: comparison with the baseline", ""]
    failures = comparison.failures()
    if failures:
        lines.append(f"❌ **{len(failures)} significant drop{'s' if len(failures) != 1 else ''}** "
                     f"(margin {comparison.margin:g}, level {comparison.level:g})")
        lines += ["", *(f"- {s}" for s in failures)]
    else:
        lines.append(f"✅ **No significant drop** (margin {comparison.margin:g}, level {comparison.level:g})")
    header = f"| {{}} | before | after | change | {conf} CI | p | cases changed | |"
    rule = "| --- | ---: | ---: | ---: | :---: | ---: | ---: | --- |"
    for model, n in comparison.paired.items():
        own = [c for c in comparison.changes if c.model == model]
        lines += ["", f"### {model} ({n} paired cases)", ""]
        headline = [c for c in own if not c.metric.startswith("f1[")]
        if headline:
            lines += [header.format("metric"), rule]
            lines += [_row(c.metric, c) for c in headline]
        tools = [c for c in own if c.metric.startswith("f1[")]
        if tools:
            lines += ["", f"**Tool F1** ({model})", "", header.format("tool"), rule]
            for c in tools:
                tool = c.metric[3:-1]
                lines.append(_row(f"{'✏️ ' if tool in changed else ''}`{_cell(tool)}`", c))
    if changed:
        lines += ["", "✏️ tool definition changed since the baseline", ""]
        for tool, (old, new) in changed.items():
            if old == new:
                lines += [f"<details><summary>definition of {tool} changed (description unchanged: input schema "
                          "or annotations)</summary>", "", "</details>", ""]
                continue
            diff = difflib.unified_diff(old.splitlines(), new.splitlines(), "baseline", "current", lineterm="")
            lines += [f"<details><summary>description of {tool} changed</summary>", "", "```diff", *diff, "```", "",
                      "</details>", ""]
    if comparison.flipped:
        shown = comparison.flipped[:_LIST_LIMIT]
        lines += ["", f"### Flipped cases ({len(comparison.flipped)})", "",
                  "| case | expected | before | after |", "| --- | --- | --- | --- |"]
        for f in shown:
            mark = {True: "✓", False: "✗"}
            lines.append(f"| `{_cell(f['case'])}` | `{_cell(f['expected_label'])}` "
                         f"| {mark[f['before']]} `{_cell(f['called_before'])}` "
                         f"| {mark[f['after']]} `{_cell(f['called_after'])}` |")
        if len(comparison.flipped) > len(shown):
            lines.append(f"\n… and {len(comparison.flipped) - len(shown)} more")
    for title, keys in (("Only in the baseline", comparison.only_in_baseline),
                        ("Only in this run", comparison.only_in_current),
                        ("Left out (error on either side)", comparison.excluded)):
        if keys:
            lines += ["", f"### {title} ({len(keys)})", ""]
            lines += [f"- `{k}`" for k in keys[:_LIST_LIMIT]]
            if len(keys) > _LIST_LIMIT:
                lines.append(f"- … and {len(keys) - _LIST_LIMIT} more")
    return "\n".join(lines).rstrip() + "\n"
