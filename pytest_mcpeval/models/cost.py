"""What a litellm call costs: its usage with the cached input tokens, its price (or "unknown"), and the prompt-cache
breakpoints that make the catalog's tokens cheap on every request after the first.

Imported by :mod:`pytest_mcpeval.models.litellm_client` only (litellm is loaded by then).

Usage (:func:`read_usage`): ``prompt_tokens`` and ``completion_tokens`` as litellm gives them (litellm's
``prompt_tokens`` counts every input token, the cached ones included, for every provider: Anthropic's
``input_tokens`` + ``cache_read_input_tokens`` + ``cache_creation_input_tokens``, OpenAI's and Gemini's
``prompt_tokens`` as they report them), then ``cache_read_tokens`` (input tokens read from the provider's prompt
cache: OpenAI ``prompt_tokens_details.cached_tokens``, Anthropic ``cache_read_input_tokens``, Gemini
``cachedContentTokenCount``) and ``cache_write_tokens`` (written to it: Anthropic ``cache_creation_input_tokens``;
the others do not bill writes), each only when the provider reported a non-zero count.

Price (:func:`response_cost`): litellm's own ``response_cost``, which already applies the cache prices of the
model's entry in its cost map (``cache_read_input_token_cost``, ``cache_creation_input_token_cost``), so the
report's dollars are the provider's bill for the usage above.  But litellm answers ``0.0``, not "unknown", for a
model it has no price for on some routes (``anthropic/<a name not in the map>``, ``ollama_chat/<any model>``: its
model-info lookup makes up zero prices for them), and ``None`` on others (``openai/<unknown>``, Azure deployment
names, ``hosted_vllm/``).  A cost is therefore kept only when it is positive, or when the model's entry in the
cost map really has a price (``ollama/llama3.1`` is listed at 0: free, as listed), or when the user priced the
model in ``mcp_model_params`` (litellm's ``input_cost_per_token`` / ``output_cost_per_token``); else it is
``None``, which the report shows as "cost unknown", never as free.  A known model name behind a custom
``api_base`` (a proxy, an OpenAI-compatible server serving a model under that name) is priced as that model:
litellm cannot tell, and neither can the plugin; set the price parameters to say otherwise.

Prompt caching (:func:`with_cache_breakpoints`): Anthropic caches a prefix only up to a ``cache_control``
breakpoint the request marks, so with ``--mcp-prompt-cache=auto`` (the default) the last tool of the catalog gets
one (the catalog is the bulk of every request and the same in every case of a file; Anthropic's prefix order is
tools, system, messages) and so does a leading system message (tools and system together): two of the four
breakpoints Anthropic allows.  litellm carries a tool's ``cache_control`` and a content block's onto the
Anthropic request (litellm/llms/anthropic/chat/transformation.py).  OpenAI and Gemini cache long identical
prefixes without being asked: the plugin's requests put the system message, then the catalog, then the case,
in the same bytes for every case of a catalog (tests/providers/test_provider_cost.py checks it on the wire).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from pytest_mcpeval.models.config import ModelSpec

log = logging.getLogger(__name__)

PRICE_PARAMS = frozenset({"input_cost_per_token", "output_cost_per_token", "input_cost_per_second",
                          "output_cost_per_second"})
CACHE_CONTROL = {"type": "ephemeral"}
CACHING_PROVIDERS = frozenset({"anthropic"})  # those that cache only where the request marks a breakpoint

_memo: dict[tuple[str, str], Any] = {}
_memo_lock = threading.Lock()


def _provider(model: ModelSpec) -> tuple[str, str] | None:
    """litellm's ``(model, provider)`` for ``model``; ``None`` when it cannot place it."""
    from pytest_mcpeval.models.litellm_load import load_litellm

    litellm = load_litellm()
    user = model.user_params
    try:
        base, provider, _, _ = litellm.get_llm_provider(
            model.target, custom_llm_provider=user.get("custom_llm_provider"), api_base=user.get("api_base"))
    except Exception as exc:  # the call itself will say why; the model is then unpriced
        log.debug("litellm cannot place %s (%s): no price", model.target, exc)
        return None
    return str(base), str(provider)


