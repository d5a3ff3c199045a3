"""Ollama, Azure OpenAI, vLLM and OpenAI through their fakes, end to end: thinking without the default
temperature (Ollama's ``think``), litellm's made-up call ids (Ollama gives none), error lines in each one's
error shape, and a refusal caused by the plugin's own default.  Issue 20 items 1, 10 and 11.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import read_report, run
from fakes import AzureFake, OllamaFake, OpenAIFake, ProviderFake, VllmFake
from test_provider_smoke import BENCH, TOOLS, script


def project(pytester: pytest.Pytester, fake: ProviderFake, params: dict[str, Any] | None = None) -> None:
    (pytester.path / "pytest.ini").write_text(fake.ini("m", params))
    (pytester.path / "tools.json").write_text(json.dumps(TOOLS))
    (pytester.path / "cases.mcpeval.yaml").write_text(BENCH)


def evaluate(pytester: pytest.Pytester, *args: str) -> dict[str, Any]:
    result = run(pytester, "--mcp-models=m", "--mcp-report=report.json", "--mcp-retries=0", *args)
    assert result.ret in (0, 1), result.stdout.str()
    return read_report(pytester)


def chats(fake: ProviderFake) -> list[dict[str, Any]]:
    return [r["body"] for r in fake.requests if r["path"].endswith(("/chat", "/completions"))]


def test_ollama_think_runs_without_the_default_temperature(pytester: pytest.Pytester) -> None:
    """Item 1 for Ollama: ``think`` asks a thinking model (Qwen3's card: no greedy decoding with thinking)."""
    with OllamaFake() as fake:
        project(pytester, fake, {"think": True})
        script(fake)
        report = evaluate(pytester)
    assert all("temperature" not in body["options"] and body["think"] is True for body in chats(fake))
    assert all(c["passed"] for c in report["cases"]), report["cases"]
    assert "temperature" not in report["run"]["models"]["m"]["params_sent"]


def test_ollama_recordings_are_identical(pytester: pytest.Pytester) -> None:
    """Item 10: Ollama gives its calls no id and litellm makes up ``call_<uuid>`` ones: replaced, so two
    recordings of the same answers are the same files with the same replies."""
    recorded = []
    port = 0
    for attempt in ("a", "b"):
        with OllamaFake(port=port) as fake:
            port = fake._httpd.server_address[1]
            project(pytester, fake)
            script(fake)
            evaluate(pytester, f"--mcp-cache-dir=cache-{attempt}")
        files = {}
        for path in sorted(Path(pytester.path, f"cache-{attempt}").rglob("*.json")):
            entry = json.loads(path.read_text())
            del entry["run"], entry["reply"]["latency_s"]
            files[str(path.relative_to(pytester.path / f"cache-{attempt}"))] = entry
        recorded.append(files)
    assert len(recorded[0]) == 4 and recorded[0] == recorded[1]
    sent = [m["tool_calls"][0]["id"] for m in chats(fake)[-1]["messages"] if m.get("tool_calls")]
    assert sent == ["call_0_0", "call_1_0"]


@pytest.mark.parametrize(("fake_class", "reply", "line"), [
    (AzureFake, {"status": 404, "error": "The API deployment for this resource does not exist.",
                 "error_type": "DeploymentNotFound"},
     "model or endpoint not found (HTTP 404 DeploymentNotFound): The API deployment for this resource does not exist."),
    (VllmFake, {"status": 400, "error": "This model's maximum context length is 32768 tokens."},
     "the request does not fit the model's context window: This model's maximum context length is 32768 tokens."),
    (OllamaFake, {"status": 400, "error": "invalid tool call arguments"},
     "bad request (HTTP 400): invalid tool call arguments"),
    (OpenAIFake, {"status": 400, "error": "Invalid schema for function 'get_issue'."},
     "bad request (HTTP 400 invalid_request_error): Invalid schema for function 'get_issue'."),
], ids=["azure", "vllm", "ollama", "openai"])
def test_a_refusal_is_one_line_with_status_type_and_message(pytester: pytest.Pytester, fake_class: type[ProviderFake],
                                                           reply: dict[str, Any], line: str) -> None:
    """Item 11: each provider's error body read for its type and message, with the status, on one line."""
    with fake_class() as fake:
        project(pytester, fake)
        fake.script("*", reply)
        report = evaluate(pytester, "-k", "single")
    error = report["cases"][0]["error"]
    assert error.split(": ", 1)[1].startswith(line.split(": check ")[0]), error
    assert "{" not in error


def test_a_refusal_of_the_plugins_default_says_so(pytester: pytest.Pytester) -> None:
    """Item 1: a server that refuses the default temperature (a model litellm does not know to spare): the
    line says the plugin's default was sent, not the user's, and how to set it."""
    with OpenAIFake() as fake:
        project(pytester, fake)
        fake.script("*", {"status": 400, "error": "Unsupported value: 'temperature' does not support 0 with this "
                                                  "model. Only the default (1) value is supported."})
        report = evaluate(pytester, "-k", "single")
    assert report["cases"][0]["error"] == (
        "model m (openai/gpt-4.1-mini): bad request (HTTP 400 invalid_request_error): Unsupported value: "
        "'temperature' does not support 0 with this model. Only the default (1) value is supported. (the plugin's "
        "default temperature=0 was sent, not a value of yours: set 'temperature' in mcp_model_params to a value "
        "the model accepts)")


def test_azure_and_vllm_get_what_they_need(pytester: pytest.Pytester) -> None:
    """The documented wiring: Azure's api-version and api-key, vLLM's model name; the default temperature sent."""
    for fake_class in (AzureFake, VllmFake):
        with fake_class() as fake:
            project(pytester, fake)
            script(fake)
            report = evaluate(pytester, "-k", "single")
        assert report["cases"][0]["passed"] is True, report["cases"]
        assert [body["temperature"] for body in chats(fake)] == [0]
    assert fake.requests[0]["path"] == "/v1/chat/completions"
