"""The litellm path: which parameters are sent, and which failures are retried.

Calls go through real litellm over HTTP to the scripted server (``litellm_client.complete`` directly:
fast), plus one end-to-end run.  Nothing may reach the internet: the ``no_internet`` fixture refuses
every connection and name lookup that is not this machine, so the missing-key checks prove that the
error comes before any network.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from conftest import read_report, run

from pytest_mcpeval.models import ModelCallError, litellm_client, litellm_failures, litellm_load
from pytest_mcpeval.models.config import ModelRegistry, ModelSpec
from pytest_mcpeval.models.reply import ModelReply
from pytest_mcpeval.testing import ScriptedModelServer

LOCAL_HOSTS = {"127.0.0.1", "::1", "localhost"}
KEY_VARIABLES = ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "GEMINI_API_KEY",
                 "GOOGLE_API_KEY", "OPENAI_API_BASE", "OPENAI_BASE_URL", "ANTHROPIC_API_BASE")
MESSAGES = [{"role": "user", "content": "hello"}]
TOOL = {"type": "function", "function": {"name": "get_me", "description": "Who am I",
                                         "parameters": {"type": "object", "properties": {}}}}
OK = {"tool_calls": [{"name": "get_me", "arguments": {}}]}


@pytest.fixture(autouse=True)
def no_internet(monkeypatch: pytest.MonkeyPatch) -> None:
    real_connect = socket.socket.connect
    real_getaddrinfo = socket.getaddrinfo

    def connect(self: socket.socket, address: Any) -> None:
        if isinstance(address, tuple) and str(address[0]) not in LOCAL_HOSTS:
            raise AssertionError(f"a test tried to connect to {address}")
        real_connect(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host is not None and str(host) not in LOCAL_HOSTS:
            raise AssertionError(f"a test tried to resolve {host}")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(litellm_failures, "BACKOFF_BASE", 0.001)


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in KEY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def spec(target: str, server: ScriptedModelServer | None = None, name: str | None = None, **params: Any) -> ModelSpec:
    """The model as the plugin resolves it from ini lines: defaults under the user's params."""
    name = name or target
    if server is not None:
        params = {"api_base": server.api_base, "api_key": "not-a-key", **params}
    lines = [f"{name} = {json.dumps(params)}"] if params else []
    return ModelRegistry.from_ini([f"{name} = {target}"] if name != target else [], lines).resolve(name)


def call(model: ModelSpec, retries: int = 1) -> ModelReply:
    return litellm_client.complete(model, MESSAGES, [TOOL], retries=retries, timeout=10)


def failure(model: ModelSpec, retries: int = 1) -> str:
    with pytest.raises(ModelCallError) as info:
        call(model, retries)
    return str(info.value)


# -- parameters -----------------------------------------------------------------------------------

def test_default_temperature_is_sent_where_the_model_accepts_it(model_server: ScriptedModelServer) -> None:
    model_server.script("*", OK)
    reply = call(spec("openai/fake", model_server))
    assert reply.calls[0].name == "get_me" and reply.attempts == 1
    assert model_server.requests[0]["temperature"] == 0


@pytest.mark.parametrize("target", ["openai/gpt-5", "openai/gpt-5-mini", "openai/o3-mini"])
def test_default_temperature_is_not_sent_to_reasoning_models(model_server: ScriptedModelServer, target: str) -> None:
    model_server.script("*", OK)
    model = spec(target, model_server)
    assert model.params["temperature"] == 0 and model.defaults == {"temperature"}  # declared, as before
    reply = call(model)
    assert reply.calls[0].name == "get_me"
    assert [r["model"] for r in model_server.requests] == [target.split("/", 1)[1]]
    assert "temperature" not in model_server.requests[0]


@pytest.mark.parametrize(("target", "temperature"), [("openai/fake", 0.7), ("openai/gpt-5", 1)])
def test_user_temperature_is_sent_as_given(model_server: ScriptedModelServer, target: str,
                                           temperature: float) -> None:
    model_server.script("*", OK)
    model = spec(target, model_server, temperature=temperature)
    assert model.defaults == frozenset() and model.user_params["temperature"] == temperature
    call(model)
    assert model_server.requests[0]["temperature"] == temperature


