"""Cost, on the wire: prompt-cache breakpoints for Anthropic, a byte-stable prefix for the providers that cache on
their own, cached tokens and their price in the report, "cost unknown" for an unpriced model, and the
``--mcp-max-cost`` cap (docs/cost.md).

Every figure asserted comes from the fakes' usage objects through litellm's own parsing and pricing: the
Anthropic fake caches marked prefixes as Anthropic does (first request writes, later ones read), the others
report what they are scripted to.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import litellm
import pytest
from conftest import GITHUB_TOOLS, read_report, run
from fakes import AnthropicFake, GeminiFake, OllamaFake, OpenAIFake, ProviderFake

SYSTEM = "You are a GitHub assistant. Use the tools."


def cases_file(n: int, system: bool = True) -> str:
    head = f"system: {SYSTEM}\n" if system else ""
    cases = "".join(f"  - id: q{i}\n    input: question {i} about me\n    expect: [{{tool: get_me, args: {{}}}}]\n"
                    for i in range(n))
    return f"server: {{tools_file: tools.json}}\n{head}cases:\n{cases}"


def project(pytester: pytest.Pytester, fake: ProviderFake, n: int = 3, extra: str = "",
            params: dict[str, Any] | None = None) -> None:
    (pytester.path / "pytest.ini").write_text(fake.ini("m", params, extra))
    (pytester.path / "tools.json").write_text(GITHUB_TOOLS.read_text())
    (pytester.path / "cases.mcpeval.yaml").write_text(cases_file(n))


def evaluate(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    result = run(pytester, "--mcp-models=m", "--mcp-report=report.json", "--mcp-retries=0", *args)
    return result, read_report(pytester)


def posts(fake: ProviderFake) -> list[dict[str, Any]]:
    return [r for r in fake.requests if r["method"] == "POST" and "show" not in r["path"]]


def price(model: str) -> dict[str, float]:
    entry = litellm.model_cost[model]
    return {k: float(entry.get(k) or 0.0) for k in ("input_cost_per_token", "output_cost_per_token",
                                                     "cache_read_input_token_cost", "cache_creation_input_token_cost")}


# -- Anthropic: breakpoints by default, cached tokens from the wire --------------------------------------------


def test_anthropic_gets_cache_breakpoints_and_the_report_counts_and_prices_the_cached_tokens(
        pytester: pytest.Pytester) -> None:
    with AnthropicFake() as fake:
        project(pytester, fake, n=3, extra="mcp_concurrency = m = 1\n")
        fake.call("*", "get_me")
        result, report = evaluate(pytester)
    assert result.ret == 0, result.stdout.str()
    bodies = [r["body"] for r in posts(fake)]
    assert len(bodies) == 3 and fake.refusals == []
    for body in bodies:  # the last tool and the system prompt are marked; nothing else
        assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
        assert all("cache_control" not in t for t in body["tools"][:-1])
        assert body["system"] == [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    assert fake.cache_writes == 1  # the first request wrote the prefix, the next two read it
    usages = [c["usage"] for c in sorted(report["cases"], key=lambda c: c["id"])]
    written = [u for u in usages if u.get("cache_write_tokens")]
    read = [u for u in usages if u.get("cache_read_tokens")]
    assert len(written) == 1 and len(read) == 2 and not written[0].get("cache_read_tokens")
    prefix = written[0]["cache_write_tokens"]
    assert prefix > 20_000 and all(u["cache_read_tokens"] == prefix for u in read)  # the 117 tools and the system
    rates = price("claude-sonnet-4-5")
    for usage in usages:  # priced as Anthropic bills: reads at the cache-read price, writes at the write price
        fresh = usage["prompt_tokens"] - usage.get("cache_read_tokens", 0) - usage.get("cache_write_tokens", 0)
        expected = (fresh * rates["input_cost_per_token"] + usage["completion_tokens"] * rates["output_cost_per_token"]
                    + usage.get("cache_read_tokens", 0) * rates["cache_read_input_token_cost"]
                    + usage.get("cache_write_tokens", 0) * rates["cache_creation_input_token_cost"])
        assert usage["cost_usd"] == pytest.approx(expected, rel=1e-9)
    totals = report["models"]["m"]["usage"]
    assert totals["cache_read_tokens"] == 2 * prefix and totals["cache_write_tokens"] == prefix
    assert totals["cost_usd"] == pytest.approx(sum(u["cost_usd"] for u in usages))
    assert totals["unpriced_calls"] == 0
    result.stdout.fnmatch_lines([f"*usage: 3 calls made (0 replayed), *({2 * prefix:,} of the input read from the "
                                 f"prompt cache, {prefix:,} written to it), $*"])


@pytest.mark.parametrize("how", ["option", "ini"])
def test_prompt_cache_off_sends_no_breakpoint(pytester: pytest.Pytester, how: str) -> None:
    with AnthropicFake() as fake:
        project(pytester, fake, n=2, extra="mcp_prompt_cache = off\n" if how == "ini" else "")
        fake.call("*", "get_me")
        result, report = evaluate(pytester, *(["--mcp-prompt-cache=off"] if how == "option" else []))
    assert result.ret == 0, result.stdout.str()
    assert len(posts(fake)) == 2 and all("cache_control" not in json.dumps(r["body"]) for r in posts(fake))
    assert fake.cache_writes == 0
    assert all("cache_read_tokens" not in c["usage"] and "cache_write_tokens" not in c["usage"]
               for c in report["cases"])


def test_a_prompt_cache_mode_that_does_not_exist_is_one_line(pytester: pytest.Pytester) -> None:
    with AnthropicFake() as fake:
        project(pytester, fake, n=1, extra="mcp_prompt_cache = sometimes\n")
        result = run(pytester, "--mcp-models=m")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini key mcp_prompt_cache: 'sometimes' is not one of auto, off*"])


def test_a_catalog_below_anthropics_minimum_is_marked_but_not_cached(pytester: pytest.Pytester) -> None:
    """Anthropic caches nothing under the model's minimum (1024 tokens for Sonnet): no cache tokens, no error."""
    with AnthropicFake() as fake:
        project(pytester, fake, n=2)
        small = [t for t in json.loads(GITHUB_TOOLS.read_text()) if t["name"] == "get_me"]
        (pytester.path / "tools.json").write_text(json.dumps(small))
        fake.call("*", "get_me")
        result, report = evaluate(pytester)
    assert result.ret == 0, result.stdout.str()
    assert all(r["body"]["tools"][-1]["cache_control"] == {"type": "ephemeral"} for r in posts(fake))
    assert fake.cache_writes == 0 and all("cache_read_tokens" not in c["usage"] for c in report["cases"])


