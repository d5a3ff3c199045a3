"""Claude through the Anthropic fake, end to end: extended thinking (no default temperature; the signed thinking
blocks go back on later turns and replay from the cache), and error lines (status, Anthropic's error type,
its message).  Issue 20 items 1, 2 and 11.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import read_report, run
from fakes import AnthropicFake, signature
from test_provider_smoke import BENCH, TOOLS

THINKING = {"thinking": {"type": "enabled", "budget_tokens": 1024}, "max_tokens": 4096}


def project(pytester: pytest.Pytester, fake: AnthropicFake, params: dict[str, Any]) -> None:
    (pytester.path / "pytest.ini").write_text(fake.ini("claude", params))
    (pytester.path / "tools.json").write_text(json.dumps(TOOLS))
    (pytester.path / "cases.mcpeval.yaml").write_text(BENCH)


def evaluate(pytester: pytest.Pytester, *args: str) -> dict[str, Any]:
    result = run(pytester, "--mcp-models=claude", "--mcp-report=report.json", "--mcp-retries=0", *args)
    assert result.ret in (0, 1), result.stdout.str()
    return read_report(pytester)


def script(fake: AnthropicFake) -> None:
    """Every reply thinks first, as Claude does with thinking on."""
    fake.script("Show me WEB-12.", {"thinking": "A lookup.",
                                    "tool_calls": [{"name": "get_issue", "arguments": {"issue_key": "WEB-12"}}]})
    fake.flow("Who opened WEB-12?",
              {"thinking": "First the basic information of the issue.",
               "tool_calls": [{"name": "get_issue", "arguments": {"issue_key": "WEB-12"}}]},
              {"thinking": "Carol opened it; who is carol?",
               "tool_calls": [{"name": "get_user", "arguments": {"username": "carol"}}]},
              {"thinking": "Done.", "content": "Carol Diaz opened it."})


@pytest.mark.parametrize("params", [THINKING, {"reasoning_effort": "low"}], ids=["thinking", "reasoning_effort"])
def test_thinking_runs_without_the_default_temperature(pytester: pytest.Pytester, params: dict[str, Any]) -> None:
    """Item 1: with thinking asked for (directly or through litellm's reasoning_effort), the plugin's default
    temperature 0 is not sent (Anthropic answers 400 to it), and the report says what was sent."""
    with AnthropicFake() as fake:
        project(pytester, fake, params)
        script(fake)
        report = evaluate(pytester)
    assert fake.refusals == []
    assert [r["body"].get("thinking", {}).get("type") for r in fake.requests] == ["enabled"] * len(fake.requests)
    assert all("temperature" not in r["body"] for r in fake.requests)
    cases = {c["id"]: c for c in report["cases"]}
    assert cases["single"]["passed"] is True and cases["flow"]["passed"] is True, cases
    sent = report["run"]["models"]["claude"]["params_sent"]
    assert "temperature" not in sent
    assert report["run"]["models"]["claude"]["params"]["temperature"] == 0  # declared, not sent


def test_without_thinking_the_default_temperature_is_still_sent(pytester: pytest.Pytester) -> None:
    with AnthropicFake() as fake:
        project(pytester, fake, {})
        script(fake)
        evaluate(pytester, "-k", "single")
    assert [r["body"]["temperature"] for r in fake.requests] == [0]


def test_thinking_blocks_go_back_unchanged_and_replay_from_the_cache(pytester: pytest.Pytester) -> None:
    """Item 2: each assistant turn of a flow goes back starting with its signed thinking block (Anthropic
    refuses a tool-use turn without it); the cache entry keeps the blocks, so a replay sends nothing new."""
    with AnthropicFake() as fake:
        project(pytester, fake, THINKING)
        script(fake)
        report = evaluate(pytester, "-k", "flow")
        assert fake.refusals == []
        flow = next(c for c in report["cases"] if c["id"] == "flow")
        assert flow["error"] is None and flow["passed"] is True, flow
        last = fake.requests[-1]["body"]["messages"]
        assistants = [m["content"] for m in last if m["role"] == "assistant"]
        assert [blocks[0] for blocks in assistants] == [
            {"type": "thinking", "thinking": "First the basic information of the issue.",
             "signature": signature("First the basic information of the issue.")},
            {"type": "thinking", "thinking": "Carol opened it; who is carol?",
             "signature": signature("Carol opened it; who is carol?")}]
        assert [b["type"] for b in assistants[0]] == ["thinking", "tool_use"]
        entries = [json.loads(p.read_text()) for p in Path(pytester.path, ".mcpeval", "cache").rglob("*.json")]
        kept = sorted(b["thinking"] for e in entries for b in e["reply"].get("thinking_blocks", []))
        # kept as sent: "basic information" has the shape of a credential, and the cache masks by value only
        assert kept == ["Carol opened it; who is carol?", "Done.", "First the basic information of the issue."]
        made = len(fake.requests)
        again = evaluate(pytester, "-k", "flow")
        assert len(fake.requests) == made  # every turn replayed: the conversation is the same, byte for byte
        assert next(c for c in again["cases"] if c["id"] == "flow")["usage"]["cached"] is True
        replayed = evaluate(pytester, "-k", "flow", "--mcp-record=none")  # and replays with nothing to call
        assert next(c for c in replayed["cases"] if c["id"] == "flow")["passed"] is True


def test_without_the_fix_anthropic_refuses_turn_two(pytester: pytest.Pytester) -> None:
    """The fake's rule the previous test relies on: the same flow with the blocks dropped is refused."""
    import httpx

    with AnthropicFake() as fake:
        script(fake)
        messages = [{"role": "user", "content": "Who opened WEB-12?"},
                    {"role": "assistant", "content": [{"type": "tool_use", "id": "call_0_0", "name": "get_issue",
                                                       "input": {"issue_key": "WEB-12"}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_0_0", "content": "x"}]}]
        answer = httpx.post(f"{fake.base_url}/v1/messages", headers={"x-api-key": "k", "anthropic-version": "1"},
                            json={"model": fake.model_name, "messages": messages, **THINKING})
    assert answer.status_code == 400


def test_a_refusal_is_one_line_with_status_type_and_message(pytester: pytest.Pytester) -> None:
    """Item 11: not the raw JSON body, but the status, Anthropic's error type and its message."""
    with AnthropicFake() as fake:
        project(pytester, fake, {})
        fake.script("*", {"status": 400, "error": "tools.0.custom.name: String should match pattern"})
        report = evaluate(pytester, "-k", "single")
    error = report["cases"][0]["error"]
    assert error == ("model claude (anthropic/claude-sonnet-4-5): bad request (HTTP 400 invalid_request_error): "
                     "tools.0.custom.name: String should match pattern")


def test_overloaded_is_retried_then_one_line(pytester: pytest.Pytester) -> None:
    """Anthropic's 529: litellm reports it as a 500 (its status is lost there); the error type says what it was."""
    with AnthropicFake() as fake:
        project(pytester, fake, {"num_retries": 1})
        fake.script("*", {"status": 529, "error": "Overloaded"})
        report = evaluate(pytester, "-k", "single")
    assert len(fake.requests) == 2
    assert report["cases"][0]["error"].endswith("after 2 attempts: InternalServerError (HTTP 500 overloaded_error): "
                                                "Overloaded")
