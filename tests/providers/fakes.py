r"""Fake provider servers: Anthropic, Gemini, Ollama, Azure OpenAI, vLLM and OpenAI, each on 127.0.0.1.

Each fake is a real threaded HTTP server that speaks one provider's documented wire format, refuses what
that provider refuses (same status, same error body shape) and answers from a script, so a test runs the
plugin through litellm's own provider code (its request transformation, its response parsing, its error
mapping), exactly as a user of that provider would, without a network or a key.

The API (stable: other tests build on it)::

    from fakes import AnthropicFake, GeminiFake, OllamaFake, AzureFake, VllmFake, OpenAIFake

    with AnthropicFake() as fake:                        # started; stopped at the end
        fake.call("Who am I?", "get_me")                  # as ScriptedModelServer: script / call / flow
        fake.flow("Who opened WEB-12?", [{"name": "get_issue", "arguments": {"issue_key": "WEB-12"}}],
                  {"content": "Carol.", "thinking": "I know now."})
        (pytester.path / "pytest.ini").write_text(fake.ini("claude", extra="mcp_timeout = 10\n"))
        run(pytester, "--mcp-models=claude")
        fake.requests[0]["body"]["max_tokens"]             # what litellm sent
        fake.bodies                                        # just the JSON bodies

- Scripting is :class:`pytest_mcpeval.testing.ScriptedModelServer`'s (these classes subclass it, so its
  ``script``, ``call``, ``flow`` and rule matching are the same code): the rule is chosen by the text of the
  last user message (exact, then glob, then ``"*"``), a list of replies is used one per request, and
  ``{"turns": [...]}`` answers by the turn of a flow.  Each fake first turns its provider's messages into
  the neutral roles the matcher reads (``user`` / ``assistant`` / ``tool``: an Anthropic user message made
  only of ``tool_result`` blocks, a Gemini user turn made only of ``functionResponse`` parts and an Ollama
  ``tool`` message all count as tool answers, not user messages).
- A reply is provider-neutral, rendered into the provider's own response::

    {"tool_calls": [{"name": "get_me", "arguments": {}, "id": "toolu_x"}],  # id optional (generated)
     "content": "text",                          # text before / instead of calls
     "thinking": "my reasoning",                 # Anthropic thinking block + signature, Gemini thought part +
                                                 # thoughtSignature, Ollama message.thinking, vLLM reasoning_content
     "finish": "max_tokens",                     # the provider-native stop reason, as is (default: the natural one)
     "usage": {"cache_read_input_tokens": 90},   # merged into the provider's usage object, in its own names
     "block": "SAFETY",                          # Gemini only: promptFeedback.blockReason and no candidates
     "searches": [{"query": "issue", "tools": ["get_issue"]}]}  # Anthropic only: server-side tool search blocks

  and the errors: ``{"status": 429, "error": "slow down", "headers": {"retry-after": "0"}}`` is sent in the
  provider's error shape (Anthropic ``{"type": "error", "error": {"type", "message"}}``, Gemini
  ``{"error": {"code", "message", "status"}}``, Ollama ``{"error": "..."}``, OpenAI / Azure
  ``{"error": {"message", "type", "param", "code"}}``, vLLM ``{"object": "error", "message", "type", "code"}``),
  with ``"error_type"`` to name the provider's type (default: the provider's type for the status);
  ``{"body": {...} | str, "status": 200, "headers": {}}`` sends that body as is (e.g. Gemini's 429 with
  ``RetryInfo`` in ``error.details``).  Any reply may add ``"delay": seconds``.
- Validation runs before the script: a request the provider would refuse gets the provider's 400 (or
  401/404) whatever the script says, with the provider's message; the refusals are listed on each class.
  ``fake.refusals`` lists the ``(status, message)`` of the requests refused.
- ``requests``: one dict per request received: ``{"method", "path", "query" (dict of str), "headers" (dict,
  lower-case names), "body" (the parsed JSON), "status" (what the fake answered), "at" (``time.monotonic()``
  when it arrived)}``.
- For a pytester project: ``fake.model`` (the litellm model string, e.g. ``anthropic/claude-sonnet-4-5``;
  pass ``model=`` to the constructor for another), ``fake.params()`` (the ``mcp_model_params`` object:
  ``api_base``, ``api_key``, and what else the provider needs, e.g. Azure's ``api_version``; ``**extra``
  merged in), ``fake.ini(name, params=None, extra="")`` (a whole ``[pytest]`` section aliasing ``name`` to
  the model, in the style of tests/conftest.py ``ini_for``) and ``fake.model_ini(name, params=None)`` (just
  the two ini lines).  Every fake is reached through ``api_base`` in the params, never through os.environ
  (``fake.env()`` gives the variables litellm would read instead, for a subprocess test).

Sources of the formats and refusals: Anthropic's Messages API reference and "Extended thinking" guide
(docs.anthropic.com), Gemini's ``generateContent`` reference, "Function calling" and "Thought signatures"
guides (ai.google.dev), Ollama's docs/api.md (``/api/chat``), Azure OpenAI's REST reference
(learn.microsoft.com, ``api-version`` and the ``api-key`` header), vLLM's OpenAI-compatible server docs,
and litellm's own transformations (litellm/llms/anthropic/chat/transformation.py,
litellm/llms/vertex_ai/gemini/transformation.py, litellm/llms/ollama/chat/transformation.py,
litellm/llms/azure/, litellm/llms/hosted_vllm/).
"""

from __future__ import annotations

import hashlib
import json
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar

from pytest_mcpeval.testing import ScriptedModelServer, _turn

KEY = "not-a-key"


