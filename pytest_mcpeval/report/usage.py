"""How the renderings (terminal, Markdown, HTML) word a model's usage: tokens, cached tokens and cost.

One wording for all three, so "cost unknown" means the same everywhere: a paid call without a price (a model
missing from litellm's cost map) makes the total unknown, never free; the priced part is shown beside it as a
lower bound (``priced_cost_usd``, docs/report.md#modelsmodel).
"""

from __future__ import annotations

from pytest_mcpeval.results import UsageMetrics


def cost_text(usage: UsageMetrics) -> str:
    """``$0.1234``; ``cost unknown (2 unpriced calls; $0.01 for the 8 priced)``; ``cost unknown``."""
    if usage["cost_usd"] is not None:
        return f"${usage['cost_usd']:.4f}"
    unpriced = usage.get("unpriced_calls", 0)
    if not unpriced:
        return "cost unknown"
    calls = f"{unpriced} unpriced call{'s' if unpriced != 1 else ''}"
    priced = usage.get("priced_cost_usd")
    if priced is None:
        return f"cost unknown ({calls})"
    return f"cost unknown ({calls}; at least ${priced:.4f} for the {usage['priced_calls']} priced)"


def tokens_text(usage: UsageMetrics) -> str:
    """``12,345 + 678 tokens (10,000 of the input read from the prompt cache, 2,000 written to it)``."""
    out = f"{usage['prompt_tokens']:,} + {usage['completion_tokens']:,} tokens"
    read, written = usage.get("cache_read_tokens", 0), usage.get("cache_write_tokens", 0)
    parts = ([f"{read:,} of the input read from the prompt cache"] if read else []) + (
        [f"{written:,} written to it"] if written else [])
    return out + (f" ({', '.join(parts)})" if parts else "")
