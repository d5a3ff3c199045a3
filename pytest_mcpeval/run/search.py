"""The search strategy: a single-call case under client-side tool search (docs/tool-search.md).

The model is shown the search tool (:func:`pytest_mcpeval.tool_search.search_tool`) and the tools the file keeps
loaded, not the catalog.  Each call of the search tool is answered, as a tool message, with the top K tools of the
case's catalog for its query (bm25 and regex in :mod:`pytest_mcpeval.tool_search`, embedding by the local
retriever), and those tools' full definitions join the tools of the next request.  A query the method cannot run
(a bad regex) is answered with an error result the model sees.  After ``max_searches`` searches the search tool is
no longer shown; a search call beyond the bound in the same reply is answered with an error.  The first reply that
calls another tool, or none, is the case's answer: its calls (search calls left out) are scored as a single call
is, against the case's whole catalog, and the diagnosis says whether the search or the choice missed
(:mod:`pytest_mcpeval.scoring.search`).  Each request is a :class:`~pytest_mcpeval.run.dispatch.Unit` whose key
hashes the whole conversation and the tools shown, so a search case replays from the cache like a flow; it runs as
a task of the process's event loop, as a flow does.  Usage and latency sum every request of the case.

Under native search (``native``, ``native-regex``) the provider searches: one request carries the whole catalog,
deferred, and the provider's search tool; the provider runs the searches and loads the tools they surface within
the request, and the reply says what it searched and found (``ModelReply.searches``), which fills the same view.

A reply the provider's safety filter withheld makes the case an error with ``blocked`` (as a single call's does); an
error after some searches keeps them in ``search``.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, cast

from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.models import ModelCallError
from pytest_mcpeval.models.local import is_local
from pytest_mcpeval.models.reply import ModelReply, RawCall
from pytest_mcpeval.results import CalledTool, CaseResult
from pytest_mcpeval.run.case import CaseError, CaseRef, build_messages, error_result
from pytest_mcpeval.run.dispatch import Unit
from pytest_mcpeval.run.flow import Blocked, call_id, summed_usage
from pytest_mcpeval.run.searching import Misplaced, SearchConfig, Searches, check_search
from pytest_mcpeval.run.single import CONTENT_CAP
from pytest_mcpeval.scoring import search as scored
from pytest_mcpeval.scoring import stops
from pytest_mcpeval.scoring.case import parse_call, score_case
from pytest_mcpeval.tool_result import tool_message
from pytest_mcpeval.tool_search import SEARCH_TOOL

if TYPE_CHECKING:
    from pytest_mcpeval.run.engine import Engine


async def evaluate(runtime: Engine, ref: CaseRef, catalog: Catalog, repeat: int, result: dict[str, Any],
                   config: SearchConfig) -> CaseResult:
    """Complete ``result`` (identity and catalog already set) with the searches, the answer and its score."""
    assert ref.model is not None
    expects = ref.expectations()
    search = Searches(config, catalog)
    replies: list[ModelReply] = []
    try:
        check_search(ref, config, catalog, result)
        last, shown = await _converse(runtime, ref, repeat, search, replies)
    except ModelCallError as exc:
        if isinstance(exc, Blocked):  # as a single call records it (run.single)
            _ending(result, replies[-1])
            result["blocked"] = exc.reason
        message = str(exc).removeprefix(f"{runtime.label(ref)}: ")
        return _searched_error(result, expects, message, search)
    except Misplaced as exc:
        return error_result(result, expects, str(exc))
    except CaseError as exc:
        message = f"{result['file']}:{result['line']}: case `{ref.case.id}`: {exc}"
        return _searched_error(result, expects, message, search)
    searching = SEARCH_TOOL in shown.by_name  # a call of it past the bound is a call of a tool it was not shown
    calls = [_parsed(c, shown, catalog) for c in last.calls if not searching or shown.mcp_name(c.name) != SEARCH_TOOL]
    result.update(score_case(expects, calls, catalog))
    _ending(result, last)
    view = search.view([e.tool for e in expects])
    result["search"] = view
    result["search_recall"] = scored.case_recall(view)
    result["turns"] = len(replies)
    own = stops.refine(result["diagnosis"], last.finish_reason, last.provider_finish_reason, bool(calls), False)
    result["diagnosis"] = scored.diagnosis(view, [e.tool for e in expects], calls, bool(result["passed"]), own)
    invented = sorted({c["tool"] for c in calls if c["tool"] not in catalog.by_name})
    if invented:
        result["hallucinated_tools"] = invented
    content = last.content
    if content is not None and len(content) > CONTENT_CAP:
        result["content_truncated"] = len(content)
        content = content[:CONTENT_CAP]
    result["content"] = content
    result["usage"], result["latency_s"] = summed_usage(replies, {})
    if ref.model.name not in runtime.facts.params_sent:  # once per process, for the run (run/facts.py)
        from pytest_mcpeval.models import params_sent

        known = next((r.params_sent for r in replies if r.params_sent is not None), None)
        runtime.facts.note_model(ref.model.name, known if known is not None else params_sent(ref.model))
    return cast(CaseResult, result)  # made UTF-8 safe (and masked) where every result goes: run/item.py


def _ending(result: dict[str, Any], reply: ModelReply) -> None:
    """The case's finish reasons: those of its last reply."""
    for name in ("finish_reason", "provider_finish_reason"):
        if getattr(reply, name) is not None:
            result[name] = getattr(reply, name)


