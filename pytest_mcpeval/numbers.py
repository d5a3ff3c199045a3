"""The one place numbers become text: percentages, decimals, p-values, intervals and a comparison's sentence.

Every rendering (terminal, Markdown, HTML) and the gate's messages format through these functions, so a
value reads the same wherever it is shown; how a metric is shown (a percentage or three decimals, its label)
comes from the registry (:mod:`pytest_mcpeval.results.registry`).  A value that was not measured is ``—``;
the terminal summary, which has always said ``n/a``, passes ``missing=NA``.  Pure: imports only the data
model and its registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_mcpeval.results import MetricChange
from pytest_mcpeval.results.registry import METRICS, is_percent

DASH = "—"  # a value not measured (Markdown, HTML, a comparison)
NA = "n/a"  # the same in the terminal summary


def pct(value: float | None, missing: str = DASH) -> str:
    return missing if value is None else f"{value:.1%}"


def num(value: float | None, signed: bool = False, missing: str = DASH) -> str:
    if value is None:
        return missing
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def metric_value(metric: str, value: float | None, missing: str = DASH) -> str:
    """A metric's value as the registry says it is shown: a percentage, or a number with three decimals."""
    return pct(value, missing) if is_percent(metric) else num(value, missing=missing)


def format_p(p: float) -> str:
    """A p-value as every rendering prints it: four decimals, ``< 0.0001`` below that."""
    return "< 0.0001" if p < 0.0001 else f"{p:.4f}"


def p_clause(p: float) -> str:
    """``p = 0.0312`` or ``p < 0.0001``."""
    text = format_p(p)
    return f"p {text}" if text.startswith("<") else f"p = {text}"


def confidence(level: float) -> str:
    """The confidence of an interval at significance ``level``: ``95%``."""
    return f"{100 * (1 - level):g}%"


def interval(low: float | None, high: float | None, signed: bool = True) -> str | None:
    """``[-0.250, -0.050]``; ``None`` without bounds."""
    if low is None or high is None:
        return None
    return f"[{num(low, signed)}, {num(high, signed)}]"


def unit(metric: str) -> str:
    """What ``n`` of a comparison row counts: paired cases, flows, or flows with claims (the registry's)."""
    entry = METRICS.get(metric)
    return entry.paired.unit if entry is not None and entry.paired is not None else "paired cases"


def sentence(change: MetricChange | Mapping[str, Any], model: str | None = None, metric: str | None = None) -> str:
    """E.g. ``model gpt-5: accuracy dropped 0.900 -> 0.750 (-0.150, 95% CI [-0.250, -0.050], p = 0.0039, 9 of
    40 paired cases changed)``.  ``model`` and ``metric`` replace the names shown (an escaped form of them)."""
    model = change["model"] if model is None else model
    name = change["metric"] if metric is None else metric
    before, after, diff = change["before"], change["after"], change["diff"]
    if before is None or after is None or diff is None:
        return f"model {model}: {name} {num(before)} -> {num(after)} (not comparable, n = {change['n']} paired cases)"
    verb = "dropped" if diff < 0 else "rose" if diff > 0 else "unchanged"
    shown = interval(change["ci_low"], change["ci_high"], signed=False)
    ci = "" if shown is None else f", {confidence(change['level'])} CI {shown}"
    p_adjusted = change.get("p_adjusted")
    adjusted = "" if p_adjusted is None else f", Holm-adjusted {p_clause(p_adjusted)}"
    return (f"model {model}: {name} {verb} {before:.3f} -> {after:.3f} ({diff:+.3f}{ci}, {p_clause(change['p_value'])}"
            f"{adjusted}, {change['discordant']} of {change['n']} {unit(change['metric'])} changed)")
