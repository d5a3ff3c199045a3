"""The worked example of docs/cost.md#prompt-caching: 1000 cases x the GitHub server's 117 tools, billed input tokens
and dollars with and without prompt caching, for Anthropic and OpenAI.

    .venv/bin/python examples/github/caching.py            # the table of docs/cost.md
    .venv/bin/python examples/github/caching.py --cases 200 --models claude-haiku-4-5,gpt-5-mini

Offline, no key.  tests/providers/test_provider_cost.py checks that docs/cost.md shows what this prints.

* The catalog's tokens are the plugin's own count (``pytest_mcpeval.models.tokens``: o200k, the report's
  ``catalogs.{id}.tokens``); each case adds ``--case-tokens`` of its own (the system prompt and the question;
  they differ per case, so they are never cached) and answers with ``--output-tokens``.
* Anthropic (``--mcp-prompt-cache=auto``, the default): the first request writes the catalog to the cache,
  billed at the cache-write price (125% of the input price for the 5-minute cache), every later one reads it
  at the cache-read price (10%).  One write assumes the cache is warm before the rest start; with
  ``--mcp-concurrency=N`` up to N first requests may each write (the ``writes`` column takes ``--writes``).
* OpenAI: automatic caching of a prompt's prefix of 1024 tokens or more, in steps of 128 tokens; the first
  request is billed in full, every later one reads the longest cached 128-token multiple of the shared prefix
  at the model's cached-input price.  No write surcharge.
* Prices: litellm's bundled cost map (``litellm.cost_per_token``, which applies the cache prices itself).
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass
from pathlib import Path

# litellm reads its bundled cost map and fetches nothing (as the plugin tells it)
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
HERE = Path(__file__).resolve().parent
DEFAULT_MODELS = ("claude-sonnet-4-5", "claude-haiku-4-5", "gpt-5", "gpt-4.1-mini")
OPENAI_MIN, OPENAI_STEP = 1024, 128


@dataclass(frozen=True)
class Row:
    model: str
    requests: int
    input_tokens: int  # every input token sent
    cache_read: int  # of them, read from the cache
    cache_write: int  # of them, written to it (Anthropic)
    plain_usd: float  # the run without caching
    cached_usd: float  # the run with it

    @property
    def billed_plain(self) -> int:
        return self.input_tokens

    def billed_cached(self, read_share: float, write_share: float) -> float:
        """Input tokens at the input price that cost as much as the cached run's input."""
        fresh = self.input_tokens - self.cache_read - self.cache_write
        return fresh + self.cache_read * read_share + self.cache_write * write_share


def catalog_tokens() -> int:
    from pytest_mcpeval.catalog import catalog_from_json
    from pytest_mcpeval.models.tokens import tool_tokens

    catalog = catalog_from_json(json.loads((HERE / "github-tools.json").read_text(encoding="utf-8")))
    return sum(tool_tokens(catalog).values())


def _cost(model: str, prompt: int, output: int, read: int = 0, write: int = 0) -> float:
    import litellm

    prompt_usd, output_usd = litellm.cost_per_token(
        model=model, prompt_tokens=prompt, completion_tokens=output, cache_read_input_tokens=read,
        cache_creation_input_tokens=write)
    return float(prompt_usd) + float(output_usd)


def worked_example(models: tuple[str, ...] = DEFAULT_MODELS, cases: int = 1000, case_tokens: int = 60,
                   output_tokens: int = 40, writes: int = 1) -> tuple[int, list[Row]]:
    """The catalog's tokens and one row per model."""
    import litellm

    tools = catalog_tokens()
    per_request = tools + case_tokens
    rows = []
    for model in models:
        provider = litellm.get_llm_provider(model)[1]
        plain = cases * _cost(model, per_request, output_tokens)
        if provider == "anthropic":
            written = min(writes, cases)
            read_requests = cases - written
            cached = (written * _cost(model, per_request, output_tokens, write=tools)
                      + read_requests * _cost(model, per_request, output_tokens, read=tools))
            rows.append(Row(model, cases, cases * per_request, read_requests * tools, written * tools, plain, cached))
        else:  # OpenAI: automatic, in 128-token steps from 1024 up; the first request is billed in full
            hit = tools // OPENAI_STEP * OPENAI_STEP if tools >= OPENAI_MIN else 0
            cached = (_cost(model, per_request, output_tokens)
                      + (cases - 1) * _cost(model, per_request, output_tokens, read=hit))
            rows.append(Row(model, cases, cases * per_request, (cases - 1) * hit, 0, plain, cached))
    return tools, rows


def table(models: tuple[str, ...] = DEFAULT_MODELS, cases: int = 1000, case_tokens: int = 60,
          output_tokens: int = 40, writes: int = 1) -> str:
    """The Markdown of docs/cost.md#prompt-caching."""
    import litellm

    tools, rows = worked_example(models, cases, case_tokens, output_tokens, writes)
    lines = [f"{cases:,} cases x {tools:,} catalog tokens (117 tools) + {case_tokens} tokens of each case, "
             f"{output_tokens} output tokens per case:", "",
             "| model | input tokens | read from cache | written to cache | billed as input tokens, no cache "
             "| billed as input tokens, cached | $ no cache | $ cached | saved |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row in rows:
        entry = litellm.model_cost[row.model]
        price = float(entry["input_cost_per_token"])
        read_share = float(entry.get("cache_read_input_token_cost") or price) / price
        write_share = float(entry.get("cache_creation_input_token_cost") or price) / price
        lines.append(
            f"| `{row.model}` | {row.input_tokens:,} | {row.cache_read:,} | {row.cache_write:,} "
            f"| {row.billed_plain:,} | {round(row.billed_cached(read_share, write_share)):,} "
            f"| ${row.plain_usd:.2f} | ${row.cached_usd:.2f} | {1 - row.cached_usd / row.plain_usd:.0%} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS))
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--case-tokens", type=int, default=60)
    parser.add_argument("--output-tokens", type=int, default=40)
    parser.add_argument("--writes", type=int, default=1)
    args = parser.parse_args()
    print(table(tuple(m for m in args.models.split(",") if m), args.cases, args.case_tokens, args.output_tokens,
                args.writes))


if __name__ == "__main__":
    main()
