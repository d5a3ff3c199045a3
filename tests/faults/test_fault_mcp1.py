"""A stdio server written for mcp 1.x, started where the plugin's mcp 2.x is installed (issue 23, item 3).

Installing pytest-mcpeval into a server's environment upgrades its ``mcp`` to 2.x, and a 1.x server then dies
at import.  These servers are real scripts of mcp 1.x code run with this venv's Python (mcp 2.3), so they die
as such a server dies here: the low-level ``Server`` lost its ``list_resources()`` decorator (what
mcp-server-sqlite from PyPI met), and ``mcp.server.fastmcp`` is gone.  The one-line error quotes the last line
of the server's stderr and then says what to do; in the pre-flight check, which quotes the same error, and in
the run (``--mcp-no-preflight``).  A server whose Python has no mcp at all is told so; one that dies of another
missing module gets no hint.
"""

from __future__ import annotations

import json
import sys
from fnmatch import fnmatchcase

import pytest
from conftest import NOTES_CASES, make_project, read_report, run

from pytest_mcpeval.testing import ScriptedModelServer

LOWLEVEL_V1 = '''\
from mcp.server.lowlevel import Server

server = Server("notes")


@server.list_resources()  # mcp 1.x: a decorator; mcp 2.x passes handlers to Server(...)
async def resources():
    return []
'''
FASTMCP_V1 = '''\
from mcp.server.fastmcp import FastMCP  # mcp 1.x; mcp 2.x calls it MCPServer

mcp = FastMCP("notes")
mcp.run()
'''
OTHER = "import notes_database_driver_xyz\n"
HINT = ("; it looks written for mcp 1.x and ran with mcp 2.x: a stdio server runs from its own environment "
        "(command: [path/to/its/venv/bin/python, -m, ...]), and installing pytest-mcpeval (mcp 2.x) into "
        "that environment upgrades its mcp (README: Servers built on mcp 1.x); its log: *"
        ).replace("[", "[[]")  # for fnmatch
LAST_LINES = {
    "lowlevel": "AttributeError: 'Server' object has no attribute 'list_resources'",
    "fastmcp": "ModuleNotFoundError: No module named 'mcp.server.fastmcp'. This is mcp 2.x, where FastMCP was renamed*",
}
SCRIPTS = {"lowlevel": LOWLEVEL_V1, "fastmcp": FASTMCP_V1}


def project(pytester: pytest.Pytester, model_server: ScriptedModelServer, source: str, *flags: str) -> None:
    command = ", ".join(json.dumps(part) for part in (sys.executable, *flags, "server.py"))
    bench = f"server: {{command: [{command}]}}\n" + NOTES_CASES
    make_project(pytester, model_server, {"server.py": source, "notes.mcpeval.yaml": bench})


@pytest.mark.parametrize("kind", ["lowlevel", "fastmcp"])
def test_the_run_says_a_server_of_mcp1_needs_its_own_environment(
        pytester: pytest.Pytester, model_server: ScriptedModelServer, kind: str) -> None:
    project(pytester, model_server, SCRIPTS[kind])
    result = run(pytester, "--mcp-models=fake", "--mcp-no-preflight", "--mcp-report=report.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    errors = {c["error"] for c in read_report(pytester)["cases"]}
    assert len(errors) == 1  # both cases, one message
    (error,) = errors
    assert fnmatchcase(error, f"could not connect to the server (command: *server.py): the server closed the "
                              f"connection during the MCP handshake (its process ended with exit code 1); the last "
                              f"line of its stderr: {LAST_LINES[kind]}{HINT}"), error
    assert "Traceback" not in result.stdout.str()
    assert model_server.requests == []


@pytest.mark.parametrize("kind", ["lowlevel", "fastmcp"])
def test_the_preflight_check_says_it_too(pytester: pytest.Pytester, model_server: ScriptedModelServer,
                                         kind: str) -> None:
    project(pytester, model_server, SCRIPTS[kind])
    result = run(pytester, "--mcp-models=fake")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"  server of notes.mcpeval.yaml (command: *server.py): could not connect to the "
                                 f"server *; the last line of its stderr: {LAST_LINES[kind]}{HINT}"])
    assert model_server.requests == []


def test_another_missing_module_gets_no_hint(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    project(pytester, model_server, OTHER)
    result = run(pytester, "--mcp-models=fake")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*the last line of its stderr: ModuleNotFoundError: No module named "
                                 "'notes_database_driver_xyz'; its log: *"])
    assert "mcp 1.x" not in result.stderr.str()


def test_a_python_without_mcp_is_named(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    """`command: [python, ...]` is the python on PATH, which may be one without mcp (a venv not activated):
    here this venv's Python without its site-packages (-S)."""
    project(pytester, model_server, FASTMCP_V1, "-S")
    result = run(pytester, "--mcp-models=fake")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*the last line of its stderr: ModuleNotFoundError: No module named 'mcp'; the Python "
                                 "that ran it has no mcp (a bare `python` in command is the one on PATH): start it "
                                 "with its own environment's Python (command: [[]path/to/its/venv/bin/python, ...]); "
                                 "its log: *"])
    assert "mcp 1.x" not in result.stderr.str()
