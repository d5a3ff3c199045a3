"""The single-call strategy: one model call with the full tool list, scored against the expected calls."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.models import ModelCallError
from pytest_mcpeval.report.types import CaseResult
from pytest_mcpeval.run.case import CaseRef, error_result
from pytest_mcpeval.scoring.case import parse_call, score_case
from pytest_mcpeval.scoring.retrieval import retrieval_ranks

if TYPE_CHECKING:
    from pytest_mcpeval.run.runtime import Runtime


def evaluate(runtime: Runtime, ref: CaseRef, catalog: Catalog, repeat: int, result: dict[str, Any]) -> CaseResult:
    """Complete ``result`` (identity and catalog already set) with the model's reply and its score."""
    assert ref.model is not None
    expects = ref.expectations()
    try:
        reply = runtime.dispatcher.get(runtime.unit(ref, catalog, repeat))
    except ModelCallError as exc:
        return error_result(result, expects, str(exc))
    calls = [parse_call(c.name, c.arguments, catalog) for c in reply.calls]
    if not reply.fills_arguments:  # a retriever names a tool and nothing more
        calls = [{"tool": c["tool"]} for c in calls]
    result.update(score_case(expects, calls, catalog, fills_arguments=reply.fills_arguments))
    if reply.ranking is not None:
        result["retrieval"] = retrieval_ranks(expects, reply.ranking, reply.top_k)
    if ref.model.name not in runtime._reported_models:  # once per process, like catalog_info
        from pytest_mcpeval.models import params_sent

        runtime._reported_models.add(ref.model.name)
        result["model_info"] = {"params_sent": params_sent(ref.model)}
    result["content"] = reply.content
    result["usage"] = {
        **reply.usage,
        "cost_usd": 0.0 if reply.cached else reply.cost_usd,
        "cached": reply.cached,
        "attempts": reply.attempts,
    }
    result["latency_s"] = 0.0 if reply.cached else round(reply.latency_s, 4)
    return cast(CaseResult, result)

