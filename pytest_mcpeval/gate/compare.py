"""Compare a run against a baseline run: metric by metric, on the paired cases.

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

``macro_f1`` averages over the real labels only, as the report does (scoring.metrics): a tool name the
model invented keeps its ``f1[TOOL]`` and counts against accuracy, but is left out of the average.  Baseline
cases do not carry ``hallucinated_tools``, so here a label is real when it is ``(none)``, a tool of either
run's catalogs or a tool some paired case expects (:func:`known_labels`); both sides use the same labels.

Two families, as in the report (docs/metrics.md): ``accuracy``, ``pass_rate``, ``macro_f1`` and ``f1[TOOL]``
are over the paired *single-call* cases; ``flow_pass_rate`` over the paired *flows* (``flow`` in the case: a
case without it, as in a baseline written before flows, is a single call), exact McNemar as ``pass_rate``;
``coverage`` (mean claims coverage) over the paired flows that have claims on both sides, tested with the
same swap test, which on one continuous column is the paired *sign-flip* test of the per-case coverage
differences (:func:`pytest_mcpeval.gate.significance.sign_flip_test`).  A metric is tested only for a model
with paired cases of its family.  A case that is a flow in one run and a single call in the other is
compared in neither family (:attr:`Comparison.kind_changed`).

A change is a *drop* when ``diff < -margin`` and ``p < level``; drops are what a pull request gate
fails on.  Everything is seeded: the same inputs give the same output.

With ``correction="holm"`` (``--mcp-drop-correction=holm``) the changes of each model are one family and
their p-values are adjusted by Holm's step-down method (:func:`holm`), which keeps the chance of any false
verdict among them at ``level``; only the changes that could be significant at all count in the family
(``k`` discordant cases give at best ``2 / 2**k``: a change of fewer than six at level 0.05 cannot be),
the screening of Tarone (1990) for discrete tests.  A verdict then reads ``p_adjusted``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_mcpeval.defaults import DEFAULT_DROP_LEVEL, DEFAULT_DROP_MARGIN, DEFAULT_RESAMPLES, DROP_CORRECTIONS
from pytest_mcpeval.gate.significance import _CHUNK, format_p, mcnemar_exact, permutation_test, sign_flip_test
from pytest_mcpeval.results import Flipped
from pytest_mcpeval.scoring.case import NONE
from pytest_mcpeval.scoring.metrics import f1_scores, macro_f1, sort_labels
from pytest_mcpeval.scoring.registry import DEFAULT_DROP_METRICS, DROP_METRICS

METRICS = DROP_METRICS  # the names --mcp-drop-metrics accepts (scoring.registry)
SINGLE_CALL_METRICS = ("accuracy", "macro_f1", "pass_rate", "tool_f1")  # over the paired single-call cases
CORRECTIONS = DROP_CORRECTIONS  # --mcp-drop-correction


def _p_clause(p: float) -> str:
    text = format_p(p)
    return f"p {text}" if text.startswith("<") else f"p = {text}"


def confidence(level: float) -> str:
    return f"{100 * (1 - level):g}%"


_UNITS = {"flow_pass_rate": "paired flows", "coverage": "paired flows with claims"}  # what `n` counts


@dataclass
class MetricChange:
    """One metric of one model, before (baseline) and after (current), on the paired cases.

    ``before``/``after``/``diff`` are ``None`` only for an ``f1[TOOL]`` that is undefined on one side
    (the tool was neither expected nor called there); such a change is never significant.
    ``discordant`` counts the paired cases whose outcome for this metric differs between the runs (for
    ``f1[TOOL]``: whose expected or called tool, as far as that tool is concerned; for ``coverage``: whose
    coverage differs); only they carry evidence.  ``n`` counts the paired cases the metric is over: single
    calls, flows, or flows with claims.
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
    p_adjusted: float | None = None  # with a correction (holm): what the verdict reads; None without one

    def sentence(self) -> str:
        """E.g. ``model gpt-5: accuracy dropped 0.900 -> 0.750 (-0.150, 95% CI [-0.250, -0.050], p = 0.0039, 9 of
        40 paired cases changed)``."""
        if self.before is None or self.after is None or self.diff is None:
            b = "—" if self.before is None else f"{self.before:.3f}"
            a = "—" if self.after is None else f"{self.after:.3f}"
            return f"model {self.model}: {self.metric} {b} -> {a} (not comparable, n = {self.n} paired cases)"
        verb = "dropped" if self.diff < 0 else "rose" if self.diff > 0 else "unchanged"
        ci = ("" if self.ci_low is None or self.ci_high is None
              else f", {confidence(self.level)} CI [{self.ci_low:.3f}, {self.ci_high:.3f}]")
        unit = _UNITS.get(self.metric, "paired cases")
        adjusted = "" if self.p_adjusted is None else f", Holm-adjusted {_p_clause(self.p_adjusted)}"
        return (f"model {self.model}: {self.metric} {verb} {self.before:.3f} -> {self.after:.3f} "
                f"({self.diff:+.3f}{ci}, {_p_clause(self.p_value)}{adjusted}, {self.discordant} of {self.n} {unit} "
                "changed)")