def _searched_error(result: dict[str, Any], expects: list[Any], message: str, search: Searches) -> CaseResult:
    """An error result that keeps the searches made before the error (what the model looked for is known)."""
    if search.queries:
        result["search"] = search.view([e.tool for e in expects])
    return error_result(result, expects, message)


def _parsed(raw: RawCall, shown: Catalog, catalog: Catalog) -> CalledTool:
    """A call of the answer by its MCP name: as the tools it was shown name it, else as the catalog does (a tool
    the model called before any search loaded it)."""
    called = parse_call(raw.name, raw.arguments, shown)
    if called["tool"] not in catalog.by_name:
        called["tool"] = catalog.mcp_name(raw.name)
    return called


async def _converse(runtime: Engine, ref: CaseRef, repeat: int, search: Searches,
                    replies: list[ModelReply]) -> tuple[ModelReply, Catalog]:
    """Search turns until the model calls another tool or none: its last reply and the tools that reply saw."""
    assert ref.model is not None
    conversation = build_messages(ref.bench.spec.system, ref.case)
    used: set[str] = set()  # tool-call ids of the conversation
    for turn in range(search.config.max_searches + 1):
        shown = search.shown()
        label = runtime.label(ref) if turn == 0 else f"{runtime.label(ref)} (turn {turn + 1})"
        if is_local(ref.model):  # a retriever: said before its model is loaded for nothing
            raise CaseError(f"model {ref.model.name} ranks tools and cannot search: tool search needs a model that "
                            "calls tools with arguments")
        reply = await runtime.dispatcher.fetch(Unit.make(ref.model, copy.deepcopy(conversation), shown, repeat, label))
        replies.append(reply)
        if search.native:  # the provider searched within the request: one reply is the answer
            search.read(reply)
        reason = stops.blocked(reply.finish_reason, reply.provider_finish_reason)
        if reason is not None:
            where = None if search.native else turn
            raise Blocked(stops.blocked_message(f"{ref.model.name} ({ref.model.target})", reason, where), reason)
        if search.native:
            return reply, search.catalog
        searches = [c for c in reply.calls if shown.mcp_name(c.name) == SEARCH_TOOL]
        if not searches or len(searches) < len(reply.calls) or not search.open:
            return reply, shown
        ids = []
        for index, call in enumerate(searches):  # an answer must name one call: a missing or repeated id is replaced
            ids.append(call.id if call.id and call.id not in used else call_id(turn, index))
            used.add(ids[-1])
        conversation.append({"role": "assistant", "content": reply.content, "tool_calls": [
            {"id": id_, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for id_, c in zip(ids, searches, strict=True)]})
        for id_, call in zip(ids, searches, strict=True):
            text, is_error = await search.answer(call)
            conversation.append(tool_message(id_, text, is_error, ref.model.target))
    return replies[-1], search.shown()
