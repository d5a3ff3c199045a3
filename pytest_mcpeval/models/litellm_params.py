"""The parameters a litellm call sends: the user's as given, and each plugin default the model accepts.

The user's parameters (``mcp_model_params``) are sent as given; each plugin default (``temperature: 0``) is sent
only if litellm says the model accepts it, so gpt-5 and the o-series, which take no temperature but 1, are
called without it, and not where the vendor asks for another value
(:data:`pytest_mcpeval.models.config.DEFAULT_WITHHELD`: with thinking asked for, for Gemini 3).
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from pytest_mcpeval.models.config import ModelSpec, withheld, without_secrets
from pytest_mcpeval.models.litellm_load import load_litellm
from pytest_mcpeval.text import canonical_json

log = logging.getLogger(__name__)

# ours, never passed on to litellm
CONTROL_PARAMS = frozenset({"num_retries"})
# user parameters that can change whether a default is accepted (gpt-5.1 takes temperature 0 only with
# reasoning_effort "none"); transport, secrets and the request body itself are left out of that check
NOT_CHECKED = frozenset({"api_base", "api_version", "api_key", "base_url", "default_headers", "extra_headers",
                         "timeout", "request_timeout", "max_retries", "deployment_id", "organization", "tools",
                         "tool_choice", "functions", "function_call", "stream", "stream_options", "user"})

# -- parameters -----------------------------------------------------------------------------------

_sent: dict[str, dict[str, Any]] = {}
_sent_lock = threading.Lock()




def _accepted(model: ModelSpec, name: str, value: Any) -> bool:
    """Whether litellm would send the default ``name=value`` to ``model`` along with the user's params."""
    litellm = load_litellm()
    from litellm.exceptions import UnsupportedParamsError
    from litellm.utils import get_optional_params

    user = model.user_params
    try:
        base_model, provider, _, _ = litellm.get_llm_provider(
            model.target, custom_llm_provider=user.get("custom_llm_provider"), api_base=user.get("api_base")
        )
    except Exception as exc:  # litellm cannot place the model: the call will say why, the default changes nothing
        log.debug("litellm cannot place %s (%s): defaults are sent unchecked", model.target, exc)
        return True
    known = set(getattr(litellm, "OPENAI_CHAT_COMPLETION_PARAMS", ())) - NOT_CHECKED
    context = {k: v for k, v in user.items() if k in known and k != name}

    def verdict(extra: dict[str, Any]) -> bool | None:
        try:
            get_optional_params(model=base_model, custom_llm_provider=provider, **extra)
        except UnsupportedParamsError:
            return False
        except Exception as exc:  # an unexpected failure of the check: send the default, as the user declared it
            log.debug("litellm's parameter check failed for %s (%r): the default is sent", model.target, exc)
            return None
        return True

    if context and verdict(context) is False:
        context = {}  # a parameter of the user's own is rejected (the call will say so): judge the default alone
    return verdict({**context, name: value}) is not False


def request_params(model: ModelSpec) -> dict[str, Any]:
    """The parameters :func:`complete` passes to litellm for ``model``, secrets included.

    The user's parameters as given, and each default the model accepts; never ``num_retries`` (ours).
    Memoised per model (the check asks litellm's parameter mapping, offline, a few ms the first time).
    """
    memo = canonical_json([model.target, model.params, sorted(model.defaults)])
    with _sent_lock:
        found = _sent.get(memo)
    if found is None:
        found = {
            k: v for k, v in model.params.items()
            if k not in CONTROL_PARAMS and (k not in model.defaults or (
                withheld(model.target, k, model.user_params) is None and _accepted(model, k, v)))
        }
        with _sent_lock:
            _sent[memo] = found
    return dict(found)


def params_sent(model: ModelSpec) -> dict[str, Any]:
    """What the report may show of :func:`request_params`: builtin JSON data, secrets left out."""
    data: dict[str, Any] = json.loads(json.dumps(without_secrets(request_params(model)), default=str))
    return data