@dataclass
class Comparison:
    """The outcome of :func:`compare`."""

    changes: list[MetricChange]
    only_in_baseline: list[str]
    only_in_current: list[str]
    flipped: list[Flipped]
    excluded: list[str] = field(default_factory=list)  # keys in both runs left out for an error on either side
    paired: dict[str, int] = field(default_factory=dict)  # model -> paired cases (single calls and flows)
    margin: float = DEFAULT_DROP_MARGIN
    level: float = DEFAULT_DROP_LEVEL
    kind_changed: list[str] = field(default_factory=list)  # keys of a flow in one run, a single call in the other
    correction: str = "none"  # or "holm": the p-values of each model's changes adjusted (see holm)

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


def _stats(counts: Any, n: int, n_labels: int, include: Any = None) -> dict[str, Any]:
    """Metric arrays of shape (rows,) or (rows, labels) from weighted count rows (see ``_columns``);
    ``include``, a boolean mask over the labels, is the labels macro F1 averages over (``None``: all)."""
    tp = counts[:, 2:2 + n_labels]
    support = counts[:, 2 + n_labels:2 + 2 * n_labels]
    predicted = counts[:, 2 + 2 * n_labels:]
    f1 = f1_scores(tp, support, predicted)
    return {"accuracy": counts[:, 0] / n, "pass_rate": counts[:, 1] / n, "macro_f1": macro_f1(f1, include),
            "f1": f1}


