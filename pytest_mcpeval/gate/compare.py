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

Which metrics there are, and how each is tested, the registry says (:mod:`pytest_mcpeval.results.registry`):
a metric whose entry has ``paired`` is a mean of one case field over the paired cases of its family and is
tested as above; ``macro_f1`` and ``tool_f1`` are tested over the labels.  The statistics are in
:mod:`.paired`, the catalogs' part (changed tools, real labels) in :mod:`.catalogs`; :func:`comparison_section`
is what the report stores, so that every rendering reads the comparison from the report alone.

A change is a *drop* when ``diff < -margin`` and ``p < level``; drops are what a pull request gate
fails on.  Everything is seeded: the same inputs give the same output.

With ``correction="holm"`` (``--mcp-drop-correction=holm``) the changes of each model are one family and
their p-values are adjusted by Holm's step-down method (:func:`holm`), which keeps the chance of any false
verdict among them at ``level``; only the changes that could be significant at all count in the family
(``k`` discordant cases give at best ``2 / 2**k``: a change of fewer than six at level 0.05 cannot be),
the screening of Tarone (1990) for discrete tests.  A verdict then reads ``p_adjusted``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_mcpeval.defaults import DEFAULT_DROP_LEVEL, DEFAULT_DROP_MARGIN, DEFAULT_RESAMPLES, DROP_CORRECTIONS
from pytest_mcpeval.gate.catalogs import changed_tools, definitions, known_labels
from pytest_mcpeval.gate.paired import LABEL_METRICS, holm, label_changes, mean_change
from pytest_mcpeval.numbers import sentence
from pytest_mcpeval.results import ComparisonSection, Flipped, MetricChange
from pytest_mcpeval.results.registry import DEFAULT_DROP_METRICS, DROP_METRICS
from pytest_mcpeval.results.registry import METRICS as REGISTRY

__all__ = ["CORRECTIONS", "METRICS", "SINGLE_CALL_METRICS", "Comparison", "case_key", "changed_tools", "compare",
           "comparison_section", "definitions", "holm", "is_flow", "known_labels", "nothing_compared"]

METRICS = DROP_METRICS  # the names --mcp-drop-metrics accepts (results.registry)
CORRECTIONS = DROP_CORRECTIONS  # --mcp-drop-correction
SINGLE_CALL_METRICS = tuple(m for m in METRICS if m in LABEL_METRICS  # over the paired single-call cases
                            or (m in REGISTRY and getattr(REGISTRY[m].paired, "cases", None) == "single"))


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
    moved: list[Flipped] = field(default_factory=list)  # single calls whose called tool changed, flipped or not

    def failures(self) -> list[str]:
        return [sentence(c) for c in self.changes if c["drop"]]

    def improvements(self) -> list[MetricChange]:
        return [c for c in self.changes if c["improvement"]]

    @property
    def passed(self) -> bool:
        return not any(c["drop"] for c in self.changes)


def case_key(case: Mapping[str, Any]) -> str:
    return f"{case.get('file', '')}::{case.get('id', '')}[{case.get('model', '')}]#{case.get('repeat', 0)}"


def _pair_key(case: Mapping[str, Any]) -> tuple[str, str, str, int]:
    return (str(case.get("file", "")), str(case.get("id", "")), str(case.get("model", "")),
            int(case.get("repeat") or 0))


def _usable(case: Mapping[str, Any]) -> bool:
    return not case.get("error") and case.get("correct") is not None


def _paired_values(pairs: list[tuple[Mapping[str, Any], Mapping[str, Any]]], value: str,
                   test: str) -> list[list[float]]:
    """``[before, after]`` of the case field ``value`` per paired case: a 0/1 outcome for the McNemar test
    (``passed`` of a case without it counts as not passed), a number present on both sides for the sign-flip
    test (a pair without it on either side is left out)."""
    if test == "mcnemar":
        return [[float(bool(c.get(value))) for c in pair] for pair in pairs]
    return [[float(c[value]) for c in pair] for pair in pairs if all(c.get(value) is not None for c in pair)]


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

    # a draft case (docs/drafting.md) is never paired: it is not the gate's until a person removes its mark
    before_cases = {_pair_key(c): c for c in baseline.get("cases") or [] if not c.get("draft")}
    after_cases = {_pair_key(c): c for c in current_report.get("cases") or [] if not c.get("draft")}
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
    moved = [_flip(b, a) for model_pairs in pairs.values() for b, a in model_pairs
             if not is_flow(b) and b.get("called_label") != a.get("called_label")]

    order = [*(current_report.get("models") or {}), *(baseline.get("models") or {})]
    models = [m for m in dict.fromkeys(order) if m in pairs] + sorted(set(pairs) - set(order))
    known = known_labels(baseline, current_report)
    changes: list[MetricChange] = []
    for model in models:
        families = {"single": [(b, a) for b, a in pairs[model] if not is_flow(b)],
                    "flows": [(b, a) for b, a in pairs[model] if is_flow(b)]}
        by_metric = (label_changes(model, families["single"], [m for m in metrics if m in LABEL_METRICS], known,
                                   margin, level, resamples, seed) if families["single"] else {})
        for name in metrics:
            how = REGISTRY[name].paired if name in REGISTRY else None
            if how is not None:
                values = _paired_values(families[how.cases], how.value, how.test)
                if values:
                    by_metric[name] = [mean_change(model, name, how.test, values, margin, level, resamples, seed)]
        own = [c for metric in metrics for c in by_metric.get(metric, [])]
        if correction == "holm":
            holm(own, level, margin)
        changes += own
    return Comparison(changes, only_before, only_after, flipped, excluded,
                      {m: len(pairs[m]) for m in models}, margin, level, kind_changed, correction, moved)


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


def comparison_section(comparison: Comparison, baseline: Mapping[str, Any], current: Mapping[str, Any],
                       path: str, correction: str) -> ComparisonSection:
    """What the report stores of a comparison: everything a rendering shows of it (the changes with their
    sentences, the paired counts, the tools whose definition changed, the baseline's F1 per tool)."""
    return {
        "baseline": path,
        "margin": comparison.margin,
        "level": comparison.level,
        "correction": correction,
        "changes": comparison.changes,
        "drops": comparison.failures(),
        "improvements": [sentence(c) for c in comparison.improvements()],
        "flipped": comparison.flipped,
        "moved": comparison.moved,
        "only_in_baseline": comparison.only_in_baseline,
        "only_in_current": comparison.only_in_current,
        "paired": dict(comparison.paired),
        "excluded": list(comparison.excluded),
        "kind_changed": list(comparison.kind_changed),
        "changed_tools": changed_tools(baseline, current),
        "baseline_tools": {name: _tool_f1((m or {}).get("tools") or {})
                           for name, m in (baseline.get("models") or {}).items()},
    }


def _tool_f1(tools: Mapping[str, Any]) -> dict[str, float | None]:
    """The baseline's F1 per tool: a baseline keeps the number, a full report used as one its ``f1``."""
    return {tool: (v.get("f1") if isinstance(v, Mapping) else v) for tool, v in tools.items()}


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
