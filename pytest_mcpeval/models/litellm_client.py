"""The litellm path: one chat completion with the full tool list, with retries and a deadline (:func:`acomplete`).

Imported only when a case actually runs (litellm costs seconds to import: :mod:`.litellm_load`).  litellm's own
environment variables (``OPENAI_API_BASE``, ``ANTHROPIC_API_KEY``, ...) work as documented by litellm.  The parts
live beside it: the parameters sent (:mod:`.litellm_params`), why an attempt failed and how long to wait
(:mod:`.litellm_failures`).

Calls are litellm's async API on the process's event loop (:mod:`pytest_mcpeval.core`).  ``timeout``
(``--mcp-timeout``) is a deadline for each attempt as a whole, a cancel scope around the awaited call:
connecting, the headers and the whole body (httpx, which litellm hands the timeout, applies it to each read
alone, so a provider that sends a byte every few seconds could keep a call going for minutes).  Retries sleep
on the loop, ``Retry-After`` first.

Messages are sent as given, in the OpenAI chat format, which litellm translates for other providers; a
flow's conversation holds assistant messages with ``tool_calls`` (``id``, ``type: function``, ``function``
with ``name`` and ``arguments`` text) and ``tool`` messages (``tool_call_id``, ``content``).  litellm gets a
copy (the caller hashes the conversation into cache keys).  Each call's ``id`` is kept on the reply (``""``
when the provider gave none: :func:`_call_id`).

A reply keeps its finish reason: litellm's normalised one and the provider's own where litellm keeps it
(:func:`_finish_reasons`), and the searches the provider ran under its own tool search (:func:`_server_searches`).

One reply litellm cannot hand over is read on this side of the call: tool-call arguments nested deeper than
``json`` can parse (litellm parses them to spot OpenAI's ``multi_tool_use.parallel`` and rejects the whole,
well-formed completion on the ``RecursionError``).  The provider's answer as litellm received it reaches the
per-call ``logger_fn`` (a documented parameter of a call), and :func:`_deep_reply` builds the reply from it: the
model made a malformed call, a miss (``malformed_call``), not an error of the provider.
"""

from __future__ import annotations

import copy
import json
import random
import re
import time
from typing import Any

from pytest_mcpeval.bounds import depth_exceeds
from pytest_mcpeval.defaults import DEFAULT_RETRIES, DEFAULT_TIMEOUT
from pytest_mcpeval.models.common import KeyRejected, ModelCallError
from pytest_mcpeval.models.config import ModelSpec
from pytest_mcpeval.models.cost import read_usage, response_cost, with_cache_breakpoints
from pytest_mcpeval.models.litellm_failures import _retry_after, backoff, classify
from pytest_mcpeval.models.litellm_load import load_litellm
from pytest_mcpeval.models.litellm_params import params_sent, request_params
from pytest_mcpeval.models.reply import ModelReply, RawCall

__all__ = ["DeadlinePassed", "acomplete", "classify", "complete", "load_litellm", "params_sent", "request_params"]

# the ids litellm gives a tool call the provider sent without one: str(uuid.uuid4()) (Ollama, and others),
# f"call_{uuid.uuid4()}", f"call_{uuid.uuid4().hex[:28]}" (Gemini), f"call_{uuid.uuid4().hex}" (Bedrock), ...
LITELLM_MADE_ID = re.compile(
    r"(call_)?([0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}|[0-9a-f]{16,32})")
# litellm appends a Gemini thought signature to the call's id (litellm_core_utils/prompt_templates/factory.py
# THOUGHT_SIGNATURE_SEPARATOR) as well as putting it in the call's provider_specific_fields
THOUGHT_SEPARATOR = "__thought__"


class DeadlinePassed(Exception):
    """An attempt that had no whole answer by its deadline; :func:`classify` reads it as any timeout (retried)."""

    def __init__(self, timeout: float) -> None:
        super().__init__("timed out")  # the line names the deadline: "Timeout: no answer within 2 s (--mcp-timeout)"
        self.timeout = timeout