def test_unsupported_user_parameter_names_it_and_the_fix(model_server: ScriptedModelServer) -> None:
    message = failure(spec("openai/gpt-5", model_server, name="gpt5", temperature=0))
    assert message.startswith("model gpt5 (openai/gpt-5): unsupported parameter temperature (from mcp_model_params): "
                              "gpt-5 doesn't support temperature=0")
    assert message.endswith('; remove it from mcp_model_params or add "drop_params": true to have litellm drop it')
    assert "\n" not in message and "after" not in message
    assert model_server.requests == []  # litellm refuses before sending


def test_drop_params_is_honoured(model_server: ScriptedModelServer) -> None:
    model_server.script("*", OK)
    call(spec("openai/gpt-5", model_server, temperature=0, drop_params=True))
    assert "temperature" not in model_server.requests[0]


def test_reasoning_effort_none_lets_the_default_through(model_server: ScriptedModelServer) -> None:
    """gpt-5.1 takes temperature 0 only without reasoning: the check sees the user's reasoning_effort."""
    assert "temperature" not in litellm_client.request_params(spec("openai/gpt-5.1", reasoning_effort="high"))
    assert litellm_client.request_params(spec("openai/gpt-5.1", reasoning_effort="none"))["temperature"] == 0


def test_params_sent_for_the_report() -> None:
    model = spec("openai/gpt-5", api_key="sk-secret", api_base="http://127.0.0.1:1/v1", max_tokens=64,
                 num_retries=0, extra_headers={"Authorization": "x"})
    sent = litellm_client.params_sent(model)
    assert sent == {"api_base": "http://127.0.0.1:1/v1", "max_tokens": 64}  # no default, no secret, no control
    assert litellm_client.request_params(model)["api_key"] == "sk-secret"  # what complete() passes on
    assert litellm_client.params_sent(spec("anthropic/claude-sonnet-4-5")) == {"temperature": 0}
    from pytest_mcpeval.models import params_sent

    assert params_sent(spec("local/minilm", top_k=3)) == {"min_similarity": 0.2, "top_k": 3}
    json.dumps(sent)  # builtin data


def test_the_cache_key_does_not_need_litellm() -> None:
    """Replays compute request keys from the declared params: litellm must not be imported for that."""
    code = (
        "import sys\n"
        "from pytest_mcpeval.models.config import ModelRegistry\n"
        "from pytest_mcpeval.run.cache import request_key\n"
        "model = ModelRegistry().resolve('openai/gpt-5')\n"
        "assert model.params == {'temperature': 0}, model.params\n"
        "request_key(model, [{'role': 'user', 'content': 'x'}], [], 0)\n"
        "assert 'litellm' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# -- failures -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("status", "expected"), [
    (401, "authentication failed (HTTP 401): scripted error: check the API key (the provider's key variable, "
          "or api_key in mcp_model_params)"),
    (403, "permission denied (HTTP 403): scripted error: the key may not use this model"),
    (404, "model or endpoint not found (HTTP 404): scripted error: check the model name and api_base {api_base}"),
    (400, "bad request (HTTP 400): scripted error"),
    (422, "bad request (HTTP 422): scripted error"),
])
def test_errors_that_cannot_pass_fail_at_once(model_server: ScriptedModelServer, status: int, expected: str) -> None:
    model_server.script("*", {"status": status, "error": "scripted error"})
    message = failure(spec("openai/fake", model_server, name="fake"), retries=3)
    assert message == "model fake (openai/fake): " + expected.format(api_base=model_server.api_base)
    assert len(model_server.requests) == 1


def test_context_window_fails_at_once(model_server: ScriptedModelServer) -> None:
    text = "This model's maximum context length is 128000 tokens. However, your messages resulted in 200000 tokens."
    model_server.script("*", {"status": 400, "error": text})
    message = failure(spec("openai/fake", model_server, name="fake"), retries=3)
    assert message == f"model fake (openai/fake): the request does not fit the model's context window: {text}"
    assert len(model_server.requests) == 1


@pytest.mark.parametrize(("status", "kind"), [(429, "RateLimitError"), (500, "InternalServerError"),
                                              (503, "ServiceUnavailableError"), (408, "Timeout")])
def test_errors_that_may_pass_are_retried(model_server: ScriptedModelServer, status: int, kind: str) -> None:
    model_server.script("*", {"status": status, "error": "busy"})
    message = failure(spec("openai/fake", model_server, name="fake"), retries=1)
    assert message == f"model fake (openai/fake) after 2 attempts: {kind} (HTTP {status}): busy"
    assert len(model_server.requests) == 2