# -- OpenAI and Gemini: automatic caching, cached tokens reported ------------------------------------------------


@pytest.mark.parametrize(("fake_class", "usage", "model"), [
    (OpenAIFake, {"prompt_tokens_details": {"cached_tokens": 20_480}}, "gpt-4.1-mini"),
    (GeminiFake, {"cachedContentTokenCount": 20_480}, "gemini/gemini-2.5-flash"),
], ids=["openai", "gemini"])
def test_cached_tokens_the_provider_reports_reach_the_report_at_the_cached_price(
        pytester: pytest.Pytester, fake_class: type[ProviderFake], usage: dict[str, Any], model: str) -> None:
    with fake_class() as fake:
        project(pytester, fake, n=2)
        fake.script("question 0 about me", {"tool_calls": [{"name": "get_me", "arguments": {}}]})
        fake.script("question 1 about me", {"tool_calls": [{"name": "get_me", "arguments": {}}], "usage": usage})
        result, report = evaluate(pytester)
    assert result.ret == 0, result.stdout.str()
    cases = {c["id"]: c["usage"] for c in report["cases"]}
    assert "cache_read_tokens" not in cases["q0"] and cases["q1"]["cache_read_tokens"] == 20_480
    assert "cache_write_tokens" not in cases["q1"]  # neither bills writes
    rates = price(model)
    first, second = cases["q0"], cases["q1"]
    # the same request but the case text: the cached one is cheaper by the discount on the cached tokens
    assert abs(first["prompt_tokens"] - second["prompt_tokens"]) <= 2
    saved = 20_480 * (rates["input_cost_per_token"] - rates["cache_read_input_token_cost"])
    assert first["cost_usd"] - second["cost_usd"] == pytest.approx(
        saved + (first["prompt_tokens"] - second["prompt_tokens"]) * rates["input_cost_per_token"], rel=1e-6)
    assert report["models"]["m"]["usage"]["cache_read_tokens"] == 20_480


# -- the byte-stable prefix ---------------------------------------------------------------------------------------


def _without_case(fake: ProviderFake, body: dict[str, Any]) -> str:
    """The request without the case's own part (the last user turn), as the bytes it was sent in."""
    body = dict(body)
    if isinstance(fake, GeminiFake):
        body["contents"] = body["contents"][:-1]
    else:
        body["messages"] = body["messages"][:-1]
    return json.dumps(body)


