"""Thresholds -> the session's exit status.

A threshold is a small object that knows its metric, direction and scope, and returns a sentence when
it fails (the way pytest-benchmark's ``RegressionCheck`` does).  Syntax, on the command line through
``--mcp-min-accuracy`` / ``--mcp-min-f1`` and in the ini key ``mcp_thresholds``::

    [MODEL:] METRIC[ [TOOL] ] (>= | <=) VALUE

    accuracy >= 0.9
    gpt-5: macro_f1 >= 0.85
    f1[search_issues] >= 0.8
    hallucination_rate <= 0.05
    recall[list_issues] >= 0.9
    local/minilm: recall_at_5 >= 0.9      # retrievers only (local/... models)
    flow_pass_rate >= 0.8                 # multi-step flows (--mcp-min-pass-rate)
    coverage >= 0.75                      # claims coverage of flows' answers (--mcp-min-coverage)
    flow_f1[search_issues] >= 0.8         # multi-label per-tool F1 over flow cases; flow_macro_f1 too

A threshold on a metric with no data fails ("not measured"): a gate must not pass on nothing.
Baseline comparisons (significant drops) will be further objects of the same kind.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pytest_mcpeval.results import CaseResult, CatalogInfo, ModelMetrics
from pytest_mcpeval.results.registry import METRICS, NAMES, TOOL_METRICS
from pytest_mcpeval.text import did_you_mean

_SYNTAX = re.compile(
    r"^\s*(?:(?P<model>\S.*?)\s*:\s*)?(?P<metric>[a-z_0-9]+)\s*(?:\[(?P<tool>[^\]]+)\])?\s*"
    r"(?P<op>>=|<=)\s*(?P<value>[-+]?(?:\d+\.?\d*|\.\d+))\s*$"
)


class ThresholdError(ValueError):
    """A threshold that cannot be parsed or names something that does not exist."""


@dataclass(frozen=True)
class Threshold:
    metric: str
    op: str
    value: float
    tool: str | None = None
    model: str | None = None
    source: str = ""

    def __str__(self) -> str:
        scope = f"{self.model}: " if self.model else ""
        tool = f"[{self.tool}]" if self.tool else ""
        return f"{scope}{self.metric}{tool} {self.op} {self.value:g}"

    def applies_to(self, model: str, metrics: Mapping[str, object] | None = None) -> bool:
        """Scope by model; retrieval thresholds only concern retrievers, argument ones only models that fill
        arguments (a threshold that names its model always applies to it)."""
        if self.model is not None and self.model != model:
            return False
        if metrics is None or self.model is not None:
            return True
        return METRICS[self.metric].applies_to(metrics)

    def read(self, metrics: Mapping[str, object]) -> float | None:
        return METRICS[self.metric].read(metrics, self.tool)

    def check(self, model: str, metrics: Mapping[str, object]) -> str | None:
        """``None`` when the threshold holds for this model, else a sentence saying why not."""
        metric = METRICS[self.metric]
        value = self.read(metrics)
        origin = f" (from {self.source})" if self.source else ""
        shown = f"{self.metric}[{self.tool}]" if self.tool else self.metric
        if value is None:
            if not metric.applies_to(metrics):
                what = metric.not_applicable_reason()
            else:
                what = f"no data for `{self.tool}`" if self.tool else metric.unmeasured()
            return f"model {model}: {shown} was not measured ({what}); threshold {self.op} {self.value:g}{origin}"
        ok = value >= self.value if self.op == ">=" else value <= self.value
        if ok:
            return None
        return f"model {model}: {shown} = {value:.3f}, required {self.op} {self.value:g}{origin}"


def parse_threshold(text: str, source: str = "") -> Threshold:
    match = _SYNTAX.match(text)
    if match is None:
        raise ThresholdError(
            f"cannot read threshold {text!r}: expected `[MODEL:] METRIC[ [TOOL] ] (>= | <=) VALUE` "
            "(e.g. `accuracy >= 0.9`, `f1[search_issues] >= 0.8`, `gpt-5: macro_f1 >= 0.85`)"
        )
    name, tool = match["metric"], match["tool"]
    if name not in METRICS:
        raise ThresholdError(f"unknown metric `{name}` in {text!r}{did_you_mean(name, NAMES)} "
                             f"(metrics: {', '.join(NAMES)})")
    metric = METRICS[name]
    if tool is None and metric.per_tool_only:
        macro = "flow_macro_f1" if metric.family == "flows" else "macro_f1"
        raise ThresholdError(f"`{name}` is per tool: write `{name}[TOOL]` (or use {macro}) in {text!r}")
    if tool is not None and metric.tool_path is None:
        raise ThresholdError(f"`{name}` is not a per-tool metric in {text!r} (per tool: {', '.join(TOOL_METRICS)})")
    value = float(match["value"])
    if not 0.0 <= value <= 1.0:
        raise ThresholdError(f"threshold value must lie in [0, 1] in {text!r}")
    return Threshold(name, match["op"], value, tool.strip() if tool else None, match["model"], source)


def check_names(thresholds: Iterable[Threshold], tools: set[str], models: set[str]) -> list[str]:
    """Usage errors: thresholds naming a tool no server publishes or a model that did not run."""
    errors = []
    for t in thresholds:
        if t.tool is not None and t.tool not in tools and t.tool != "(none)":
            errors.append(f"threshold `{t}`{f' (from {t.source})' if t.source else ''}: no server publishes "
                          f"a tool `{t.tool}`{did_you_mean(t.tool, tools)}")
        if t.model is not None and models and t.model not in models:
            errors.append(f"threshold `{t}`: model `{t.model}` did not run{did_you_mean(t.model, models)}")
    return errors


def catalog_failures(catalogs: Mapping[str, CatalogInfo], max_tokens: int | None) -> list[str]:
    """``--mcp-max-catalog-tokens``: every catalog over the budget, with its heaviest tools."""
    if max_tokens is None:
        return []
    out = []
    for _, info in sorted(catalogs.items()):
        if info["tokens"] > max_tokens:
            heavy = sorted(info["tools"].items(), key=lambda kv: (-kv[1]["tokens"], kv[0]))[:3]
            names = ", ".join(f"{name} ({tool['tokens']})" for name, tool in heavy)
            out.append(f"catalog of {info['server']} costs {info['tokens']} tokens per request, above "
                       f"--mcp-max-catalog-tokens={max_tokens} (heaviest: {names})")
    return out


def budget_failures(cases: Iterable[CaseResult], models: Mapping[str, ModelMetrics], max_cost: float | None
                    ) -> tuple[list[str], list[str]]:
    """``--mcp-max-cost``: the gate's failure when the cap refused calls (their cases did not run), and the
    notes for models whose calls had no price (the cap could not count them)."""
    if max_cost is None:
        return [], []
    refused = sum(1 for c in cases if "budget reached: " in str(c.get("error") or ""))
    failures = [f"--mcp-max-cost={max_cost:g}: budget reached, {refused} case{'s' if refused != 1 else ''} not "
                "run (errors); the answers paid for are in the cache"] if refused else []
    notes = [f"--mcp-max-cost={max_cost:g} does not cover {name}: {m['usage']['unpriced_calls']} of its calls have "
             "no price in litellm's cost map (set input_cost_per_token / output_cost_per_token in "
             "mcp_model_params to count them)"
             for name, m in sorted(models.items()) if (m.get("usage") or {}).get("unpriced_calls")]
    return failures, notes


def evaluate(thresholds: Iterable[Threshold], models: Mapping[str, ModelMetrics]) -> list[str]:
    """Every failing threshold, as sentences, in a stable order."""
    failures = []
    for t in thresholds:
        applied = False
        for name, metrics in models.items():
            if t.applies_to(name, metrics):
                applied = True
                message = t.check(name, metrics)
                if message:
                    failures.append(message)
        if not applied and models:  # e.g. a recall threshold and no retriever ran: it must not pass on nothing
            origin = f" (from {t.source})" if t.source else ""
            failures.append(f"{t}{origin} was not measured: no model it applies to ran")
    return failures
