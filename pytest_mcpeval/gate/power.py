"""What the drop gate can see: the fewest changed cases that can be significant, and the smallest detectable drop.

Every test of the gate is an exact paired test (:mod:`.significance`): only the *discordant* cases (whose outcome
changed between the runs) carry evidence, and ``k`` of them never give a p-value below ``2 / 2**k`` (the observed
pattern and its mirror always count).  A change is significant when ``p < level``; with Holm's correction over a
family of ``m`` testable changes, the smallest p-value must be below ``level / m``.  So

    min_changed(level, m) = the smallest k with 2 / 2**k * m < level

(6 at level 0.05, 8 at level 0.01; 8 at level 0.05 with m = 5 tests).  A metric measured on ``support`` cases can
show a drop only when at least ``min_changed`` of them change: the smallest fall it could flag is
``min_changed / support`` (``detectable_drop``), and a metric with fewer cases than that is *blind*: it can fall
from 1.0 to 0.0 without the gate noticing.

:func:`model_power` states this for one model of a report (``models.{MODEL}.power`` and the per-tool fields), and
:func:`detectable_failures` is ``--mcp-min-detectable-drop``.  Every count is over *distinct* cases: the repeats
of a case (``--mcp-repeat``) are one unit, since at temperature 0 they add no information and with sampling they
are not independent evidence of the model's behaviour on new requests.  With Holm's correction the worst case is
reported: ``tests`` counts every metric the benchmark can test at all (those with at least
``min_changed(level)`` cases), as when all of them move at once; a drop confined to one metric needs only
``min_changed(level)`` (Tarone's screening, :func:`pytest_mcpeval.gate.paired.holm`).  Pure: no numpy, no pytest.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from pytest_mcpeval.numbers import pct
from pytest_mcpeval.results import CaseResult, ModelMetrics, ModelPower, PowerFigure, ToolMetrics
from pytest_mcpeval.results.case import NONE
from pytest_mcpeval.text import plural

__all__ = ["detectable_drop", "detectable_failures", "min_changed", "model_power"]

_SINGLE = ("accuracy", "pass_rate", "macro_f1")  # the drop metrics over single calls; tool_f1 is per label


def min_changed(level: float, tests: int = 1) -> int:
    """The fewest discordant cases whose best p-value ``2 / 2**k`` (times ``tests``, Holm's factor for the smallest
    of ``tests`` p-values) is below ``level``."""
    if not 0.0 < level < 1.0 or not math.isfinite(level):
        raise ValueError(f"level must be strictly between 0 and 1, not {level!r}")
    if tests < 1:
        raise ValueError(f"tests must be at least 1, not {tests!r}")
    k = 1
    while 2.0 ** (1 - k) * tests >= level:
        k += 1
    return k


def detectable_drop(support: int, changed: int) -> float | None:
    """``changed / support``: the smallest fall of a share over ``support`` cases that ``changed`` discordant cases
    can show; ``None`` when ``support < changed`` (blind: no fall, however large, can be significant)."""
    if support < changed or support <= 0:
        return None
    return changed / support


def _distinct(cases: Sequence[CaseResult]) -> dict[str, set[tuple[str, str]]]:
    """The distinct scored cases (``(file, id)``: repeats are one) of each family a drop metric is over:
    ``single``, ``flows``, ``coverage`` (flows with claims), and ``label:TOOL`` for each expected label of a
    single call."""
    out: dict[str, set[tuple[str, str]]] = {"single": set(), "flows": set(), "coverage": set()}
    for c in cases:
        if c.get("error") or c.get("correct") is None:
            continue
        key = (str(c.get("file", "")), str(c.get("id", "")))
        if c.get("flow"):
            out["flows"].add(key)
            if c.get("coverage") is not None:
                out["coverage"].add(key)
        else:
            out["single"].add(key)
            out.setdefault(f"label:{c.get('expected_label') or NONE}", set()).add(key)
            if c.get("search_recall") is not None:  # under tool search, with a tool to find (docs/tool-search.md)
                out.setdefault("search", set()).add(key)
                search: Mapping[str, Any] = c.get("search") or {}
                for tool in search.get("found") or {}:
                    out.setdefault(f"found:{tool}", set()).add(key)
    return out


def model_power(cases: Sequence[CaseResult], tools: Mapping[str, ToolMetrics], tested: Collection[str],
                untested: list[str], level: float, correction: str, drop_metrics: Sequence[str]) -> ModelPower:
    """What the drop gate can see of one model: its ``power`` section; sets ``cases``, ``min_changed`` and
    ``detectable_drop`` of every entry of ``tools`` (its single-call tool metrics) in place.  ``tested`` are the
    tools some scored case (of either family) expects, ``untested`` the published tools none expects."""
    distinct = _distinct(cases)
    alone = min_changed(level)
    sizes = {"accuracy": len(distinct["single"]), "pass_rate": len(distinct["single"]),
             "macro_f1": len(distinct["single"]), "flow_pass_rate": len(distinct["flows"]),
             "coverage": len(distinct["coverage"]), "search_recall": len(distinct.get("search", ()))}
    headline = [m for m in drop_metrics if m in sizes and sizes[m] and (m not in _SINGLE or distinct["single"])]
    labels = {key[6:]: len(found) for key, found in distinct.items() if key.startswith("label:")}
    tests = 1
    if correction == "holm":
        testable = sum(1 for m in headline if sizes[m] >= alone)
        if "tool_f1" in drop_metrics:
            testable += sum(1 for n in labels.values() if n >= alone)
        if "tool_findability" in drop_metrics:
            testable += sum(1 for key, found in distinct.items() if key.startswith("found:") and len(found) >= alone)
        tests = max(1, testable)
    need = min_changed(level, tests)
    for tool, figures in tools.items():
        support = labels.get(tool, 0)
        figures["cases"] = support
        figures["min_changed"] = need
        figures["detectable_drop"] = detectable_drop(support, need)
    expected = sorted(t for t in tested if t != NONE)
    blind = [t for t in expected if labels.get(t, 0) < need]
    figures_of: dict[str, PowerFigure] = {
        m: {"n": sizes[m], "min_changed": need, "detectable_drop": detectable_drop(sizes[m], need)} for m in headline}
    return {
        "level": level, "correction": correction, "tests": tests, "min_changed": need, "min_changed_alone": alone,
        "blind": blind, "untested": list(untested),
        "no_single_call": [t for t in blind if not labels.get(t)],
        "detectable": {t: need / labels[t] for t in expected if t not in blind},
        "headline": figures_of,
        "repeats": max((int(c.get("repeat") or 0) for c in cases), default=0) + 1,
    }


def detectable_failures(models: Mapping[str, ModelMetrics], bound: float | None) -> list[str]:
    """``--mcp-min-detectable-drop=X``: one failure per model naming the tools some case expects whose drop the gate
    could not flag at ``X``: blind, or with a smallest detectable drop above ``X``.  Untested tools are the lint's."""
    if bound is None:
        return []
    failures = []
    for name, m in models.items():
        power = m.get("power")
        if power is None:
            continue
        tools = m["tools"]
        blind = [f"{t} (blind: {plural(tools[t].get('cases', 0) if t in tools else 0, 'case')})"
                 for t in power["blind"]]
        weak = [f"{t} ({pct(d)})" for t, d in sorted(power["detectable"].items()) if d > bound + 1e-12]
        if blind or weak:
            failures.append(
                f"--mcp-min-detectable-drop={bound:g}: {name}: the drop gate cannot flag a fall of {bound * 100:g}% in "
                f"the recall of {plural(len(blind) + len(weak), 'tool')} (a tool needs at least "
                f"{math.ceil(power['min_changed'] / bound - 1e-9)} single-call cases at level {power['level']:g}"
                f"{', Holm' if power['correction'] == 'holm' else ''}): {', '.join(blind + weak)}")
    return failures
