"""A scripted OpenAI-compatible chat-completions server: the test double for models.

It speaks real HTTP, so a case runs through litellm exactly as with a hosted model, but the answers
come from a script: ``{input text: reply}`` per model name.  A reply is one of::

    {"tool_calls": [{"name": "list_issues", "arguments": {"owner": "github"}}]}
    {"tool_calls": [{"name": "list_issues", "arguments": "{not json"}]}   # raw argument text
    {"content": "I cannot do that."}                                       # no tool call
    {"status": 500, "error": "overloaded"}                                 # an HTTP error

The input text is the content of the last user message.  Every request is kept in ``requests`` so tests
can check what a model was sent (the tool list, the messages, the parameters).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_REPLY: dict[str, Any] = {"content": "I cannot help with that."}


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):  # content parts
                return "".join(p.get("text", "") for p in content if isinstance(p, dict))
            return str(content)
    return ""


def completion_body(model: str, reply: dict[str, Any], prompt_tokens: int) -> dict[str, Any]:
    calls = [
        {
            "id": f"call_{i}",
            "type": "function",
            "function": {
                "name": call["name"],
                "arguments": call["arguments"] if isinstance(call.get("arguments"), str)
                else json.dumps(call.get("arguments", {})),
            },
        }
        for i, call in enumerate(reply.get("tool_calls", []))
    ]
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 7, "total_tokens": prompt_tokens + 7},
    }


class ScriptedModelServer:
    """Start with :meth:`start` (or as a context manager); point litellm at :attr:`api_base`."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.rules: dict[tuple[str, str], dict[str, Any]] = {}
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    self._send(400, {"error": {"message": "request body is not JSON"}})
                    return
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                with server._lock:
                    server.requests.append(body)
                reply = server.reply_for(str(body.get("model", "")), body.get("messages", []))
                if "status" in reply:
                    self._send(int(reply["status"]), {"error": {"message": reply.get("error", "scripted error")}})
                    return
                prompt_tokens = len(json.dumps(body)) // 4
                self._send(200, completion_body(str(body.get("model", "")), reply, prompt_tokens))

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer((host, port), Handler)
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def api_base(self) -> str:
        host, port = self._httpd.server_address[:2]
        host_text = host.decode() if isinstance(host, bytes) else str(host)
        return f"http://{host_text}:{port}/v1"

    def script(self, text: str, reply: dict[str, Any], model: str = "*") -> None:
        """Answer ``reply`` when the last user message is ``text`` (``"*"`` matches any text)."""
        self.rules[(model, text)] = reply

    def call(self, text: str, tool: str, model: str = "*", **arguments: Any) -> None:
        """Shorthand: answer ``text`` with one call of ``tool``."""
        self.script(text, {"tool_calls": [{"name": tool, "arguments": arguments}]}, model)

    def reply_for(self, model: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
        text = _last_user_text(messages)
        for key in ((model, text), ("*", text), (model, "*"), ("*", "*")):
            if key in self.rules:
                return self.rules[key]
        return DEFAULT_REPLY

    def start(self) -> ScriptedModelServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="scripted-model", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
