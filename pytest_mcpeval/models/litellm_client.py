"""The litellm path: one chat completion with the full tool list, with retries and a timeout.

Imported only when a case actually runs (litellm costs seconds to import).  Before the import the
offline switches are set (unless the user set them), so litellm reads its bundled cost map and fetches
nothing on its own.  litellm's own environment variables (``OPENAI_API_BASE``, ``ANTHROPIC_API_KEY``,
...) work as documented by litellm.

Retries are ours, not litellm's (its ``num_retries`` is forced to 0): rate limits (429), timeouts,
connection errors and 5xx answers are retried with exponential backoff and full jitter, honouring a
``Retry-After`` header; other errors (bad request, authentication, unknown model) fail at once.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

from pytest_mcpeval.models import ModelCallError
from pytest_mcpeval.models.config import ModelSpec
from pytest_mcpeval.models.reply import ModelReply, RawCall

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

DEFAULT_RETRIES = 3
DEFAULT_TIMEOUT = 120.0
BACKOFF_BASE = 1.0
BACKOFF_CAP = 30.0
RETRY_AFTER_CAP = 120.0
TRANSIENT = ("RateLimitError", "Timeout", "APIConnectionError", "InternalServerError", "ServiceUnavailableError",
             "APIError", "BadGatewayError")


def _is_transient(exc: Exception) -> bool:
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return status == 429 or status == 408 or status >= 500
    return type(exc).__name__ in TRANSIENT


def _retry_after(exc: Exception) -> float | None:
    """Seconds from a ``Retry-After`` header on the error, if the provider sent one."""
    headers: Any = None
    response = getattr(exc, "response", None)
    if response is not None:
        headers = getattr(response, "headers", None)
    headers = headers or getattr(exc, "litellm_response_headers", None)
    if not headers:
        return None
    try:
        value = headers.get("retry-after") or headers.get("Retry-After")
        return min(float(value), RETRY_AFTER_CAP) if value is not None else None
    except (TypeError, ValueError, AttributeError):
        return None


def backoff(attempt: int, rng: random.Random, retry_after: float | None = None) -> float:
    """Seconds to wait before retry number ``attempt`` (1-based): full jitter, or the server's wish."""
    if retry_after is not None:
        return retry_after
    return rng.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1)))


def complete(model: ModelSpec, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
             retries: int = DEFAULT_RETRIES, timeout: float = DEFAULT_TIMEOUT, seed: int = 0) -> ModelReply:
    """One chat completion with ``tools``; raises :class:`ModelCallError` once retries are spent."""
    import litellm

    litellm.suppress_debug_info = True
    params = dict(model.params)
    retries = int(params.pop("num_retries", retries))
    kwargs: dict[str, Any] = {"model": model.target, "messages": messages, "timeout": timeout, **params,
                              "num_retries": 0}
    if tools:
        kwargs["tools"] = tools
    rng = random.Random(seed)  # jitter is seeded per request: runs are reproducible
    attempt = 0
    started = time.perf_counter()
    while True:
        attempt += 1
        try:
            response = litellm.completion(**kwargs)
            break
        except Exception as exc:  # litellm maps every provider failure onto its exception classes
            if attempt > retries or not _is_transient(exc):
                text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                tries = f" after {attempt} attempts" if attempt > 1 else ""
                raise ModelCallError(
                    f"model {model.name} ({model.target}){tries}: {type(exc).__name__}: {text}"
                ) from None
            time.sleep(backoff(attempt, rng, _retry_after(exc)))
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
    # litellm prices every response from its (offline) cost map already; None when the model is not in it
    hidden = getattr(response, "_hidden_params", None) or {}
    raw_cost = hidden.get("response_cost")
    cost = float(raw_cost) if isinstance(raw_cost, int | float) else None
    return ModelReply(calls=calls, content=message_obj.content, usage=usage, latency_s=latency,
                      cost_usd=cost, attempts=attempt)
