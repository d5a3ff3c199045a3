"""The flow strategy: a conversation in which the model's tool calls are answered, then scored.

The loop (docs/flows.md): the conversation goes to the model with the full tool list; every tool call of
its reply is answered, in order, by a ``tool`` message carrying the call's id; and again, until the model
answers without a tool call (its text is the final answer) or ``max_turns`` model calls were made (the
turn limit: no final answer; the last turn's calls are answered all the same, so every call of the
transcript has its answer).  Each model call is a :class:`~pytest_mcpeval.run.dispatch.Unit` through the
dispatcher, so it is cached by a key that hashes the whole conversation (a recorded flow replays offline)
and made within the model's concurrency.  A flow is a task of the process's event loop (:mod:`pytest_mcpeval.core`),
started ahead by the prefetch (:meth:`~pytest_mcpeval.run.runtime.Runtime.prefetch`): a flow waiting for a turn, a
tool or the judge holds nothing, and the turns of different flows interleave.  A call without a provider id (or
with one the conversation already holds) gets :func:`call_id`.

A call is answered by:

1. the first mock of its tool whose ``when`` matches (only the named arguments are compared; a ``when``
   may refer to results of earlier turns with ``from_result``); a mock without ``when`` is the tool's
   default and answers any call of it, one with malformed arguments too;
2. with ``execute: live``, the server itself, over the session that listed the tools;
3. else an error result the model sees and may recover from: ``invalid arguments: ...`` for arguments
   that are not a JSON object, ``unknown tool: T`` for a tool the server does not publish, and otherwise
   ``no mock matches tool T with these arguments`` (a gap of the benchmark file, listed in ``unmatched``).

A ``structured`` mock is sent as compact canonical JSON and kept as structured content; a live result is
sent as its text parts (:class:`~pytest_mcpeval.servers.ToolResult`).  An error result is flagged as one where
the provider's format has a flag litellm can send (:func:`pytest_mcpeval.tool_result.tool_message`: Gemini's
``{"error": ...}`` response; Anthropic's ``is_error`` litellm cannot send).  Each turn keeps its reply's
finish reasons; a turn the provider's safety filter withheld makes the case an error (``blocked``), and how
the last reply ended refines a failed flow's diagnosis (:mod:`pytest_mcpeval.scoring.stops`).
A live call that fails (the server died or did not answer) makes the case an error naming the server's log,
as does a model call that fails, a judge that gives no verdict, or a model that cannot hold a conversation
(a ``local/`` retriever).

Then the claims on the final answer (``check`` ones here, the others by the judge model), and
:func:`pytest_mcpeval.scoring.flow.score_flow`, on the whole transcript.  The result keeps every text up
to :data:`~pytest_mcpeval.run.single.CONTENT_CAP` characters (the final answer's original length in
``content_truncated`` when it is cut); scoring, references and claims see the texts whole.

Usage sums the model calls of the flow: tokens of every turn, cost and latency of the turns actually made
(replayed ones cost nothing), ``attempts`` one plus the retries of those; ``cached`` only when every turn
and every judge call was replayed.  The judge's usage is apart, in ``judge_usage`` under its name.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, cast

from pytest_mcpeval.benchmark.loader import unknown_mock_tools
from pytest_mcpeval.benchmark.matchers import check_object
from pytest_mcpeval.benchmark.schema import MockResult
from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.models import ModelCallError
from pytest_mcpeval.models.reply import ModelReply, RawCall
from pytest_mcpeval.results import (
    CalledTool,
    CaseResult,
    CaseUsage,
    ClaimView,
    ToolAnswerView,
    TrajectoryCall,
    TrajectoryTurn,
)
from pytest_mcpeval.run.case import CaseError, CaseRef, error_result
from pytest_mcpeval.run.dispatch import Unit
from pytest_mcpeval.run.judge import JudgeError, judge_claims
from pytest_mcpeval.run.searching import Misplaced, SearchConfig, Searches, check_search, searched, searched_diagnosis
from pytest_mcpeval.run.single import CONTENT_CAP, text_calls
from pytest_mcpeval.scoring import stops
from pytest_mcpeval.scoring.case import parse_call
from pytest_mcpeval.scoring.claims import checked_claim
from pytest_mcpeval.scoring.flow import bind, score_flow
from pytest_mcpeval.servers import ServerError
from pytest_mcpeval.text import canonical_json
from pytest_mcpeval.tool_result import tool_message
from pytest_mcpeval.tool_search import SEARCH_TOOL

if TYPE_CHECKING:
    from pytest_mcpeval.run.engine import Engine


class Blocked(ModelCallError):
    """A turn's reply was withheld by the provider's safety filter (:func:`pytest_mcpeval.scoring.stops.blocked`)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def _ending(result: dict[str, Any], trajectory: list[TrajectoryTurn]) -> None:
    """The case's finish reasons: those of its last turn (the one that answered, or was blocked)."""
    if trajectory:
        for name in ("finish_reason", "provider_finish_reason"):
            if name in trajectory[-1]:
                result[name] = trajectory[-1][name]


