"""How a reply ended, per provider, through the whole plugin: the verdict each gets (issue 20, items 3-7).

Each test runs the plugin as a user of that provider would, against the provider's fake (fakes.py), so the
stop reason, the safety block, the text that holds a call, the 429 body and the tool answers all go through
litellm's own code for that provider.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import read_report, run
from fakes import AnthropicFake, AzureFake, GeminiFake, OllamaFake, OpenAIFake, ProviderFake, VllmFake

from pytest_mcpeval.models import litellm_failures

TOOLS = [
    {"name": "get_issue", "description": "Get an issue by key.",
     "inputSchema": {"type": "object", "properties": {"issue_key": {"type": "string"}}, "required": ["issue_key"]}},
    {"name": "get_user", "description": "Get a user by username.",
     "inputSchema": {"type": "object", "properties": {"username": {"type": "string"}}, "required": ["username"]}},
]

BENCH = """\
server: {tools_file: tools.json}
cases:
  - id: single
    input: Show me WEB-12.
    expect: [{tool: get_issue, args: {issue_key: WEB-12}}]
  - id: none
    input: Say hello.
    expect: []
  - id: flow
    input: Who opened WEB-12?
    order: in_order
    expect:
      - {tool: get_issue, args: {issue_key: WEB-12}}
      - {tool: get_user, args: {username: carol}}
    mocks:
      get_issue:
        - when: {issue_key: WEB-12}
          result: {structured: {key: WEB-12, author: carol}}
        - result: {error: "no such issue"}
      get_user:
        - result: {text: "carol: Carol Diaz"}