def complete(model: ModelSpec, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
             retries: int = DEFAULT_RETRIES, timeout: float = DEFAULT_TIMEOUT, seed: int = 0,
             timeout_option: str = "--mcp-timeout") -> ModelReply:
    """:func:`acomplete` for a caller outside a run (tune's proposer, draft's drafter): on a loop of its own."""
    from pytest_mcpeval.core import Core

    core = Core()
    try:
        return core.call(acomplete, model, messages, tools, retries, timeout, seed, timeout_option)
    finally:
        core.close()


async def acomplete(model: ModelSpec, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                    retries: int = DEFAULT_RETRIES, timeout: float = DEFAULT_TIMEOUT, seed: int = 0,
                    timeout_option: str = "--mcp-timeout") -> ModelReply:
    """One chat completion with ``tools``; raises :class:`ModelCallError` once retries are spent (a timeout's
    message names ``timeout_option``: the tune command's proposer has its own)."""
    if model.target.startswith("llama-server/"):  # local/qwen2.5-coder-*: the llama.cpp route (models/llama)
        from pytest_mcpeval.models.llama import route
        return await route.acomplete(model, messages, tools, acomplete, ModelCallError, retries=retries,
                                     timeout=timeout, seed=seed, timeout_option=timeout_option)
    import anyio

    litellm = load_litellm()
    retries = int(model.params.get("num_retries", retries))
    # a copy: the caller's conversation is hashed into cache keys, and providers' adapters may edit messages
    # (Anthropic: cache_control breakpoints on the catalog and system prompt, unless --mcp-prompt-cache=off)
    messages, tools = with_cache_breakpoints(model, copy.deepcopy(messages), tools)
    kwargs: dict[str, Any] = {"model": model.target, "messages": messages, "timeout": timeout,
                              **request_params(model), "num_retries": 0}
    if tools:
        kwargs["tools"] = tools
    # the deadline of each attempt: --mcp-timeout, or a timeout in seconds the user gave in mcp_model_params
    given = kwargs.get("timeout")
    deadline = float(given) if isinstance(given, int | float) and not isinstance(given, bool) and given > 0 else timeout
    rng = random.Random(seed)  # jitter is seeded per request: runs are reproducible
    attempt = 0
    started = time.perf_counter()
    while True:
        attempt += 1
        received: list[Any] = []
        kwargs["logger_fn"] = lambda details, seen=received: _keep_raw(details, seen)
        try:
            with anyio.fail_after(deadline):
                response = await litellm.acompletion(**kwargs)
            break
        except TimeoutError:
            failure = classify(DeadlinePassed(deadline), model, deadline, timeout_option)
            error: Exception = DeadlinePassed(deadline)
        except Exception as exc:  # litellm maps every provider failure onto its exception classes
            deep = _deep_reply(received, model, attempt, time.perf_counter() - started)
            if deep is not None:
                return deep
            failure = classify(exc, model, deadline, timeout_option)
            error = exc
        if attempt > retries or not failure.retry:
            tries = f" after {attempt} attempts" if attempt > 1 else ""
            kind = KeyRejected if failure.key_rejected else ModelCallError
            raise kind(f"model {model.name} ({model.target}){tries}: {failure.message}") from None
        await anyio.sleep(backoff(attempt, rng, _retry_after(error, timeout)))
    latency = time.perf_counter() - started
    choices = getattr(response, "choices", None)
    message_obj = getattr(choices[0], "message", None) if choices else None
    if message_obj is None:  # the provider answered, with nothing to score: an error, never a miss
        what = "no choices" if not choices else "a choice without a message"
        raise ModelCallError(f"model {model.name} ({model.target}): the response has {what}: the provider "
                             "returned an empty completion (nothing to score)")
    calls = [
        RawCall(name=str(call.function.name or ""), arguments=call.function.arguments or "", id=_call_id(call),
                fields=_call_fields(call))
        for call in (getattr(message_obj, "tool_calls", None) or [])
    ]
    hidden = getattr(response, "_hidden_params", None) or {}
    finish, native = _finish_reasons(choices[0] if choices else None, message_obj)
    return ModelReply(calls=calls, content=message_obj.content, usage=read_usage(getattr(response, "usage", None)),
                      latency_s=latency, cost_usd=response_cost(model, hidden.get("response_cost")),
                      attempts=attempt, params_sent=params_sent(model), thinking_blocks=_thinking_blocks(message_obj),
                      finish_reason=finish, provider_finish_reason=native, searches=_server_searches(message_obj))