def call_id(turn: int, index: int) -> str:
    """The id of a tool call the provider gave none: deterministic, so cache keys are stable."""
    return f"call_{turn}_{index}"


async def evaluate(runtime: Engine, ref: CaseRef, catalog: Catalog, repeat: int, result: dict[str, Any],
                   search: SearchConfig | None = None) -> CaseResult:
    """Complete ``result`` (identity and catalog already set) with the flow's transcript, claims and score; under
    tool ``search`` (docs/tool-search.md) the model searches as turns of the flow."""
    assert ref.model is not None
    case = ref.case
    expects = ref.expectations()
    result["flow"] = True
    result["order"] = case.order_mode
    trajectory: list[TrajectoryTurn] = []
    searches = Searches(search, catalog) if search is not None else None
    try:
        unknown = unknown_mock_tools(case, catalog)  # checked at collection for a tools_file, here for live servers
        if unknown:
            raise CaseError("; ".join(unknown))
        if search is not None:
            check_search(ref, search, catalog, result)
        replies, final, finished, unmatched = await _converse(runtime, ref, catalog, repeat, trajectory, searches)
        result["turns"] = len(replies)
        result["unmatched"] = unmatched
        result["final_answer"] = _cap(final)  # kept when the judge fails: its error is about this answer
        claims, judge_usage = await _claims(runtime, ref, final, repeat)
    except (ModelCallError, JudgeError) as exc:  # their messages name the model (the report names the case)
        if isinstance(exc, Blocked):
            _ending(result, trajectory)
            result["blocked"] = exc.reason
        return _error(result, expects, str(exc).removeprefix(f"{runtime.label(ref)}: "), trajectory)
    except Misplaced as exc:
        return _error(result, expects, str(exc), trajectory)
    except (CaseError, ServerError) as exc:
        return _error(result, expects, f"{result['file']}:{result['line']}: case `{case.id}`: {exc}", trajectory)
    threshold = ref.bench.claims_threshold(case, runtime.claims_threshold)
    scored = [{**turn, "calls": [c for c in turn["calls"] if c["answer"]["source"] != "search"]} for turn in trajectory]
    result.update(score_flow(expects, case.order_mode, case.forbid, cast(list[TrajectoryTurn], scored), catalog,
                             turn_limit=not finished, claims=claims, claims_threshold=threshold))
    _ending(result, trajectory)
    last = replies[-1] if finished and replies else None
    written = text_calls(last, catalog) if last is not None else []
    if written:
        result["text_calls"] = written
    if last is not None:  # the reply that ended the flow: did the model choose to stop there?
        result["diagnosis"] = stops.refine(result["diagnosis"], last.finish_reason, last.provider_finish_reason,
                                           False, bool(written))
    if searches is not None:  # what the searches found, and whether they or the choice missed (scoring.search)
        searched_diagnosis(result, searches.view([e.tool for e in expects]), [e.tool for e in expects])
    result["claims"] = claims
    if judge_usage:
        result["judge_usage"] = judge_usage
    if ref.model.name not in runtime.facts.params_sent:  # once per process, for the run (run/facts.py)
        from pytest_mcpeval.models import params_sent

        # a replay has them from the cache entry: no litellm import
        known = next((r.params_sent for r in replies if r.params_sent is not None), None)
        runtime.facts.note_model(ref.model.name, known if known is not None else params_sent(ref.model))
    result["trajectory"] = _capped(trajectory)
    result["final_answer"] = _cap(final)
    if final is not None and len(final) > CONTENT_CAP:
        result["content_truncated"] = len(final)
    result["usage"], result["latency_s"] = summed_usage(replies, judge_usage)
    return cast(CaseResult, result)  # made UTF-8 safe (and masked) where every result goes: run/item.py


# -- the conversation -------------------------------------------------------------------------------


