"""Secrets (issue 19, item 3): no secret the user gave the plugin reaches anything the plugin writes or prints.

Each test runs the plugin as a user runs it, with a secret on one path in (a model parameter deep in
``extra_body``, a flag of a stdio server's command, a server's ``env:``, a token in an MCP URL's path, an HTTP
header), arranges for the secret to be echoed back (a dying server prints it, a server rejects it in its
answer, a model repeats it), and then reads every file the run wrote (the project: report, baseline,
Markdown, HTML, junit XML, the response cache; and ``basetemp``: the servers' logs) and its terminal output:
the secret is in none of them, and REDACTED stands where it was.  The secrets have no known key shape, so
only masking by value can catch them.

And item 12 in part: a server that writes megabytes to its stderr gets a log capped at ``STDERR_CAP`` bytes,
with a marker and its last lines, and the run is not held up by it.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import GITHUB_TOOLS, NOTES_CASES, get_me_cases, make_project, read_report, run

from pytest_mcpeval.testing import ScriptedModelServer

SESSION = "Qm7vTz2pLx9rWb4n"  # no key shape (sk-..., ghp_...): only masking by value catches these
X_API_KEY = "Hd8sKq3mZt6yVc1x"
FLAG_KEY = "Rn5wBj8fTq2kXm7p"
FLAG_TOKEN = "Wz4cNv9hLs3dGq6t"
ENV_PASSWORD = "Pb2xMk7rJw5nYt8s"
PATH_TOKEN = "a1B2c3D4e5F6g7H8i9J0kLmN"  # 24 URL-safe characters, letters and digits: a token-like segment
HEADER_TOKEN = "Ty6pQc1vSd8mBn3k"
HEADER_KEY = "Lg9tHw4zFx2rPk5c"
ARTIFACTS = ("--mcp-report=report.json", "--mcp-markdown=summary.md", "--mcp-save-baseline=baseline.json",
             "--mcp-html=report.html", "--junitxml=junit.xml", "-rA", "-v")


def files_of(pytester: pytest.Pytester) -> dict[Path, float]:
    """Every file of the project and of ``basetemp`` (in-process pytester runs put it beside the project), with
    its modification time; not ``__pycache__`` (Python's, of the test's own scripts)."""
    found: dict[Path, float] = {}
    for root in (pytester.path, pytester.path.parent / "basetemp"):
        for path in root.rglob("*") if root.exists() else ():
            if path.is_file() and "__pycache__" not in path.parts:
                found[path] = path.stat().st_mtime
    return found


def leaks(pytester: pytest.Pytester, before: dict[Path, float], result: pytest.RunResult,
          secrets: list[str]) -> dict[str, list[str]]:
    """Which secrets are in which file the run wrote (or changed), and in its terminal output."""
    texts = {str(path.relative_to(pytester.path.parent)): path.read_bytes().decode("utf-8", "replace")
             for path, mtime in files_of(pytester).items() if before.get(path) != mtime}
    texts["terminal"] = "\n".join(result.stdout.lines + result.stderr.lines)
    found = {name: [s for s in secrets if s in text] for name, text in texts.items()}
    return {name: hits for name, hits in found.items() if hits}


def written(pytester: pytest.Pytester, pattern: str) -> list[str]:
    return [p.read_text(encoding="utf-8") for p in sorted(pytester.path.rglob(pattern))]


def server_logs(pytester: pytest.Pytester) -> str:
    """The servers' logs of the last run (with xdist, each worker's are under its own ``popen-gwN``; the
    ``...current`` links of pytest's numbered directories are skipped)."""
    logs = (pytester.path.parent / "basetemp").rglob("server-*.log")
    return "".join(p.read_text(encoding="utf-8") for p in sorted(logs)
                   if not any(part.endswith("current") for part in p.parts))


# -- model parameters: extra_body.session_auth and extra_body["x-api-key"] ------------------------------------


