"""Real MCP servers of every kind: stdio, streamable HTTP, in-process, and a conftest fixture override."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import NOTES_CASES, make_project, read_report, run

from pytest_mcpeval.testing import ScriptedModelServer

SERVER = '''
import os, sys
from mcp.server import MCPServer

print("SERVER-STDERR-MARKER", file=sys.stderr, flush=True)
server = MCPServer("notes", log_level="WARNING")
SUFFIX = os.environ.get("NOTES_SUFFIX", "")


@server.tool(description="List every note in a folder." + SUFFIX)
def list_notes(folder: str, limit: int = 20) -> list[str]:
    return []


@server.tool(description="Full-text search over all notes.")
def search_notes(query: str) -> list[str]:
    return []


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
'''



def script(server: ScriptedModelServer) -> None:
    server.call("Show the notes in my work folder", "list_notes", folder="work")
    server.call("Which note mentions the dentist?", "search_notes", query="dentist")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "notes_server.py").write_text(SERVER)
    port = free_port()
    log = (tmp_path / "http.log").open("w")
    proc = subprocess.Popen([sys.executable, "notes_server.py", "--http", str(port)], cwd=tmp_path,
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


def check_run(pytester: pytest.Pytester, server: ScriptedModelServer, *args: str) -> pytest.RunResult:
    script(server)
    result = run(pytester, "--mcp-models=fake", "--mcp-report=report.json", *args)
    result.stdout.fnmatch_lines(["*2 passed*"])
    assert "SERVER-STDERR-MARKER" not in result.stdout.str() + result.stderr.str()
    assert result.ret == 0
    tools = [t["function"]["name"] for t in server.requests[0]["tools"]]
    assert tools == ["list_notes", "search_notes"]
    assert read_report(pytester)["models"]["fake"]["accuracy"] == 1.0
    return result


@pytest.mark.parametrize("args", [[], ["-n", "1"]], ids=["no-xdist", "xdist"])
def test_stdio_command(pytester: pytest.Pytester, model_server: ScriptedModelServer, args: list[str]) -> None:
    bench = (f"server:\n  command: [{sys.executable}, notes_server.py]\n  env: {{NOTES_SUFFIX: ' (env)'}}\n"
             + NOTES_CASES)
    make_project(pytester, model_server, {"notes_server.py": SERVER, "notes.mcpeval.yaml": bench})
    check_run(pytester, model_server, *args)
    description = model_server.requests[0]["tools"][0]["function"]["description"]
    assert description == "List every note in a folder. (env)"


def test_stdio_under_no_capture(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    bench = f"server:\n  command: [{sys.executable}, notes_server.py]\n" + NOTES_CASES
    make_project(pytester, model_server, {"notes_server.py": SERVER, "notes.mcpeval.yaml": bench})
    check_run(pytester, model_server, "-s")


def test_streamable_http(pytester: pytest.Pytester, model_server: ScriptedModelServer, http_server: str) -> None:
    bench = f"server:\n  url: {http_server}\n  headers: {{X-Token: '${{NOTES_TOKEN}}'}}\n" + NOTES_CASES
    make_project(pytester, model_server, {"notes.mcpeval.yaml": bench})
    check_run(pytester, model_server)


def test_in_process_python_object(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    bench = "server:\n  python: notes_server:server\n" + NOTES_CASES
    make_project(pytester, model_server, {"evals/notes_server.py": SERVER, "evals/notes.mcpeval.yaml": bench})
    check_run(pytester, model_server, "-p", "no:xdist")


def test_conftest_fixture_overrides_the_file_server(pytester: pytest.Pytester,
                                                   model_server: ScriptedModelServer) -> None:
    conftest = "import pytest\nimport notes_server\n\n@pytest.fixture(scope='session')\n" \
               "def mcp_server():\n    return notes_server.server\n"
    bench = "server:\n  url: http://127.0.0.1:9/unreachable\n" + NOTES_CASES
    make_project(pytester, model_server, {"notes_server.py": SERVER, "conftest.py": conftest,
                                          "notes.mcpeval.yaml": bench})
    check_run(pytester, model_server)


def test_unknown_expected_tool_on_a_live_server(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    bench = "server:\n  python: notes_server:server\n" + NOTES_CASES.replace("tool: search_notes", "tool: search_note")
    make_project(pytester, model_server, {"notes_server.py": SERVER, "notes.mcpeval.yaml": bench})
    script(model_server)
    result = run(pytester, "--mcp-models=fake")
    result.stdout.fnmatch_lines(
        ["*notes.mcpeval.yaml:10: case `search-dentist`: expected tool `search_note` is not published by the "
         "server; did you mean `search_notes`?*", "*1 passed, 1 error*"]
    )
    assert "Traceback" not in result.stdout.str()


def test_missing_python_target(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    bench = "server:\n  python: no_such_module:server\n" + NOTES_CASES
    make_project(pytester, model_server, {"notes.mcpeval.yaml": bench})
    result = run(pytester, "--mcp-models=fake", "--mcp-no-preflight")
    result.stdout.fnmatch_lines(["*cannot import `no_such_module`: ModuleNotFoundError*; its log: *server-0.log",
                                 "*2 error*"])
    assert "Traceback" not in result.stdout.str()
    assert "ModuleNotFoundError: No module named 'no_such_module'" in server_log(result)


# -- failures: one line in pytest's output, the whole story in the server's log ---------------------------------


def server_log(result: pytest.RunResult) -> str:
    """The log that the (one) server error of a run names."""
    logs = set(re.findall(r"; its log: (\S+\.log)", result.stdout.str()))
    assert len(logs) == 1, result.stdout.str()
    return Path(logs.pop()).read_text(encoding="utf-8")


def test_stdio_server_that_crashes_at_start_up(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    crash = "import sys\nprint('SERVER-STDERR-MARKER', file=sys.stderr)\nraise RuntimeError('BOOM-AT-START')\n"
    bench = f"server:\n  command: [{sys.executable}, crash_server.py]\n" + NOTES_CASES
    make_project(pytester, model_server, {"crash_server.py": crash, "notes.mcpeval.yaml": bench})
    result = run(pytester, "--mcp-models=fake", "--mcp-no-preflight")
    result.stdout.fnmatch_lines([
        "*could not connect to the server (command: * crash_server.py): the server closed the connection during "
        "the MCP handshake (its process ended with exit code 1); the last line of its stderr: RuntimeError: "
        "BOOM-AT-START; its log: *server-0.log",
        "*2 error*",
    ])
    assert "Traceback" not in result.stdout.str() and "SERVER-STDERR-MARKER" not in result.stdout.str()
    log = server_log(result)
    server_traceback = 'crash_server.py", line 3, in <module>\n    raise RuntimeError(\'BOOM-AT-START\')\n'
    assert "SERVER-STDERR-MARKER\nTraceback (most recent call last):\n" in log
    assert server_traceback in log and "RuntimeError: BOOM-AT-START" in log  # the server's own, from its stderr
    assert "mcpeval: could not connect to the server (command: " in log  # then the client's, the whole group
    assert "Exception Group Traceback" in log and "MCPError: Connection closed" in log
    assert model_server.requests == []


def test_python_target_whose_import_raises(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    broken = "import os\n\n\ndef boom():\n    raise RuntimeError('BOOM-AT-IMPORT')\n\n\nboom()\n"
    bench = "server:\n  python: broken_server:server\n" + NOTES_CASES
    make_project(pytester, model_server, {"broken_server.py": broken, "notes.mcpeval.yaml": bench})
    result = run(pytester, "--mcp-models=fake", "--mcp-no-preflight")
    result.stdout.fnmatch_lines([
        "*cannot import `broken_server`: RuntimeError: BOOM-AT-IMPORT; its log: *server-0.log", "*2 error*",
    ])
    assert "Traceback" not in result.stdout.str()
    log = server_log(result)
    assert log.startswith("mcpeval: cannot import `broken_server`: RuntimeError: BOOM-AT-IMPORT\n"
                          "Traceback (most recent call last):\n")
    assert 'broken_server.py", line 8, in <module>\n    boom()\n' in log
    assert 'broken_server.py", line 5, in boom\n' in log
    assert log.endswith("RuntimeError: BOOM-AT-IMPORT\n")


def test_unreachable_url(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    make_project(pytester, model_server, {"notes.mcpeval.yaml": f"server:\n  url: {url}\n" + NOTES_CASES})
    result = run(pytester, "--mcp-models=fake", "--mcp-no-preflight")
    result.stdout.fnmatch_lines([
        f"*could not connect to the server (url: {url}): ConnectError: All connection attempts failed; "
        "its log: *server-0.log",
        "*2 error*",
    ])
    log = server_log(result)
    assert log.startswith(f"mcpeval: could not connect to the server (url: {url})\n")
    assert "Exception Group Traceback" in log and "streamable_http" in log
    assert "ConnectError: All connection attempts failed\n" in log


def test_fixture_object_that_cannot_connect(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    conftest = "import pytest\n\n@pytest.fixture(scope='session')\ndef mcp_server():\n    return object()\n"
    bench = "server:\n  url: http://127.0.0.1:9/unused\n" + NOTES_CASES
    make_project(pytester, model_server, {"conftest.py": conftest, "notes.mcpeval.yaml": bench})
    result = run(pytester, "--mcp-models=fake")
    result.stdout.fnmatch_lines([
        "*could not connect to the server (fixture object): TypeError: *; its log: *server-fixture.log", "*2 error*",
    ])
    log = server_log(result)
    assert log.startswith("mcpeval: could not connect to the server (fixture object)\nTraceback")
    assert "TypeError: 'builtins.object' object does not support the asynchronous context manager protocol" in log


def test_what_the_plugin_writes_to_a_server_log_is_masked(tmp_path: Path) -> None:
    """The failures the plugin appends to a server's log (headline and traceback) go through the run's
    redactor: a secret value, or a token in a URL, never reaches the file."""
    from pytest_mcpeval import redact
    from pytest_mcpeval.server_log import write_log

    before = redact._current
    redact.use(redact.Redactor(["s3cr3t-value-1234"]))
    try:
        try:
            raise ConnectionError("https://mcp.test/sse?token=abcdefgh12345 refused s3cr3t-value-1234")
        except ConnectionError as exc:
            write_log(tmp_path / "server.log", "connecting with key s3cr3t-value-1234 failed", exc)
    finally:
        redact.use(before)
    text = (tmp_path / "server.log").read_text()
    assert "s3cr3t-value-1234" not in text and "abcdefgh12345" not in text
    assert "mcpeval: connecting with key REDACTED failed" in text and "?token=REDACTED" in text
    assert "ConnectionError" in text and "Traceback" in text


def test_an_in_process_servers_directory_leaves_sys_path_when_it_closes(tmp_path: Path) -> None:
    """``python: module:attr`` puts the benchmark's directory on ``sys.path`` while its server runs (its tools may
    import their own modules when called), and takes it off once the last server imported through it closes; a
    failed import leaves nothing behind."""
    from pytest_mcpeval.benchmark.schema import ServerSpec
    from pytest_mcpeval.servers import ServerError, ServerPool

    (tmp_path / "notes_server_path.py").write_text(SERVER)
    spec = ServerSpec(python="notes_server_path:server")
    here = str(tmp_path)
    assert here not in sys.path
    pool = ServerPool(tmp_path / "logs", timeout=30)
    try:
        catalog = pool.catalog_for_spec(spec, tmp_path, tmp_path)
        assert {"list_notes", "search_notes"} <= set(catalog.names)
        assert sys.path.count(here) == 1  # while the server runs
    finally:
        pool.close()
        sys.modules.pop("notes_server_path", None)
    assert here not in sys.path
    with pytest.raises(ServerError, match="cannot import `no_such_module_here`"):
        ServerPool(tmp_path / "logs").catalog_for_spec(ServerSpec(python="no_such_module_here:server"), tmp_path,
                                                       tmp_path)
    assert here not in sys.path


def test_every_server_block_key_but_tools_file_is_a_transport() -> None:
    """The one table of transports: the server block's "exactly one of" keys are derived from it, in the order
    the messages (and docs/format.md) give them."""
    from pytest_mcpeval.transports import SOURCE_KEYS, TRANSPORTS, Http, InProcess, Stdio

    assert SOURCE_KEYS == ("tools_file", "command", "url", "python")
    assert {key: t.spec for key, t in TRANSPORTS.items()} == {"command": Stdio, "url": Http, "python": InProcess}
