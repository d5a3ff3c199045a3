"""The single-call strategy: one model call with the full tool list, scored against the expected calls.

The reply's text goes into the result up to :data:`CONTENT_CAP` characters (nothing is scored on it, and
the result crosses xdist and lands in the report); a longer text is cut and ``content_truncated`` holds
its original length.  The result is scored on the reply as the model sent it; where every result goes
(run/item.py), every string in it is then made encodable as UTF-8: a lone surrogate (``"\\ud83d"``, legal JSON
that a model may send) becomes U+FFFD, so the result crosses the xdist channel (execnet sends UTF-8) and prints on
a terminal, and the report is the same with and without xdist.  The cache keeps the reply as sent.

How the reply ended is recorded (``finish_reason``, ``provider_finish_reason``) and weighed
(:mod:`pytest_mcpeval.scoring.stops`): a reply the provider's safety filter withheld is an error, a miss cut
off by the token limit is ``truncated``, one without calls that wrote a call in its text (``text_calls``)
is ``tool_call_in_text``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.models import ModelCallError
from pytest_mcpeval.models.reply import ModelReply
from pytest_mcpeval.models.text_calls import find_text_calls
from pytest_mcpeval.results import CalledTool, CaseResult
from pytest_mcpeval.run.case import CaseRef, error_result
from pytest_mcpeval.scoring import stops
from pytest_mcpeval.scoring.case import parse_call, score_case
from pytest_mcpeval.scoring.retrieval import retrieval_ranks

if TYPE_CHECKING:
    from pytest_mcpeval.run.engine import Engine

CONTENT_CAP = 20_000  # characters of the model's text kept in a case result


def text_calls(reply: ModelReply, catalog: Catalog) -> list[CalledTool]:
    """The calls of shown tools a reply without calls wrote in its text (by API or MCP name), as ``called``
    shows calls; ``[]`` when it made calls (a client would have run those) or is a retriever's."""
    if reply.calls or not reply.fills_arguments or not reply.content:
        return []
    names = {*catalog.from_openai_name, *catalog.by_name}
    return [parse_call(c.name, c.arguments, catalog) for c in find_text_calls(reply.content, names)]


def evaluate(runtime: Engine, ref: CaseRef, catalog: Catalog, repeat: int, result: dict[str, Any]) -> CaseResult:
    """Complete ``result`` (identity and catalog already set) with the model's reply and its score."""
    assert ref.model is not None
    expects = ref.expectations()
    try:
        reply = runtime.dispatcher.get(runtime.unit(ref, catalog, repeat))
    except ModelCallError as exc:
        return error_result(result, expects, str(exc))
    if reply.finish_reason is not None:
        result["finish_reason"] = reply.finish_reason
    if reply.provider_finish_reason is not None:
        result["provider_finish_reason"] = reply.provider_finish_reason
    reason = stops.blocked(reply.finish_reason, reply.provider_finish_reason)
    if reason is not None:  # the provider withheld the reply: nothing the model chose (docs/metrics.md)
        result["blocked"] = reason
        return error_result(result, expects, stops.blocked_message(f"{ref.model.name} ({ref.model.target})", reason))
    calls = [parse_call(c.name, c.arguments, catalog) for c in reply.calls]
    if not reply.fills_arguments:  # a retriever names a tool and nothing more
        calls = [{"tool": c["tool"]} for c in calls]
    result.update(score_case(expects, calls, catalog, fills_arguments=reply.fills_arguments))
    if reply.parsed_from_text:  # the route's tool parser made these calls of the text (models/llama/route.py)
        result["calls_parsed_from_text"] = reply.parsed_from_text
    written = text_calls(reply, catalog)
    if written:
        result["text_calls"] = written
    result["diagnosis"] = stops.refine(result["diagnosis"], reply.finish_reason, reply.provider_finish_reason,
                                       bool(calls), bool(written))
    invented = sorted({c["tool"] for c in calls if c["tool"] not in catalog.by_name})
    if invented:  # a model mistake (a miss), and a label of its own that macro F1 leaves out
        result["hallucinated_tools"] = invented
    if reply.ranking is not None:
        result["retrieval"] = retrieval_ranks(expects, reply.ranking, reply.top_k)
    if ref.model.name not in runtime.facts.params_sent:  # once per process, for the run (run/facts.py)
        from pytest_mcpeval.models import params_sent

        # a replay has them from the cache entry: no litellm import
        runtime.facts.note_model(ref.model.name, reply.params_sent if reply.params_sent is not None
                                 else params_sent(ref.model))
    content = reply.content
    length = reply.content_truncated or (len(content) if content is not None else 0)
    if content is not None and length > CONTENT_CAP:
        content = content[:CONTENT_CAP]
        result["content_truncated"] = length
    result["content"] = content
    result["usage"] = {
        **reply.usage,
        "cost_usd": 0.0 if reply.cached else reply.cost_usd,
        "cached": reply.cached,
        "attempts": reply.attempts,
    }
    result["latency_s"] = 0.0 if reply.cached else round(reply.latency_s, 4)
    if reply.load_s and not reply.cached:  # the local model's load, apart from the latency (models/local.py)
        result["load_s"] = round(reply.load_s, 4)
    return cast(CaseResult, result)  # made UTF-8 safe (and masked) where every result goes: run/item.py

