"""Gemini through the Gemini fake, end to end: no default temperature for Gemini 3 or with thinking, thought
signatures sent back with their calls, recordings that do not change from run to run, error lines.  Issue 20
items 1, 2, 9, 10 and 11.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import read_report, run
from fakes import GeminiFake, signature
from test_provider_smoke import BENCH, TOOLS


def project(pytester: pytest.Pytester, fake: GeminiFake, params: dict[str, Any] | None = None) -> None:
    (pytester.path / "pytest.ini").write_text(fake.ini("gemini", params))
    (pytester.path / "tools.json").write_text(json.dumps(TOOLS))
    (pytester.path / "cases.mcpeval.yaml").write_text(BENCH)


def evaluate(pytester: pytest.Pytester, *args: str) -> dict[str, Any]:
    result = run(pytester, "--mcp-models=gemini", "--mcp-report=report.json", "--mcp-retries=0", *args)
    assert result.ret in (0, 1), result.stdout.str()
    return read_report(pytester)


def script(fake: GeminiFake) -> None:
    """Gemini 3 thinks on every turn and signs its first function call."""
    fake.script("Show me WEB-12.", {"thinking": "A lookup.",
                                    "tool_calls": [{"name": "get_issue", "arguments": {"issue_key": "WEB-12"}}]})
    fake.flow("Who opened WEB-12?",
              {"thinking": "First the issue.",
               "tool_calls": [{"name": "get_issue", "arguments": {"issue_key": "WEB-12"}}]},
              {"thinking": "Now carol.", "tool_calls": [{"name": "get_user", "arguments": {"username": "carol"}}]},
              {"content": "Carol Diaz opened it."})


def temperatures(fake: GeminiFake) -> list[Any]:
    return [r["body"].get("generationConfig", {}).get("temperature", "absent") for r in fake.requests]


def test_gemini_3_gets_no_default_temperature(pytester: pytest.Pytester) -> None:
    """Item 9: Google recommends Gemini 3's default temperature 1.0 (lower loops): the plugin's 0 is not sent."""
    with GeminiFake("gemini-3-pro-preview") as fake:
        project(pytester, fake)
        script(fake)
        report = evaluate(pytester, "-k", "single")
    assert temperatures(fake) == ["absent"]
    assert report["cases"][0]["passed"] is True
    assert "temperature" not in report["run"]["models"]["gemini"]["params_sent"]


def test_gemini_2_5_still_gets_temperature_0_and_a_users_value_is_sent(pytester: pytest.Pytester) -> None:
    with GeminiFake("gemini-2.5-flash") as fake:
        project(pytester, fake)
        script(fake)
        evaluate(pytester, "-k", "single")
    assert temperatures(fake) == [0]
    with GeminiFake("gemini-3-pro-preview") as fake:
        project(pytester, fake, {"temperature": 0.2})
        script(fake)
        report = evaluate(pytester, "-k", "single")
    assert temperatures(fake) == [0.2]
    assert report["run"]["models"]["gemini"]["params_sent"]["temperature"] == 0.2


def test_thinking_on_gemini_2_5_gets_no_default_temperature(pytester: pytest.Pytester) -> None:
    """Item 1 for Gemini: reasoning_effort maps to thinkingConfig; the default temperature is left out."""
    with GeminiFake("gemini-2.5-flash") as fake:
        project(pytester, fake, {"reasoning_effort": "low"})
        script(fake)
        evaluate(pytester, "-k", "single")
    assert temperatures(fake) == ["absent"]
    assert "thinkingConfig" in fake.requests[0]["body"]["generationConfig"]


def test_thought_signatures_go_back_with_their_calls(pytester: pytest.Pytester) -> None:
    """Item 2: each model turn is sent back with its call's thoughtSignature unchanged (Gemini 3 refuses the
    request without it), and under the same id whatever litellm made up."""
    with GeminiFake("gemini-3-pro-preview") as fake:
        project(pytester, fake)
        script(fake)
        report = evaluate(pytester, "-k", "flow")
        made = len(fake.requests)
        replayed = evaluate(pytester, "-k", "flow")  # the signatures come from the cache: the same conversation
        assert len(fake.requests) == made and replayed["cases"][0]["usage"]["cached"] is True
    assert fake.refusals == []
    flow = report["cases"][0]
    assert flow["error"] is None and flow["passed"] is True, flow
    model_turns = [c for c in fake.requests[-1]["body"]["contents"] if c["role"] == "model"]
    signed = [p.get("thoughtSignature") for turn in model_turns for p in turn["parts"] if "function_call" in p]
    assert signed == [signature("First the issue."), signature("Now carol.")]
    assert [c["id"] for turn in flow["trajectory"] for c in turn["calls"]] == ["call_0_0", "call_1_0"]


def test_two_recordings_of_the_same_flow_are_identical(pytester: pytest.Pytester) -> None:
    """Item 10: litellm gives each Gemini call a random ``call_<hex>`` id (with the signature appended); they are
    replaced by deterministic ids, so recording the same answers twice writes the same cache: the same files
    (each named by the hash of its request), with the same replies."""
    recorded = []
    port = 0  # the second run on the first one's port: api_base is part of what an entry records
    for attempt in ("a", "b"):
        with GeminiFake("gemini-3-pro-preview", port=port) as fake:
            port = fake._httpd.server_address[1]
            project(pytester, fake)
            script(fake)
            evaluate(pytester, f"--mcp-cache-dir=cache-{attempt}")
        assert fake.refusals == []
        recorded.append(cache_files(pytester.path / f"cache-{attempt}"))
    assert len(recorded[0]) == 4  # the single call and the flow's three turns
    assert recorded[0] == recorded[1]


def cache_files(directory: Path) -> dict[str, Any]:
    """Each entry by its path, without what differs between any two runs (the run's id, the call's latency)."""
    files = {}
    for path in sorted(directory.rglob("*.json")):
        entry = json.loads(path.read_text())
        del entry["run"], entry["reply"]["latency_s"]
        files[str(path.relative_to(directory))] = entry
    return files


def test_a_refusal_is_one_line_with_status_and_gemini_status(pytester: pytest.Pytester) -> None:
    """Item 11: Gemini's error body as status, its ``status`` word and its message, not as raw JSON."""
    with GeminiFake() as fake:
        project(pytester, fake)
        fake.script("*", {"status": 400, "error": "* GenerateContentRequest.contents: contents is not specified"})
        report = evaluate(pytester, "-k", "single")
    assert report["cases"][0]["error"] == (
        "model gemini (gemini/gemini-2.5-flash): bad request (HTTP 400 INVALID_ARGUMENT): "
        "* GenerateContentRequest.contents: contents is not specified")