async def _converse(runtime: Engine, ref: CaseRef, catalog: Catalog, repeat: int, trajectory: list[TrajectoryTurn],
                    searches: Searches | None = None) -> tuple[list[ModelReply], str | None, bool, list[CalledTool]]:
    """Run the loop, filling ``trajectory``: ``(replies, final answer, finished, unmatched calls)``.

    ``finished`` is False at the turn limit (the last reply still called tools)."""
    assert ref.model is not None
    unit = runtime.unit(ref, catalog, repeat)
    shown = catalog if searches is None else searches.shown()  # under search: the search tool and the tools found
    if searches is not None:
        unit = Unit.make(ref.model, unit.messages, shown, repeat, runtime.label(ref))
    conversation = copy.deepcopy(unit.messages)
    max_turns = ref.bench.max_turns(ref.case)
    replies: list[ModelReply] = []
    unmatched: list[CalledTool] = []
    used: set[str] = set()  # tool-call ids of the conversation
    for turn in range(max_turns):
        reply = await runtime.dispatcher.fetch(unit)  # other flows go on meanwhile, on the same loop
        replies.append(reply)
        if not reply.fills_arguments:
            raise CaseError(f"model {ref.model.name} ranks tools and cannot hold a conversation: a flow needs a "
                            "model that calls tools with arguments")
        reason = stops.blocked(reply.finish_reason, reply.provider_finish_reason)
        if reason is not None:  # the provider withheld the reply: the flow has no choice of the model to score
            trajectory.append(_turn({"calls": [], "content": reply.content}, reply))
            raise Blocked(stops.blocked_message(f"{ref.model.name} ({ref.model.target})", reason, turn), reason)
        if not reply.calls:
            trajectory.append(_turn({"calls": [], "content": reply.content}, reply))
            return replies, reply.content, True, unmatched
        earlier = [call for done in trajectory for call in done["calls"]]
        calls: list[TrajectoryCall] = []
        for index, raw in enumerate(reply.calls):
            fresh = raw.id and raw.id not in used  # an answer must name one call: a repeated id is replaced too
            id_ = raw.id if fresh else call_id(turn, index)
            used.add(id_)
            if searches is not None and SEARCH_TOOL in shown.by_name and shown.mcp_name(raw.name) == SEARCH_TOOL:
                calls.append(await searched(searches, raw, id_))
                continue
            calls.append(await _answered(runtime, ref, catalog, raw, id_, earlier, unmatched))
        trajectory.append(_turn({"calls": calls, "content": reply.content}, reply))
        if turn + 1 == max_turns:
            break
        conversation.append(assistant_message(reply, calls))
        conversation.extend(tool_message(call["id"], call["answer"]["text"], call["answer"]["is_error"],
                                         ref.model.target) for call in calls)
        shown = catalog if searches is None else searches.shown()
        unit = Unit.make(ref.model, copy.deepcopy(conversation), shown, repeat,
                         f"{runtime.label(ref)} (turn {turn + 2})")
    return replies, None, False, unmatched


def _turn(turn: TrajectoryTurn, reply: ModelReply) -> TrajectoryTurn:
    """``turn`` with the reply's finish reasons, when it has them."""
    if reply.finish_reason is not None:
        turn["finish_reason"] = reply.finish_reason
    if reply.provider_finish_reason is not None:
        turn["provider_finish_reason"] = reply.provider_finish_reason
    return turn


