"""Per-model metrics of multi-step flows and of claims (definitions in docs/metrics.md#flows).

Tool use in a flow is **multi-label** classification: each scored flow case has a *set* of expected tools
(the tools of its ``expect``) and a set of called tools (every tool it called, in any turn); a tool counts
once per case however often it is expected or called.  Per tool, over the flow cases: ``TP`` = cases that
expected and called it, ``FP`` = called but not expected, ``FN`` = expected but not called; precision, recall
and F1 as scikit-learn's ``precision_recall_fscore_support`` on ``MultiLabelBinarizer`` output with
``zero_division=nan`` (an undefined ratio is ``None``, never 0).  ``micro_f1`` pools the counts of every
tool; ``macro_f1`` averages F1 over the real tools, leaving out names the model invented (flagged in a
case's ``hallucinated_tools`` and never expected), as the single-call macro F1 does (scoring.metrics).

Errors are excluded from everything; ``None`` when the model has no scored case of the family.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pytest_mcpeval.results import CaseResult, ClaimsMetrics, FlowMetrics, FlowToolMetrics
from pytest_mcpeval.scoring.metrics import _ratio, _value, f1_scores, macro_f1


def flow_cases(cases: Sequence[CaseResult]) -> list[CaseResult]:
    """The scored flow cases (errors excluded)."""
    return [c for c in cases if c.get("flow") and not c.get("error")]


def tool_sets(case: CaseResult) -> tuple[set[str], set[str]]:
    """``(expected tools, called tools)`` of a flow case."""
    return ({e["tool"] for e in case.get("expected") or []}, {c["tool"] for c in case.get("called") or []})


def invented_tools(cases: Sequence[CaseResult]) -> set[str]:
    """Called names the model invented: flagged in ``hallucinated_tools`` wherever called, never expected."""
    flagged: set[str] = set()
    real: set[str] = set()
    for c in cases:
        expected, called = tool_sets(c)
        marked = set(c.get("hallucinated_tools") or ())
        real |= expected | (called - marked)
        flagged |= called & marked
    return flagged - real


def flow_metrics(cases: Sequence[CaseResult]) -> FlowMetrics | None:
    """The ``flows`` metrics of one model's results (any mix of single-call and flow cases, errors included)."""
    flows = flow_cases(cases)
    if not flows:
        return None
    import numpy as np

    sets = [tool_sets(c) for c in flows]
    labels = sorted({t for expected, called in sets for t in expected | called})
    truth = np.array([[t in expected for t in labels] for expected, _ in sets], dtype=bool).reshape(len(sets), -1)
    guess = np.array([[t in called for t in labels] for _, called in sets], dtype=bool).reshape(len(sets), -1)
    tp = (truth & guess).sum(axis=0).astype(float)
    support = truth.sum(axis=0).astype(float)
    predicted = guess.sum(axis=0).astype(float)
    f1 = f1_scores(tp, support, predicted)
    tools: dict[str, FlowToolMetrics] = {
        label: {"precision": _ratio(tp[i], predicted[i]), "recall": _ratio(tp[i], support[i]),
                "f1": _value(f1[i]), "support": int(support[i])}
        for i, label in enumerate(labels)
    }
    invented = invented_tools(flows)
    real = np.array([label not in invented for label in labels], dtype=bool)
    n = len(flows)
    return {
        "cases": n,
        "pass_rate": _ratio(sum(bool(c.get("passed")) for c in flows), n),
        "order_match_rate": _ratio(sum(bool(c.get("order_ok")) for c in flows), n),
        "exact_set_rate": _ratio(sum(expected == called for expected, called in sets), n),
        "tools": tools,
        "micro_f1": _ratio(2 * float(tp.sum()), float(support.sum() + predicted.sum())),
        "macro_f1": _value(macro_f1(f1, real)) if real.any() else None,
    }


def claims_metrics(cases: Sequence[CaseResult]) -> ClaimsMetrics | None:
    """The ``claims`` metrics over the scored cases that have claims (``None`` when there are none)."""
    bearing = [c for c in cases if not c.get("error") and c.get("claims") and c.get("coverage") is not None]
    if not bearing:
        return None
    n = len(bearing)
    return {
        "cases": n,
        "mean_coverage": _ratio(math.fsum(float(c.get("coverage") or 0.0) for c in bearing), n),
        "pass_rate": _ratio(sum(bool(c.get("passed")) for c in bearing), n),
    }
