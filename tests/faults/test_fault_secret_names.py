"""Secret names (issue 30, item 5): ``extra_body.passcode`` (and ``pin``, ``otp``, ...) reached the report and the
response cache in clear, and a model that repeated one put it in the Markdown summary and on the HTML page: the
name rules masked ``key``, ``token``, ``secret``, ``password``, ``auth...``, ``credential...`` and a few more.
:func:`pytest_mcpeval.redact.secret_name` is the one rule; it now knows the common names of secrets that were
missing, and names that only look like them stay shown (``pinned``, ``spinner``, ``signature_version``).
"""

from __future__ import annotations

import json

import pytest
from conftest import GITHUB_TOOLS, get_me_cases, read_report, run
from test_fault_secrets import files_of, leaks, written

from pytest_mcpeval.redact import Redactor, secret_name
from pytest_mcpeval.testing import ScriptedModelServer

SECRET_NAMES = [
    "passcode", "user_passcode", "pin", "PIN", "user_pin", "pin_code", "pincode", "myPin", "otp", "totp", "hotp",
    "otp_code", "mfa_code", "2fa_code", "two_factor_code", "recovery_code", "backup_codes", "private_key",
    "privateKey", "ssh-private-key", "signature", "x-amz-signature", "jwt", "csrf", "hmac", "mnemonic",
    "seed_phrase", "conn_str", "connection_string", "ConnectionString", "cvv", "cvc", "sharedAccessKey",
    "accountKey", "one_time_password",
    # and what was masked before stays masked
    "api_key", "x-api-key", "X-Auth-Token", "Authorization", "session_auth", "client_secret", "db_password",
    "cookie", "refresh_token", "session_id", "sig",
]
INNOCENT_NAMES = [
    "pinned", "spinner", "pinyin", "opinion", "shipping", "pinecone_index", "hotpot", "topping", "signature_version",
    "signature_method", "sig_version", "otp_enabled", "pin_length", "token_type", "max_tokens", "maxTokens",
    "thinking.budget_tokens", "keyword", "monkey", "passage", "compass", "bypass", "top_p", "key_count",
    "private_key_path", "secret_name",
]


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_a_secret_name_is_one(name: str) -> None:
    assert secret_name(name)


@pytest.mark.parametrize("name", INNOCENT_NAMES)
def test_an_innocent_name_is_not_one(name: str) -> None:
    assert not secret_name(name)


def test_query_parameters_and_environment_variables_follow_the_same_rule() -> None:
    redactor = Redactor.for_run(environ={"APP_PASSCODE": "Vq8dLr2mXc5n", "USER_PIN": "73914285", "PINNED": "pinned-1"})
    text = ("https://bank.example/login?passcode=Hx7kP2qWz9&pin=4821&otp=112233&pinned=yes&spinner=dots "
            "with Vq8dLr2mXc5n and 73914285 and pinned-1")
    assert redactor.text(text) == ("https://bank.example/login?passcode=REDACTED&pin=REDACTED&otp=REDACTED"
                                   "&pinned=yes&spinner=dots with REDACTED and REDACTED and pinned-1")


SECRETS = {  # no key shape: only the names can teach the redactor these values
    "passcode": "Kd7wQm2xTr9v", "pin": "58302917", "otp": "Zp4nHc8sLq1w", "private_key": "Mx3vBt6yRk9d",
    "signature": "Yt5cWq8nPz2j", "mfa_code": "Gh6rTz1mKs4p", "jwt": "eyJhbGciOiJIUzI1NiJ9x.Jq2w",
    "hmac": "Uw9pXb3kVn7s",
}
SHOWN = {"pinned": "visible-pinned-1", "signature_version": "visible-sigv-4", "spinner": "visible-dots-1",
         "otp_enabled": True}


def test_secret_names_are_masked_in_the_report_the_cache_the_page_and_the_markdown(
        pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    extra_body = {**SECRETS, "nested": {"pin": "4821"}, **SHOWN}
    params = {"api_base": model_server.api_base, "api_key": "not-a-key", "extra_body": extra_body}
    (pytester.path / "pytest.ini").write_text(
        f"[pytest]\nmcp_model_aliases = fake = openai/fake\nmcp_model_params = fake = {json.dumps(params)}\n")
    (pytester.path / "tools.json").write_text(GITHUB_TOOLS.read_text())
    (pytester.path / "bench.mcpeval.yaml").write_text(get_me_cases(2))
    echoed = " ".join(SECRETS.values())
    model_server.script("*", {"tool_calls": [{"name": "get_me", "arguments": {}}]})
    model_server.script("q question 1", {"content": f"Your codes: {echoed}",  # a miss that repeats every secret
                                         "tool_calls": [{"name": f"unlock_{SECRETS['passcode']}",
                                                         "arguments": {"q": echoed}}]})
    before = files_of(pytester)
    result = run(pytester, "--mcp-models=fake", "--mcp-report=report.json", "--mcp-markdown=summary.md",
                 "--mcp-html=report.html", "--junitxml=junit.xml", "-rA", "-v")
    sent = model_server.requests[0]
    assert {name: sent[name] for name in SECRETS} == SECRETS  # they were used
    assert leaks(pytester, before, result, list(SECRETS.values())) == {}
    masked = {**dict.fromkeys(SECRETS, "REDACTED"), "nested": {"pin": "REDACTED"}, **SHOWN}
    run_ = read_report(pytester)["run"]["models"]["fake"]
    assert run_["params"]["extra_body"] == masked and run_["params_sent"]["extra_body"] == masked
    entries = [json.loads(text) for text in written(pytester, ".mcpeval/cache/*/*/*.json")]
    assert [e["params_sent"]["extra_body"] for e in entries] == [masked, masked]
    assert "Your codes: " + " ".join(["REDACTED"] * len(SECRETS)) in [e["reply"]["content"] for e in entries]
    for page in ("summary.md", "report.html"):  # the tool the model invented, masked
        assert "unlock_REDACTED" in (pytester.path / page).read_text(encoding="utf-8"), page
    assert "Your codes: REDACTED REDACTED" in (pytester.path / "report.html").read_text(encoding="utf-8")
    # names about a secret are shown with their values
    assert all(value in json.dumps(entries) for value in ("visible-pinned-1", "visible-sigv-4", "visible-dots-1"))
