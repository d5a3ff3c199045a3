"""What any model client returns: the calls it made, its text, usage, and (for retrievers) a ranking.

:meth:`ModelReply.to_entry` is what the response cache stores: everything a replay needs (the calls
unchanged, usage, cost) and no raw response body.  Text content beyond :data:`CACHE_CONTENT_CAP`
characters is cut there, and ``content_truncated`` keeps the original length (nothing is scored on the
text; the report keeps less of it anyway).

A call keeps the id the provider gave it (``""`` when it gave none, and in entries written before ids were
kept): a flow sends it back with the call's answer, and the next request's cache key hashes it, so a
replayed flow sends the same conversation.  The flow engine gives a call without an id the deterministic
``call_{turn}_{index}`` (:func:`pytest_mcpeval.run.flow.call_id`).

What a provider needs back unchanged on a flow's later turns is kept too, in the entry as well (so a replayed
flow sends the same conversation): the reply's signed ``thinking_blocks`` (Anthropic's extended thinking) and a
call's ``fields`` (a Gemini call's ``thought_signature``).  Both are left out of an entry that has none, so
entries without them read and write as before.

A reply to a request under the provider's own tool search (docs/tool-search.md, native search) keeps ``searches``: each
search the provider ran, in order, as ``{"query": TEXT, "tools": [API names surfaced, best first]}`` (and
``"error"``: the provider's error code, when it answered one); the entry keeps them, so a replay reads the same
searches.  Left out of an entry without them.

A reply from litellm also keeps ``params_sent`` (what the report shows of the parameters the call was made
with): the cache entry carries it beside the reply, so a replay needs no litellm to report it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

CACHE_CONTENT_CAP = 1_000_000  # characters of a reply's text a cache entry keeps


@dataclass
class RawCall:
    """A tool call as the model made it: the API name, the argument text (unparsed), the provider's id."""

    name: str
    arguments: str
    id: str = field(default="", compare=False)  # "" when the provider gave none; not part of what the call is
    # what the provider needs back with the call on later turns ({"thought_signature": ...} for Gemini)
    fields: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass
class ModelReply:
    calls: list[RawCall] = field(default_factory=list)
    content: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    latency_s: float = 0.0
    # seconds this call spent on one-off setup before it could answer (the local model's load, a catalog's
    # embeddings): kept out of latency_s, reported apart; never in a cache entry (a replay loads nothing)
    load_s: float = 0.0
    cost_usd: float | None = None  # litellm's cost map (offline); None when the model is not in it
    cached: bool = False  # replayed from the cache: no cost, no latency
    attempts: int = 1
    fills_arguments: bool = True  # False for retrievers: argument metrics do not apply
    ranking: list[tuple[str, float]] | None = None  # every tool, best first (retrievers only)
    top_k: int = 10  # how much of the ranking the report keeps
    content_truncated: int | None = None  # the original length when ``content`` was cut (a replay)
    # what the call sent besides the request (litellm_client.params_sent), kept in the cache entry so that a
    # replay reports it without importing litellm; None for a retriever and in entries written before it was kept
    params_sent: dict[str, Any] | None = None
    # the signed thinking blocks of the reply, sent back unchanged with the assistant turn of a flow
    thinking_blocks: list[dict[str, Any]] | None = None
    # why the reply ended: litellm's normalised reason (stop, length, tool_calls, content_filter; None for a
    # retriever and in entries written before it was kept), and the provider's own where litellm keeps it
    # (Gemini's finishReason, Anthropic's refusal / pause_turn): MALFORMED_FUNCTION_CALL is "stop" normalised
    finish_reason: str | None = None
    provider_finish_reason: str | None = None
    # the shapes ("fence", "json", "tag") of the calls a serving layer parsed from the reply's text (models/llama)
    parsed_from_text: str | None = None
    # the searches the provider ran for this reply (native tool search), in order; None without
    searches: list[dict[str, Any]] | None = None

    def to_entry(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("cached")
        data.pop("load_s")
        for call in data["calls"]:
            if not call["id"]:
                del call["id"]
            if not call["fields"]:
                del call["fields"]
        if not data["thinking_blocks"]:
            del data["thinking_blocks"]
        if self.content is not None and len(self.content) > CACHE_CONTENT_CAP:
            data["content"] = self.content[:CACHE_CONTENT_CAP]
            data["content_truncated"] = self.content_truncated or len(self.content)
        if data["content_truncated"] is None:
            del data["content_truncated"]
        if data["parsed_from_text"] is None:
            del data["parsed_from_text"]
        if data["searches"] is None:
            del data["searches"]
        del data["params_sent"]  # kept beside the reply in the entry (run.dispatch)
        return data

    @classmethod
    def from_entry(cls, data: dict[str, Any]) -> ModelReply:
        calls = [RawCall(str(c["name"]), str(c["arguments"]), str(c.get("id") or ""), dict(c.get("fields") or {}))
                 for c in data.get("calls", [])]
        blocks = data.get("thinking_blocks")
        searches = data.get("searches")
        ranking = data.get("ranking")
        return cls(
            calls=calls,
            content=data.get("content"),
            usage={str(k): int(v) for k, v in (data.get("usage") or {}).items()},
            latency_s=float(data.get("latency_s") or 0.0),
            cost_usd=data.get("cost_usd"),
            attempts=int(data.get("attempts") or 1),
            fills_arguments=bool(data.get("fills_arguments", True)),
            ranking=[(str(n), float(s)) for n, s in ranking] if ranking is not None else None,
            top_k=int(data.get("top_k") or 10),
            content_truncated=int(data["content_truncated"]) if data.get("content_truncated") else None,
            thinking_blocks=[dict(b) for b in blocks] if isinstance(blocks, list) and blocks else None,
            finish_reason=str(data["finish_reason"]) if data.get("finish_reason") else None,
            provider_finish_reason=str(data["provider_finish_reason"]) if data.get("provider_finish_reason") else None,
            parsed_from_text=str(data["parsed_from_text"]) if data.get("parsed_from_text") else None,
            searches=[dict(s) for s in searches if isinstance(s, dict)] if isinstance(searches, list) else None,
        )