def test_secrets_deep_in_model_params_reach_neither_the_cache_nor_the_report(
        pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    """``extra_body.session_auth`` and ``extra_body["x-api-key"]`` are sent as given, and stored nowhere: the
    cache entry's ``params_sent`` has them masked (the cache is meant to be committed), as do the report's
    ``run.models`` params; a reply that echoes one (a model repeating the key) is stored masked too.  A second
    run replays every entry: the keys did not change."""
    params = {"api_base": model_server.api_base, "api_key": "not-a-key",
              "extra_body": {"session_auth": SESSION, "x-api-key": X_API_KEY}}
    (pytester.path / "pytest.ini").write_text(
        f"[pytest]\nmcp_model_aliases = fake = openai/fake\nmcp_model_params = fake = {json.dumps(params)}\n")
    (pytester.path / "tools.json").write_text(GITHUB_TOOLS.read_text())
    (pytester.path / "bench.mcpeval.yaml").write_text(get_me_cases(2))
    model_server.script("*", {"tool_calls": [{"name": "get_me", "arguments": {}}]})
    model_server.script("q question 1", {"content": f"Your session {SESSION} is noted.",
                                         "tool_calls": [{"name": "get_me", "arguments": {}}]})
    before = files_of(pytester)
    result = run(pytester, "--mcp-models=fake", *ARTIFACTS)
    assert result.ret == 0, result.stdout.str()
    sent = model_server.requests[0]
    assert (sent["session_auth"], sent["x-api-key"]) == (SESSION, X_API_KEY)  # they were used
    assert leaks(pytester, before, result, [SESSION, X_API_KEY]) == {}
    entries = [json.loads(text) for text in written(pytester, ".mcpeval/cache/*/*/*.json")]
    assert len(entries) == 2
    masked = {"session_auth": "REDACTED", "x-api-key": "REDACTED"}
    assert [e["params_sent"]["extra_body"] for e in entries] == [masked, masked]
    assert sorted(e["reply"]["content"] or "" for e in entries) == ["", "Your session REDACTED is noted."]
    run_ = read_report(pytester)["run"]["models"]["fake"]
    assert run_["params"]["extra_body"] == masked and run_["params_sent"]["extra_body"] == masked

    replay = run(pytester, "--mcp-models=fake", "--mcp-record=none", "--mcp-report=report.json")
    assert replay.ret == 0, replay.stdout.str()
    assert len(model_server.requests) == 2  # none more: both replayed
    assert {c["usage"]["cached"] for c in read_report(pytester)["cases"]} == {True}


# -- a stdio server's command line and env:, echoed as it dies ------------------------------------------------

DYING_SERVER = r'''
"""Prints how it was started (its command line, its password from the environment), then dies."""
import os, sys
print(f"starting with {' '.join(sys.argv[1:])}", file=sys.stderr, flush=True)
print(f"FATAL: the database refused the password {os.environ.get('DB_PASSWORD')}", file=sys.stderr, flush=True)
sys.exit(3)
'''


@pytest.mark.parametrize(("where", "xdist_args"), [("command", []), ("env", []), ("command", ["-n", "1"])],
                         ids=["command", "env", "command-xdist"])
def test_a_dying_stdio_servers_command_line_and_env_are_masked_everywhere(
        pytester: pytest.Pytester, model_server: ScriptedModelServer, xdist_args: list[str], where: str) -> None:
    """``--api-key=VALUE`` and ``--token VALUE`` in a server's ``command`` (which the error names), and a
    ``DB_PASSWORD`` of its ``env:`` that the dying server prints on stderr (which the error quotes): none of them
    in the report, baseline, Markdown, HTML, junit XML, terminal or the server's log; with xdist the workers
    learn them as they collect the file."""
    if where == "command":
        server = (f"server:\n  command: [{sys.executable}, dying.py, --api-key={FLAG_KEY}, --token, {FLAG_TOKEN}]\n")
        secrets = [FLAG_KEY, FLAG_TOKEN]
    else:
        server = f"server:\n  command: [{sys.executable}, dying.py]\n  env: {{DB_PASSWORD: {ENV_PASSWORD}}}\n"
        secrets = [ENV_PASSWORD]
    make_project(pytester, model_server, {"dying.py": DYING_SERVER, "notes.mcpeval.yaml": server + NOTES_CASES})
    before = files_of(pytester)
    # the pre-flight check meets the dying server first: its one line is masked too
    result = run(pytester, "--mcp-models=fake", "--mcp-connect-timeout=5", *ARTIFACTS, *xdist_args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*server of notes.mcpeval.yaml*REDACTED*"])
    assert leaks(pytester, before, result, secrets) == {}
    # past the check (a server that dies as the cases run): every artefact
    result = run(pytester, "--mcp-models=fake", "--mcp-connect-timeout=5", *ARTIFACTS, "--mcp-no-preflight",
                 *xdist_args)
    cases = read_report(pytester)["cases"]
    assert [c["error"] is not None for c in cases] == [True, True]
    error = cases[0]["error"]
    assert "the last line of its stderr: FATAL: the database refused the password" in error
    if where == "command":
        assert "dying.py --api-key=REDACTED --token REDACTED): the server closed" in error
        assert "starting with --api-key=REDACTED --token REDACTED\n" in server_logs(pytester)
    else:
        assert error.split("; its log: ")[0].endswith("refused the password REDACTED")
        assert "FATAL: the database refused the password REDACTED\n" in server_logs(pytester)
    assert leaks(pytester, before, result, secrets) == {}
    assert "REDACTED" in (pytester.path / "report.html").read_text() and "REDACTED" in (
        pytester.path / "junit.xml").read_text()
    assert stderr_readers() == []  # each ended with its server


def stderr_readers() -> list[str]:
    """The threads reading a server's stderr (server_log.StderrPipe) still alive in this process."""
    return [t.name for t in threading.enumerate() if t.name.startswith("mcpeval-stderr")]


REPORT_HOOK = """
from pathlib import Path


def pytest_mcpeval_report(config, report):
    raise RuntimeError("the server block was: " + Path("notes.mcpeval.yaml").read_text().split("cases:")[0])
"""


def test_the_xdist_controller_masks_with_what_its_workers_learnt(pytester: pytest.Pytester,
                                                                  model_server: ScriptedModelServer) -> None:
    """With ``-n 2`` the controller collects no benchmark file, yet what it writes itself (here the gate line of a
    ``pytest_mcpeval_report`` hook that quotes the server block) is masked with the secrets its workers learnt
    from the file: they hand them over in ``workeroutput``."""
    server = f"server:\n  command: [{sys.executable}, dying.py, --api-key={FLAG_KEY}]\n"
    make_project(pytester, model_server, {"dying.py": DYING_SERVER, "notes.mcpeval.yaml": server + NOTES_CASES,
                                          "conftest.py": REPORT_HOOK})
    before = files_of(pytester)
    result = run(pytester, "--mcp-models=fake", "--mcp-connect-timeout=5", *ARTIFACTS, "-n", "2", "--mcp-no-preflight")
    failures = read_report(pytester)["gate"]["failures"]
    assert any("a pytest_mcpeval_report hook raised RuntimeError: the server block was:" in f
               and "--api-key=REDACTED" in f for f in failures), failures
    assert leaks(pytester, before, result, [FLAG_KEY]) == {}


# -- an HTTP server: a token in the URL's path, credentials in headers, echoed in its answer ---------------------


class _Rejecting(BaseHTTPRequestHandler):
    """An MCP endpoint that refuses every request with a JSON-RPC error naming the credentials it was given."""

    def do_POST(self) -> None:  # http.server calls it by this name
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        message = (f"access denied for {self.headers.get('Authorization')} "
                   f"(key {self.headers.get('X-Api-Key')}) at {self.path}")
        answer = json.dumps({"jsonrpc": "2.0", "id": body.get("id"),
                             "error": {"code": -32001, "message": message}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def rejecting_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Rejecting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


def test_a_token_in_an_mcp_urls_path_and_its_headers_are_masked_everywhere(
        pytester: pytest.Pytester, model_server: ScriptedModelServer, rejecting_server: str,
        xdist_args: list[str]) -> None:
    """The URL's token-like path segment (the error names the server by its URL) and the values of its
    ``Authorization`` and ``X-Api-Key`` headers (the server's answer repeats them): masked everywhere, with
    xdist too."""
    server = (f"server:\n  url: {rejecting_server}/mcp/{PATH_TOKEN}\n"
              f"  headers: {{Authorization: Bearer {HEADER_TOKEN}, X-Api-Key: {HEADER_KEY}}}\n")
    make_project(pytester, model_server, {"notes.mcpeval.yaml": server + NOTES_CASES})
    before = files_of(pytester)
    result = run(pytester, "--mcp-models=fake", "--mcp-connect-timeout=5", *ARTIFACTS, "--mcp-no-preflight",
                 *xdist_args)
    cases = read_report(pytester)["cases"]
    error = cases[0]["error"]
    assert error.startswith(f"could not connect to the server (url: {rejecting_server}/mcp/REDACTED): "), error
    assert "access denied for REDACTED (key REDACTED) at /mcp/REDACTED" in error
    assert leaks(pytester, before, result, [PATH_TOKEN, HEADER_TOKEN, HEADER_KEY]) == {}
    assert "/mcp/REDACTED" in (pytester.path / "report.html").read_text()


def test_a_url_that_an_mcp_server_fixture_returns_is_masked(pytester: pytest.Pytester,
                                                            model_server: ScriptedModelServer,
                                                            rejecting_server: str) -> None:
    """The ``mcp_server`` fixture's URL is learnt when it is connected: its path token is masked as a file's."""
    make_project(pytester, model_server, {
        "conftest.py": "import pytest\n\n@pytest.fixture(scope='session')\ndef mcp_server():\n"
                       f"    return '{rejecting_server}/mcp/{PATH_TOKEN}'\n",
        "notes.mcpeval.yaml": NOTES_CASES})
    before = files_of(pytester)
    result = run(pytester, "--mcp-models=fake", "--mcp-connect-timeout=5", *ARTIFACTS, "--mcp-no-preflight")
    assert "/mcp/REDACTED" in read_report(pytester)["cases"][0]["error"]
    found = leaks(pytester, before, result, [PATH_TOKEN])
    assert found == {}


# -- item 12 (part): a server's stderr log is capped ------------------------------------------------------------

LOUD_SERVER = r'''
"""A working MCP server over stdio that first writes about 5 MB to stderr, then its last words."""
import json, sys
for i in range(50_000):
    sys.stderr.write(f"debug line {i:06d} " + "x" * 80 + "\n")
print("LAST: ready", file=sys.stderr, flush=True)
TOOLS = [{"name": n, "description": d, "inputSchema": {"type": "object", "properties": {a: {"type": "string"}}}}
         for n, d, a in (("list_notes", "List every note in a folder.", "folder"),
                         ("search_notes", "Full-text search over all notes.", "query"))]
for line in sys.stdin:
    request = json.loads(line)
    rid, method = request.get("id"), request.get("method")
    if rid is None:
        continue
    if method == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "loud", "version": "0"}}
        answer = {"jsonrpc": "2.0", "id": rid, "result": result}
    elif method == "tools/list":
        answer = {"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}}
    else:
        answer = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "unknown method"}}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
'''


def test_a_servers_stderr_log_is_capped_and_the_server_never_blocks(pytester: pytest.Pytester,
                                                                     model_server: ScriptedModelServer) -> None:
    """5 MB on stderr before the handshake: the server is drained all the while (it would block on a full pipe
    otherwise, and the connection time out), the cases are scored, and its log keeps the first megabyte, one
    marker line saying how much was cut, and the last lines."""
    from pytest_mcpeval.server_log import STDERR_CAP

    server = f"server:\n  command: [{sys.executable}, loud.py]\n"
    make_project(pytester, model_server, {"loud.py": LOUD_SERVER, "notes.mcpeval.yaml": server + NOTES_CASES})
    model_server.call("Show the notes in my work folder", "list_notes", folder="work")
    model_server.call("Which note mentions the dentist?", "search_notes", query="dentist")
    started = time.perf_counter()
    result = run(pytester, "--mcp-models=fake", "--mcp-connect-timeout=20", "--mcp-report=report.json")
    elapsed = time.perf_counter() - started
    assert result.ret == 0, result.stdout.str()
    assert [c["passed"] for c in read_report(pytester)["cases"]] == [True, True]
    log = server_logs(pytester)
    assert STDERR_CAP <= len(log.encode()) < STDERR_CAP + 10_000
    assert log.startswith("debug line 000000 ")
    lines = log.splitlines()
    marker = next(i for i, line in enumerate(lines) if "bytes of its stderr cut by pytest-mcpeval" in line)
    assert lines[marker].startswith("mcpeval: ... [")
    cut = int(lines[marker].split("[", 1)[1].split(" bytes", 1)[0].replace(",", ""))
    assert 3_900_000 < cut < 4_100_000  # 50,000 lines of 99 bytes, less the megabyte kept and the tail
    assert lines[marker + 1:] == [f"debug line {i:06d} " + "x" * 80 for i in range(49_981, 50_000)] + ["LAST: ready"]
    assert elapsed < 15  # the 5 MB cost well under a second to drain; the bound is for a loaded machine
    assert stderr_readers() == []