class Refusal(Exception):
    """A request the provider refuses: ``status``, the provider's error type and its message."""

    def __init__(self, status: int, message: str, type_: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type = status, message, type_


def _arguments(call: dict[str, Any]) -> Any:
    """A scripted call's arguments as an object (a JSON string is parsed; other text is kept as text)."""
    arguments = call.get("arguments", {})
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def signature(text: str) -> str:
    """The signature the fakes give a thinking block / thought: derived from its text, so it can be checked."""
    return "sig-" + hashlib.sha256(text.encode()).hexdigest()[:24]


class ProviderFake(ScriptedModelServer):
    """The common part: the HTTP handling, the records, the ini lines.  Subclasses define the dialect."""

    provider: ClassVar[str] = ""  # litellm's prefix
    default_model: ClassVar[str] = ""

    def __init__(self, model: str | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host, port)
        self.model_name = model or self.default_model
        self.requests: list[dict[str, Any]] = []  # type: ignore[assignment]  # records, not bare bodies
        self.refusals: list[tuple[int, str]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

            def _handle(self, method: str) -> None:
                url = urllib.parse.urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                record: dict[str, Any] = {
                    "method": method, "path": url.path,
                    "query": dict(urllib.parse.parse_qsl(url.query)),
                    "headers": {k.lower(): v for k, v in self.headers.items()}, "body": None, "status": 0,
                    "at": time.monotonic(),
                }
                with fake._lock:
                    fake.requests.append(record)
                try:
                    try:
                        record["body"] = json.loads(raw or b"{}")
                    except ValueError:
                        raise Refusal(400, "request body is not JSON") from None
                    status, payload, headers = fake.respond(record)
                except Refusal as refusal:
                    with fake._lock:
                        fake.refusals.append((refusal.status, refusal.message))
                    status, payload, headers = refusal.status, fake.error_body(
                        refusal.status, refusal.message, refusal.type), {}
                record["status"] = status
                data = payload if isinstance(payload, bytes) else (
                    payload.encode() if isinstance(payload, str) else json.dumps(payload).encode())
                try:
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, str(value))
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._httpd.RequestHandlerClass = Handler  # the scripted server's socket, this dialect

    # -- what a test uses -----------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        host_text = host.decode() if isinstance(host, bytes) else str(host)
        return f"http://{host_text}:{port}"

    @property
    def api_base(self) -> str:
        """What litellm's ``api_base`` is set to for this provider."""
        return self.base_url

    @property
    def model(self) -> str:
        return f"{self.provider}/{self.model_name}"

    @property
    def bodies(self) -> list[Any]:
        return [r["body"] for r in self.requests]

    def params(self, **extra: Any) -> dict[str, Any]:
        return {"api_base": self.api_base, "api_key": KEY, **extra}

    def env(self) -> dict[str, str]:  # pragma: no cover - overridden
        return {}

    def model_ini(self, name: str, params: dict[str, Any] | None = None) -> str:
        merged = self.params(**(params or {}))
        return (f"mcp_model_aliases = {name} = {self.model}\n"
                f"mcp_model_params = {name} = {json.dumps(merged)}\n")

    def ini(self, name: str = "fake", params: dict[str, Any] | None = None, extra: str = "") -> str:
        return "[pytest]\n" + self.model_ini(name, params) + extra

    # -- the dialect ----------------------------------------------------------------------------------------

    def respond(self, record: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        model, messages = self.validate(record)
        reply = self.reply_for(model, messages)
        if reply.get("delay"):
            time.sleep(float(reply["delay"]))
        headers = {str(k): str(v) for k, v in reply.get("headers", {}).items()}
        if "body" in reply:
            return int(reply.get("status", 200)), reply["body"], headers
        if "status" in reply:
            status = int(reply["status"])
            error = self.error_body(status, reply.get("error", "scripted error"), reply.get("error_type"))
            return status, error, headers
        return 200, self.render(reply, record, _turn(messages)), headers

    def validate(self, record: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        """Refuse what the provider refuses (raise :class:`Refusal`); return the model and neutral messages."""
        raise NotImplementedError

    def render(self, reply: dict[str, Any], record: dict[str, Any], turn: int) -> Any:
        raise NotImplementedError

    def error_body(self, status: int, message: str, type_: str | None) -> Any:
        raise NotImplementedError


# -- Anthropic ------------------------------------------------------------------------------------------------

ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                   404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
                   529: "overloaded_error"}
THINKING_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
# Anthropic's server-side tool search ("Tool search tool" guide, platform.claude.com/docs/en/agents-and-tools/
# tool-use/tool-search-tool): its two tools (type -> the name its calls carry) and the beta header it needs
SEARCH_TOOL_TYPES = {"tool_search_tool_bm25_20251119": "tool_search_tool_bm25",
                     "tool_search_tool_regex_20251119": "tool_search_tool_regex"}
TOOL_SEARCH_BETA = "advanced-tool-use-2025-11-20"


class AnthropicFake(ProviderFake):
    """``POST /v1/messages`` (Messages API).  Refuses, as Anthropic does (400 ``invalid_request_error``
    unless said): no ``x-api-key`` (401 ``authentication_error``) or no ``anthropic-version``; no
    ``max_tokens``; empty ``messages``; a role other than user / assistant; a tool without an object
    ``input_schema`` or with a name outside ``^[a-zA-Z0-9_-]{1,64}$``; with ``thinking`` enabled: a
    ``budget_tokens`` under 1024 or not under ``max_tokens``, a ``temperature`` other than 1, ``top_k``, a
    forced ``tool_choice``, and an assistant message of the current tool loop (after the last user text) that
    holds ``tool_use`` but does not start with a ``thinking`` / ``redacted_thinking`` block, or whose
    ``signature`` is not the one this fake issued; ``tool_use`` ids without ``tool_result`` blocks (first)
    in the next message, and ``tool_result`` ids without a ``tool_use`` in the previous one.

    Renders content blocks (``thinking`` with ``signature``, ``text``, ``tool_use`` with ids
    ``toolu_{turn}_{index}``), ``stop_reason`` (``tool_use`` / ``end_turn`` or the reply's ``finish``) and
    ``usage`` with ``cache_creation_input_tokens`` / ``cache_read_input_tokens``.

    Tool search (Anthropic's "Tool search tool" guide): a ``tool_search_tool_bm25_20251119`` /
    ``tool_search_tool_regex_20251119`` tool and ``defer_loading`` on the others.  Refused: either without the
    ``anthropic-beta: advanced-tool-use-2025-11-20`` header, a ``defer_loading`` that is not a boolean or on the search
    tool itself, and a request whose every tool is deferred (``All tools have defer_loading set. At least one tool
    must be non-deferred.``).  A reply's ``"searches": [{"query": "...", "tools": [names]} | {"query": "...", "error":
    "invalid_pattern"}]`` is rendered before its calls as ``server_tool_use`` (``srvtoolu_{turn}_{index}``, the
    request's search tool's name, ``input.query``) and ``tool_search_tool_result`` blocks (``content`` a
    ``tool_search_tool_search_result`` with ``tool_references`` or a ``tool_search_tool_result_error`` with its
    ``error_code``), and ``usage.server_tool_use.tool_search_requests``; a request without a search tool gets no
    search blocks (the same script answers the whole catalog).  A script the provider could not answer so is a 500
    naming the mistake: a reference to a tool the request does not hold, a call of a deferred tool no search of the
    reply surfaced.

    Prompt caching, as Anthropic's "Prompt caching" guide describes it: a ``cache_control`` breakpoint (on a
    tool, a system block or a message content block; at most 4, else 400 ``A maximum of 4 blocks with
    cache_control may be provided. Found N.``; ``type`` must be ``ephemeral``) marks the prefix up to it, in
    Anthropic's order (tools, then system, then messages).  A marked prefix shorter than the model's minimum
    (:attr:`min_cacheable`: 1024 tokens for Sonnet / Opus, 2048 for Haiku 3 / 3.5, 4096 for Haiku 4.5 and Opus
    4.5) is not cached, silently.  The longest marked prefix seen before (same model, same bytes) is read
    (``cache_read_input_tokens``), the longest marked one beyond it is written (``cache_creation_input_tokens``)
    and ``input_tokens`` is the rest; the first request with a prefix writes it, the later ones read it.  Tokens
    are the fake's count (a quarter of the JSON's characters).  ``fake.cache_writes`` counts the prefixes written.
    A reply's ``usage`` still overrides what this computes."""

    provider = "anthropic"
    default_model = "claude-sonnet-4-5"
    MAX_BREAKPOINTS = 4

    def __init__(self, model: str | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(model, host, port)
        self._prompt_cache: set[str] = set()
        self.cache_writes = 0

    @property
    def min_cacheable(self) -> int:
        name = self.model_name
        if "haiku-4" in name or "opus-4-5" in name:
            return 4096
        return 2048 if "haiku" in name else 1024

    def _marked_prefixes(self, body: dict[str, Any]) -> list[tuple[int, str]]:
        """``(tokens, key)`` of each prefix a ``cache_control`` breakpoint marks, shortest first."""
        tools = list(body.get("tools") or [])
        system = body.get("system") or []
        system = [{"type": "text", "text": system}] if isinstance(system, str) else list(system)
        messages = list(body.get("messages") or [])
        marked: list[tuple[int, str]] = []

        def mark(block: dict[str, Any], prefix: dict[str, Any]) -> None:
            control = block.get("cache_control")
            if control is None:
                return
            if not isinstance(control, dict) or control.get("type") != "ephemeral":
                raise Refusal(400, "cache_control.type: Input should be 'ephemeral'")
            text = json.dumps({"model": body.get("model"), **prefix}, sort_keys=False)
            marked.append((len(text) // 4, hashlib.sha256(text.encode()).hexdigest()))

        for i, tool in enumerate(tools):
            mark(tool, {"tools": tools[: i + 1]})
        for i, block in enumerate(system):
            if isinstance(block, dict):
                mark(block, {"tools": tools, "system": system[: i + 1]})
        for i, message in enumerate(messages):
            blocks = self._blocks(message)
            for j, block in enumerate(blocks):
                mark(block, {"tools": tools, "system": system,
                             "messages": [*messages[:i], {**message, "content": blocks[: j + 1]}]})
        if len(marked) > self.MAX_BREAKPOINTS:
            raise Refusal(400, f"A maximum of {self.MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                               f"Found {len(marked)}.")
        return marked

    def _cache_usage(self, body: dict[str, Any], total: int) -> dict[str, int]:
        """``input_tokens`` / ``cache_read_input_tokens`` / ``cache_creation_input_tokens`` of one request."""
        marked = [(tokens, key) for tokens, key in self._marked_prefixes(body) if tokens >= self.min_cacheable]
        read = written = 0
        with self._lock:
            hits = [tokens for tokens, key in marked if key in self._prompt_cache]
            read = max(hits, default=0)
            beyond = [(tokens, key) for tokens, key in marked if tokens > read]
            if beyond:
                written = max(tokens for tokens, _ in beyond) - read
                self._prompt_cache.update(key for _, key in beyond)
                self.cache_writes += 1
        return {"input_tokens": max(total - read - written, 0), "cache_read_input_tokens": read,
                "cache_creation_input_tokens": written}

    def env(self) -> dict[str, str]:
        return {"ANTHROPIC_API_BASE": self.base_url, "ANTHROPIC_API_KEY": KEY}

    def error_body(self, status: int, message: str, type_: str | None) -> Any:
        return {"type": "error", "error": {"type": type_ or ANTHROPIC_TYPES.get(status, "api_error"),
                                           "message": message}, "request_id": "req_fake"}

    def validate(self, record: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        if record["path"] != "/v1/messages":
            raise Refusal(404, f"Not found: {record['path']}")
        headers, body = record["headers"], record["body"]
        if not headers.get("x-api-key") and not headers.get("authorization"):
            raise Refusal(401, "x-api-key header is required")
        if not headers.get("anthropic-version"):
            raise Refusal(400, "anthropic-version: header is required")
        if not isinstance(body.get("max_tokens"), int):
            raise Refusal(400, "max_tokens: Field required")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise Refusal(400, "messages: at least one message is required")
        self._check_search(headers, list(body.get("tools") or []))
        for i, tool in enumerate(body.get("tools") or []):
            name = str(tool.get("name", ""))
            if tool.get("type") is None and not isinstance(tool.get("input_schema"), dict):
                raise Refusal(400, f"tools.{i}.custom.input_schema: Field required")
            if tool.get("type") is None and tool["input_schema"].get("type") != "object":
                raise Refusal(400, f"tools.{i}.custom.input_schema.type: Input should be 'object'")
            if not name or len(name) > 64 or not all(c.isalnum() or c in "_-" for c in name):
                raise Refusal(400, f"tools.{i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'")
        self._marked_prefixes(body)  # the breakpoints' count and type
        thinking = body.get("thinking") or {}
        enabled = thinking.get("type") in ("enabled", "adaptive")
        if thinking.get("type") == "enabled":
            budget = thinking.get("budget_tokens")
            if not isinstance(budget, int) or budget < 1024:
                raise Refusal(400, "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
            if body["max_tokens"] <= budget:
                raise Refusal(400, "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult "
                                   f"our documentation at {THINKING_DOCS}#max-tokens-and-context-window-size")
        if enabled:
            if "temperature" in body and body["temperature"] != 1:
                raise Refusal(400, "`temperature` may only be set to 1 when thinking is enabled. Please consult "
                                   f"our documentation at {THINKING_DOCS}#important-considerations-when-using-"
                                   "extended-thinking")
            if "top_k" in body:
                raise Refusal(400, "`top_k` must be unset when thinking is enabled. Please consult our "
                                   f"documentation at {THINKING_DOCS}")
            if (body.get("tool_choice") or {}).get("type") in ("any", "tool"):
                raise Refusal(400, "Thinking may not be enabled when tool_choice forces tool use.")
        neutral: list[dict[str, Any]] = []
        last_text_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"
                              and not self._tool_results(m)), default=-1)
        for i, message in enumerate(messages):
            role, blocks = message.get("role"), self._blocks(message)
            if role not in ("user", "assistant"):
                raise Refusal(400, f"messages.{i}.role: Input should be 'user' or 'assistant'")
            uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            if role == "assistant" and uses:
                following = messages[i + 1] if i + 1 < len(messages) else None
                answered = self._tool_results(following) if following and following.get("role") == "user" else []
                missing = [u for u in uses if u not in answered]
                if missing:
                    raise Refusal(400, f"messages.{i + 1}: `tool_use` ids were found without `tool_result` blocks "
                                       f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                                       "corresponding `tool_result` block in the next message.")
                if enabled and i > last_text_user:
                    first = blocks[0]
                    if first.get("type") not in ("thinking", "redacted_thinking"):
                        raise Refusal(400, f"messages.{i}.content.0.type: Expected `thinking` or "
                                           f"`redacted_thinking`, but found `{first.get('type')}`. When `thinking` is "
                                           "enabled, a final `assistant` message must start with a thinking block "
                                           "(preceeding the lastmost set of `tool_use` and `tool_result` blocks). "
                                           "We recommend you include thinking blocks from previous turns. To avoid "
                                           "this requirement, disable `thinking`. Please consult our documentation "
                                           f"at {THINKING_DOCS}")
                    if first.get("type") == "thinking" and first.get("signature") != signature(
                            str(first.get("thinking", ""))):
                        raise Refusal(400, f"messages.{i}.content.0: Invalid `signature` in `thinking` block")
            if role == "user":
                results = self._tool_results(message)
                previous = messages[i - 1] if i else {}
                offered = [b.get("id") for b in self._blocks(previous) if b.get("type") == "tool_use"]
                for j, result in enumerate(results):
                    if result not in offered:
                        raise Refusal(400, f"messages.{i}.content.{j}: unexpected `tool_use_id` found in "
                                           f"`tool_result` blocks: {result}. Each `tool_result` block must have a "
                                           "corresponding `tool_use` block in the previous message.")
                if results and blocks[0].get("type") != "tool_result" and offered:
                    raise Refusal(400, f"messages.{i}: `tool_result` blocks must come first in the content")
                if results and len(results) == len(blocks):
                    neutral.extend({"role": "tool", "content": ""} for _ in results)
                    continue
                neutral.append({"role": "user", "content": "".join(
                    b.get("text", "") for b in blocks if b.get("type") == "text")})
            else:
                neutral.append({"role": "assistant"})
        return str(body.get("model", "")), neutral

    @staticmethod
    def _check_search(headers: dict[str, str], tools: list[dict[str, Any]]) -> None:
        """Tool search's refusals (see the class)."""
        betas = {b.strip() for b in headers.get("anthropic-beta", "").split(",")}
        for i, tool in enumerate(tools):
            searching = tool.get("type") in SEARCH_TOOL_TYPES
            if (searching or "defer_loading" in tool) and TOOL_SEARCH_BETA not in betas:
                raise Refusal(400, f"tools.{i}: tool search needs the beta header `anthropic-beta: {TOOL_SEARCH_BETA}`")
            if "defer_loading" in tool and not isinstance(tool["defer_loading"], bool):
                raise Refusal(400, f"tools.{i}.custom.defer_loading: Input should be a valid boolean")
            if searching and tool.get("defer_loading"):
                raise Refusal(400, f"tools.{i}: the tool search tool cannot have defer_loading set")
        if tools and all(t.get("defer_loading") is True for t in tools):
            raise Refusal(400, "All tools have defer_loading set. At least one tool must be non-deferred.")

    def _searches(self, reply: dict[str, Any], tools: list[dict[str, Any]], turn: int) -> tuple[list[dict[str, Any]],
                                                                                                   set[str]]:
        """The blocks of the reply's scripted searches, and the tools they loaded."""
        searches = reply.get("searches") or []
        if not searches:
            return [], set()
        tool = next((t for t in tools if t.get("type") in SEARCH_TOOL_TYPES), None)
        if tool is None:  # the model has no search tool: it calls what it is shown (one script answers both modes)
            return [], set()
        held = {str(t.get("name")) for t in tools if t.get("type") not in SEARCH_TOOL_TYPES}
        blocks: list[dict[str, Any]] = []
        loaded: set[str] = set()
        for i, search in enumerate(searches):
            id_ = f"srvtoolu_{turn}_{i}"
            blocks.append({"type": "server_tool_use", "id": id_, "name": tool.get("name"),
                           "input": {"query": search["query"]}})
            if "error" in search:
                content: dict[str, Any] = {"type": "tool_search_tool_result_error", "error_code": search["error"]}
            else:
                unknown = [n for n in search.get("tools", []) if n not in held]
                if unknown:
                    raise Refusal(500, f"fake: a search scripted to find {unknown}, tools the request does not hold",
                                  "api_error")
                loaded.update(search.get("tools", []))
                content = {"type": "tool_search_tool_search_result", "tool_references": [
                    {"type": "tool_reference", "tool_name": n} for n in search.get("tools", [])]}
            blocks.append({"type": "tool_search_tool_result", "tool_use_id": id_, "content": content})
        return blocks, loaded

    @staticmethod
    def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
        content = message.get("content")
        if isinstance(content, str):
            return [{"type": "text", "text": content}]
        return [b for b in content or [] if isinstance(b, dict)]

    def _tool_results(self, message: dict[str, Any]) -> list[str]:
        return [str(b.get("tool_use_id")) for b in self._blocks(message) if b.get("type") == "tool_result"]

    def render(self, reply: dict[str, Any], record: dict[str, Any], turn: int) -> Any:
        content: list[dict[str, Any]] = []
        if reply.get("thinking"):
            content.append({"type": "thinking", "thinking": reply["thinking"],
                            "signature": signature(reply["thinking"])})
        if reply.get("content"):
            content.append({"type": "text", "text": reply["content"]})
        tools = list(record["body"].get("tools") or [])
        searched, loaded = self._searches(reply, tools, turn)
        content.extend(searched)
        deferred = {str(t.get("name")) for t in tools if t.get("defer_loading")}
        calls = reply.get("tool_calls", [])
        hidden = [c["name"] for c in calls if c["name"] in deferred and c["name"] not in loaded]
        if hidden:
            raise Refusal(500, f"fake: a call scripted of {hidden}, deferred and surfaced by no search", "api_error")
        for i, call in enumerate(calls):
            content.append({"type": "tool_use", "id": call.get("id") or f"toolu_{turn}_{i}", "name": call["name"],
                            "input": _arguments(call)})
        usage = {**self._cache_usage(record["body"], len(json.dumps(record["body"])) // 4), "output_tokens": 7,
                 **({"server_tool_use": {"tool_search_requests": len(reply["searches"])}} if reply.get("searches")
                    else {}), **reply.get("usage", {})}
        return {"id": f"msg_fake_{turn}", "type": "message", "role": "assistant", "model": record["body"]["model"],
                "content": content, "stop_reason": reply.get("finish", "tool_use" if calls else "end_turn"),
                "stop_sequence": None, "usage": usage}


# -- Gemini ---------------------------------------------------------------------------------------------------

GEMINI_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}
# the fields of the Gemini API's Schema object (ai.google.dev/api/caching#Schema): anything else in a
# function declaration's `parameters` is "Invalid JSON payload received. Unknown name ..."
GEMINI_SCHEMA_FIELDS = frozenset({
    "type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems", "properties",
    "required", "minProperties", "maxProperties", "minLength", "maxLength", "pattern", "example", "anyOf",
    "propertyOrdering", "default", "items", "minimum", "maximum"})
# the placeholders Google documents for a history whose signatures were lost (thought-signatures guide); litellm
# sends the second one base64-encoded (get_dummy_thought_signature): accepted, as Gemini accepts them
DUMMY_SIGNATURES = frozenset({"context_engineering_is_the_way_to_go", "skip_thought_signature_validator",
                              "c2tpcF90aG91Z2h0X3NpZ25hdHVyZV92YWxpZGF0b3I="})
GEMINI_TYPES = frozenset({"TYPE_UNSPECIFIED", "STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL"})


def _camel(part: dict[str, Any]) -> dict[str, Any]:
    """A part with its field names as proto3 JSON reads them either way (litellm sends ``function_call``)."""
    def camel(name: str) -> str:
        head, *rest = name.split("_")
        return head + "".join(word.title() for word in rest)

    return {camel(k): v for k, v in part.items()}


class GeminiFake(ProviderFake):
    """``POST /v1beta/models/{model}:generateContent`` (Google AI Studio).  Refuses, as Gemini does (400
    ``INVALID_ARGUMENT`` unless said): no ``x-goog-api-key`` header or ``key`` parameter (403
    ``PERMISSION_DENIED``); empty ``contents``; a role other than user / model; a model turn with
    ``functionCall`` parts that does not come right after a user turn or a function response turn; a turn of
    ``functionResponse`` parts whose count differs from the calls of the model turn before it; a field in a
    function declaration's ``parameters`` outside the Schema object's (e.g. ``additionalProperties``,
    ``$schema``) or a type outside its enum; and a ``functionCall`` this fake sent with a ``thoughtSignature``
    that comes back without one it issued for that call (as Gemini 3 refuses; Google's documented placeholder
    signatures are accepted, as Gemini accepts them, so tests assert the signature sent, in ``requests``).  The
    fake gives a signature with every reply that has ``thinking``, on its first function call, as Gemini does.

    Renders ``candidates[0].content.parts`` (``{"text", "thought": true, "thoughtSignature"}`` for thinking,
    ``text``, ``functionCall``; no ``content`` when there are no parts, as Gemini sends a candidate with nothing
    to say), ``finishReason`` (``STOP`` or the reply's ``finish``; ``MALFORMED_FUNCTION_CALL`` comes with a
    ``finishMessage`` but no content: the reply's ``content`` goes into the message), ``promptFeedback``
    for a reply's ``block`` (no candidates), and ``usageMetadata`` (``cachedContentTokenCount`` if given)."""

    provider = "gemini"
    default_model = "gemini-2.5-flash"

    def __init__(self, model: str | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(model, host, port)
        self._signatures: dict[str, set[str]] = {}  # function call -> the thoughtSignatures sent with it

    @property
    def api_base(self) -> str:
        return f"{self.base_url}/v1beta"

    def env(self) -> dict[str, str]:
        return {"GEMINI_API_BASE": self.api_base, "GEMINI_API_KEY": KEY}

    def error_body(self, status: int, message: str, type_: str | None) -> Any:
        return {"error": {"code": status, "message": message, "status": type_ or GEMINI_STATUS.get(status, "UNKNOWN")}}

    def _check_schema(self, schema: Any, where: str) -> None:
        if not isinstance(schema, dict):
            return
        for key, value in schema.items():
            if key not in GEMINI_SCHEMA_FIELDS:
                raise Refusal(400, f'Invalid JSON payload received. Unknown name "{key}" at \'{where}\': '
                                   "Cannot find field.")
            if key == "type" and str(value).upper() not in GEMINI_TYPES:
                raise Refusal(400, f"Invalid value at '{where}.type' (type.googleapis.com/google.ai."
                                   f'generativelanguage.v1beta.Type), "{value}"')
        for name, sub in (schema.get("properties") or {}).items():
            self._check_schema(sub, f"{where}.properties[{name}].value")
        if "items" in schema:
            self._check_schema(schema["items"], f"{where}.items")
        for i, sub in enumerate(schema.get("anyOf") or []):
            self._check_schema(sub, f"{where}.any_of[{i}]")

    def validate(self, record: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        path = record["path"]
        prefix, _, method = path.rpartition(":")
        if not prefix.startswith("/v1beta/models/") or method != "generateContent":
            raise Refusal(404, f"Not found: {path}")
        if not record["headers"].get("x-goog-api-key") and not record["query"].get("key"):
            raise Refusal(403, "Method doesn't allow unregistered callers (callers without established identity). "
                               "Please use API Key or other form of API consumer identity to call this API.")
        body = record["body"]
        for i, tool in enumerate(body.get("tools") or []):
            declarations = tool.get("functionDeclarations") or tool.get("function_declarations") or []
            for j, declaration in enumerate(declarations):
                self._check_schema(declaration.get("parameters"),
                                   f"tools[{i}].function_declarations[{j}].parameters")
        contents = body.get("contents")
        if not isinstance(contents, list) or not contents:
            raise Refusal(400, "* GenerateContentRequest.contents: contents is not specified")
        contents = [{**c, "parts": [_camel(p) for p in c.get("parts") or []]} for c in contents]
        neutral: list[dict[str, Any]] = []
        for i, content in enumerate(contents):
            role, parts = content.get("role", "user"), content["parts"]
            if role not in ("user", "model"):
                raise Refusal(400, f"Please use a valid role: user, model. (contents[{i}].role: {role})")
            calls = [p["functionCall"] for p in parts if "functionCall" in p]
            responses = [p["functionResponse"] for p in parts if "functionResponse" in p]
            if role == "model" and calls:
                previous = contents[i - 1] if i else None
                if previous is None or previous.get("role", "user") != "user":
                    raise Refusal(400, "Please ensure that function call turn comes immediately after a user turn "
                                       "or after a function response turn.")
                for part in parts:
                    if "functionCall" not in part:
                        continue
                    issued = self._signatures.get(self._call_key(part["functionCall"]))
                    if issued and part.get("thoughtSignature") not in issued | DUMMY_SIGNATURES:
                        raise Refusal(400, "Function call is missing a thought_signature in functionCall parts. "
                                           "This is required for tools to work correctly, and missing "
                                           "thought_signature may lead to degraded model performance. Additional "
                                           f"data, function call `default_api:{part['functionCall'].get('name')}` "
                                           f", position {i + 1}. Please refer to https://ai.google.dev/gemini-api/"
                                           "docs/thought-signatures for more details.")
                    break  # the signature rides on the first function call of a turn
            if responses:
                previous = contents[i - 1] if i else {}
                asked = [p for p in previous.get("parts") or [] if "functionCall" in p]
                if previous.get("role") != "model" or len(asked) != len(responses):
                    raise Refusal(400, "Please ensure that the number of function response parts is equal to the "
                                       "number of function call parts of the function call turn.")
                neutral.extend({"role": "tool", "content": ""} for _ in responses)
                continue
            if role == "model":
                neutral.append({"role": "assistant"})
            else:
                neutral.append({"role": "user", "content": "".join(str(p.get("text", "")) for p in parts)})
        model = urllib.parse.unquote(prefix[len("/v1beta/models/"):])
        return model, neutral

    @staticmethod
    def _call_key(call: dict[str, Any]) -> str:
        return json.dumps([call.get("name"), call.get("args") or {}], sort_keys=True)

    def render(self, reply: dict[str, Any], record: dict[str, Any], turn: int) -> Any:
        prompt = len(json.dumps(record["body"])) // 4
        usage = {"promptTokenCount": prompt, "candidatesTokenCount": 7, "totalTokenCount": prompt + 7,
                 **reply.get("usage", {})}
        if reply.get("block"):
            return {"promptFeedback": {"blockReason": reply["block"]}, "usageMetadata": usage}
        parts: list[dict[str, Any]] = []
        sig = signature(reply["thinking"]) if reply.get("thinking") else None
        if reply.get("thinking"):
            parts.append({"text": reply["thinking"], "thought": True})
        if reply.get("content") and reply.get("finish") != "MALFORMED_FUNCTION_CALL":
            parts.append({"text": reply["content"]})
        for call in reply.get("tool_calls", []):
            function_call = {"name": call["name"], "args": _arguments(call)}
            if call.get("id"):
                function_call["id"] = call["id"]
            parts.append({"functionCall": function_call})
        if sig:  # Gemini puts the signature on the first function call, else on the last part
            target = next((p for p in parts if "functionCall" in p), parts[-1])
            target["thoughtSignature"] = sig
            if "functionCall" in target:
                with self._lock:
                    self._signatures.setdefault(self._call_key(target["functionCall"]), set()).add(sig)
        candidate: dict[str, Any] = {"finishReason": reply.get("finish", "STOP"), "index": 0}
        if parts:  # a candidate with nothing to say (MALFORMED_FUNCTION_CALL, MAX_TOKENS while thinking) has no content
            candidate["content"] = {"role": "model", "parts": parts}
        if candidate["finishReason"] == "MALFORMED_FUNCTION_CALL":
            candidate["finishMessage"] = "Malformed function call: " + str(reply.get("content") or "")
        return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": self.model_name,
                "responseId": f"fake-{turn}"}


# -- Ollama ---------------------------------------------------------------------------------------------------


class OllamaFake(ProviderFake):
    """``POST /api/chat`` (Ollama, litellm's ``ollama_chat/`` route).  Refuses, as Ollama does: an unknown
    model (404 ``model "x" not found, try pulling it first``: the fake serves only its model name); a role
    other than system / user / assistant / tool (400); a tool call whose ``arguments`` is not an object (400,
    Go's unmarshal error).  Renders ``message`` (``content``, ``thinking``, ``tool_calls`` with object
    arguments and no ids, as Ollama), ``done_reason`` (``stop`` or the reply's ``finish``) and the counts
    ``prompt_eval_count`` / ``eval_count``.  Errors are ``{"error": "..."}``."""

    provider = "ollama_chat"
    default_model = "qwen3:8b"

    def env(self) -> dict[str, str]:
        return {"OLLAMA_API_BASE": self.base_url}

    def params(self, **extra: Any) -> dict[str, Any]:
        return {"api_base": self.api_base, **extra}

    def error_body(self, status: int, message: str, type_: str | None) -> Any:
        return {"error": message}

    def respond(self, record: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        if record["path"] == "/api/show":  # litellm asks for the model's details (its capabilities)
            if record["body"].get("name", record["body"].get("model")) != self.model_name:
                raise Refusal(404, f"model '{record['body'].get('name')}' not found")
            return 200, {"details": {"family": "qwen3", "parameter_size": "8.2B", "format": "gguf"},
                         "model_info": {"general.architecture": "qwen3", "qwen3.context_length": 40960},
                         "capabilities": ["completion", "tools", "thinking"], "template": "", "modelfile": ""}, {}
        return super().respond(record)

    def validate(self, record: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        if record["path"] != "/api/chat":
            raise Refusal(404, "404 page not found")
        body = record["body"]
        model = str(body.get("model", ""))
        if model != self.model_name:
            raise Refusal(404, f'model "{model}" not found, try pulling it first')
        neutral: list[dict[str, Any]] = []
        for message in body.get("messages") or []:
            role = message.get("role")
            if role not in ("system", "user", "assistant", "tool"):
                raise Refusal(400, f"invalid role: {role}")
            for call in message.get("tool_calls") or []:
                if not isinstance((call.get("function") or {}).get("arguments", {}), dict):
                    raise Refusal(400, "json: cannot unmarshal string into Go struct field "
                                       "ToolCallFunction.messages.tool_calls.function.arguments of type "
                                       "api.ToolCallFunctionArguments")
            neutral.append({"role": role, "content": message.get("content", "")})
        return model, neutral

    def render(self, reply: dict[str, Any], record: dict[str, Any], turn: int) -> Any:
        message: dict[str, Any] = {"role": "assistant", "content": reply.get("content") or ""}
        if reply.get("thinking"):
            message["thinking"] = reply["thinking"]
        if reply.get("tool_calls"):
            message["tool_calls"] = [{"function": {"name": c["name"], "arguments": _arguments(c)}}
                                     for c in reply["tool_calls"]]
        return {"model": record["body"]["model"], "created_at": "2026-01-01T00:00:00Z", "message": message,
                "done": True, "done_reason": reply.get("finish", "stop"), "total_duration": 1000,
                "prompt_eval_count": len(json.dumps(record["body"])) // 4, "eval_count": 7,
                **reply.get("usage", {})}


# -- OpenAI-style: OpenAI, Azure, vLLM ---------------------------------------------------------------------------

OPENAI_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error",
                429: "rate_limit_exceeded", 500: "server_error", 503: "server_error"}


class OpenAIFake(ProviderFake):
    """``POST /v1/chat/completions`` (OpenAI).  Refuses: no ``Authorization: Bearer`` (401); empty
    ``messages`` or a role outside system / developer / user / assistant / tool (400); a ``tool`` message whose
    ``tool_call_id`` no assistant call before it has (400, as OpenAI: "messages with role 'tool' must be a
    response to a preceeding message with 'tool_calls'"); an assistant message with ``tool_calls`` not followed
    by a tool message for each id (400).  Renders ``choices[0].message`` / ``finish_reason`` (``tool_calls`` /
    ``stop`` or the reply's ``finish``), ``usage`` with ``prompt_tokens_details.cached_tokens``; a reply's
    ``thinking`` is ``reasoning_content`` (as vLLM's reasoning parsers send it)."""

    provider = "openai"
    default_model = "gpt-4.1-mini"
    path = "/v1/chat/completions"

    @property
    def api_base(self) -> str:
        return f"{self.base_url}/v1"

    def env(self) -> dict[str, str]:
        return {"OPENAI_BASE_URL": self.api_base, "OPENAI_API_KEY": KEY}

    def error_body(self, status: int, message: str, type_: str | None) -> Any:
        return {"error": {"message": message, "type": type_ or OPENAI_TYPES.get(status, "server_error"),
                          "param": None, "code": None}}

    def authorise(self, record: dict[str, Any]) -> None:
        if not record["headers"].get("authorization", "").startswith("Bearer "):
            raise Refusal(401, "You didn't provide an API key. You need to provide your API key in an "
                               "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).")

    def route(self, record: dict[str, Any]) -> None:
        if record["path"] != self.path:
            raise Refusal(404, f"Invalid URL (POST {record['path']})")

    def validate(self, record: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        self.route(record)
        self.authorise(record)
        body = record["body"]
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise Refusal(400, "[] is too short - 'messages'")
        pending: list[str] = []
        for i, message in enumerate(messages):
            role = message.get("role")
            if role not in ("system", "developer", "user", "assistant", "tool"):
                raise Refusal(400, f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', "
                                   "'user', 'function', 'tool', and 'developer'.")
            if role == "tool":
                if message.get("tool_call_id") not in pending:
                    raise Refusal(400, f"Invalid parameter: messages with role 'tool' must be a response to a "
                                       f"preceeding message with 'tool_calls'. (messages.[{i}].role)")
                pending.remove(message["tool_call_id"])
                continue
            if pending:
                raise Refusal(400, "An assistant message with 'tool_calls' must be followed by tool messages "
                                   "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                                   f"response messages: {', '.join(pending)}")
            if role == "assistant":
                pending = [str(c.get("id")) for c in message.get("tool_calls") or []]
        return str(body.get("model", "")), [m for m in messages if isinstance(m, dict)]

    def render(self, reply: dict[str, Any], record: dict[str, Any], turn: int) -> Any:
        calls = [{"id": c.get("id") or f"call_{turn}_{i}", "type": "function",
                  "function": {"name": c["name"], "arguments": c["arguments"] if isinstance(c.get("arguments"), str)
                               else json.dumps(c.get("arguments", {}))}}
                 for i, c in enumerate(reply.get("tool_calls", []))]
        message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
        if reply.get("thinking"):
            message["reasoning_content"] = reply["thinking"]
        if calls:
            message["tool_calls"] = calls
        prompt = len(json.dumps(record["body"])) // 4
        usage = {"prompt_tokens": prompt, "completion_tokens": 7, "total_tokens": prompt + 7,
                 "prompt_tokens_details": {"cached_tokens": 0}, **reply.get("usage", {})}
        finish = reply.get("finish", "tool_calls" if calls else "stop")
        choice = {"index": 0, "message": message, "finish_reason": finish}
        return {"id": f"chatcmpl-fake-{turn}", "object": "chat.completion", "created": 0,
                "model": record["body"].get("model", self.model_name), "choices": [choice], "usage": usage}


class AzureFake(OpenAIFake):
    """``POST /openai/deployments/{deployment}/chat/completions?api-version=...`` (Azure OpenAI).  Refuses, as
    Azure does: no ``api-version`` (404 ``Resource not found``) or one it does not know (404 ``API version not
    supported``); no ``api-key`` header (401 ``Access denied due to invalid subscription key ...``); a
    deployment other than the fake's (404 ``DeploymentNotFound``); then OpenAI's message checks.  Errors are
    ``{"error": {"code", "message"}}`` (Azure's own shape: ``code`` is a string).  A reply's ``finish`` of
    ``content_filter`` is sent with Azure's ``content_filter_results``."""

    provider = "azure"
    default_model = "gpt-4o-deploy"
    api_version = "2024-10-21"
    versions = frozenset({"2024-06-01", "2024-10-21", "2025-01-01-preview", "2025-04-01-preview"})

    @property
    def api_base(self) -> str:
        return self.base_url

    def env(self) -> dict[str, str]:
        return {"AZURE_API_BASE": self.base_url, "AZURE_API_VERSION": self.api_version, "AZURE_API_KEY": KEY}

    def params(self, **extra: Any) -> dict[str, Any]:
        return {"api_base": self.api_base, "api_key": KEY, "api_version": self.api_version, **extra}

    def error_body(self, status: int, message: str, type_: str | None) -> Any:
        return {"error": {"code": type_ or str(status), "message": message}}

    def route(self, record: dict[str, Any]) -> None:
        parts = record["path"].split("/")
        if len(parts) != 6 or parts[1:3] != ["openai", "deployments"] or parts[4:] != ["chat", "completions"]:
            raise Refusal(404, "Resource not found")
        version = record["query"].get("api-version")
        if not version:
            raise Refusal(404, "Resource not found")
        if version not in self.versions:
            raise Refusal(404, "API version not supported")
        if parts[3] != self.model_name:
            raise Refusal(404, "The API deployment for this resource does not exist. If you created the deployment "
                               "within the last 5 minutes, please wait a moment and try again.", "DeploymentNotFound")

    def authorise(self, record: dict[str, Any]) -> None:
        if not record["headers"].get("api-key") and not record["headers"].get("authorization"):
            raise Refusal(401, "Access denied due to invalid subscription key or wrong API endpoint. Make sure to "
                               "provide a valid key for an active subscription and use a correct regional API "
                               "endpoint for your resource.")

    def render(self, reply: dict[str, Any], record: dict[str, Any], turn: int) -> Any:
        body = super().render(reply, record, turn)
        filtered = reply.get("finish") == "content_filter"  # as Azure reports it: the category that tripped
        body["choices"][0]["content_filter_results"] = {
            k: {"filtered": hit, "severity": "high" if hit else "safe"}
            for k in ("hate", "self_harm", "sexual", "violence") for hit in [filtered and k == "violence"]}
        body["prompt_filter_results"] = [{"prompt_index": 0, "content_filter_results": {}}]
        return body


class VllmFake(OpenAIFake):
    """vLLM's OpenAI-compatible server (``hosted_vllm/`` route, ``POST /v1/chat/completions``).  Refuses, as
    vLLM does: a model other than the one served (404 ``The model `x` does not exist.``); ``tools`` with
    ``tool_choice`` ``auto`` (or none given) when the server was started without a tool parser
    (``VllmFake(tool_parser=False)``: 400 ``"auto" tool choice requires --enable-auto-tool-choice and
    --tool-call-parser to be set``); then OpenAI's message checks.  No key is required.  Errors are
    ``{"object": "error", "message", "type", "param", "code"}``."""

    provider = "hosted_vllm"
    default_model = "Qwen/Qwen3-8B"

    def __init__(self, model: str | None = None, host: str = "127.0.0.1", port: int = 0,
                 tool_parser: bool = True) -> None:
        super().__init__(model, host, port)
        self.tool_parser = tool_parser

    def env(self) -> dict[str, str]:
        return {"HOSTED_VLLM_API_BASE": self.api_base}

    def error_body(self, status: int, message: str, type_: str | None) -> Any:
        return {"object": "error", "message": message,
                "type": type_ or {400: "BadRequestError", 404: "NotFoundError"}.get(status, "InternalServerError"),
                "param": None, "code": status}

    def authorise(self, record: dict[str, Any]) -> None:
        body = record["body"]
        if body.get("model") != self.model_name:
            raise Refusal(404, f"The model `{body.get('model')}` does not exist.")
        if body.get("tools") and body.get("tool_choice", "auto") == "auto" and not self.tool_parser:
            raise Refusal(400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set')


ALL_FAKES: tuple[type[ProviderFake], ...] = (AnthropicFake, GeminiFake, OllamaFake, AzureFake, VllmFake, OpenAIFake)