@pytest.mark.parametrize("fake_class", [OpenAIFake, GeminiFake, AnthropicFake], ids=["openai", "gemini", "anthropic"])
def test_every_case_of_a_catalog_sends_the_same_prefix(pytester: pytest.Pytester,
                                                       fake_class: type[ProviderFake]) -> None:
    """System, tools, then the case: everything before the case's own turn is the same bytes in every request
    (tool order, key order, parameters), so the provider's prefix cache applies to all but the case."""
    with fake_class() as fake:
        project(pytester, fake, n=4)
        fake.call("*", "get_me")
        result, _ = evaluate(pytester)
    assert result.ret == 0, result.stdout.str()
    bodies = [r["body"] for r in posts(fake)]
    assert len(bodies) == 4
    prefixes = {_without_case(fake, b) for b in bodies}
    assert len(prefixes) == 1, "the requests differ before the case"
    tools = bodies[0]["tools"]
    declared = tools[0].get("functionDeclarations") or tools[0].get("function_declarations") if tools else None
    names = ([d["name"] for d in declared] if fake_class is GeminiFake
             else [t.get("name") or t["function"]["name"] for t in tools])
    assert names == [t["name"] for t in json.loads(GITHUB_TOOLS.read_text())]  # the server's order, as listed


# -- an unpriced model is "cost unknown", never free ---------------------------------------------------------------


@pytest.mark.parametrize("fake", [lambda: AnthropicFake(model="claude-unknown-9"), OllamaFake,
                                  lambda: OpenAIFake(model="my-own-model")], ids=["anthropic", "ollama", "openai"])
def test_an_unpriced_model_costs_null_and_says_cost_unknown(pytester: pytest.Pytester, fake: Any) -> None:
    """litellm prices ``anthropic/<unknown>`` and ``ollama_chat/<any>`` at 0.0 (made-up zero prices) and
    ``openai/<unknown>`` at None: all three are "cost unknown" in every rendering."""
    with fake() as server:
        project(pytester, server, n=2)
        server.call("*", "get_me")
        result, report = evaluate(pytester, "--mcp-markdown=summary.md", "--mcp-html=report.html")
    assert result.ret == 0, result.stdout.str()
    assert [c["usage"]["cost_usd"] for c in report["cases"]] == [None, None]
    usage = report["models"]["m"]["usage"]
    assert usage["cost_usd"] is None and usage["priced_cost_usd"] is None
    assert usage["unpriced_calls"] == 2 and usage["priced_calls"] == 0
    result.stdout.fnmatch_lines(["*usage: 2 calls made (0 replayed), * tokens*, cost unknown (2 unpriced calls)"])
    assert "cost unknown (2 unpriced calls)" in (pytester.path / "summary.md").read_text()
    assert "cost unknown (2 unpriced calls)" in (pytester.path / "report.html").read_text()


