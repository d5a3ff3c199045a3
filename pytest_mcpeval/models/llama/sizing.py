"""How much context a slot of the local server gets: what the catalog needs, bounded by the model and the memory.

Every request sends the whole catalog the case shows, so a slot must hold the tools, the conversation and the
reply.  The catalog is counted as the plugin counts it everywhere (:mod:`pytest_mcpeval.models.tokens`:
``o200k_base`` over each tool's OpenAI ``tools`` entry); the model's own tokenizer and chat template differ a
little, hence :data:`MARGIN`.  The slot gets

    context = round_up(max(MIN_CONTEXT, tokens x MARGIN + ROOM + max_tokens), STEP)

bounded by the context the model was trained for (its GGUF header) and by the memory the key/value cache may
take (:data:`MEMORY_SHARE` of what the machine has available, for every slot).  A catalog that cannot fit is one
:class:`~pytest_mcpeval.models.llama.LlamaError`, said by the pre-flight check before any call.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_mcpeval.models.llama import LlamaError
from pytest_mcpeval.models.llama.gguf import ModelShape

MIN_CONTEXT = 8192  # tokens a slot at least: a flow's turns on a small catalog
ROOM = 3072  # tokens beyond the catalog and the reply: the system prompt, the request, a flow's tool answers
MARGIN = 1.2  # the model's tokenizer and chat template against o200k's count of the JSON
STEP = 1024
MEMORY_SHARE = 0.5  # of MemAvailable, for the key/value cache of every slot


def catalog_tokens(tools: Iterable[Mapping[str, Any]]) -> int:
    """Tokens of OpenAI ``tools`` entries, as :mod:`pytest_mcpeval.models.tokens` counts a catalog (each entry
    once per process: every call of a run sends the same catalog)."""
    from pytest_mcpeval.models.tokens import entries_tokens

    return entries_tokens(tools)


def available_memory() -> int | None:
    """Bytes the kernel says can be had without swapping (``MemAvailable``), or ``None`` where it does not say."""
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


@dataclass(frozen=True)
class Context:
    per_slot: int  # tokens
    wanted: int  # tokens the catalog asked for (before rounding up to MIN_CONTEXT and STEP)
    limit: int  # the most a slot may have here
    limited_by: str  # what sets the limit


def wanted(tokens: int, max_tokens: int) -> int:
    return math.ceil(tokens * MARGIN) + ROOM + max_tokens


def context(tokens: int | None, max_tokens: int, model: ModelShape, slots: int,
            memory: int | None = None) -> Context:
    """The context of each of ``slots`` slots for a catalog of ``tokens`` (``None``: not known, so all the model
    and the memory allow); :class:`LlamaError` when it cannot fit."""
    need = wanted(tokens or 0, max_tokens)
    limit, limited_by = model.context_length, f"the {model.context_length:,} tokens it was trained for"
    todo = "serve a model with a longer context"
    memory = available_memory() if memory is None else memory
    if memory is not None:
        by_memory = int(memory * MEMORY_SHARE) // (model.kv_bytes_per_token * slots) // STEP * STEP
        if by_memory < limit:
            limit = by_memory
            limited_by = (f"the {by_memory:,} tokens a slot that half of the {memory / 2**30:.1f} GiB of memory "
                          f"available holds ({model.kv_bytes_per_token:,} bytes a token, {slots} slot(s))")
            todo = "free memory, or serve the model where there is more"
    if need > limit:
        raise LlamaError(f"the model cannot hold the catalog: a request takes about {tokens or 0:,} tokens of tools "
                         f"(o200k count), {need:,} with room for the conversation and {max_tokens} tokens of reply, "
                         f"more than {limited_by}; show the cases fewer tools (the file's `tools:` or "
                         f"`distractors:`), or {todo} (docs/chat-model.md)")
    if tokens is None:
        return Context(per_slot=limit, wanted=need, limit=limit, limited_by=limited_by)
    per_slot = min(limit, max(MIN_CONTEXT, math.ceil(need / STEP) * STEP))
    return Context(per_slot=per_slot, wanted=need, limit=limit, limited_by=limited_by)
