"""What one run of examples/github costs against hosted models: the table of docs/cost.md.

    .venv/bin/python examples/github/cost.py
    .venv/bin/python examples/github/cost.py --models gpt-5,claude-opus-4-5 --reasoning-tokens 500

Offline, no key.  It runs the two benchmark files once with the demo's scripted stand-in
(examples/demo_script.json, see examples/demo.py), keeps every request the plugin sent (the 117 tools, the
messages, and for the flows the mocked tool answers of the turns before), and prices each request with
litellm's bundled cost map (``litellm.cost_per_token``, read offline):

* input tokens of a request = the tokens of the tools it was sent (the report's catalog count,
  ``pytest_mcpeval.models.tokens.tool_tokens``: o200k, gpt-4o's encoding) + the tokens of its messages
  (``litellm.token_counter`` for gpt-4o);
* output tokens = the tokens of the stand-in's answer (its tool calls as JSON, or its text), plus
  ``--reasoning-tokens`` per request for models that think before answering (0 by default: see docs/cost.md).

"with the catalog cached" prices the catalog of every request but the first at the provider's cache-read
rate (and the first at its cache-write rate where the map has one): the best case of prompt caching.
Requests are priced one by one, so a tier that starts above 200k input tokens applies only where a single
request crosses it.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent
REPO = EXAMPLES.parent
MODEL = "scripted-demo"
TOKENIZER = "gpt-4o"  # litellm.token_counter's model for the messages and answers (o200k, as the catalog count)
DEFAULT_MODELS = ["gpt-5", "gpt-5-mini", "gpt-4o-mini", "claude-sonnet-4-5", "claude-haiku-4-5",
                  "gemini/gemini-2.5-pro", "gemini/gemini-2.5-flash"]


def load_demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mcpeval_demo", EXAMPLES / "demo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def record_requests() -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], str]:
    """Run examples/github with the scripted stand-in: every request the plugin sent, with its answer."""
    demo = load_demo()
    with ExitStack() as stack:
        server = demo.script_server(stack)
        params = {"api_base": server.api_base, "api_key": "none", "num_retries": 0}
        command = [
            sys.executable, "-m", "pytest", str(HERE), f"--rootdir={REPO}", f"--mcp-models={MODEL}",
            "--mcp-record=off", "-o", f"mcp_model_aliases={MODEL} = openai/{MODEL}",
            "-o", f"mcp_model_params={MODEL} = {json.dumps(params)}", "-p", "no:cacheprovider", "-q",
        ]
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.exit(f"the run failed (exit status {done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
        last = done.stdout.strip().splitlines()[-1].strip("= ")
        return [(body, server.reply_for(MODEL, body["messages"])) for body in server.requests], last


def reply_text(reply: dict[str, Any]) -> str:
    calls = reply.get("tool_calls")
    if calls:
        return "".join(json.dumps({"name": c["name"], "arguments": c["arguments"]}) for c in calls)
    return str(reply.get("content") or "")


def price(model: str, rows: list[tuple[int, int, int]]) -> tuple[float, float]:
    """USD for the requests ``rows`` = (catalog tokens, input tokens, output tokens), priced one by one with
    litellm's cost map: as sent, and with the catalog of every request but the first read from the provider's
    prompt cache (the first writes it, at the cache-write rate where the map has one)."""
    import litellm

    writes = litellm.model_cost[model].get("cache_creation_input_token_cost") is not None
    plain = cached = 0.0
    for i, (tools, tokens_in, tokens_out) in enumerate(rows):
        plain += sum(litellm.cost_per_token(model=model, prompt_tokens=tokens_in, completion_tokens=tokens_out))
        reuse = {"cache_read_input_tokens": tools} if i else {"cache_creation_input_tokens": tools} if writes else {}
        cached += sum(litellm.cost_per_token(model=model, prompt_tokens=tokens_in, completion_tokens=tokens_out,
                                             **reuse))
    return plain, cached


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS),
                        help="comma-separated keys of litellm's cost map (default: %(default)s)")
    parser.add_argument("--reasoning-tokens", type=int, default=0, metavar="N",
                        help="output tokens added to every request, for reasoning models (default: 0)")
    args = parser.parse_args(argv)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # the bundled map: no download
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    import litellm

    from pytest_mcpeval.catalog import catalog_from_json
    from pytest_mcpeval.models.tokens import tool_tokens

    catalog = catalog_from_json(json.loads((HERE / "github-tools.json").read_text(encoding="utf-8")))
    tokens = tool_tokens(catalog)  # by MCP name; requests name tools by their API name
    per_tool = {t["function"]["name"]: tokens[catalog.mcp_name(t["function"]["name"])] for t in catalog.openai_tools}
    requests, outcome = record_requests()
    rows = []  # per request: (catalog tokens, input tokens, output tokens)
    for body, reply in requests:
        tools = sum(per_tool[t["function"]["name"]] for t in body.get("tools", []))
        messages = litellm.token_counter(model=TOKENIZER, messages=body["messages"])
        output = litellm.token_counter(model=TOKENIZER, text=reply_text(reply)) + args.reasoning_tokens
        rows.append((tools, tools + messages, output))
    with_tools = [r for r in rows if r[0]]
    catalog_tokens = max(r[0] for r in rows)
    total_in = sum(r[1] for r in rows)
    total_out = sum(r[2] for r in rows)
    print(f"litellm {importlib.metadata.version('litellm')}, cost map bundled with it (LITELLM_LOCAL_MODEL_COST_MAP)")
    print(f"scripted run: {outcome}; {len(rows)} model requests ({len(with_tools)} with the catalog)")
    print(f"catalog: {len(catalog.tools)} tools, {catalog_tokens:,} tokens per request (the report's count)")
    print(f"input: {total_in:,} tokens, of which the catalog {sum(r[0] for r in rows):,} "
          f"({sum(r[0] for r in rows) / total_in:.1%}); output: {total_out:,} tokens"
          + (f" (with {args.reasoning_tokens} reasoning tokens per request)" if args.reasoning_tokens else ""))
    print()
    print("| model | input $/M | output $/M | cache read $/M | one request (catalog only) | one run | "
          "one run, catalog cached |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for model in [m.strip() for m in args.models.split(",") if m.strip()]:
        info = litellm.model_cost.get(model)
        if info is None:
            print(f"| `{model}` | not in litellm's cost map | | | | | |")
            continue
        plain, cached = price(model, rows)
        catalog_only = price(model, [(0, catalog_tokens, 0)])[0]

        def per_m(key: str, info: dict[str, Any] = info) -> str:
            value = info.get(key)
            return "n/a" if value is None else f"{value * 1e6:.3g}"

        print(f"| `{model}` | {per_m('input_cost_per_token')} | {per_m('output_cost_per_token')} | "
              f"{per_m('cache_read_input_token_cost')} | ${catalog_only:.4f} | ${plain:.2f} | ${cached:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
