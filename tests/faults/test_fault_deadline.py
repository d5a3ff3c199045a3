"""Deadlines and races (issue 19, items 1 and 11): a reply that trickles in, a tool call that never ends, and
the environment read by the threads that make the calls while pytest changes it for every item.

A timeout that httpx applies to each read alone lets a provider that sends a byte every half second keep a call
going for minutes: ``--mcp-timeout`` is a deadline for each attempt's whole exchange (connecting, the headers,
the body), and ``--mcp-connect-timeout`` one for each tool call.  Each test runs the plugin as a user runs it
(pytester, the scripted model over HTTP through litellm, real MCP servers) and times the call itself from the
server's side: from the request's arrival to the moment the client hung up (the server notices it at its next
byte), so that the bounds hold on a loaded machine whatever pytest's own start costs.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import NOTES_CASES, make_project, read_report, run

from pytest_mcpeval.testing import ScriptedModelServer

TOOLS = [{"name": "get_me", "description": "Who am I", "inputSchema": {"type": "object", "properties": {}}}]
BENCH = "server: {tools_file: tools.json}\ncases:\n  - id: slow\n    input: who am I?\n    expect: [{tool: get_me}]\n"
# the completion is about 300 bytes: a byte every half second is 150 s of a call that never times out per read
DRIP = {"tool_calls": [{"name": "get_me", "arguments": {}}], "drip": 0.5}
TIMEOUT = 2.0


class HeldFor:
    """How long the scripted server was answering: from its first request's arrival to the moment it had none in
    flight again (a dripping answer ends when the client has hung up and the next byte cannot be written)."""

    def __init__(self, server: ScriptedModelServer) -> None:
        self.server = server
        self.arrived: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.is_set() and not self.server.requests:
            time.sleep(0.01)
        self.arrived = time.perf_counter()

    def seconds(self, limit: float = 30.0) -> float:
        """Once the run is over: the seconds the server was held (at most ``limit``, waiting for its last byte)."""
        self._stop.set()
        self._thread.join()
        assert self.arrived is not None and self.server.requests
        end = time.perf_counter() + limit
        while self.server.in_flight and time.perf_counter() < end:
            time.sleep(0.01)
        assert self.server.in_flight == 0, "the client never hung up: the dripping answer is still being sent"
        return time.perf_counter() - self.arrived


# -- 1. a model reply that trickles in ------------------------------------------------------------------

@pytest.mark.parametrize("xdist_args", [[], ["-n", "1"]], ids=["in-process", "xdist"])
def test_a_dripping_reply_is_a_timeout_error(pytester: pytest.Pytester, model_server: ScriptedModelServer,
                                             xdist_args: list[str]) -> None:
    """Headers at once, then the body a byte every 0.5 s: with ``--mcp-timeout=2 --mcp-retries=0`` the case is an
    error ``Timeout: no answer within 2 s (--mcp-timeout)`` within a few seconds (the call took 240 s and passed
    before), and the connection is closed, not left dripping."""
    make_project(pytester, model_server, {"bench.mcpeval.yaml": BENCH}, tools=TOOLS)
    model_server.script("*", DRIP)
    held = HeldFor(model_server)
    result = run(pytester, "--mcp-models=fake", f"--mcp-timeout={TIMEOUT:g}", "--mcp-retries=0", "--mcp-record=off",
                 "--mcp-report=report.json", *xdist_args)
    seconds = held.seconds()
    (case,) = read_report(pytester)["cases"]
    assert case["passed"] is None and case["error"] == (
        f"model fake (openai/fake): Timeout: no answer within {TIMEOUT:g} s (--mcp-timeout)")
    result.stdout.fnmatch_lines(["*1 error*"])
    result.stdout.no_fnmatch_line("*Traceback*")
    assert result.ret == 1
    assert len(model_server.requests) == 1
    # about TIMEOUT (the server sees the hang-up at its next byte); the margin is for a loaded machine: the drip
    # itself takes 150 s
    assert seconds < 4 * TIMEOUT, f"the call held the server {seconds:.1f} s"


def test_each_attempt_has_the_deadline(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    """Retried like any timeout: two attempts of a second each (and the backoff, at most 1 s, between them)."""
    make_project(pytester, model_server, {"bench.mcpeval.yaml": BENCH}, tools=TOOLS)
    model_server.script("*", DRIP)
    held = HeldFor(model_server)
    result = run(pytester, "--mcp-models=fake", "--mcp-timeout=1", "--mcp-retries=1", "--mcp-record=off",
                 "--mcp-report=report.json")
    seconds = held.seconds()
    (case,) = read_report(pytester)["cases"]
    assert case["error"] == "model fake (openai/fake) after 2 attempts: Timeout: no answer within 1 s (--mcp-timeout)"
    assert len(model_server.requests) == 2 and result.ret == 1
    assert seconds < 3 * 2 * 1.0, f"two attempts held the server {seconds:.1f} s"


def test_a_slow_answer_within_the_deadline_is_scored(pytester: pytest.Pytester,
                                                     model_server: ScriptedModelServer) -> None:
    """The deadline is not a shorter timeout: an answer that trickles in within it is scored."""
    make_project(pytester, model_server, {"bench.mcpeval.yaml": BENCH}, tools=TOOLS)
    model_server.script("*", {**DRIP, "drip": 0.001})  # ~0.3 s for the body
    result = run(pytester, "--mcp-models=fake", "--mcp-timeout=20", "--mcp-retries=0", "--mcp-record=off",
                 "--mcp-report=report.json")
    (case,) = read_report(pytester)["cases"]
    assert case["error"] is None and case["passed"] is True and result.ret == 0


def test_a_judge_call_has_the_deadline(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    """A judge's call goes the same way as the model's: its dripping verdict is a timeout error of the case."""
    bench = ("server: {tools_file: tools.json}\ncases:\n"
             "  - id: judged\n    input: Who am I?\n    expect: [{tool: get_me}]\n"
             "    mocks:\n      get_me: [{result: {text: alice}}]\n    claims: [Says that I am alice.]\n")
    make_project(pytester, model_server, {"bench.mcpeval.yaml": bench}, tools=TOOLS)
    model_server.flow("Who am I?", [{"name": "get_me", "arguments": {}}], "You are alice.")
    model_server.script("Claim:*", DRIP)
    held = HeldFor(model_server)
    result = run(pytester, "--mcp-models=fake", "--mcp-judge-model=fake", f"--mcp-timeout={TIMEOUT:g}",
                 "--mcp-retries=0", "--mcp-record=off", "--mcp-report=report.json")
    seconds = held.seconds()
    (case,) = read_report(pytester)["cases"]
    assert case["passed"] is None and "Timeout: no answer within 2 s (--mcp-timeout)" in case["error"], case["error"]
    assert result.ret == 1
    assert seconds < 2 * TIMEOUT + 2.0, f"the flow and its judge held the server {seconds:.1f} s"


# -- 1. a tool call that never ends -------------------------------------------------------------------------

SLOW_SERVER = r'''
"""An MCP server over stdio that lists its tools, then never finishes answering a call: python slow.py MODE."""
import json, os, sys, time

MODE = sys.argv[1]
with open("server.pid", "a") as f:
    f.write(f"{os.getpid()}\n")
TOOLS = [{"name": "list_notes", "description": "List every note in a folder.",
          "inputSchema": {"type": "object", "properties": {"folder": {"type": "string"}}, "required": ["folder"]}},
         {"name": "search_notes", "description": "Full-text search over all notes.",
          "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}]


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    request = json.loads(line)
    method, rid = request.get("method"), request.get("id")
    if rid is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
            "serverInfo": {"name": "slow", "version": "0"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
    elif method == "tools/call" and MODE == "trickle":  # the answer a byte every 0.2 s, its end never
        answer = json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": "x" * 500}]}})
        for char in answer:
            sys.stdout.write(char)
            sys.stdout.flush()
            time.sleep(0.2)
    elif method == "tools/call":  # reads on, answers nothing
        continue
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"unknown method {method}"}})
'''

HANGING_IN_PROCESS = '''
import anyio
from mcp.server import MCPServer

server = MCPServer("hanging", log_level="WARNING")


@server.tool()
async def list_notes(folder: str) -> str:
    """List every note in a folder."""
    await anyio.sleep(3600)
    return "never"


@server.tool()
async def search_notes(query: str) -> str:
    """Full-text search over all notes."""
    await anyio.sleep(3600)
    return "never"
'''

LIVE_CASES = NOTES_CASES.replace("    input: Show", "    execute: live\n    input: Show").replace(
    "    input: Which", "    execute: live\n    input: Which")
CONNECT_TIMEOUT = 2.0


@pytest.mark.parametrize("server", [  # (a silent stdio server is the trickling one's first seconds)
    f"server:\n  command: [{json.dumps(sys.executable)}, slow.py, trickle]\n",
    'server: {python: "hanging_server:server"}\n',
], ids=["stdio-trickle", "in-process"])
def test_a_tool_call_that_never_ends_is_an_error_of_its_case(pytester: pytest.Pytester,
                                                             model_server: ScriptedModelServer, server: str) -> None:
    """A live tool call the server never finishes answering (silent, a byte at a time, an in-process tool that
    waits for ever) ends as an error of its case after ``--mcp-connect-timeout``, naming the tool, the server
    and its log; no server process outlives the run.
    The MCP SDK's read timeout, given to each call, bounded these three already, with a message of its own
    (``failed to answer a call of `list_notes`: MCPError: Request 'tools/call' timed out``); the plugin's deadline
    is for the whole call (the SDK's clock starts once the request is written, and again for each round of a
    call) and names the option."""
    make_project(pytester, model_server, {"slow.py": SLOW_SERVER, "hanging_server.py": HANGING_IN_PROCESS,
                                          "notes.mcpeval.yaml": server + LIVE_CASES})
    model_server.flow("Show the notes in my work folder", [{"name": "list_notes", "arguments": {"folder": "work"}}],
                      "Done.")
    model_server.flow("Which note mentions the dentist?",
                      [{"name": "search_notes", "arguments": {"query": "dentist"}}], "Done.")
    started = time.perf_counter()
    result = run(pytester, "--mcp-models=fake", f"--mcp-connect-timeout={CONNECT_TIMEOUT:g}", "--mcp-record=off",
                 "--mcp-report=report.json")
    elapsed = time.perf_counter() - started
    cases = {c["id"]: c for c in read_report(pytester)["cases"]}
    assert sorted(cases) == ["list-work", "search-dentist"]
    for case, tool in (("list-work", "list_notes"), ("search-dentist", "search_notes")):
        error = cases[case]["error"]
        assert cases[case]["passed"] is None and error is not None
        assert f"did not answer a call of `{tool}` within {CONNECT_TIMEOUT:g} s (--mcp-connect-timeout); its log: " \
            in error, error
        assert Path(error.rsplit("its log: ", 1)[1]).is_file()
    result.stdout.no_fnmatch_line("*Traceback*")
    assert result.ret == 1
    pid_file = pytester.path / "server.pid"
    pids = [int(p) for p in pid_file.read_text().split()] if pid_file.exists() else []
    assert [p for p in pids if _alive(p)] == []
    # two calls of 2 s, one after the other (the flows share one session), plus starting and stopping the
    # server (a stdio server that does not read its stdin is stopped with SIGTERM after 2 s) and pytest's own start
    assert elapsed < 2 * CONNECT_TIMEOUT + 12.0, f"the run took {elapsed:.1f} s"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# -- 11. the environment, read by the threads that make the calls --------------------------------------------