def bootstrap_metrics(before: _Side, after: _Side, n_labels: int, resamples: int, seed: int, include: Any = None,
                      ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Observed and resampled metrics on both sides: ``(observed_before, observed_after, boot_before,
    boot_after)``; each resample draws paired case indices with replacement (the same for both sides).
    ``include`` as in :func:`_stats`."""
    import numpy as np

    n = len(before.correct)
    cols = np.hstack([_columns(before, n_labels), _columns(after, n_labels)])
    width = cols.shape[1] // 2
    observed = cols.sum(axis=0)[None, :]
    boot = resampled_sums(cols, resamples, seed)
    return (_stats(observed[:, :width], n, n_labels, include), _stats(observed[:, width:], n, n_labels, include),
            _stats(boot[:, :width], n, n_labels, include), _stats(boot[:, width:], n, n_labels, include))


def resampled_sums(cols: Any, resamples: int, seed: int) -> Any:
    """Column sums of ``resamples`` paired bootstrap resamples of the rows (cases) of ``cols``, shape
    ``(resamples, columns)``: each resample draws ``n`` row indices with replacement, seeded."""
    import numpy as np

    n = len(cols)
    rng = np.random.default_rng(seed)
    parts = []
    for start in range(0, resamples, _CHUNK):
        rows = min(_CHUNK, resamples - start)
        idx = rng.integers(0, n, size=(rows, n))
        weights = np.bincount((idx + (np.arange(rows) * n)[:, None]).ravel(), minlength=rows * n)
        parts.append(weights.reshape(rows, n).astype(np.float64) @ cols)
    return np.vstack(parts)


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


def _macro_stat(n_labels: int, include: Any = None) -> Callable[[Any], Any]:
    """Macro F1 of count rows ``tp[L], support[L], predicted[L]`` over the labels ``include`` keeps."""
    def stat(counts: Any) -> Any:
        return macro_f1(f1_scores(counts[:, :n_labels], counts[:, n_labels:2 * n_labels], counts[:, 2 * n_labels:]),
                        include)
    return stat


def known_labels(baseline: Mapping[str, Any], current: Mapping[str, Any]) -> set[str] | None:
    """The tools of both runs' catalogs and ``(none)``: the labels that are no invented tool name.  ``None``
    when neither run has a catalog (a report made by hand, an old file): nothing then tells an invented
    name from a real tool, and macro F1 averages over every label."""
    tools = set(_definitions(baseline)) | set(_definitions(current))
    return tools | {NONE} if tools else None


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
    correction: str = "none",
) -> Comparison:
    """Compare the current report with a baseline (from :func:`make_baseline`, or a full report).

    ``resamples`` is the number of bootstrap resamples of the interval, and of random swap patterns of a
    permutation test too large to enumerate; ``seed`` seeds both.
    """
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric(s) {', '.join(map(repr, unknown))}; expected some of {', '.join(METRICS)}")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level}")
    if correction not in CORRECTIONS:
        raise ValueError(f"unknown correction {correction!r}; expected one of {', '.join(CORRECTIONS)}")

    before_cases = {_pair_key(c): c for c in baseline.get("cases") or []}
    after_cases = {_pair_key(c): c for c in current_report.get("cases") or []}
    only_before = [case_key(before_cases[k]) for k in sorted(before_cases.keys() - after_cases.keys())]
    only_after = [case_key(after_cases[k]) for k in sorted(after_cases.keys() - before_cases.keys())]
    excluded: list[str] = []
    kind_changed: list[str] = []
    pairs: dict[str, list[tuple[Mapping[str, Any], Mapping[str, Any]]]] = {}
    for k in sorted(before_cases.keys() & after_cases.keys()):
        b, a = before_cases[k], after_cases[k]
        if not (_usable(b) and _usable(a)):
            excluded.append(case_key(a))
        elif is_flow(b) != is_flow(a):
            kind_changed.append(case_key(a))
        else:
            pairs.setdefault(k[2], []).append((b, a))

    flipped = [_flip(b, a) for model_pairs in pairs.values() for b, a in model_pairs if _outcome(b) != _outcome(a)]

    order = [*(current_report.get("models") or {}), *(baseline.get("models") or {})]
    models = [m for m in dict.fromkeys(order) if m in pairs] + sorted(set(pairs) - set(order))
    known = known_labels(baseline, current_report)
    changes: list[MetricChange] = []
    for model in models:
        single = [(b, a) for b, a in pairs[model] if not is_flow(b)]
        flows = [(b, a) for b, a in pairs[model] if is_flow(b)]
        by_metric = (_single_call_changes(model, single, [m for m in metrics if m in SINGLE_CALL_METRICS], known,
                                          margin, level, resamples, seed) if single else {})
        if flows and "flow_pass_rate" in metrics:
            passed = [[float(bool(c.get("passed"))) for c in pair] for pair in flows]
            by_metric["flow_pass_rate"] = [_mean_change(model, "flow_pass_rate", passed, margin, level, resamples,
                                                        seed)]
        claims = [pair for pair in flows if all(c.get("coverage") is not None for c in pair)]
        if claims and "coverage" in metrics:
            coverage = [[float(c["coverage"]) for c in pair] for pair in claims]
            by_metric["coverage"] = [_mean_change(model, "coverage", coverage, margin, level, resamples, seed)]
        own = [c for metric in metrics for c in by_metric.get(metric, [])]
        if correction == "holm":
            holm(own, level, margin)
        changes += own
    return Comparison(changes, only_before, only_after, flipped, excluded,
                      {m: len(pairs[m]) for m in models}, margin, level, kind_changed, correction)


def nothing_compared(comparison: Comparison, baseline: Mapping[str, Any], current: Mapping[str, Any]) -> str | None:
    """Why no metric could be compared, when none could (no paired case): so that a gate on drops cannot pass
    on nothing, as it would with a baseline of other models, files or case ids.  ``None`` when some case paired."""
    if comparison.paired:
        return None
    shared = len(comparison.excluded) + len(comparison.kind_changed)
    if shared:
        return (f"none of the {shared} cases this run shares with the baseline could be compared (an error on "
                "either side, or a flow in one run and a single call in the other), so no drop could be measured")

    def models(report: Mapping[str, Any]) -> str:
        names = sorted({str(c.get("model")) for c in report.get("cases") or []})
        return ", ".join(names) if names else "none"

    return ("no case of this run pairs with the baseline (none has the same file, case id, model and repeat; the "
            f"baseline's models: {models(baseline)}; this run's: {models(current)}), so no drop could be measured")


def holm(family: list[MetricChange], level: float, margin: float) -> None:
    """Holm's step-down adjustment of the p-values of ``family`` (one model's changes), in place: the ``i``-th
    smallest of the ``m`` p-values becomes ``max over j <= i of min(1, (m - j + 1) * p_j)``, and a change is
    significant when that is below ``level``.  ``m`` counts only the changes that could be significant at
    ``level`` unadjusted (``2 / 2**discordant <= level``, the best p-value of the exact tests); the others keep
    their p-value, which is above the level anyway (Tarone's screening of untestable hypotheses)."""
    testable = [c for c in family if c.diff is not None and 2.0 ** (1 - c.discordant) <= level]
    m = len(testable)
    running = 0.0
    for rank, change in enumerate(sorted(testable, key=lambda c: (c.p_value, c.metric))):
        running = max(running, min(1.0, (m - rank) * change.p_value))
        change.p_adjusted = running
    for change in family:
        if change.p_adjusted is None:
            change.p_adjusted = change.p_value
        change.significant = change.diff is not None and change.p_adjusted < level
        change.drop = change.significant and change.diff is not None and change.diff < -margin
        change.improvement = change.significant and change.diff is not None and change.diff > margin


def _single_call_changes(model: str, model_pairs: list[tuple[Mapping[str, Any], Mapping[str, Any]]],
                         metrics: Sequence[str], known: set[str] | None, margin: float, level: float, resamples: int,
                         seed: int) -> dict[str, list[MetricChange]]:
    """The single-call metrics of one model over its paired single-call cases: metric -> changes (``tool_f1``:
    one per label)."""
    import numpy as np

    out: dict[str, list[MetricChange]] = {}
    if not metrics:
        return out
    n = len(model_pairs)
    labels = sort_labels(
        str(c.get(key) or NONE) for pair in model_pairs for c in pair for key in ("expected_label", "called_label")
    )
    index = {label: i for i, label in enumerate(labels)}
    expected = {str(c.get("expected_label") or NONE) for pair in model_pairs for c in pair}
    include = None if known is None else np.array([x in known or x in expected for x in labels], dtype=bool)

    def side(cases: list[Mapping[str, Any]]) -> _Side:
        return _Side(
            correct=np.array([bool(c["correct"]) for c in cases], dtype=np.float64),
            passed=np.array([bool(c.get("passed")) for c in cases], dtype=np.float64),
            expected=np.array([index[str(c.get("expected_label") or NONE)] for c in cases], dtype=np.int64),
            called=np.array([index[str(c.get("called_label") or NONE)] for c in cases], dtype=np.int64),
        )

    before, after = side([b for b, _ in model_pairs]), side([a for _, a in model_pairs])
    ob, oa, bb, ba = bootstrap_metrics(before, after, len(labels), resamples, seed, include)
    cols_b, cols_a = _columns(before, len(labels)), _columns(after, len(labels))
    for metric in metrics:
        if metric in ("accuracy", "pass_rate"):
            column = 0 if metric == "accuracy" else 1
            worse = int(np.sum((cols_b[:, column] == 1) & (cols_a[:, column] == 0)))
            better = int(np.sum((cols_b[:, column] == 0) & (cols_a[:, column] == 1)))
            out[metric] = [_change(model, metric, ob[metric][0], oa[metric][0], ba[metric] - bb[metric], n,
                                   margin, level, (mcnemar_exact(worse, better), worse + better))]
        elif metric == "macro_f1":
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


def _mean_change(model: str, metric: str, values: list[list[float]], margin: float, level: float, resamples: int,
                 seed: int) -> MetricChange:
    """A mean over paired cases, ``values`` one ``[before, after]`` per case: ``flow_pass_rate`` (0/1 outcomes:
    the exact McNemar test, as ``pass_rate``) or ``coverage`` (the exact sign-flip test of the per-case
    differences); the interval from the same paired bootstrap as the other metrics."""
    import numpy as np

    cols = np.array(values, dtype=np.float64).reshape(len(values), 2)
    n = len(cols)
    if metric == "flow_pass_rate":
        worse = int(np.sum((cols[:, 0] == 1) & (cols[:, 1] == 0)))
        better = int(np.sum((cols[:, 0] == 0) & (cols[:, 1] == 1)))
        test = (mcnemar_exact(worse, better), worse + better)
    else:
        test = sign_flip_test(cols[:, 0], cols[:, 1], resamples, seed)
    boot = resampled_sums(cols, resamples, seed) / n
    observed = cols.sum(axis=0) / n
    return _change(model, metric, observed[0], observed[1], boot[:, 1] - boot[:, 0], n, margin, level, test)


def is_flow(case: Mapping[str, Any]) -> bool:
    """A multi-step flow (``flow: true``); a case without the key, as in baselines older than flows, is a single
    call."""
    return bool(case.get("flow"))


def _outcome(case: Mapping[str, Any]) -> bool:
    """What a flipped case flipped: ``passed`` of a flow (its ``correct`` is only its first call), ``correct``
    of a single call."""
    return bool(case.get("passed")) if is_flow(case) else bool(case["correct"])


def _flip(b: Mapping[str, Any], a: Mapping[str, Any]) -> Flipped:
    out: Flipped = {
        "case": case_key(a),
        "model": str(a.get("model")),
        "expected_label": a.get("expected_label"),
        "before": _outcome(b),
        "after": _outcome(a),
        "called_before": b.get("called_label"),
        "called_after": a.get("called_label"),
        "passed_before": b.get("passed"),
        "passed_after": a.get("passed"),
    }
    if is_flow(a):
        out["flow"] = True
    return out


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