"""

CALL = {"name": "get_issue", "arguments": {"issue_key": "WEB-12"}}


def project(pytester: pytest.Pytester, fake: ProviderFake, extra: str = "") -> None:
    (pytester.path / "pytest.ini").write_text(fake.ini("m", extra=extra))
    (pytester.path / "tools.json").write_text(json.dumps(TOOLS))
    (pytester.path / "cases.mcpeval.yaml").write_text(BENCH)


def evaluate(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    result = run(pytester, "--mcp-models=m", "--mcp-report=report.json", "--mcp-markdown=report.md",
                 "--mcp-html=report.html", "--mcp-retries=0", *args)
    assert result.ret in (0, 1), result.stdout.str()
    return result, read_report(pytester)


def by_id(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {case["id"]: case for case in report["cases"]}


def posts(fake: ProviderFake) -> list[dict[str, Any]]:
    return [r for r in fake.requests if r["method"] == "POST" and "show" not in r["path"]]


# -- 3. stop reasons ----------------------------------------------------------------------------------------

TRUNCATION = [(AnthropicFake, "max_tokens", None), (GeminiFake, "MAX_TOKENS", "MAX_TOKENS"),
              (OpenAIFake, "length", None), (AzureFake, "length", None), (VllmFake, "length", None),
              (OllamaFake, "length", None)]


@pytest.mark.parametrize(("fake_class", "finish", "native"), TRUNCATION, ids=[t[0].provider for t in TRUNCATION])
def test_a_reply_cut_off_by_the_token_limit_is_truncated(pytester: pytest.Pytester, fake_class: type[ProviderFake],
                                                         finish: str, native: str | None) -> None:
    """Anthropic ``max_tokens``, Gemini ``MAX_TOKENS`` and ``length`` elsewhere all mean the reply was cut: a
    miss diagnosed ``truncated`` with the hint, not ``no_tool_use``; the finish reasons are in the result."""
    with fake_class() as fake:
        project(pytester, fake)
        fake.script("Show me WEB-12.", {"content": "Let me think about which tool", "finish": finish})
        fake.flow("Who opened WEB-12?", [CALL], {"content": "It was opened by", "finish": finish})
        result, report = evaluate(pytester, "-k", "single or flow")
    assert fake.refusals == []
    cases = by_id(report)
    single, flow = cases["single"], cases["flow"]
    assert (single["passed"], single["diagnosis"], single["finish_reason"]) == (False, "truncated", "length")
    assert single.get("provider_finish_reason") == native
    assert (flow["passed"], flow["diagnosis"], flow["finish_reason"]) == (False, "truncated", "length")
    assert [t.get("finish_reason") for t in flow["trajectory"]] == ["tool_calls", "length"]
    assert report["models"]["m"]["diagnoses"] == {"truncated": 2}
    out = result.stdout.str()
    assert "raise max_tokens in mcp_model_params" in out
    assert "raise max_tokens in mcp_model_params" in (pytester.path / "report.md").read_text()
    assert "raise max_tokens in mcp_model_params" in (pytester.path / "report.html").read_text()


def test_a_natural_stop_keeps_its_diagnosis_and_reason(pytester: pytest.Pytester) -> None:
    with AnthropicFake() as fake:
        project(pytester, fake)
        fake.script("Show me WEB-12.", {"content": "I cannot look that up."})
        _, report = evaluate(pytester, "-k", "single")
    single = by_id(report)["single"]
    assert (single["diagnosis"], single["finish_reason"]) == ("no_tool_use", "stop")
    assert "provider_finish_reason" not in single


def test_gemini_malformed_function_call_is_malformed_call(pytester: pytest.Pytester) -> None:
    """Gemini drops a call it cannot parse and says MALFORMED_FUNCTION_CALL, which litellm normalises to
    ``stop``: its native reason (kept by litellm) makes it ``malformed_call``, single call or flow."""
    with GeminiFake() as fake:
        project(pytester, fake)
        fake.script("Show me WEB-12.", {"content": "print(default_api.get_issue(issue_key=WEB-12", "finish":
                                        "MALFORMED_FUNCTION_CALL"})
        fake.flow("Who opened WEB-12?", [CALL], {"content": "get_user(", "finish": "MALFORMED_FUNCTION_CALL"})
        result, report = evaluate(pytester, "-k", "single or flow")
    cases = by_id(report)
    for case in (cases["single"], cases["flow"]):
        assert (case["passed"], case["diagnosis"]) == (False, "malformed_call"), case
        assert (case["finish_reason"], case["provider_finish_reason"]) == ("stop", "MALFORMED_FUNCTION_CALL")
    assert cases["flow"]["trajectory"][-1]["provider_finish_reason"] == "MALFORMED_FUNCTION_CALL"
    assert "could not parse the call the model wrote and dropped it (MALFORMED_FUNCTION_CALL)" in result.stdout.str()


# -- 4. safety blocks ---------------------------------------------------------------------------------------

BLOCKS = [(GeminiFake, {"block": "SAFETY"}, "content_filter"),
          (GeminiFake, {"content": "", "finish": "SAFETY"}, "content_filter"),
          (AzureFake, {"content": "", "finish": "content_filter"}, "content_filter"),
          (AnthropicFake, {"content": "", "finish": "refusal"}, "refusal")]


@pytest.mark.parametrize(("fake_class", "reply", "reason"), BLOCKS,
                         ids=["gemini-prompt-blocked", "gemini-SAFETY", "azure-content_filter", "anthropic-refusal"])
def test_a_safety_block_is_an_error_never_a_pass(pytester: pytest.Pytester, fake_class: type[ProviderFake],
                                                 reply: dict[str, Any], reason: str) -> None:
    """A reply the provider withheld is an error (out of every metric, failing the gate), not the model's
    choice: ``expect: []`` does not pass on it, and the report says it was blocked."""
    with fake_class() as fake:
        project(pytester, fake)
        fake.script("*", reply)
        fake.flow("Who opened WEB-12?", [CALL], reply)  # blocked on its second turn
        result, report = evaluate(pytester)
    assert result.ret == 1
    cases = by_id(report)
    for case in cases.values():
        assert case["passed"] is None and case["diagnosis"] is None, case
        assert case["blocked"] == reason and case["finish_reason"] == "content_filter"
        assert case["error"].startswith(f"model m ({fake.model}): blocked by the provider's safety filter ({reason})")
    assert "on turn 2" in cases["flow"]["error"]
    assert [t.get("finish_reason") for t in cases["flow"]["trajectory"]] == ["tool_calls", "content_filter"]
    metrics = report["models"]["m"]
    assert (metrics["errors"], metrics["blocked"], metrics["scored"], metrics["accuracy"]) == (3, 3, 0, None)
    assert "m: 0 scored, 3 errors (3 blocked by the provider's safety filter)" in (
        result.stdout.str())
    assert "3 of 3 cases have no score" in " ".join(report["gate"]["failures"])


# -- 5. a tool call written as text ---------------------------------------------------------------------------

WRITTEN = [(VllmFake, '<tool_call>\n{"name": "get_issue", "arguments": {"issue_key": "WEB-12"}}\n</tool_call>'),
           (OllamaFake, 'Looking.\n```json\n{"name": "get_issue", "arguments": {"issue_key": "WEB-12"}}\n```'),
           (OpenAIFake, '{"name": "get_issue", "parameters": {"issue_key": "WEB-12"}}')]


@pytest.mark.parametrize(("fake_class", "content"), WRITTEN, ids=["vllm-hermes", "ollama-fence", "llama.cpp-json"])
def test_a_tool_call_written_as_text_is_diagnosed_and_shown(pytester: pytest.Pytester,
                                                            fake_class: type[ProviderFake], content: str) -> None:
    """A call in ``content`` is still a miss (no client would run it), but ``tool_call_in_text`` with the parsed
    call in the report, the terminal, the Markdown and the HTML, so the user fixes the serving side."""
    with fake_class() as fake:
        project(pytester, fake)
        fake.script("Show me WEB-12.", {"content": content})
        fake.flow("Who opened WEB-12?", [CALL], {"content": content.replace("get_issue", "get_user").replace(
            '"issue_key": "WEB-12"', '"username": "carol"')})
        result, report = evaluate(pytester, "-k", "single or flow")
    cases = by_id(report)
    single, flow = cases["single"], cases["flow"]
    assert (single["passed"], single["diagnosis"], single["called"]) == (False, "tool_call_in_text", [])
    assert single["text_calls"] == [{"tool": "get_issue", "args": {"issue_key": "WEB-12"}}]
    assert (flow["passed"], flow["diagnosis"]) == (False, "tool_call_in_text")
    assert flow["text_calls"] == [{"tool": "get_user", "args": {"username": "carol"}}]
    shown = 'a tool call written as text, not as a call: get_issue {"issue_key":"WEB-12"}'
    assert shown in result.stdout.str()
    assert "fix its tool parser or chat template" in (pytester.path / "report.md").read_text()
    assert "a tool call written as text" in (pytester.path / "report.html").read_text()


def test_prose_with_json_is_no_tool_call(pytester: pytest.Pytester) -> None:
    """Only a name the model was shown makes text a call: an answer quoting JSON stays ``no_tool_use``."""
    with OllamaFake() as fake:
        project(pytester, fake)
        fake.script("Show me WEB-12.", {"content": 'The issue is {"name": "WEB-12", "arguments": []} I think.'})
        _, report = evaluate(pytester, "-k", "single")
    single = by_id(report)["single"]
    assert single["diagnosis"] == "no_tool_use" and "text_calls" not in single


# -- 6. Gemini's retry delay -----------------------------------------------------------------------------------

def retry_info(delay: str) -> dict[str, Any]:
    return {"status": 429, "body": {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": (
        "You exceeded your current quota, please check your plan and billing details."), "details": [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaMetric": "x"}]},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}]}}}


def test_gemini_retry_delay_in_the_body_is_honoured(pytester: pytest.Pytester) -> None:
    """Gemini's 429 says how long to wait only in its body (RetryInfo.retryDelay, here 1.5 s, more than the
    first backoff's full jitter can draw): the retry waits that long, then passes."""
    with GeminiFake() as fake:
        project(pytester, fake)
        fake.script("Show me WEB-12.", [retry_info("1.5s"), {"tool_calls": [CALL]}])
        _, report = evaluate(pytester, "-k", "single", "--mcp-retries=1")
    single = by_id(report)["single"]
    assert single["passed"] is True and single["usage"]["attempts"] == 2
    first, second = posts(fake)
    assert first["status"] == 429 and second["at"] - first["at"] >= 1.5