def test_a_timeout_is_retried(model_server: ScriptedModelServer) -> None:
    model_server.script("*", {"delay": 1.0, **OK})
    model = spec("openai/fake", model_server, name="fake")
    with pytest.raises(ModelCallError) as info:
        litellm_client.complete(model, MESSAGES, [TOOL], retries=1, timeout=0.3)
    assert str(info.value).startswith("model fake (openai/fake) after 2 attempts: Timeout: no answer within 0.3 s "
                                      "(--mcp-timeout)")
    assert len(model_server.requests) == 2


def test_a_retry_that_succeeds_counts_its_attempts(model_server: ScriptedModelServer) -> None:
    model_server.script("*", [{"status": 503}, {"status": 429}, OK])
    reply = call(spec("openai/fake", model_server), retries=2)
    assert reply.attempts == 3 and reply.calls[0].name == "get_me"


def test_connection_refused_is_retried() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens there once closed
    model = spec("openai/fake", name="fake", api_base=f"http://127.0.0.1:{port}/v1", api_key="not-a-key")
    message = failure(model, retries=1)  # litellm says "InternalServerError: Connection error.": the cause is read
    assert message == (f"model fake (openai/fake) after 2 attempts: connection error: [Errno 111] Connection refused "
                       f"(api_base http://127.0.0.1:{port}/v1)")


