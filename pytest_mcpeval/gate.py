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

A threshold on a metric with no data fails ("not measured"): a gate must not pass on nothing.
Baseline comparisons (significant drops) will be further objects of the same kind.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

MODEL_METRICS = ("accuracy", "pass_rate", "macro_f1", "weighted_f1")
RETRIEVAL_METRICS = ("recall_at_1", "recall_at_3", "recall_at_5", "recall_at_10", "mrr")
ARGUMENT_METRICS = ("hallucination_rate", "all_expected_rate", "all_required_rate", "exact_match_rate")
TOOL_METRICS = ("precision", "recall", "f1", *ARGUMENT_METRICS)
ALL_METRICS = (*MODEL_METRICS, *ARGUMENT_METRICS, *RETRIEVAL_METRICS, "precision", "recall", "f1")

_SYNTAX = re.compile(
    r"^\s*(?:(?P<model>\S.*?)\s*:\s*)?(?P<metric>[a-z_0-9]+)\s*(?:\[(?P<tool>[^\]]+)\])?\s*"
    r"(?P<op>>=|<=)\s*(?P<value>[-+]?(?:\d+\.?\d*|\.\d+))\s*$"
)


class ThresholdError(ValueError):
    """A threshold that cannot be parsed or names something that does not exist."""


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, sorted(set(choices)), n=1, cutoff=0.6)
    return f"; did you mean `{close[0]}`?" if close else ""


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

    def applies_to(self, model: str, metrics: Mapping[str, Any] | None = None) -> bool:
        """Scope by model; retrieval thresholds only concern models that rank tools (retrievers)."""
        if self.model is not None and self.model != model:
            return False
        if metrics is None or self.model is not None:
            return True  # a threshold that names its model always applies to it
        if self.metric in RETRIEVAL_METRICS:
            return metrics.get("retrieval") is not None  # only retrievers rank tools
        if self.metric in ARGUMENT_METRICS:
            return bool(metrics.get("arguments", {}).get("applicable", True))  # retrievers fill no arguments
        return True

    def read(self, metrics: Mapping[str, Any]) -> float | None:
        if self.metric in RETRIEVAL_METRICS:
            retrieval = metrics.get("retrieval") or {}
            if self.metric == "mrr":
                value = retrieval.get("mrr")
            else:
                value = (retrieval.get("recall_at") or {}).get(self.metric.removeprefix("recall_at_"))
            return None if value is None else float(value)
        if self.tool is not None:
            tool = metrics.get("tools", {}).get(self.tool)
            if tool is None:
                return None
            source = tool["arguments"] if self.metric in ARGUMENT_METRICS else tool
            value = source.get(self.metric)
        elif self.metric in ARGUMENT_METRICS:
            value = metrics.get("arguments", {}).get(self.metric)
        else:
            value = metrics.get(self.metric)
        return None if value is None else float(value)

    def check(self, model: str, metrics: Mapping[str, Any]) -> str | None:
        """``None`` when the threshold holds for this model, else a sentence saying why not."""
        value = self.read(metrics)
        origin = f" (from {self.source})" if self.source else ""
        if value is None:
            if self.metric in RETRIEVAL_METRICS and metrics.get("retrieval") is None:
                what = "it is not a retriever: only local/... models rank tools"
            elif self.metric in ARGUMENT_METRICS and not metrics.get("arguments", {}).get("applicable", True):
                what = "a retriever fills no arguments"
            else:
                what = f"no data for `{self.tool}`" if self.tool else "no case was scored"
            return f"model {model}: {self.metric}{f'[{self.tool}]' if self.tool else ''} was not measured " \
                   f"({what}); threshold {self.op} {self.value:g}{origin}"
        ok = value >= self.value if self.op == ">=" else value <= self.value
        if ok:
            return None
        shown = f"{self.metric}[{self.tool}]" if self.tool else self.metric
        return f"model {model}: {shown} = {value:.3f}, required {self.op} {self.value:g}{origin}"


def parse_threshold(text: str, source: str = "") -> Threshold:
    match = _SYNTAX.match(text)
    if match is None:
        raise ThresholdError(
            f"cannot read threshold {text!r}: expected `[MODEL:] METRIC[ [TOOL] ] >= VALUE` "
            "(e.g. `accuracy >= 0.9`, `f1[search_issues] >= 0.8`, `gpt-5: macro_f1 >= 0.85`)"
        )
    metric, tool = match["metric"], match["tool"]
    if metric not in ALL_METRICS:
        raise ThresholdError(f"unknown metric `{metric}` in {text!r}{_did_you_mean(metric, ALL_METRICS)} "
                             f"(metrics: {', '.join(ALL_METRICS)})")
    if tool is None and metric in ("precision", "recall", "f1"):
        raise ThresholdError(f"`{metric}` is per tool: write `{metric}[TOOL]` (or use macro_f1) in {text!r}")
    if tool is not None and metric not in TOOL_METRICS:
        raise ThresholdError(f"`{metric}` is not a per-tool metric in {text!r} (per tool: {', '.join(TOOL_METRICS)})")
    value = float(match["value"])
    if not 0.0 <= value <= 1.0:
        raise ThresholdError(f"threshold value must lie in [0, 1] in {text!r}")
    return Threshold(metric, match["op"], value, tool.strip() if tool else None, match["model"], source)


def check_names(thresholds: Iterable[Threshold], tools: set[str], models: set[str]) -> list[str]:
    """Usage errors: thresholds naming a tool no server publishes or a model that did not run."""
    errors = []
    for t in thresholds:
        if t.tool is not None and t.tool not in tools and t.tool != "(none)":
            errors.append(f"threshold `{t}`{f' (from {t.source})' if t.source else ''}: no server publishes "
                          f"a tool `{t.tool}`{_did_you_mean(t.tool, tools)}")
        if t.model is not None and models and t.model not in models:
            errors.append(f"threshold `{t}`: model `{t.model}` did not run{_did_you_mean(t.model, models)}")
    return errors


def catalog_failures(catalogs: Mapping[str, Mapping[str, Any]], max_tokens: int | None) -> list[str]:
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


def evaluate(thresholds: Iterable[Threshold], models: Mapping[str, Mapping[str, Any]]) -> list[str]:
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