def _server_searches(message: Any) -> list[dict[str, Any]] | None:
    """The searches of the provider's own tool search in the reply (docs/tool-search.md, native search), in order, each
    ``{"query", "tools"}`` (the tool names it surfaced, best first) and ``"error"`` (the provider's error code);
    ``None`` when it ran none.  Anthropic answers a search with a ``server_tool_use`` block (``input.query``) and a
    ``tool_search_tool_result`` block (``content.tool_references``: ``{"type": "tool_reference", "tool_name"}``, or
    ``content.error_code``).  litellm keeps both in the message's ``provider_specific_fields``: the first as an
    OpenAI-style call in ``server_tool_calls`` (left out of ``tool_calls``: nothing for the client to run), the second
    as it came in ``tool_results`` (litellm/llms/anthropic/chat/transformation.py, _build_provider_specific_fields)."""
    fields = getattr(message, "provider_specific_fields", None)
    if not isinstance(fields, dict):
        return None
    results = {r.get("tool_use_id"): r for r in fields.get("tool_results") or []
               if isinstance(r, dict) and r.get("type") == "tool_search_tool_result"}
    searches: list[dict[str, Any]] = []
    for call in fields.get("server_tool_calls") or []:
        call = dict(call) if isinstance(call, dict) else {}
        function = call.get("function")
        function = function if isinstance(function, dict) else {}
        result = results.get(call.get("id"))
        if result is None and not str(function.get("name") or "").startswith("tool_search"):
            continue  # another server tool (web search, code execution)
        try:
            args = json.loads(function.get("arguments") or "{}")
        except (ValueError, RecursionError):
            args = None
        query = (args.get("query") or args.get("pattern")) if isinstance(args, dict) else None
        search: dict[str, Any] = {"query": query if isinstance(query, str) else "", "tools": []}
        content = result.get("content") if result is not None else None
        if isinstance(content, dict) and isinstance(content.get("tool_references"), list):
            search["tools"] = [str(r["tool_name"]) for r in content["tool_references"]
                               if isinstance(r, dict) and r.get("type") == "tool_reference" and r.get("tool_name")]
        elif isinstance(content, dict) and content.get("error_code"):
            search["error"] = str(content["error_code"])
        else:  # no result block for the search (or one of another shape): it surfaced nothing the reply shows
            search["error"] = "no result"
        searches.append(search)
    return searches or None


def _keep_raw(details: Any, seen: list[Any]) -> None:
    """litellm's ``logger_fn``: keep the provider's answer as received (``original_response``, after the call)."""
    if isinstance(details, dict) and details.get("original_response") is not None:
        seen.append(details["original_response"])


