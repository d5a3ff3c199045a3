"""Server-side faults (issue 10): misbehaving MCP servers, injected as small scripts in the test's project.

Every test runs the plugin as a user runs it (pytester in this process, ``--mcp-models=fake``, a benchmark
file with two cases whose server is the misbehaving one) and holds the run to one rule: every selected case
ends in the report exactly once, scored, missed or error, with the right label and a clear message (what
happened, the server, its log), in bounded time, never with a traceback; and no server process outlives the
run.  ``--mcp-connect-timeout=2`` keeps the whole file in seconds.

The misbehaving server is :data:`RAW_SERVER`, an MCP server written by hand (no SDK) so that it can do what a
real SDK never would: print garbage on stdout, never answer, exit at any point, publish two tools of the same
name or a schema that is not one.  Each process it starts appends its pid to ``server.pid``.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest
from conftest import NOTES_CASES, make_project, read_report, run

from pytest_mcpeval.testing import ScriptedModelServer

RAW_SERVER = r'''
"""A hand-written MCP server over stdio that misbehaves on purpose: python raw_server.py MODE."""
import json, os, sys, time

MODE = sys.argv[1]
with open("server.pid", "a") as f:
    f.write(f"{os.getpid()}\n")
TOOLS = [
    {"name": "list_notes", "description": "List every note in a folder.",
     "inputSchema": {"type": "object", "properties": {"folder": {"type": "string"}}, "required": ["folder"]}},
    {"name": "search_notes", "description": "Full-text search over all notes.",
     "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}},
]
if MODE == "duplicates":
    TOOLS.append(dict(TOOLS[0], description="Another tool of the same name."))
if MODE == "bad-schema":  # an object, but not a JSON Schema: a misspelt type and a $ref to nowhere
    TOOLS[1]["inputSchema"] = {"type": "object", "required": ["query"],
                               "properties": {"query": {"type": "strng"}, "state": {"$ref": "#/defs/Missing"}}}


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


if MODE == "exit":
    print("FATAL: cannot open the notes database", file=sys.stderr, flush=True)
    sys.exit(3)
if MODE == "hang":  # stuck before reading anything (a database that never answers...): only a signal ends it
    time.sleep(3600)
if MODE.startswith("garbage"):
    print("Starting notes server v1.2 ...", flush=True)
    print("{not json", flush=True)
for line in sys.stdin:
    if MODE == "garbage-only":
        continue  # reads every request, answers none
    request = json.loads(line)
    method, rid = request.get("method"), request.get("id")
    if rid is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw", "version": "0"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
        if MODE == "exit-after-list":
            print("CRASH-AFTER-LIST: the notes database went away", file=sys.stderr, flush=True)
            sys.exit(1)
    else:  # server/discover (the SDK's probe for the 2026 protocol) and anything else
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"unknown method {method}"}})
'''

IDS = ["list-work", "search-dentist"]
TOOLS = [
    {"name": "list_notes", "description": "List every note in a folder.",
     "inputSchema": {"type": "object", "properties": {"folder": {"type": "string"}}, "required": ["folder"]}},
    {"name": "search_notes", "description": "Full-text search over all notes.",
     "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}},
]
CONNECT_TIMEOUT = 2.0
# what a run costs on top of waiting for a server: pytest in this process, the plugin, starting a Python
# server (about 0.5 s) and stopping it; a run that waited the SDK's own timeouts would take 10 s or more
OVERHEAD = 5.0


@dataclass
class Outcome:
    result: pytest.RunResult
    cases: dict[str, dict[str, Any]]
    elapsed: float
    pids: list[int]


def script(server: ScriptedModelServer) -> None:
    server.call("Show the notes in my work folder", "list_notes", folder="work")
    server.call("Which note mentions the dentist?", "search_notes", query="dentist")


def evaluate(pytester: pytest.Pytester, model_server: ScriptedModelServer, server: str, *args: str) -> Outcome:
    """One run against ``server`` (the benchmark's ``server:`` block): every case in the report exactly once,
    no traceback, no server process left.  Past the pre-flight check (``--mcp-no-preflight``): these are the
    faults of a server met while the cases run (one that dies later, on an xdist worker, ...); the check's own
    outcome for them is tests/test_preflight.py's."""
    make_project(pytester, model_server, {"raw_server.py": RAW_SERVER, "notes.mcpeval.yaml": server + NOTES_CASES})
    script(model_server)
    started = time.perf_counter()
    result = run(pytester, "--mcp-models=fake", f"--mcp-connect-timeout={CONNECT_TIMEOUT:g}",
                 "--mcp-report=report.json", "--mcp-no-preflight", *args)
    elapsed = time.perf_counter() - started
    report = read_report(pytester)
    assert sorted(c["id"] for c in report["cases"]) == IDS, result.stdout.str()
    out = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out, out
    pid_file = pytester.path / "server.pid"
    pids = [int(p) for p in pid_file.read_text().split()] if pid_file.exists() else []
    assert [p for p in pids if alive(p)] == []
    return Outcome(result, {c["id"]: c for c in report["cases"]}, elapsed, pids)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def stdio(mode: str) -> str:
    return f"server:\n  command: [{sys.executable}, raw_server.py, {mode}]\n"


def assert_errors(outcome: Outcome, message: str) -> str:
    """Both cases are errors with ``message`` (an fnmatch pattern), excluded from the metrics; pytest shows
    it on both items.  Returns the log the message names."""
    for case in outcome.cases.values():
        assert case["error"] is not None and fnmatchcase(case["error"], message), case["error"]
        assert "\n" not in case["error"]
        assert case["passed"] is None and case["correct"] is None and case["diagnosis"] is None
    assert len({c["error"] for c in outcome.cases.values()}) == 1  # one connection attempt, one message
    outcome.result.stdout.fnmatch_lines(["*2 error*"])
    assert outcome.result.ret != 0
    error: str = outcome.cases["list-work"]["error"]
    return error.rsplit("; its log: ", 1)[1]


def assert_scored(outcome: Outcome, model_server: ScriptedModelServer) -> None:
    assert [outcome.cases[i]["passed"] for i in IDS] == [True, True]
    assert all(c["error"] is None for c in outcome.cases.values())
    outcome.result.stdout.fnmatch_lines(["*2 passed*"])
    assert outcome.result.ret == 0
    assert [t["function"]["name"] for t in model_server.requests[0]["tools"]] == ["list_notes", "search_notes"]


def server_log(pytester: pytest.Pytester) -> str:
    """The one server log of the last run (in-process pytester runs use ``basetemp`` next to the project)."""
    (log,) = (Path(pytester.path).parent / "basetemp").glob("mcpeval-servers[0-9]*/server-*.log")
    return log.read_text(encoding="utf-8")


# -- 1. a stdio server that exits at start ----------------------------------------------------------------


def test_stdio_server_that_exits_at_start(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    outcome = evaluate(pytester, model_server, stdio("exit"))
    log = assert_errors(outcome, "could not connect to the server (command: * raw_server.py exit): "
                                 "the server closed the connection during the MCP handshake (its process ended "
                                 "with exit code 3); the last line of its stderr: FATAL: cannot open the notes "
                                 "database; its log: *server-0.log")
    text = Path(log).read_text(encoding="utf-8")
    assert text.startswith("FATAL: cannot open the notes database\nmcpeval: could not connect to the server (")
    assert "MCPError: Connection closed" in text  # the whole story: the client's exception group
    assert outcome.elapsed < OVERHEAD
    assert model_server.requests == []  # no model is called for a case without tools
    assert len(outcome.pids) == 1  # tried once for both cases


# -- 2. a stdio server that prints garbage on stdout before the handshake -----------------------------------


def test_garbage_on_stdout_is_logged_and_ignored(pytester: pytest.Pytester,
                                                 model_server: ScriptedModelServer) -> None:
    """The SDK skips a line of stdout that is not JSON-RPC; the run goes on, the line is in the server's log
    (not in pytest's output)."""
    outcome = evaluate(pytester, model_server, stdio("garbage"))
    assert_scored(outcome, model_server)
    assert "Failed to parse JSONRPC" not in outcome.result.stdout.str()
    text = server_log(pytester)
    assert "mcpeval: mcp.client.stdio: ERROR: Failed to parse JSONRPC message from server: ValidationError" in text
    assert "input_value='Starting notes server v1.2 ...'" in text and "input_value='{not json'" in text


def test_garbage_then_silence_is_the_connect_timeout(pytester: pytest.Pytester,
                                                     model_server: ScriptedModelServer) -> None:
    outcome = evaluate(pytester, model_server, stdio("garbage-only"))
    log = assert_errors(outcome, "server (command: * raw_server.py garbage-only) did not complete "
                                 "the MCP handshake within 2 s (--mcp-connect-timeout); the MCP SDK logged 2 errors "
                                 "about it (in its log); it wrote nothing to stderr; its log: *server-0.log")
    assert CONNECT_TIMEOUT <= outcome.elapsed < CONNECT_TIMEOUT + OVERHEAD
    assert "input_value='{not json'" in Path(log).read_text(encoding="utf-8")


# -- 3. a stdio server that never answers `initialize` ------------------------------------------------------


def test_server_that_hangs_before_initialize(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    outcome = evaluate(pytester, model_server, stdio("hang"))
    log = assert_errors(outcome, "server (command: * raw_server.py hang) did not complete the MCP "
                                 "handshake within 2 s (--mcp-connect-timeout); it wrote nothing to stderr; "
                                 "its log: *server-0.log")
    # the option's time (plus the SDK's 2 s for the server to exit once its stdin is closed, then SIGTERM), not
    # the SDK's 10 s discovery probe plus its read timeout, nor a 15 s grace
    assert CONNECT_TIMEOUT <= outcome.elapsed < CONNECT_TIMEOUT + OVERHEAD
    assert Path(log).read_text(encoding="utf-8") == (
        f"mcpeval: server (command: {sys.executable} raw_server.py hang) did not complete the MCP handshake "
        "within 2 s (--mcp-connect-timeout); it was stopped\n"
    )
    assert len(outcome.pids) == 1 and model_server.requests == []  # stopped before the error (checked: not alive)


# -- 4. a stdio server that dies once it has listed its tools -----------------------------------------------


def test_server_that_exits_after_listing(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    """Single-call evaluation needs only the tool list: the cases are scored, and closing the dead server at the
    end of the session neither hangs nor prints anything; its last words are in its log."""
    outcome = evaluate(pytester, model_server, stdio("exit-after-list"))
    assert_scored(outcome, model_server)
    assert outcome.elapsed < OVERHEAD
    text = server_log(pytester)
    assert "CRASH-AFTER-LIST: the notes database went away\n" in text
    assert "CRASH-AFTER-LIST" not in outcome.result.stdout.str()


# -- 5. an HTTP server that is not there --------------------------------------------------------------------


def test_unreachable_http_server(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    with socket.socket() as s:  # a port that was free a moment ago, and nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/mcp"
    outcome = evaluate(pytester, model_server, f"server:\n  url: {url}\n")
    log = assert_errors(outcome, f"could not connect to the server (url: {url}): ConnectError: All connection "
                                 "attempts failed; its log: *server-0.log")
    assert outcome.elapsed < CONNECT_TIMEOUT  # refused at once, not waited for
    assert "ConnectError: All connection attempts failed\n" in Path(log).read_text(encoding="utf-8")


# -- 6. two tools of the same name --------------------------------------------------------------------------


def test_live_server_with_duplicate_tool_names(pytester: pytest.Pytester,
                                               model_server: ScriptedModelServer) -> None:
    outcome = evaluate(pytester, model_server, stdio("duplicates"))
    log = assert_errors(outcome, "server (command: * raw_server.py duplicates) published an invalid "
                                 "tool list: duplicate tool names: `list_notes` (tools [[]0], [[]2]); tool names must "
                                 "be unique (a model could not tell the tools apart, and providers reject duplicate "
                                 "function names); its log: *server-0.log")
    assert "mcpeval: server (command: " in Path(log).read_text(encoding="utf-8")
    assert model_server.requests == []


def collection_error(pytester: pytest.Pytester, model_server: ScriptedModelServer, tools_json: str) -> str:
    """A benchmark whose tools_file holds ``tools_json``: a collection error (exit 2), no case run."""
    make_project(pytester, model_server, {"notes.mcpeval.yaml": "server:\n  tools_file: tools.json\n" + NOTES_CASES,
                                          "tools.json": tools_json})
    result = run(pytester, "--mcp-models=fake")
    out = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out, out
    assert result.ret == 2
    result.stdout.fnmatch_lines(["*ERROR collecting notes.mcpeval.yaml*", "*1 error*"])
    assert model_server.requests == []
    return out


def test_tools_file_with_duplicate_tool_names(pytester: pytest.Pytester,
                                              model_server: ScriptedModelServer) -> None:
    tools = [*TOOLS, dict(TOOLS[0], description="Another tool of the same name.")]
    out = collection_error(pytester, model_server, json.dumps(tools, indent=2))
    pytest.LineMatcher(out.splitlines()).fnmatch_lines([
        "notes.mcpeval.yaml:2: server.tools_file: tools_file tools.json is not a valid tool list:",
        "tools.json:33: tools[[]2[]] (`list_notes`).name: `list_notes` is also the name of tools[[]0[]], line 2: tool "
        "names must be unique (a model could not tell the two apart, and providers reject duplicate function names)",
    ])


# -- 7. schemas that are not schemas ------------------------------------------------------------------------


def test_tools_file_with_a_string_schema(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    """Was an AttributeError in scoring, and the cases dropped; now the file is rejected where it is read."""
    tools = [TOOLS[0], {"name": "search_notes", "description": "Search.", "inputSchema": "query: string"},
             {"name": "get_note", "input_schema": {"type": "object"}}]
    out = collection_error(pytester, model_server, json.dumps(tools, indent=2))
    pytest.LineMatcher(out.splitlines()).fnmatch_lines([
        "notes.mcpeval.yaml:2: server.tools_file: tools_file tools.json is not a valid tool list:",
        'tools.json:20: tools[[]1[]] (`search_notes`).inputSchema: expected a JSON Schema object such as {"type": '
        '"object", "properties": {...}}, got a string',
        "tools.json:22: tools[[]2[]] (`get_note`).inputSchema: this field is required: a JSON Schema object such as *"
        " (found `input_schema`: did you mean `inputSchema`?)",
    ])


@pytest.mark.parametrize("source", ["live", "tools_file"])
def test_schema_that_is_not_a_json_schema(pytester: pytest.Pytester, model_server: ScriptedModelServer,
                                          source: str) -> None:
    """An object that is not a valid JSON Schema (a misspelt type, a $ref to nowhere): the evaluation runs and
    scores as usual, and lint says what it could not check (an `unchecked` finding, a warning)."""
    if source == "live":
        server = stdio("bad-schema")
    else:
        bad = [TOOLS[0], {**TOOLS[1], "inputSchema": {"type": "object", "required": ["query"], "properties": {
            "query": {"type": "strng"}, "state": {"$ref": "#/defs/Missing"}}}}]
        (Path(pytester.path) / "tools.json").write_text(json.dumps(bad))
        server = "server:\n  tools_file: tools.json\n"
    outcome = evaluate(pytester, model_server, server, "--mcp-lint")
    assert [outcome.cases[i]["passed"] for i in IDS] == [True, True]
    report = json.loads((Path(pytester.path) / "report.json").read_text())
    (problem,) = report["lint"]["notes.mcpeval.yaml"]["problems"]
    assert problem["kind"] == "unchecked"
    assert problem["message"] == (
        "notes.mcpeval.yaml:10: case `search-dentist`: expect[0].args: cannot check against the schema of "
        "`search_notes`: invalid schema at properties.query.type: 'strng' is not valid under any of the given schemas"
    )
    outcome.result.stdout.fnmatch_lines(["*UncheckedSchemaWarning: case `search-dentist`*", "*3 passed*"])