def assistant_message(reply: ModelReply, calls: list[TrajectoryCall]) -> dict[str, Any]:
    """The model's turn as the next request sends it back: its text and its calls as it made them, with what the
    provider needs back unchanged (litellm's names: the reply's signed ``thinking_blocks``, which Anthropic
    requires at the start of a tool-use turn when thinking is on, and a call's ``provider_specific_fields``,
    where a Gemini call's ``thought_signature`` rides)."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": reply.content,
        "tool_calls": [
            {"id": call["id"], "type": "function", "function": {"name": raw.name, "arguments": raw.arguments},
             **({"provider_specific_fields": dict(raw.fields)} if raw.fields else {})}
            for raw, call in zip(reply.calls, calls, strict=True)
        ],
    }
    if reply.thinking_blocks:
        message["thinking_blocks"] = [dict(block) for block in reply.thinking_blocks]
    return message


# -- answers ----------------------------------------------------------------------------------------------


async def _answered(runtime: Engine, ref: CaseRef, catalog: Catalog, raw: RawCall, id_: str,
              earlier: list[TrajectoryCall], unmatched: list[CalledTool]) -> TrajectoryCall:
    called = parse_call(raw.name, raw.arguments, catalog)
    answer = await _answer(runtime, ref, catalog, called, earlier)
    if answer is None:
        tool = called["tool"]
        answer = {"source": "unmatched", "is_error": True, "text": f"no mock matches tool {tool} with these arguments"}
        unmatched.append(called)
    call: TrajectoryCall = {"id": id_, "tool": called["tool"], "args": called.get("args"), "answer": answer}
    if "malformed" in called:
        call["raw"] = called["raw"]
        call["malformed"] = called["malformed"]
    return call


async def _answer(runtime: Engine, ref: CaseRef, catalog: Catalog, called: CalledTool,
            earlier: list[TrajectoryCall]) -> ToolAnswerView | None:
    """The answer of a mock or of the live server; an error result the model sees for a call that cannot be
    made; ``None`` when no mock matches a call that could have been answered (a gap of the file)."""
    tool = called["tool"]
    args = called.get("args")
    for k, mock in enumerate(ref.case.mocks.get(tool, [])):
        if mock.when is None:
            return _mocked(mock.result)
        if args is None:
            continue  # malformed arguments match no `when`
        when, _ = bind(ref.bench.mock_matchers[(ref.case.id, tool, k)], earlier)
        if when is None or not check_object(when, args, allow_extra=True):
            return _mocked(mock.result)
    if args is None:  # the model's mistake: it may recover from it
        return {"source": "invalid", "is_error": True, "text": f"invalid arguments: {called.get('malformed')}"}
    if tool not in catalog.by_name:
        return {"source": "invalid", "is_error": True, "text": f"unknown tool: {tool}"}
    if ref.case.execute == "live":
        answer = await runtime.pool.call_tool(catalog, tool, args, runtime.pool.timeout)
        view: ToolAnswerView = {"source": "live", "is_error": answer.is_error, "text": answer.text}
        if answer.structured is not None:
            view["structured"] = answer.structured
        return view
    return None


def _mocked(result: MockResult) -> ToolAnswerView:
    if result.error is not None:
        return {"source": "mock", "is_error": True, "text": result.error}
    if "structured" in result.model_fields_set:
        return {"source": "mock", "is_error": False, "text": canonical_json(result.structured),
                "structured": result.structured}
    return {"source": "mock", "is_error": False, "text": result.text}


# -- claims ---------------------------------------------------------------------------------------------


async def _claims(runtime: Engine, ref: CaseRef, final: str | None, repeat: int,
            ) -> tuple[list[ClaimView], dict[str, CaseUsage]]:
    """The claims' views in the file's order (checks here, the rest by the judge) and the judge's usage."""
    claims = ref.case.claims
    views: list[ClaimView | None] = [checked_claim(c, final) if c.check is not None else None for c in claims]
    judged = [c for c in claims if c.check is None]
    if not judged:
        return cast(list[ClaimView], views), {}
    judge = runtime.judge
    if judge is None:
        raise CaseError("claims without `check` need a judge model (--mcp-judge-model or ini mcp_judge_model)")
    verdicts, usage = await judge_claims(runtime.dispatcher, judge, judged, final, runtime.label(ref), repeat)
    found = iter(verdicts)
    filled = [view if view is not None else next(found) for view in views]
    return filled, {judge.name: cast(CaseUsage, usage)} if usage else {}  # no answer: nothing was asked


# -- the result -----------------------------------------------------------------------------------------


def summed_usage(replies: list[ModelReply], judge_usage: dict[str, CaseUsage]) -> tuple[CaseUsage, float]:
    fresh = [r for r in replies if not r.cached]
    costs = [r.cost_usd for r in fresh]
    usage: CaseUsage = {
        "prompt_tokens": sum(r.usage.get("prompt_tokens", 0) for r in replies),
        "completion_tokens": sum(r.usage.get("completion_tokens", 0) for r in replies),
        "cost_usd": None if any(c is None for c in costs) else sum(c for c in costs if c is not None),
        "cached": not fresh and all(u.get("cached", False) for u in judge_usage.values()),
        "attempts": 1 + sum(r.attempts - 1 for r in fresh),
    }
    if read := sum(r.usage.get("cache_read_tokens", 0) for r in replies):  # where the provider reported them
        usage["cache_read_tokens"] = read
    if written := sum(r.usage.get("cache_write_tokens", 0) for r in replies):
        usage["cache_write_tokens"] = written
    return usage, round(sum(r.latency_s for r in fresh), 4)


def _cap(text: str | None) -> str | None:
    return text[:CONTENT_CAP] if text is not None and len(text) > CONTENT_CAP else text


def _capped(trajectory: list[TrajectoryTurn]) -> list[TrajectoryTurn]:
    """The transcript as the result keeps it: each text at most ``CONTENT_CAP`` characters."""
    out: list[TrajectoryTurn] = []
    for turn in trajectory:
        calls: list[TrajectoryCall] = []
        for call in turn["calls"]:
            answer: ToolAnswerView = {**call["answer"], "text": _cap(call["answer"]["text"])}
            calls.append({**call, "answer": answer})
        out.append({**turn, "calls": calls, "content": _cap(turn["content"])})
    return out


def _error(result: dict[str, Any], expects: Any, message: str, trajectory: list[TrajectoryTurn]) -> CaseResult:
    """An error result that keeps the transcript so far (what led to the failure)."""
    result["trajectory"] = _capped(trajectory)
    result.setdefault("turns", len(trajectory))
    return error_result(result, expects, message)