def test_a_model_listed_free_stays_free_and_a_model_priced_in_params_is_priced(pytester: pytest.Pytester) -> None:
    """``ollama/llama3.1`` is listed at 0 in litellm's map: free, as listed; a price in mcp_model_params counts."""
    with OllamaFake(model="llama3.1") as fake:
        project(pytester, fake, n=1, params={"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6})
        fake.call("*", "get_me")
        _, report = evaluate(pytester)
    case = report["cases"][0]["usage"]
    assert case["cost_usd"] == pytest.approx(case["prompt_tokens"] * 1e-6 + case["completion_tokens"] * 2e-6)


def test_usage_totals_over_priced_and_unpriced_calls_are_unknown_with_a_lower_bound() -> None:
    from pytest_mcpeval.report.usage import cost_text
    from pytest_mcpeval.scoring.repeats import usage_metrics

    def case(cost: float | None) -> Any:
        return {"error": None, "latency_s": 0.1,
                "usage": {"prompt_tokens": 10, "completion_tokens": 1, "cost_usd": cost, "attempts": 1}}

    usage = usage_metrics([case(0.25), case(None), case(0.5)])
    assert usage["cost_usd"] is None and usage["priced_cost_usd"] == 0.75
    assert (usage["priced_calls"], usage["unpriced_calls"]) == (2, 1)
    assert cost_text(usage) == "cost unknown (1 unpriced call; at least $0.7500 for the 2 priced)"
    assert usage_metrics([case(0.25)])["cost_usd"] == 0.25


# -- --mcp-max-cost ------------------------------------------------------------------------------------------------


def _entries(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in Path(pytester.path, ".mcpeval", "cache").rglob("*.json")]


@pytest.mark.parametrize("workers_args", [[], ["-n", "2"]], ids=["no-xdist", "n2"])
def test_max_cost_stops_new_calls_at_the_cap(pytester: pytest.Pytester, workers_args: list[str]) -> None:
    """gpt-4.1-mini (priced in litellm's map) through the OpenAI fake: one call costs about $0.012 with the
    117 tools; a cap of $0.02 lets two calls through (three with -n 2: one per worker may be in flight when it
    is reached), the other cases are errors, the gate fails, the cache holds every answer paid for, and the
    next run replays them for free and makes the next calls (checked in one process: the same code path)."""
    with OpenAIFake() as fake:
        project(pytester, fake, n=6, extra="mcp_concurrency = m = 1\n")
        fake.call("*", "get_me")
        result, report = evaluate(pytester, "--mcp-max-cost=0.02", *workers_args)
        answered = [c for c in report["cases"] if c["error"] is None]
        refused = [c for c in report["cases"] if c["error"] is not None]
        assert result.ret == 1
        assert len(answered) == len(posts(fake))
        spent = sum(c["usage"]["cost_usd"] for c in answered)
        one = max(c["usage"]["cost_usd"] for c in answered)
        workers = 2 if "-n" in workers_args else 1
        assert spent >= 0.02 and spent - 0.02 < one * workers, (spent, one)  # stopped within the calls in flight
        assert len(refused) == 6 - len(answered) and refused
        assert all("budget reached: $" in c["error"] and "of $0.02 spent (--mcp-max-cost=0.02)" in c["error"]
                   for c in refused)
        assert not report["gate"]["passed"]
        assert (f"--mcp-max-cost=0.02: budget reached, {len(refused)} case{'s' if len(refused) != 1 else ''} not run"
                in " ".join(report["gate"]["failures"]))
        assert sorted(e["case"] for e in _entries(pytester)) == sorted(
            f"cases.mcpeval.yaml::{c['id']}[m]" for c in answered)
        if workers_args:
            return
        calls_before = len(posts(fake))
        # the next run replays what was paid for (free: replays never count) and goes on from there
        _, report = evaluate(pytester, "--mcp-max-cost=0.02", *workers_args)
        new_calls = len(posts(fake)) - calls_before
    cases = {c["id"]: c for c in report["cases"]}
    assert all(cases[c["id"]]["usage"]["cached"] and cases[c["id"]]["error"] is None for c in answered)
    fresh = [c for c in cases.values() if c["error"] is None and not c["usage"]["cached"]]
    assert fresh and len(fresh) == new_calls
    assert sum(c["usage"]["cost_usd"] for c in fresh) - 0.02 < one * workers


def test_max_cost_names_a_model_it_cannot_count(pytester: pytest.Pytester) -> None:
    with OpenAIFake(model="my-own-model") as fake:
        project(pytester, fake, n=2)
        fake.call("*", "get_me")
        result, report = evaluate(pytester, "--mcp-max-cost=1")
    assert result.ret == 0 and all(c["error"] is None for c in report["cases"])
    result.stdout.fnmatch_lines(["*--mcp-max-cost=1 does not cover m: 2 of its calls have no price in litellm's "
                                 "cost map*"])


@pytest.mark.parametrize("value", ["0", "-1", "lots", "nan"])
def test_max_cost_must_be_a_positive_amount(pytester: pytest.Pytester, value: str) -> None:
    result = run(pytester, f"--mcp-max-cost={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--mcp-max-cost*positive amount of US dollars*" if value != "lots"
                                 else "*--mcp-max-cost*'lots' is not an amount of US dollars*"])


# -- docs/cost.md's worked example is what the script computes ---------------------------------------------------


def test_docs_cost_shows_the_worked_example_the_script_computes(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util
    import sys

    repo = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("github_caching", repo / "examples" / "github" / "caching.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    table = module.table()
    assert table in (repo / "docs" / "cost.md").read_text(), table
    _, rows = module.worked_example()
    sonnet = next(r for r in rows if r.model == "claude-sonnet-4-5")
    assert sonnet.cache_write == sonnet.input_tokens // 1000 - 60 and sonnet.cached_usd < sonnet.plain_usd / 5


def test_the_anthropic_fake_refuses_a_fifth_breakpoint_as_anthropic_does() -> None:
    import httpx

    marked = {"type": "ephemeral"}
    tools = [{"name": f"t{i}", "input_schema": {"type": "object"}, "cache_control": marked} for i in range(5)]
    with AnthropicFake() as fake:
        headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
        answer = httpx.post(f"{fake.base_url}/v1/messages", headers=headers,
                            json={"model": fake.model_name, "max_tokens": 64, "tools": tools,
                                  "messages": [{"role": "user", "content": "hi"}]})
    assert answer.status_code == 400
    assert answer.json()["error"] == {"type": "invalid_request_error", "message": (
        "A maximum of 4 blocks with cache_control may be provided. Found 5.")}
