"""The one registry of metrics: every name a threshold, a comparison or a rendering may use.

Each :class:`Metric` says which family it belongs to, whether higher is better, whether it is per tool,
where its value lives in a model's metrics (``results.ModelMetrics``), how it is shown (its ``label`` and
whether it is a percentage) and, for the metrics the baseline comparison tests, which paired test it takes
(:class:`Paired`).  The values themselves are computed in one place each (``scoring``): selection and
arguments in ``scoring.metrics``, retrieval in ``scoring.retrieval``, repeats in ``scoring.repeats``,
multi-step flows and claims in ``scoring.flows``.  Thresholds (``gate.thresholds``), the baseline comparison
(``gate.compare``), option parsing (``settings``) and every rendering (``report``) look names up here.

It lives beside the data model, at the ground floor, because the renderings read it and may import nothing
of ``scoring`` or ``gate``.  Pure: no pytest, no I/O; imports nothing of the plugin's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

KS = (1, 3, 5, 10)  # the k of recall@k (scoring.retrieval computes them; --mcp-min-recall-at accepts them)

Family = Literal["selection", "arguments", "retrieval", "flows", "claims", "search"]


@dataclass(frozen=True)
class Paired:
    """How the baseline comparison tests a metric that is the mean of one field over paired cases.

    ``cases`` is the family of paired cases it is over (single calls or flows), ``value`` the case field whose
    mean it is (``correct``, ``passed``, ``coverage``; a flow pair counts only when both sides have it),
    ``test`` the exact paired test (``mcnemar`` for 0/1 outcomes, ``sign_flip`` for a continuous value) and
    ``unit`` what the sentence says ``n`` counts."""

    cases: Literal["single", "flows"]
    value: str
    test: Literal["mcnemar", "sign_flip"]
    unit: str = "paired cases"


@dataclass(frozen=True)
class Metric:
    name: str
    family: Family
    description: str
    path: tuple[str, ...] = ()  # where the model-level value lives in ModelMetrics; () = per tool only
    tool_path: tuple[str, ...] | None = None  # where the per-tool value lives in ToolMetrics
    higher_is_better: bool = True
    percent: bool = True  # shown as a percentage (else as a number with three decimals)
    tools_at: tuple[str, ...] = ("tools",)  # where the per-tool mapping lives in ModelMetrics
    label: str = ""  # how the renderings name it ("" = its name)
    paired: Paired | None = None  # how the baseline comparison tests it as a mean (None: not such a metric)

    @property
    def title(self) -> str:
        return self.label or self.name

    @property
    def per_tool_only(self) -> bool:
        return not self.path

    def read(self, metrics: Mapping[str, object], tool: str | None = None) -> float | None:
        """The value for a model (or one of its tools); ``None`` when it was not measured."""
        if tool is not None:
            if self.tool_path is None:
                return None
            tools: Any = metrics
            for key in self.tools_at:
                tools = tools.get(key) if isinstance(tools, Mapping) else None
            node: Any = tools.get(tool) if isinstance(tools, Mapping) else None
            path = self.tool_path
        else:
            node, path = metrics, self.path
        for key in path:
            if not isinstance(node, Mapping):
                return None
            node = node.get(key)
        return None if node is None else float(node)

    def applies_to(self, metrics: Mapping[str, object]) -> bool:
        """Whether a model measures this family at all: only retrievers rank tools, and they fill no arguments
        and hold no conversation (no flows, no claims)."""
        if self.family == "retrieval":
            return metrics.get("retrieval") is not None
        if self.family == "search":
            return metrics.get("search") is not None
        if self.family in ("flows", "claims"):
            return metrics.get("retrieval") is None
        if self.family == "arguments":
            arguments = metrics.get("arguments")
            return not isinstance(arguments, Mapping) or bool(arguments.get("applicable", True))
        return True

    def not_applicable_reason(self) -> str:
        if self.family == "search":
            return "it ran no case under tool search (docs/tool-search.md)"
        if self.family == "retrieval":
            return "it is not a retriever: only local/... models rank tools"
        if self.family in ("flows", "claims"):
            return "a retriever runs no multi-step flows"
        return "a retriever fills no arguments"

    def unmeasured(self) -> str:
        """Why a model that this metric applies to has no value for it (``read`` gave ``None``)."""
        if self.family == "flows":
            return "no flow case was scored"
        if self.family == "claims":
            return "no case with claims was scored"
        return "no case was scored"



def _argument(name: str, key: str, description: str, higher_is_better: bool = True) -> Metric:
    return Metric(name, "arguments", description, ("arguments", key), ("arguments", key), higher_is_better)


def _flow(name: str, key: str, description: str, percent: bool = True, label: str = "",
          paired: Paired | None = None) -> Metric:
    return Metric(name, "flows", description, ("flows", key), percent=percent, label=label, paired=paired)


def _flow_tool(name: str, key: str, description: str) -> Metric:
    return Metric(name, "flows", description, tool_path=(key,), tools_at=("flows", "tools"), percent=False)


_ALL = (
    Metric("accuracy", "selection", "share of scored single-call cases whose first call is the first expected tool",
           ("accuracy",), paired=Paired("single", "correct", "mcnemar")),
    Metric("pass_rate", "selection", "share of scored single-call cases that pass (right tools, right arguments)",
           ("pass_rate",), label="passed", paired=Paired("single", "passed", "mcnemar")),
    Metric("macro_f1", "selection", "mean per-label F1 over the real labels (tools of the catalog, and no tool)",
           ("macro_f1",), percent=False, label="macro F1"),
    Metric("weighted_f1", "selection", "support-weighted per-label F1", ("weighted_f1",), percent=False),
    Metric("precision", "selection", "of the cases that called the tool, the share that expected it",
           tool_path=("precision",), percent=False),
    Metric("recall", "selection", "of the cases that expected the tool, the share that called it",
           tool_path=("recall",), percent=False),
    Metric("f1", "selection", "harmonic mean of the tool's precision and recall", tool_path=("f1",), percent=False),
    _argument("hallucination_rate", "hallucination_rate", "calls naming an argument the schema does not define",
              higher_is_better=False),
    _argument("all_expected_rate", "all_expected_rate", "calls giving every non-optional expected argument"),
    _argument("all_required_rate", "all_required_rate", "calls giving every argument the schema requires"),
    _argument("exact_match_rate", "exact_match_rate", "calls whose arguments match the expectation exactly"),
    *(Metric(f"recall_at_{k}", "retrieval", f"share of expected tools a retriever ranks within the top {k}",
             ("retrieval", "recall_at", str(k))) for k in KS),
    Metric("mrr", "retrieval", "mean reciprocal rank of the best-ranked expected tool", ("retrieval", "mrr"),
           percent=False),
    _flow("flow_pass_rate", "pass_rate", "share of scored flow cases that pass (order mode, forbid, turn limit, "
          "claims coverage)", label="flows passed", paired=Paired("flows", "passed", "mcnemar", "paired flows")),
    _flow("flow_order_match_rate", "order_match_rate", "share of scored flow cases whose order mode held"),
    _flow("flow_exact_set_rate", "exact_set_rate", "share of scored flow cases whose set of called tools equals "
          "the set of expected tools"),
    _flow("flow_micro_f1", "micro_f1", "multi-label F1 pooled over every tool of the flow cases", percent=False),
    _flow("flow_macro_f1", "macro_f1", "mean multi-label per-tool F1 over the flow cases (invented names left out)",
          percent=False),
    _flow_tool("flow_precision", "precision", "of the flow cases that called the tool, the share that expected it"),
    _flow_tool("flow_recall", "recall", "of the flow cases that expected the tool, the share that called it"),
    _flow_tool("flow_f1", "f1", "harmonic mean of the tool's flow precision and recall"),
    Metric("coverage", "claims", "mean claims coverage of the final answers (cases with claims)",
           ("claims", "mean_coverage"), percent=False, label="claims coverage",
           paired=Paired("flows", "coverage", "sign_flip", "paired flows with claims")),
    Metric("claims_pass_rate", "claims", "share of the cases with claims that pass (calls and coverage)",
           ("claims", "pass_rate")),
    Metric("search_recall", "search", "share of the tools single-call cases expect that their searches surfaced "
           "(cases run under tool search)", ("search", "recall"), label="findability",
           paired=Paired("single", "search_recall", "sign_flip", "paired cases under search")),
    Metric("findability", "search", "of the cases under tool search that expected the tool, the share whose "
           "searches surfaced it", tool_path=("recall",), tools_at=("search", "tools"), percent=False),
)

METRICS: dict[str, Metric] = {m.name: m for m in _ALL}
NAMES: tuple[str, ...] = tuple(METRICS)
TOOL_METRICS: tuple[str, ...] = tuple(m.name for m in _ALL if m.tool_path is not None)

# --mcp-drop-metrics: what the baseline comparison tests (gate.compare); `tool_f1` stands for f1[TOOL] of every
# label.  `macro_f1` and `tool_f1` are tested by the swap test over the labels; every other name is a metric with
# `paired` set (accuracy and pass_rate over the single calls, flow_pass_rate over the paired flow cases and
# coverage over the paired flow cases with claims).  The default holds the flow family too: a comparison tests
# only the metrics of the families its paired cases have, so they cost a single-call benchmark nothing, and a
# benchmark of flows compared with the defaults is then not left ungated.
# `search_recall` and `tool_findability` (findability[TOOL] of every tool some paired case expects) are over the
# paired cases run under tool search on both sides: they cost a benchmark without search nothing.
DROP_METRICS: tuple[str, ...] = ("accuracy", "macro_f1", "pass_rate", "tool_f1", "flow_pass_rate", "coverage",
                                 "search_recall", "tool_findability")
DEFAULT_DROP_METRICS: tuple[str, ...] = ("accuracy", "macro_f1", "tool_f1", "flow_pass_rate", "coverage",
                                         "search_recall", "tool_findability")


HEADLINE: tuple[str, ...] = ("accuracy", "macro_f1", "pass_rate")  # the summary line of a model, in this order
INTERVALS: tuple[str, ...] = ("accuracy", "pass_rate", "macro_f1", "flow_pass_rate", "coverage")  # with a CI


def get(name: str) -> Metric:
    return METRICS[name]


def title(name: str) -> str:
    """The label of a metric or of a comparison row (``f1[TOOL]`` and unknown names as they are)."""
    metric = METRICS.get(name)
    return metric.title if metric is not None else name


def is_percent(name: str) -> bool:
    metric = METRICS.get(name)
    return metric is not None and metric.percent
