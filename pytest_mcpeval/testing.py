r"""Test helpers for users of pytest-mcpeval (a public API): a scripted model to test benchmark files offline.

:class:`ScriptedModelServer` is a real OpenAI-compatible chat-completions server on 127.0.0.1 whose
answers come from a script.  The plugin calls it through litellm exactly as it calls a hosted model, so a
test with it exercises the whole path (request, tool list, retries, cache, scoring, report, gate) but the
model's judgement.  docs/testing.md shows how to unit-test benchmark files and gates with it.

Answers come from a script: ``{input text: reply}`` per model name.  A reply is one of::

    {"tool_calls": [{"name": "list_issues", "arguments": {"owner": "github"}}]}
    {"tool_calls": [{"name": "list_issues", "arguments": "{not json"}]}   # raw argument text
    {"content": "I cannot do that."}                                       # no tool call
    {"status": 500, "error": "overloaded"}                                 # an HTTP error
    {"status": 429, "headers": {"Retry-After": "0"}}                        # a rate limit
    {"choices": []}                                                        # a completion with these choices
    {"body": b'{"id": "\xff"}'}                                            # this body, as is (status 200)
    {"body": "<html>proxy login</html>", "status": 502}                    # ... with another status
    {"reset": True}                                                        # connection closed, no answer
    {"hang": True}                                                         # no answer until the server stops
    {"best_match": True}                                                   # a keyword model (see best_match)

Any reply may add ``"delay": seconds`` (the answer comes late), ``"drip": seconds`` (the status line and headers
at once, then the body one byte every that many seconds: a reply no per-read timeout ends) and ``"gather": n``
(the answer waits, at most 30 s, until ``max_in_flight`` has reached n: a test of concurrency that does not
depend on the machine's speed).
A rule may also be a *list* of replies, used one per request in order, the last one repeating:
``[{"status": 429}, {"tool_calls": [...]}]``.
``max_in_flight`` records the most requests the server was answering at the same time, ``connections`` how many
TCP connections it accepted.

Multi-step flows: a rule ``{"turns": [reply, reply, ...]}`` answers by the position in the conversation,
the number of assistant messages after the last user message (0 for the first request of a flow, 1 once
the tool answers of the first reply are sent back, ...); past the end the last reply repeats (a model that
never stops calling tools).  Unlike a list, it gives the same answer to the same conversation however many
flows share the input text, however they interleave and whatever the cache replayed; an entry of it may be
a list (used one per request at that position).  :meth:`~ScriptedModelServer.flow` is the shorthand::

    server.flow("Who opened WEB-12?",
                [{"name": "get_issue", "arguments": {"issue_key": "WEB-12"}}],   # turn 0: one call
                [{"name": "get_user", "arguments": {"username": "carol"}},       # turn 1: two calls at once
                 {"name": "list_issue_comments", "arguments": {"issue_key": "WEB-12"}}],
                "Carol Diaz opened it.")                                          # turn 2: the final answer

Each tool call is sent with the id ``call-{turn}-{index}`` (unique in a conversation, and the same for the
same conversation); a call in a script may give its own ``"id"``, and ``"id": None`` sends a call without
one.  The tool messages a request carries are in ``requests`` like everything else.

The faults: ``"choices"`` replaces the completion's list of choices (``[]`` is a completion with none);
``"body"`` is sent instead of any JSON, a ``str`` as UTF-8, ``bytes`` as they are (non-UTF-8 bytes,
invalid JSON), with ``"status"`` (default 200) and ``"headers"``; ``"reset"`` reads the request and closes
the connection with a TCP reset, sending nothing; ``"hang"`` never answers (the client's timeout fires;
the request ends when :meth:`~ScriptedModelServer.stop` is called).  Any ``str`` in a reply may hold lone
surrogates (``"\ud83d"``): they are sent as JSON escapes, as the JSON standard allows.

The input text is the content of the last user message.  A rule's text is matched exactly first; a text
with ``*`` in it is then a glob pattern (``fnmatch``, case-sensitive; the first scripted that matches),
e.g. a judge's verdict for every request about one claim: ``"Claim:*Issue 42 was opened by alice.*"``;
``"*"`` alone answers anything else.  Every request is kept in ``requests`` so tests can check what a
model was sent (the tool list, the messages, the parameters).
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import socket
import struct
import threading
import time
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


def _turn(messages: list[dict[str, Any]]) -> int:
    """The number of assistant messages after the last user message: a flow's turn."""
    turn = 0
    for message in reversed(messages):
        role = message.get("role")
        if role == "user":
            break
        turn += role == "assistant"
    return turn


