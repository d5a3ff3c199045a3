"""Model clients.  ``config`` resolves names; :func:`call_model` is the one place a model is called.

``local/...`` models are the embedded offline retriever (:mod:`.local`); every other name goes through
litellm's async API (:mod:`.litellm_client`), on the process's event loop.  Both are imported only when a case runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_mcpeval.defaults import DEFAULT_RETRIES, DEFAULT_TIMEOUT
from pytest_mcpeval.models.common import OFFLINE_ENV, ModelCallError

__all__ = ["OFFLINE_ENV", "ModelCallError", "acall_model", "call_model", "params_sent"]

if TYPE_CHECKING:
    from pytest_mcpeval.catalog import Catalog
    from pytest_mcpeval.models.config import ModelSpec
    from pytest_mcpeval.models.reply import ModelReply


def params_sent(model: ModelSpec) -> dict[str, Any]:
    """The parameters ``model`` is called with, as builtin data without secrets: for the report.

    For a litellm model, the user's parameters as given and each default the model accepts (imports
    litellm, seconds once per process; memoised per model).  For ``local/...``, the two it reads.
    """
    from pytest_mcpeval.models import local

    if model.target.startswith(local.PREFIX):
        return {"min_similarity": float(model.params.get("min_similarity", local.DEFAULT_MIN_SIMILARITY)),
                "top_k": int(model.params.get("top_k", local.DEFAULT_TOP_K))}
    from pytest_mcpeval.models import litellm_params

    return litellm_params.params_sent(model)


def call_model(model: ModelSpec, messages: list[dict[str, Any]], catalog: Catalog) -> ModelReply:
    """A ``local/...`` model's reply, computed in the calling thread (a retriever ranks in milliseconds)."""
    from pytest_mcpeval.models import local

    try:
        return local.complete(model, messages, catalog)
    except local.LocalModelError as exc:
        raise ModelCallError(f"model {model.name}: {exc}") from None


async def acall_model(model: ModelSpec, messages: list[dict[str, Any]], catalog: Catalog, *,
                      retries: int = DEFAULT_RETRIES, timeout: float = DEFAULT_TIMEOUT, seed: int = 0) -> ModelReply:
    """The model's reply, on the process's event loop (:mod:`pytest_mcpeval.core`)."""
    from pytest_mcpeval.models.local import PREFIX

    if model.target.startswith(PREFIX):
        import anyio

        return await anyio.to_thread.run_sync(call_model, model, messages, catalog)
    from pytest_mcpeval.models import litellm_client

    return await litellm_client.acomplete(model, messages, catalog.openai_tools, retries=retries, timeout=timeout,
                                          seed=seed)
