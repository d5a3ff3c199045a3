"""What the report keeps of a catalog (:func:`catalog_info`): per tool its hash, description and token count.

Apart from :mod:`pytest_mcpeval.catalog`, which the token counter (:mod:`pytest_mcpeval.models.tokens`) reads:
here both meet, and neither imports the other's importer.
"""

from __future__ import annotations

from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.models.tokens import tool_tokens
from pytest_mcpeval.results import CatalogInfo, ToolInfo


def catalog_info(catalog: Catalog, server: str, startup_s: float | None = None) -> CatalogInfo:
    """What the report keeps of a catalog: per tool its hash, description and token cost, and the seconds its
    server took to start (``ServerPool.startup_s``; ``None`` for a static tool list)."""
    tokens = tool_tokens(catalog)
    tools: dict[str, ToolInfo] = {
        name: {"hash": digest, "description": catalog.by_name[name].get("description") or "", "tokens": tokens[name]}
        for name, digest in catalog.hashes().items()
    }
    info: CatalogInfo = {"server": server, "tools": tools, "tokens": sum(tokens.values())}
    if startup_s is not None:
        info["startup_s"] = round(startup_s, 3)
    return info
