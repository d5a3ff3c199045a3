"""How many tokens a tool catalog costs in every request (litellm's tokenizer, offline).

Each tool is counted as the JSON of its OpenAI ``tools`` entry (what the plugin sends), with the
tokenizer litellm uses for ``gpt-4o`` (o200k); providers count a little differently, so read the
figures as the catalog's relative weight, tool by tool, and how it changes in a pull request.
"""

from __future__ import annotations

import json
import os

from pytest_mcpeval.catalog import Catalog

TOKENIZER_MODEL = "gpt-4o"


def tool_tokens(catalog: Catalog) -> dict[str, int]:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    import litellm

    out = {}
    for tool in catalog.openai_tools:
        name = catalog.mcp_name(tool["function"]["name"])
        text = json.dumps(tool, sort_keys=True, ensure_ascii=False)
        out[name] = int(litellm.token_counter(model=TOKENIZER_MODEL, text=text))
    return out
