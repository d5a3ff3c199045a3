"""Model clients.  ``config`` resolves names; :func:`call_model` is the one place a model is called.

``local/...`` models are the embedded offline retriever (:mod:`.local`); every other name goes through
litellm (:mod:`.litellm_client`).  Both are imported only when a case runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_mcpeval.catalog import Catalog
    from pytest_mcpeval.models.config import ModelSpec
    from pytest_mcpeval.models.reply import ModelReply


class ModelCallError(Exception):
    """The model could not be reached, answered with an error, or could not be loaded.

    An infrastructure error: the case is listed apart and excluded from the metrics.
    """


def call_model(model: ModelSpec, messages: list[dict[str, Any]], catalog: Catalog, *, retries: int = 3,
               timeout: float = 120.0, seed: int = 0) -> ModelReply:
    from pytest_mcpeval.models.local import PREFIX, LocalModelError

    if model.target.startswith(PREFIX):
        from pytest_mcpeval.models import local

        try:
            return local.complete(model, messages, catalog)
        except LocalModelError as exc:
            raise ModelCallError(f"model {model.name}: {exc}") from None
    from pytest_mcpeval.models import litellm_client

    return litellm_client.complete(model, messages, catalog.openai_tools, retries=retries, timeout=timeout, seed=seed)