def best_match(body: dict[str, Any]) -> dict[str, Any]:
    """The reply of a keyword model, ``{"best_match": true}`` in a script (docs/tool-search.md): it calls the tool it is
    shown that ranks first by BM25 for the user's words (with ``{}`` as arguments); shown none that matches, it
    calls ``tool_search`` with those words if it is shown it and has not searched yet, else answers in text.  Its
    choice depends on the descriptions it is sent, as a model's does."""
    from pytest_mcpeval.tool_search import SEARCH_TOOL, rank

    messages = body.get("messages", [])
    text = _last_user_text(messages)
    shown = [{"name": f["name"], "description": f.get("description", ""), "inputSchema": f.get("parameters", {})}
             for tool in body.get("tools") or [] if isinstance(f := tool.get("function"), dict) and "name" in f]
    ranked = rank("bm25", text, [t for t in shown if t["name"] != SEARCH_TOOL])
    if ranked:
        return {"tool_calls": [{"name": ranked[0], "arguments": {}}]}
    if any(t["name"] == SEARCH_TOOL for t in shown) and not _turn(messages):
        return {"tool_calls": [{"name": SEARCH_TOOL, "arguments": {"query": text}}]}
    return {"content": "No tool fits."}


def completion_body(model: str, reply: dict[str, Any], prompt_tokens: int, turn: int = 0) -> dict[str, Any]:
    calls = []
    for i, call in enumerate(reply.get("tool_calls", [])):
        body: dict[str, Any] = {
            "type": "function",
            "function": {
                "name": call["name"],
                "arguments": call["arguments"] if isinstance(call.get("arguments"), str)
                else json.dumps(call.get("arguments", {})),
            },
        }
        id_ = call.get("id", f"call-{turn}-{i}")
        if id_ is not None:
            body = {"id": id_, **body}
        calls.append(body)
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
    if calls:
        message["tool_calls"] = calls
    choices = [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}]
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": reply.get("choices", choices),
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 7, "total_tokens": prompt_tokens + 7},
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # many calls in flight at once
    scripted: ScriptedModelServer  # set by the ScriptedModelServer that owns it: what its handlers answer from

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._connections: set[Any] = set()
        self._connections_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """End the connections clients keep open (HTTP keep-alive): a stopped server must not go on answering a
        client's pooled connection (a new server on the same port would never see those requests)."""
        with self._connections_lock:
            open_now = list(self._connections)
        for connection in open_now:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up (a timeout, the end of a run) is not worth a traceback."""
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    """One HTTP connection to a :class:`ScriptedModelServer`: its POSTs answered as the server's rules say."""

    protocol_version = "HTTP/1.1"  # keep-alive: clients reuse connections, as with a real provider
    disable_nagle_algorithm = True  # headers and body are separate writes: no 40 ms delayed-ACK stall

    @property
    def scripted(self) -> ScriptedModelServer:
        server = self.server
        assert isinstance(server, _Server)
        return server.scripted

    def log_message(self, format: str, *args: Any) -> None:
        return

    def setup(self) -> None:
        super().setup()
        with self.scripted._lock:
            self.scripted.connections += 1

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
        with self.scripted._lock:
            self.scripted.requests.append(body)
            self.scripted.in_flight += 1
            self.scripted.max_in_flight = max(self.scripted.max_in_flight, self.scripted.in_flight)
            self.scripted._arrived.notify_all()
        try:
            reply = self.scripted.reply_for(str(body.get("model", "")), body.get("messages", []))
            if "gather" in reply:
                with self.scripted._arrived:
                    self.scripted._arrived.wait_for(lambda: self.scripted.max_in_flight >= int(reply["gather"]), 30.0)
            delay = float(reply.get("delay", 0.0)) + self.scripted.latency
            if delay:
                time.sleep(delay)
            if reply.get("hang"):
                self.scripted._stopping.wait()
                self.close_connection = True
                return
            if reply.get("reset"):
                self._reset()
                return
            if "body" in reply:
                raw = reply["body"]
                data = raw if isinstance(raw, bytes) else str(raw).encode("utf-8", "surrogatepass")
                self._send_bytes(int(reply.get("status", 200)), data, reply.get("headers", {}),
                                 float(reply.get("drip", 0.0)))
                return
            if "status" in reply:
                message = {"error": {"message": reply.get("error", "scripted error")}}
                self._send(int(reply["status"]), message, reply.get("headers", {}),
                           float(reply.get("drip", 0.0)))
                return
            prompt_tokens = len(json.dumps(body)) // 4
            turn = _turn(body.get("messages", []))
            if reply.get("best_match"):
                reply = best_match(body)
            self._send(200, completion_body(str(body.get("model", "")), reply, prompt_tokens, turn),
                       drip=float(reply.get("drip", 0.0)))
        finally:
            with self.scripted._lock:
                self.scripted.in_flight -= 1

    def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None,
              drip: float = 0.0) -> None:
        self._send_bytes(status, json.dumps(payload).encode(), headers, drip)

    def _reset(self) -> None:
        """Close the connection with a TCP reset (SO_LINGER 0), answering nothing."""
        self.close_connection = True
        with contextlib.suppress(OSError):  # without the option: a plain close, a hang-up to the client
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()

    def _send_bytes(self, status: int, data: bytes, headers: dict[str, str] | None = None,
                    drip: float = 0.0) -> None:
        try:
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, str(value))
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if not drip:
                self.wfile.write(data)
                return
            self.wfile.flush()  # the headers now, the body byte by byte
            for index in range(len(data)):
                if self.scripted._stopping.wait(drip):  # the server stops: the rest is never sent
                    self.close_connection = True
                    return
                self.wfile.write(data[index:index + 1])
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
            self.close_connection = True