def _memoised(kind: str, model: ModelSpec, compute: Any) -> Any:
    key = (kind, model.target + "\0" + ",".join(sorted(k for k in model.user_params if k in PRICE_PARAMS)))
    with _memo_lock:
        if key in _memo:
            return _memo[key]
    value = compute()
    with _memo_lock:
        _memo[key] = value
    return value


def priced(model: ModelSpec) -> bool:
    """Whether litellm has a real price for ``model`` (its cost map lists one, or the user gave one)."""
    def compute() -> bool:
        if PRICE_PARAMS & set(model.user_params):
            return True
        from pytest_mcpeval.models.litellm_load import load_litellm

        litellm = load_litellm()
        placed = _provider(model)
        if placed is None:
            return False
        try:
            info = litellm.get_model_info(model=placed[0], custom_llm_provider=placed[1])
        except Exception as exc:  # "This model isn't mapped yet": unpriced, the report says so
            log.debug("litellm has no model info for %s: %s", model.target, exc)
            return False
        entry = litellm.model_cost.get(str(info.get("key") or "")) or {}
        return "input_cost_per_token" in entry or "output_cost_per_token" in entry  # not litellm's made-up zeros

    return bool(_memoised("priced", model, compute))


def response_cost(model: ModelSpec, raw: Any) -> float | None:
    """The call's cost in USD from litellm's ``response_cost``; ``None`` when the model has no price."""
    if not isinstance(raw, int | float) or isinstance(raw, bool):
        return None
    if raw > 0 or priced(model):
        return float(raw)
    return None


def _count(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else 0


def read_usage(usage: Any) -> dict[str, int]:
    """Tokens of one response: prompt and completion, and the cached input read / written where reported."""
    if usage is None:
        return {}
    out = {key: _count(getattr(usage, key, 0)) for key in ("prompt_tokens", "completion_tokens")}
    details = getattr(usage, "prompt_tokens_details", None)
    read = _count(getattr(details, "cached_tokens", 0)) or _count(getattr(usage, "cache_read_input_tokens", 0))
    written = _count(getattr(usage, "cache_creation_input_tokens", 0)) or _count(
        getattr(details, "cache_creation_tokens", 0))
    if read:
        out["cache_read_tokens"] = read
    if written:
        out["cache_write_tokens"] = written
    return out


def caches_on_request(model: ModelSpec) -> bool:
    """Whether ``model``'s provider caches a prefix only where the request marks it (Anthropic)."""
    placed = _memoised("provider", model, lambda: _provider(model))
    return placed is not None and placed[1] in CACHING_PROVIDERS


def with_cache_breakpoints(model: ModelSpec, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
                           ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``messages`` and ``tools`` with Anthropic ``cache_control`` breakpoints on the last tool and a leading
    system message, when ``model.prompt_cache`` is on and its provider needs them; else unchanged.  The lists
    given are not changed (the caller hashed them into the cache key): copies are marked.  Under native tool search
    the breakpoint goes on the last tool loaded from the start: a deferred tool is not part of the prompt's prefix
    (and litellm sends no ``cache_control`` on the search tool), so with none loaded only the system message has one."""
    if not model.prompt_cache or not caches_on_request(model):
        return messages, tools
    last = next((i for i in range(len(tools) - 1, -1, -1)
                 if tools[i].get("type") == "function" and not tools[i].get("defer_loading")), None)
    if last is not None and "cache_control" not in tools[last]:
        tools = [*tools[:last], {**tools[last], "cache_control": dict(CACHE_CONTROL)}, *tools[last + 1:]]
    if messages and messages[0].get("role") == "system":
        first = messages[0]
        content = first.get("content")
        if isinstance(content, str) and content:
            blocks: list[Any] = [{"type": "text", "text": content, "cache_control": dict(CACHE_CONTROL)}]
        elif isinstance(content, list) and content and isinstance(content[-1], dict):
            blocks = [*content[:-1], {**content[-1], "cache_control": dict(CACHE_CONTROL)}]
        else:
            blocks = []
        if blocks:
            messages = [{**first, "content": blocks}, *messages[1:]]
    return messages, tools