def test_gemini_retry_delay_is_bounded_by_the_timeout() -> None:
    """The body's delay is read from litellm's own exception, and bounded by --mcp-timeout and the cap."""
    import litellm

    with GeminiFake() as fake:
        fake.script("*", [retry_info("3600s"), retry_info("0.25s"), {"status": 429, "error": "no details"}])
        found = []
        for _ in range(3):
            with pytest.raises(litellm.RateLimitError) as caught:
                litellm.completion(model=fake.model, messages=[{"role": "user", "content": "hi"}], num_retries=0,
                                   **fake.params())
            found.append(caught.value)
    assert litellm_failures._retry_after(found[0], timeout=20.0) == 20.0
    assert litellm_failures._retry_after(found[0]) == litellm_failures.RETRY_AFTER_CAP
    assert litellm_failures._retry_after(found[1], timeout=20.0) == 0.25
    assert litellm_failures._retry_after(found[2], timeout=20.0) is None  # then the usual backoff


# -- 7. error results flagged as errors ------------------------------------------------------------------------

def function_responses(request: dict[str, Any]) -> list[Any]:
    """The ``response`` of every functionResponse part of a Gemini request, in order (litellm writes the
    field names in snake case, which proto3 JSON accepts)."""
    return [(part.get("functionResponse") or part.get("function_response"))["response"]
            for content in request["body"]["contents"] for part in content["parts"]
            if "functionResponse" in part or "function_response" in part]