class ScriptedModelServer:
    """Start with :meth:`start` (or as a context manager); point litellm at :attr:`api_base`."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.rules: dict[tuple[str, str], dict[str, Any] | list[dict[str, Any]]] = {}  # a list, or {"turns": [...]}
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.connections = 0  # TCP connections accepted (clients keep them alive between requests)
        self.latency = 0.0  # added to every answer (benchmarks)
        self._used: dict[tuple[str, ...], int] = {}
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)  # notified on every request (``"gather"``)
        self._stopping = threading.Event()  # releases the requests that hang
        self._httpd = _Server((host, port), _Handler)
        self._httpd.scripted = self  # what _Handler answers from
        self._thread: threading.Thread | None = None

    @property
    def api_base(self) -> str:
        host, port = self._httpd.server_address[:2]
        host_text = host.decode() if isinstance(host, bytes) else str(host)
        return f"http://{host_text}:{port}/v1"

    def script(self, text: str, reply: dict[str, Any] | list[dict[str, Any]], model: str = "*") -> None:
        """Answer ``reply`` when the last user message is ``text`` (``"*"`` matches any text)."""
        self.rules[(model, text)] = reply

    def call(self, text: str, tool: str, model: str = "*", **arguments: Any) -> None:
        """Shorthand: answer ``text`` with one call of ``tool``."""
        self.script(text, {"tool_calls": [{"name": tool, "arguments": arguments}]}, model)

    def flow(self, text: str, *turns: list[dict[str, Any]] | str | dict[str, Any], model: str = "*") -> None:
        """Script a flow: one entry per turn, a list of calls (``{"name", "arguments"}``), the final answer's
        text, or any reply; the last entry repeats (see "Multi-step flows" above)."""
        replies = [
            {"tool_calls": turn} if isinstance(turn, list) else {"content": turn} if isinstance(turn, str) else turn
            for turn in turns
        ]
        self.script(text, {"turns": replies}, model)

    def reply_for(self, model: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
        text = _last_user_text(messages)
        patterns = [key for key in self.rules  # after the exact texts: glob patterns, in the order scripted
                    if key[1] != "*" and "*" in key[1] and key[0] in (model, "*") and fnmatch.fnmatchcase(text, key[1])]
        for key in ((model, text), ("*", text), *patterns, (model, "*"), ("*", "*")):
            if key in self.rules:
                rule = self.rules[key]
                counter: tuple[str, ...] = key
                if isinstance(rule, dict) and "turns" in rule:
                    turns: list[dict[str, Any] | list[dict[str, Any]]] = rule["turns"]
                    turn = min(_turn(messages), len(turns) - 1)
                    rule, counter = turns[turn], (*key, str(turn))
                if isinstance(rule, dict):
                    return rule
                with self._lock:
                    used = self._used.get(counter, 0)
                    self._used[counter] = used + 1
                return rule[min(used, len(rule) - 1)]
        return DEFAULT_REPLY

    def start(self) -> ScriptedModelServer:
        # the serving thread polls every 50 ms, not 0.5 s: stop() waits for its next poll (0.25 s on average at 0.5 s)
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name="scripted-model",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._httpd.close_connections()

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    """``python -m pytest_mcpeval.testing [--port P] [--latency S] [--script FILE]``.

    Serves until interrupted; prints its ``api_base`` as the first line of output.  Used by the
    benchmarks in bench/ and by anyone who wants to try a benchmark file against canned answers.
    """
    import argparse

    parser = argparse.ArgumentParser(prog="python -m pytest_mcpeval.testing")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every answer")
    parser.add_argument("--script", help='JSON file {"input text" or "*": reply}')
    args = parser.parse_args(argv)
    server = ScriptedModelServer(args.host, args.port)
    server.latency = args.latency
    if args.script:
        with open(args.script, encoding="utf-8") as handle:
            for text, reply in json.load(handle).items():
                server.script(text, reply)
    print(server.api_base, flush=True)
    try:
        server._httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._httpd.server_close()


if __name__ == "__main__":
    main()