@pytest.mark.parametrize(("target", "variables"), [
    ("openai/gpt-5", "OPENAI_API_KEY"),
    ("anthropic/claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
    ("gemini/gemini-2.5-pro", "GOOGLE_API_KEY or GEMINI_API_KEY"),
])
@pytest.mark.usefixtures("no_keys")
def test_missing_key_fails_at_once_naming_the_variable(target: str, variables: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    attempts: list[int] = []
    real_classify = litellm_client.classify

    def counting(exc: Exception, model: ModelSpec, *args: Any) -> litellm_failures.Failure:
        attempts.append(1)
        return real_classify(exc, model, *args)

    monkeypatch.setattr(litellm_client, "classify", counting)
    message = failure(spec(target, name="m"), retries=3)
    assert message == f"model m ({target}): no API key: set {variables} (or api_key in mcp_model_params)"
    assert len(attempts) == 1


class _RawBodies(BaseHTTPRequestHandler):
    """A chat-completions endpoint that answers 200 with a body that is not a chat completion."""

    protocol_version = "HTTP/1.1"
    bodies = {"html": b"<html>proxy login</html>", "latin-1": b'{"id": "\xff"}', "truncated": b'{"choices": ['}
    seen: list[str] = []

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        kind = body["messages"][-1]["content"]
        self.seen.append(kind)
        data = self.bodies[kind]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def raw_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RawBodies)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("kind", ["html", "latin-1", "truncated"])
def test_undecodable_responses_are_not_retried(raw_server: str, kind: str) -> None:
    _RawBodies.seen = []
    model = spec("openai/fake", name="fake", api_base=raw_server, api_key="not-a-key")
    with pytest.raises(ModelCallError) as info:
        litellm_client.complete(model, [{"role": "user", "content": kind}], [], retries=3, timeout=10)
    assert str(info.value).startswith("model fake (openai/fake): the response could not be decoded (not UTF-8, "
                                      "not JSON or not a chat completion): ")
    assert _RawBodies.seen == [kind]


# -- end to end -----------------------------------------------------------------------------------

@pytest.mark.usefixtures("no_keys")
def test_gpt5_runs_and_a_missing_key_is_one_line(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    """The README's command works on gpt-5; a model without a key is an error per case, never retried."""
    model_server.script("*", OK)
    gpt5 = json.dumps({"api_base": model_server.api_base, "api_key": "not-a-key"})
    (pytester.path / "pytest.ini").write_text(
        "[pytest]\nmcp_model_aliases = claude = anthropic/claude-sonnet-4-5\n"
        f"mcp_model_params = openai/gpt-5 = {gpt5}\n"
    )
    (pytester.path / "tools.json").write_text(json.dumps([{"name": "get_me", "description": "Who am I",
                                                           "inputSchema": {"type": "object"}}]))
    (pytester.path / "bench.mcpeval.yaml").write_text(
        "server: {tools_file: tools.json}\ncases:\n"
        "  - id: me\n    input: who am I?\n    expect: [{tool: get_me}]\n"
        "  - id: me-too\n    input: and who am I now?\n    expect: [{tool: get_me}]\n"
    )
    # the pre-flight check: one line for the model without a key, exit 4, no model called
    result = run(pytester, "--mcp-models=openai/gpt-5,claude", "--mcp-record=off", "--mcp-report=report.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: pre-flight check failed, no model was called (--mcp-no-preflight skips the check):",
        "  model claude (anthropic/claude-sonnet-4-5): no API key: set ANTHROPIC_API_KEY (or api_key in "
        "mcp_model_params)",
    ])
    assert model_server.requests == [] and not (pytester.path / "report.json").exists()
    assert "ANTHROPIC" not in result.stdout.str() + result.stderr.str().replace("ANTHROPIC_API_KEY (or", "", 1)
    # without it, each case is an error of its own
    result = run(pytester, "--mcp-models=openai/gpt-5,claude", "--mcp-record=off", "--mcp-report=report.json",
                 "--mcp-no-preflight")
    result.stdout.fnmatch_lines([
        "*me[[]claude[]]*model claude (anthropic/claude-sonnet-4-5): no API key: set ANTHROPIC_API_KEY "
        "(or api_key in mcp_model_params)*",
    ])
    result.stdout.no_fnmatch_line("*attempts*")
    assert len(model_server.requests) == 2 and all("temperature" not in r for r in model_server.requests)
    report = read_report(pytester)
    assert report["models"]["openai/gpt-5"]["accuracy"] == 1.0
    assert report["models"]["claude"]["errors"] == 2
    assert result.ret == 1


def test_the_tokenizer_leaves_its_folder_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading o200k_base from litellm's folder sets TIKTOKEN_CACHE_DIR and leaves it (as litellm's import
    does): unsetting it again raced litellm loading its own encoding on another thread."""
    from pytest_mcpeval.models import tokens

    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.setattr(tokens, "_encoding", None)
    assert tokens.encoding().name == "o200k_base"
    assert tokens.bundled_tokenizers() is not None
    assert tokens.os.environ["TIKTOKEN_CACHE_DIR"] == str(tokens.bundled_tokenizers())


def test_calls_at_once_share_one_loop_and_keep_their_connections(model_server: ScriptedModelServer) -> None:
    """40 calls at once on one event loop, twice: all 40 are in flight together, and the second 40 reuse the
    first 40's connections (litellm's own async client; nothing of litellm's is replaced)."""
    import asyncio

    import litellm

    session = litellm.client_session
    model = ModelSpec("m", "openai/pool", {"api_base": model_server.api_base, "api_key": "k"})

    async def waves() -> None:
        for number in range(2):
            model_server.max_in_flight = 0
            model_server.script("*", {"content": "ok", "gather": 40})
            replies = await asyncio.gather(*(litellm_client.acomplete(model, [{"role": "user", "content": "hi"}], [])
                                             for _ in range(40)))
            assert [r.content for r in replies] == ["ok"] * 40
            assert model_server.max_in_flight == 40 and len(model_server.requests) == 40 * (number + 1)

    asyncio.run(waves())
    assert model_server.connections == 40  # the second wave reused the first's
    assert litellm.client_session is session  # litellm's globals are as the plugin found them


@pytest.mark.parametrize("collector_on", [True, False])
def test_litellm_is_imported_with_the_collector_off(monkeypatch: pytest.MonkeyPatch,
                                                                collector_on: bool) -> None:
    """load_litellm: the import runs with the garbage collector off (its full passes over litellm's objects were
    a third of the import), and the collector is left as the caller had it."""
    import builtins
    import gc

    states: list[bool] = []
    real_import = builtins.__import__

    def spy(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "litellm":
            states.append(gc.isenabled())
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(litellm_load, "_litellm", None)
    monkeypatch.setattr(builtins, "__import__", spy)
    was_on = gc.isenabled()
    (gc.enable if collector_on else gc.disable)()
    try:
        module = litellm_client.load_litellm()
        assert states == [False]
        assert gc.isenabled() is collector_on
        assert module is sys.modules["litellm"]
        assert litellm_client.load_litellm() is module and states == [False]  # once per process
    finally:
        (gc.enable if was_on else gc.disable)()


