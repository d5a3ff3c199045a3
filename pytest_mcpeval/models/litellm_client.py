"""The one place a model is called: litellm, with the full tool list in the OpenAI format.

Imported only when a case actually runs (litellm costs seconds to import).  Before the import the
offline switches are set (unless the user set them), so litellm reads its bundled cost map and fetches
nothing on its own.  litellm's own environment variables (``OPENAI_API_BASE``, ``ANTHROPIC_API_KEY``,
...) work as documented by litellm.
"""

from __future__ import annotations

import os
import time
from typing import Any

from pytest_mcpeval.models import ModelCallError
from pytest_mcpeval.models.config import ModelSpec
from pytest_mcpeval.models.reply import ModelReply, RawCall

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

DEFAULT_NUM_RETRIES = 2


def complete(model: ModelSpec, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply:
    """One chat completion with ``tools``; raises :class:`ModelCallError` for provider failures."""
    import litellm

    litellm.suppress_debug_info = True
    params: dict[str, Any] = {"num_retries": DEFAULT_NUM_RETRIES, **model.params}
    kwargs: dict[str, Any] = {"model": model.target, "messages": messages, **params}
    if tools:
        kwargs["tools"] = tools
    started = time.perf_counter()
    try:
        response = litellm.completion(**kwargs)
    except Exception as exc:  # litellm maps every provider failure onto its exception classes
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ModelCallError(f"model {model.name} ({model.target}): {type(exc).__name__}: {message}") from None
    latency = time.perf_counter() - started
    try:
        message_obj = response.choices[0].message
    except (AttributeError, IndexError) as exc:
        raise ModelCallError(f"model {model.name}: response without a message ({exc})") from None
    calls = [
        RawCall(name=str(call.function.name or ""), arguments=call.function.arguments or "")
        for call in (getattr(message_obj, "tool_calls", None) or [])
    ]
    usage_obj = getattr(response, "usage", None)
    usage = {
        key: int(getattr(usage_obj, key, 0) or 0) for key in ("prompt_tokens", "completion_tokens")
    } if usage_obj is not None else {}
    return ModelReply(calls=calls, content=message_obj.content, usage=usage, latency_s=latency)
