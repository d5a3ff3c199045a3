"""The fakes refuse what each provider refuses, with its status and its error body (raw HTTP, no litellm).

What the plugin sends is checked end to end elsewhere; these pin the refusals the later tests rely on, so a
fake that quietly accepts everything cannot make them pass.
"""

from __future__ import annotations

from typing import Any

import httpx
from fakes import AnthropicFake, AzureFake, GeminiFake, OllamaFake, VllmFake, signature

ANTHROPIC_HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
THINKING = {"type": "enabled", "budget_tokens": 1024}
USE = {"type": "tool_use", "id": "toolu_0_0", "name": "get_me", "input": {}}
RESULT = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_0_0", "content": "me"}]}


def anthropic(fake: AnthropicFake, **body: Any) -> httpx.Response:
    return httpx.post(f"{fake.base_url}/v1/messages", headers=ANTHROPIC_HEADERS,
                      json={"model": fake.model_name, "max_tokens": 2048, **body})


def test_anthropic_thinking_rules() -> None:
    with AnthropicFake() as fake:
        fake.call("*", "get_me")
        hi = {"role": "user", "content": "hi"}
        answer = anthropic(fake, thinking=THINKING, temperature=0, messages=[hi])
        assert answer.status_code == 400
        assert answer.json()["type"] == "error"
        assert answer.json()["error"]["type"] == "invalid_request_error"
        assert answer.json()["error"]["message"].startswith("`temperature` may only be set to 1 when thinking")
        no_thinking = [hi, {"role": "assistant", "content": [USE]}, RESULT]
        answer = anthropic(fake, thinking=THINKING, messages=no_thinking)
        assert answer.status_code == 400
        assert "Expected `thinking` or `redacted_thinking`, but found `tool_use`" in answer.json()["error"]["message"]
        assert anthropic(fake, messages=no_thinking).status_code == 200  # without thinking it is fine
        forged = [hi, {"role": "assistant", "content": [{"type": "thinking", "thinking": "x", "signature": "s"}, USE]},
                  RESULT]
        assert "Invalid `signature`" in anthropic(fake, thinking=THINKING, messages=forged).json()["error"]["message"]
        kept = [hi, {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "x", "signature": signature("x")}, USE]}, RESULT]
        assert anthropic(fake, thinking=THINKING, messages=kept).status_code == 200
        unanswered = [hi, {"role": "assistant", "content": [USE]}, hi]
        assert "`tool_use` ids were found without `tool_result`" in anthropic(
            fake, messages=unanswered).json()["error"]["message"]
        assert anthropic(fake, messages=[hi], thinking=THINKING, max_tokens=1024).status_code == 400
        assert httpx.post(f"{fake.base_url}/v1/messages", json={}).status_code == 401
        no_max = anthropic(fake, messages=[hi], max_tokens=None).json()
        assert no_max["error"]["message"] == "max_tokens: Field required"


def test_gemini_turn_rules_and_thought_signatures() -> None:
    with GeminiFake("gemini-3-pro-preview") as fake:
        fake.script("*", {"tool_calls": [{"name": "get_me", "arguments": {}}], "thinking": "plan"})
        url = f"{fake.api_base}/models/{fake.model_name}:generateContent"
        headers = {"x-goog-api-key": "k"}
        hi = {"role": "user", "parts": [{"text": "hi"}]}
        first = httpx.post(url, headers=headers, json={"contents": [hi]}).json()
        parts = first["candidates"][0]["content"]["parts"]
        assert parts[0] == {"text": "plan", "thought": True}
        assert parts[1] == {"functionCall": {"name": "get_me", "args": {}}, "thoughtSignature": signature("plan")}
        answer = {"role": "user", "parts": [{"functionResponse": {"name": "get_me", "response": {"r": 1}}}]}
        unsigned = {"role": "model", "parts": [{"functionCall": {"name": "get_me", "args": {}}}]}
        refused = httpx.post(url, headers=headers, json={"contents": [hi, unsigned, answer]})
        assert refused.status_code == 400
        assert refused.json()["error"]["status"] == "INVALID_ARGUMENT"
        assert "missing a thought_signature" in refused.json()["error"]["message"]
        signed = {"role": "model", "parts": parts}
        assert httpx.post(url, headers=headers, json={"contents": [hi, signed, answer]}).status_code == 200
        two = {"role": "user", "parts": [answer["parts"][0], answer["parts"][0]]}
        assert "number of function response parts" in httpx.post(
            url, headers=headers, json={"contents": [hi, signed, two]}).json()["error"]["message"]
        assert httpx.post(url, json={"contents": [hi]}).status_code == 403
        assert "valid role" in httpx.post(url, headers=headers, json={"contents": [
            {"role": "assistant", "parts": [{"text": "x"}]}]}).json()["error"]["message"]


def test_azure_ollama_and_vllm_refusals() -> None:
    with AzureFake() as fake:
        url = f"{fake.base_url}/openai/deployments/{fake.model_name}/chat/completions"
        body = {"messages": [{"role": "user", "content": "hi"}]}
        missing = httpx.post(url, headers={"api-key": "k"}, json=body)
        assert missing.status_code == 404
        assert missing.json() == {"error": {"code": "404", "message": "Resource not found"}}
        assert httpx.post(url, params={"api-version": fake.api_version}, json=body).status_code == 401
        assert httpx.post(url, params={"api-version": fake.api_version}, headers={"api-key": "k"},
                          json=body).status_code == 200
    with OllamaFake() as ollama:
        text_args = {"model": ollama.model_name, "stream": False, "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}]}
        refused = httpx.post(f"{ollama.base_url}/api/chat", json=text_args)
        assert refused.status_code == 400 and "cannot unmarshal string" in refused.json()["error"]
        assert httpx.post(f"{ollama.base_url}/api/chat", json={**text_args, "model": "llama9"}).json() == {
            "error": 'model "llama9" not found, try pulling it first'}
    with VllmFake(tool_parser=False) as vllm:
        body = {"model": vllm.model_name, "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}
        refused = httpx.post(f"{vllm.api_base}/chat/completions", json=body)
        assert refused.status_code == 400
        assert refused.json()["object"] == "error" and "--enable-auto-tool-choice" in refused.json()["message"]