def test_gemini_gets_a_mock_error_as_a_function_response_error(pytester: pytest.Pytester) -> None:
    """Gemini's functionResponse flags a failed call with an ``error`` key in ``response``: a mock's error goes
    back so; a result that is not an error goes back as it was."""
    with GeminiFake() as fake:
        project(pytester, fake)
        fake.flow("Who opened WEB-12?", [{"name": "get_issue", "arguments": {"issue_key": "WEB-99"}}], [CALL],
                  {"tool_calls": [{"name": "get_user", "arguments": {"username": "carol"}}]}, "Carol Diaz.")
        _, report = evaluate(pytester, "-k", "flow")
    flow = by_id(report)["flow"]
    assert flow["passed"] is True and fake.refusals == []
    assert function_responses(posts(fake)[3]) == [{"error": "no such issue"}, {"key": "WEB-12", "author": "carol"},
                                                  {"content": "carol: Carol Diaz"}]


def test_gemini_gets_a_live_tool_error_as_a_function_response_error(pytester: pytest.Pytester) -> None:
    tracker = Path(__file__).parent.parent.parent / "examples" / "tracker" / "server.py"
    shutil.copy(tracker, pytester.path / "tracker_server.py")
    with GeminiFake() as fake:
        (pytester.path / "pytest.ini").write_text(fake.ini("m"))
        (pytester.path / "live.mcpeval.yaml").write_text("""\
server: {python: "tracker_server:server"}
cases:
  - id: live
    input: Is there an issue NOPE-1?
    execute: live
    expect: [{tool: get_issue, args: {issue_key: NOPE-1}}]
""")
        fake.flow("Is there an issue NOPE-1?", [{"name": "get_issue", "arguments": {"issue_key": "NOPE-1"}}],
                  "There is no NOPE-1.")
        _, report = evaluate(pytester)
    live = by_id(report)["live"]
    assert live["passed"] is True, live
    assert live["trajectory"][0]["calls"][0]["answer"]["is_error"] is True
    [response] = function_responses(posts(fake)[1])
    assert response == {"error": live["trajectory"][0]["calls"][0]["answer"]["text"]}
    assert "NOPE-1" in response["error"]


@pytest.mark.xfail(strict=True, reason="litellm 1.110 builds Anthropic's tool_result from a tool message without "
                                       "is_error (factory.convert_to_anthropic_tool_result): docs/flows.md")
def test_anthropic_gets_a_mock_error_flagged_is_error(pytester: pytest.Pytester) -> None:
    with AnthropicFake() as fake:
        project(pytester, fake)
        fake.flow("Who opened WEB-12?", [{"name": "get_issue", "arguments": {"issue_key": "WEB-99"}}], "None.")
        evaluate(pytester, "-k", "flow")
    result = posts(fake)[1]["body"]["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["content"] == "no such issue"
    assert result.get("is_error") is True


def test_openai_style_gets_the_error_text(pytester: pytest.Pytester) -> None:
    """Where the format has no flag litellm can send, the error's text goes back unchanged."""
    with OpenAIFake() as fake:
        project(pytester, fake)
        fake.flow("Who opened WEB-12?", [{"name": "get_issue", "arguments": {"issue_key": "WEB-99"}}], "None.")
        evaluate(pytester, "-k", "flow")
    assert posts(fake)[1]["body"]["messages"][-1] == {"role": "tool", "tool_call_id": "call_0_0",
                                                      "content": "no such issue"}


def test_finish_reasons_replay_from_the_cache(pytester: pytest.Pytester) -> None:
    """The cache entry keeps both reasons: a replay without the provider gives the same verdicts.  A blocked reply
    is an error and not kept (the next run asks again): replay-only, it has no recorded response."""
    with GeminiFake() as fake:
        project(pytester, fake)
        fake.script("Show me WEB-12.", {"content": "Let me", "finish": "MAX_TOKENS"})
        fake.script("Say hello.", {"block": "PROHIBITED_CONTENT"})
        fake.flow("Who opened WEB-12?", [CALL], {"content": "get_user(", "finish": "MALFORMED_FUNCTION_CALL"})
        _, recorded = evaluate(pytester)
    _, replayed = evaluate(pytester, "--mcp-record=none")
    fields = ("passed", "diagnosis", "finish_reason", "provider_finish_reason", "blocked", "error")
    assert [[c.get(f) for f in fields] for c in replayed["cases"] if c["id"] != "none"] == [
        [c.get(f) for f in fields] for c in recorded["cases"] if c["id"] != "none"]
    assert [by_id(replayed)[i]["diagnosis"] for i in ("single", "flow")] == ["truncated", "malformed_call"]
    assert by_id(recorded)["none"]["blocked"] == "content_filter"
    assert "no recorded response" in by_id(replayed)["none"]["error"]
    assert all(c["usage"]["cached"] for c in replayed["cases"] if not c["error"])
