"""Each provider's fake through the whole plugin: a single-call case and a mocked two-turn flow pass end to end.

The fakes (fakes.py) speak each provider's wire format and refuse what the provider refuses, so these runs
go through litellm's own code for that provider (its request, its response parsing) as a user's would.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import read_report, run
from fakes import ALL_FAKES, AnthropicFake, GeminiFake, ProviderFake

TOOLS = [
    {"name": "get_issue", "description": "Get an issue by key.",
     "inputSchema": {"type": "object", "properties": {"issue_key": {"type": "string"}}, "required": ["issue_key"],
                     "additionalProperties": False}},
    {"name": "get_user", "description": "Get a user by username.",
     "inputSchema": {"type": "object", "properties": {"username": {"type": "string"}}, "required": ["username"]}},
]

BENCH = """\
server: {tools_file: tools.json}
cases:
  - id: single
    input: Show me WEB-12.
    expect: [{tool: get_issue, args: {issue_key: WEB-12}}]
  - id: flow
    input: Who opened WEB-12?
    order: in_order
    expect:
      - {tool: get_issue, args: {issue_key: WEB-12}}
      - {tool: get_user, args: {username: carol}}
    mocks:
      get_issue:
        - result: {structured: {key: WEB-12, author: carol}}
      get_user:
        - result: {text: "carol: Carol Diaz"}
    claims:
      - {claim: Names her, check: {contains: Carol Diaz}}
"""


def project(pytester: pytest.Pytester, fake: ProviderFake, bench: str = BENCH, params: dict[str, Any] | None = None,
            extra: str = "") -> None:
    (pytester.path / "pytest.ini").write_text(fake.ini("m", params, extra))
    (pytester.path / "tools.json").write_text(json.dumps(TOOLS))
    (pytester.path / "cases.mcpeval.yaml").write_text(bench)


def evaluate(pytester: pytest.Pytester, *args: str) -> dict[str, dict[str, Any]]:
    result = run(pytester, "--mcp-models=m", "--mcp-report=report.json", "--mcp-retries=0", *args)
    assert result.ret in (0, 1), result.stdout.str()
    return {case["id"]: case for case in read_report(pytester)["cases"]}


def script(fake: ProviderFake) -> None:
    fake.call("Show me WEB-12.", "get_issue", issue_key="WEB-12")
    fake.flow("Who opened WEB-12?", [{"name": "get_issue", "arguments": {"issue_key": "WEB-12"}}],
              {"tool_calls": [{"name": "get_user", "arguments": {"username": "carol"}}], "thinking": "carol it is"},
              "Carol Diaz opened it.")


@pytest.mark.parametrize("fake_class", ALL_FAKES, ids=[c.provider for c in ALL_FAKES])
def test_single_call_and_flow_pass_end_to_end(pytester: pytest.Pytester, fake_class: type[ProviderFake]) -> None:
    with fake_class() as fake:
        project(pytester, fake)
        script(fake)
        cases = evaluate(pytester)
    assert fake.refusals == []
    assert cases["single"]["error"] is None and cases["single"]["passed"] is True, cases["single"]
    flow = cases["flow"]
    assert flow["error"] is None and flow["passed"] is True, flow
    assert flow["final_answer"] == "Carol Diaz opened it."
    assert [[c["tool"] for c in turn["calls"]] for turn in flow["trajectory"]] == [["get_issue"], ["get_user"], []]
    assert [r["status"] for r in fake.requests if r["method"] == "POST" and "show" not in r["path"]] == [200] * 4


def test_a_refused_request_gets_the_providers_status_and_error_shape(pytester: pytest.Pytester) -> None:
    """The fakes refuse what the provider refuses: Anthropic with thinking and the default temperature."""
    with AnthropicFake() as fake:
        project(pytester, fake, params={"thinking": {"type": "enabled", "budget_tokens": 1024},
                                        "temperature": 0.5, "max_tokens": 2048})
        script(fake)
        cases = evaluate(pytester, "-k", "single")
    assert fake.requests[0]["status"] == 400
    assert fake.refusals[0][1].startswith("`temperature` may only be set to 1 when thinking is enabled")
    assert "temperature" in cases["single"]["error"]


def test_gemini_refuses_schema_fields_outside_its_subset() -> None:
    """Gemini's Schema object is a subset of JSON Schema (litellm keeps only that subset: the smoke run's
    ``additionalProperties`` never reaches the fake); a request with more is refused as Gemini refuses it."""
    import httpx

    with GeminiFake() as fake:
        body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
                "tools": [{"functionDeclarations": [{"name": "t", "parameters": {
                    "type": "object", "properties": {"x": {"type": "string", "const": "a"}}}}]}]}
        answer = httpx.post(f"{fake.api_base}/models/{fake.model_name}:generateContent", json=body,
                            headers={"x-goog-api-key": "k"})
    assert answer.status_code == 400
    assert answer.json() == {"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": (
        "Invalid JSON payload received. Unknown name \"const\" at "
        "'tools[0].function_declarations[0].parameters.properties[x].value': Cannot find field.")}}
