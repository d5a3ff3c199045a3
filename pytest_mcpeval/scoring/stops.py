"""How a reply ended, and what that changes in its verdict (docs/metrics.md#stop-reasons).

A reply's finish reason (litellm's normalised one, and the provider's own where litellm keeps it:
:func:`pytest_mcpeval.models.litellm_client._finish_reasons`) says whether the model chose what it did:

* ``content_filter`` (Gemini ``SAFETY`` and the other block reasons, a prompt blocked by
  ``promptFeedback.blockReason``, Azure's content filter, Anthropic's ``refusal``): the provider withheld the
  reply, the model chose nothing.  The case is an error (:func:`blocked`), never a pass and never a miss.
* ``length`` (Anthropic ``max_tokens``, Gemini ``MAX_TOKENS``, OpenAI-style ``length``): the reply was cut off
  by the token limit; a miss is diagnosed ``truncated`` unless its first call already named the wrong tool.
* Gemini ``MALFORMED_FUNCTION_CALL`` (``stop`` once normalised): the model tried to call a tool and wrote a
  call Gemini could not parse, which it dropped; a miss without calls is ``malformed_call``.
* A reply without calls whose text holds a call of a shown tool (:mod:`pytest_mcpeval.models.text_calls`):
  the serving side has no tool parser; such a miss is ``tool_call_in_text``.
"""

from __future__ import annotations

from pytest_mcpeval.results.case import MALFORMED_FUNCTION_CALL, TRUNCATED

TOOL_CALL_IN_TEXT = "tool_call_in_text"
# a miss these diagnose was decided by the model before any cut: the cut does not explain it
_CHOSEN = frozenset({"wrong_tool", "tool_use_not_expected", "forbidden_tool"})


def blocked(finish_reason: str | None, provider_reason: str | None) -> str | None:
    """The reason the provider withheld the reply (the provider's own when known), or ``None``."""
    if finish_reason != "content_filter":
        return None
    return provider_reason or finish_reason


def blocked_message(model: str, reason: str, turn: int | None = None) -> str:
    where = f" on turn {turn + 1}" if turn is not None else ""
    return (f"model {model}: blocked by the provider's safety filter ({reason}){where}: the provider withheld the "
            "reply, so there is no choice of the model to score")


def refine(diagnosis: str | None, finish_reason: str | None, provider_reason: str | None, has_calls: bool,
           text_calls: bool) -> str | None:
    """The diagnosis of a miss once the way its (last) reply ended is known; ``None`` stays ``None``."""
    if diagnosis is None:
        return None
    if finish_reason == "length" and diagnosis not in _CHOSEN:
        return TRUNCATED
    if has_calls or diagnosis not in ("no_tool_use", "premature_stop"):
        return diagnosis
    if provider_reason == MALFORMED_FUNCTION_CALL:
        return "malformed_call"
    if text_calls:
        return TOOL_CALL_IN_TEXT
    return diagnosis