def _deep_reply(received: list[Any], model: ModelSpec, attempt: int, latency: float) -> ModelReply | None:
    """The reply litellm rejected because a tool call's arguments nest too deep to parse, built from the answer as
    received: its calls (names and argument text, which scoring reads as malformed), text and finish reason;
    ``None`` when the failure was anything else."""
    raw = received[-1] if received else None
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError):
            return None
    choices = raw.get("choices") if isinstance(raw, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
    message = choice.get("message") if choice is not None else None
    if not isinstance(message, dict) or not isinstance(message.get("tool_calls"), list):
        return None
    calls: list[RawCall] = []
    for call in message["tool_calls"]:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            return None
        arguments = function.get("arguments")
        calls.append(RawCall(name=str(function.get("name") or ""), arguments=arguments if isinstance(arguments, str)
                             else "", id=_call_id_text(str(call.get("id") or ""))))
    if not any(_too_deep(c.arguments) for c in calls):
        return None
    content = message.get("content")
    finish = choice.get("finish_reason") if choice is not None else None
    return ModelReply(calls=calls, content=content if isinstance(content, str) else None, usage={},
                      latency_s=latency, cost_usd=None, attempts=attempt, params_sent=params_sent(model),
                      finish_reason=str(finish) if finish else None)


def _too_deep(text: str) -> bool:
    try:
        return depth_exceeds(json.loads(text))
    except RecursionError:
        return True
    except ValueError:
        return False


def _call_id_text(found: str) -> str:
    found = found.split(THOUGHT_SEPARATOR, 1)[0]
    return "" if LITELLM_MADE_ID.fullmatch(found) else found


def _finish_reasons(choice: Any, message: Any) -> tuple[str | None, str | None]:
    """Why the reply ended: litellm's normalised ``finish_reason`` and the provider's own reason where litellm
    keeps it, else ``None``.  litellm maps each provider's reason onto OpenAI's (Anthropic ``max_tokens`` and
    Gemini ``MAX_TOKENS`` to ``length``, Gemini ``SAFETY`` and a blocked prompt and Anthropic ``refusal`` to
    ``content_filter``) and keeps the original only in places of its own: Gemini's candidate ``finishReason``
    as the choice's ``provider_specific_fields["native_finish_reason"]`` (not for a safety stop or a blocked
    prompt, which it answers itself), Anthropic's ``refusal`` / ``pause_turn`` as the message's
    ``provider_specific_fields["stop_reason"]``.  Gemini's ``MALFORMED_FUNCTION_CALL`` is ``stop`` normalised:
    only the native reason tells it from a reply that chose to call nothing."""
    finish = getattr(choice, "finish_reason", None)
    native: Any = None
    for owner in (choice, message):
        fields = getattr(owner, "provider_specific_fields", None)
        if isinstance(fields, dict):
            native = fields.get("native_finish_reason") or fields.get("stop_reason") or native
    finish_text = str(finish) if finish else None
    native_text = str(native) if native else None
    return finish_text, native_text if native_text != finish_text else None


def _call_id(call: Any) -> str:
    """The provider's id of a tool call; ``""`` when it gave none.  litellm then makes one up (a random UUID, or
    ``call_<random hex>`` for Gemini, with the call's thought signature appended), which would change the next
    request of a flow (and its cache key) on every run: the flow engine gives such a call a deterministic id
    instead (the signature goes back in :func:`_call_fields`)."""
    return _call_id_text(str(getattr(call, "id", None) or ""))


def _call_fields(call: Any) -> dict[str, Any]:
    """What litellm keeps of a tool call beyond the OpenAI format and needs back on later turns, unchanged: a
    Gemini call's ``thought_signature`` (Google: it must be returned with the call, or Gemini 3 refuses the
    request; ai.google.dev/gemini-api/docs/thought-signatures)."""
    fields = getattr(call, "provider_specific_fields", None)
    fields = dict(fields) if isinstance(fields, dict) else {}
    found = str(getattr(call, "id", None) or "")
    if THOUGHT_SEPARATOR in found and not fields.get("thought_signature"):
        fields["thought_signature"] = found.split(THOUGHT_SEPARATOR, 1)[1]
    return json.loads(json.dumps(fields, default=str)) if fields.get("thought_signature") else {}


def _thinking_blocks(message: Any) -> list[dict[str, Any]] | None:
    """The reply's signed thinking blocks (Anthropic's ``thinking`` with its ``signature``, ``redacted_thinking``
    with its ``data``), as litellm gives them: a flow sends them back unchanged with the assistant turn (Anthropic
    refuses a tool-use turn without them when thinking is on).  Blocks without a signature (Gemini's thought
    summaries) are not needed back and are left out."""
    blocks = getattr(message, "thinking_blocks", None)
    if not isinstance(blocks, list):
        return None
    kept = [json.loads(json.dumps(dict(b), default=str)) for b in blocks
            if isinstance(b, dict) and (b.get("signature") or b.get("data"))]
    return kept or None
