"""Compare a run against a baseline run: metric by metric, on the paired cases.

Cases of the two runs are paired by ``(file, id, model)`` (:mod:`.clusters`): the case is the unit, not the
repeat.  Each side of a pair is the case's scored repeats, and every per-case value is the mean over them, so
``before`` and ``after`` are means of per-case means (each case weighs one; with the same number of repeats for
every case, the mean over all repeats) and a swap in the tests below moves all of a case's repeats together
(the cluster permutation test): ``k`` changed cases are ``k`` discordant cases however many repeats they have.
A repeat that is an error (or unscored) is left out of its case.  Every metric is computed on the paired cases
only, on both sides, so that ``before`` and ``after`` measure the same cases.

The p-value of every metric comes from one exact paired permutation (swap) test (:func:`permutation_test`):
under the null hypothesis the two outcomes of a paired case are exchangeable, so only the *discordant*
cases (whose outcome differs between the runs) carry evidence, and ``k`` of them can never give a p-value
below ``2 / 2**k``: at level 0.05 a drop needs at least six discordant cases, whatever the metric or the
tool's support.  For ``accuracy`` and ``pass_rate`` the test is the exact McNemar test
(:func:`mcnemar_exact`), or, when some case has more than one repeat and its share can be a fraction, the
sign-flip test of the per-case shares (the same p-value on 0/1 values); ``macro_f1`` and ``f1[TOOL]``
(``tool_f1``) enumerate the swap patterns over per-case count rows (a case's repeats averaged).  The displayed
interval is a percentile interval from a paired bootstrap over cases (their repeats resampled together); it
describes the difference, the verdict comes from the p-value.

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
from pytest_mcpeval.gate.clusters import Pair, case_key, flips, is_flow, mean_over, pair_cases
from pytest_mcpeval.gate.clusters import pair_key as _pair_key
from pytest_mcpeval.gate.findability import findability_changes
from pytest_mcpeval.gate.paired import LABEL_METRICS, holm, label_changes, mean_change
from pytest_mcpeval.numbers import sentence
from pytest_mcpeval.results import ComparisonSection, Flipped, MetricChange
from pytest_mcpeval.results.registry import DEFAULT_DROP_METRICS, DROP_METRICS
from pytest_mcpeval.results.registry import METRICS as REGISTRY

__all__ = ["CORRECTIONS", "METRICS", "SINGLE_CALL_METRICS", "Comparison", "case_key", "changed_tools", "compare",
           "comparison_section", "definitions", "holm", "is_flow", "known_labels", "nothing_compared"]

METRICS = DROP_METRICS  # the names --mcp-drop-metrics accepts (results.registry)
CORRECTIONS = DROP_CORRECTIONS  # --mcp-drop-correction
SINGLE_CALL_METRICS = tuple(m for m in METRICS if m in (*LABEL_METRICS, "tool_findability")  # over single calls
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


def _paired_values(pairs: list[Pair], value: str, test: str) -> list[list[float]]:
    """``[before, after]`` of the case field ``value`` per paired case, each the mean over the case's repeats
    (:func:`~pytest_mcpeval.gate.clusters.mean_over`): a 0/1 outcome for the McNemar test (``passed`` of a
    repeat without it counts as not passed), a number for the sign-flip test (a case without it on either side
    is left out)."""
    out = []
    for bs, as_ in pairs:
        b, a = mean_over(bs, value, test == "mcnemar"), mean_over(as_, value, test == "mcnemar")
        if b is not None and a is not None:
            out.append([b, a])
    return out


def _clustered(pairs: list[Pair]) -> bool:
    """Whether some paired case has more than one repeat on either side: then its per-case values can be
    fractions, and the 0/1 metrics are tested by the sign-flip test instead of McNemar's closed form."""
    return any(len(bs) > 1 or len(as_) > 1 for bs, as_ in pairs)


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
    pairing = pair_cases(before_cases, after_cases)
    pairs = pairing.pairs
    flipped, moved = flips(pairs)

    order = [*(current_report.get("models") or {}), *(baseline.get("models") or {})]
    models = [m for m in dict.fromkeys(order) if m in pairs] + sorted(set(pairs) - set(order))
    known = known_labels(baseline, current_report)
    changes: list[MetricChange] = []
    for model in models:
        families = {"single": [(b, a) for b, a in pairs[model] if not is_flow(b[0])],
                    "flows": [(b, a) for b, a in pairs[model] if is_flow(b[0])]}
        by_metric = (label_changes(model, families["single"], [m for m in metrics if m in LABEL_METRICS], known,
                                   margin, level, resamples, seed) if families["single"] else {})
        for name in metrics:
            how = REGISTRY[name].paired if name in REGISTRY else None
            if how is not None:
                values = _paired_values(families[how.cases], how.value, how.test)
                if values:
                    by_metric[name] = [mean_change(model, name, how.test, values, margin, level, resamples, seed,
                                                   _clustered(families[how.cases]))]
            elif name == "tool_findability":  # findability[TOOL] per tool (gate.findability)
                by_metric[name] = findability_changes(model, families["single"], margin, level, resamples, seed)
        own = [c for metric in metrics for c in by_metric.get(metric, [])]
        if correction == "holm":
            holm(own, level, margin)
        changes += own
    return Comparison(changes, pairing.only_in_baseline, pairing.only_in_current, flipped, pairing.excluded,
                      {m: len(pairs[m]) for m in models}, margin, level, pairing.kind_changed, correction, moved)


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

    return ("no case of this run pairs with the baseline (none has the same file, case id and model; the "
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
