"""``--mcp-overlay`` under faults (issue 30, items 7 and 9).

- The overlay's check reads the catalogs pre-flight listed: each server starts once for the checks (it started
  a third time, one server after another), a dead server is the pre-flight's line within
  ``--mcp-connect-timeout`` (70.7 s before, against 7.8 s without an overlay), and no ``mcpeval-overlay-*``
  folder is left in the temporary directory.
- ``--mcp-tools --mcp-overlay`` with a misspelt tool says so, with a did-you-mean (it said nothing).
- ``--snapshot-update --mcp-snapshots --mcp-overlay`` is refused: the snapshots would record the overlay's
  descriptions as the server's, and the next plain run would fail.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import make_project, run
from test_preflight import COUNTING_SERVER  # a stdio server that counts its starts in starts.txt

from pytest_mcpeval.testing import ScriptedModelServer

HANG = "import time\ntime.sleep(120)\n"
CASES = "cases:\n  - id: q0\n    input: who am i\n    expect: [{tool: get_me}]\n"
OVERLAY = "version: 1\ntools:\n  get_me: {description: 'The signed-in user.'}\n"
GET_ME = {"tool_calls": [{"name": "get_me", "arguments": {}}]}


def server(script: str) -> str:
    return f"server: {{command: [{json.dumps(sys.executable)}, {script}]}}\n"


@pytest.fixture
def temporary(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own temporary directory (the folders the checks make in it are counted)."""
    folder = pytester.path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_the_overlay_check_starts_no_server_of_its_own_and_leaves_no_folder(
        pytester: pytest.Pytester, model_server: ScriptedModelServer, temporary: Path) -> None:
    files = {f"{name}.mcpeval.yaml": server("counting.py") + CASES.replace("q0", name) for name in "ab"}
    make_project(pytester, model_server, {"counting.py": COUNTING_SERVER, "overlay.yaml": OVERLAY, **files})
    model_server.script("*", GET_ME)
    result = run(pytester, "--mcp-models=fake", "--mcp-record=off", "--mcp-overlay=overlay.yaml")
    assert result.ret == 0, result.stdout.str()
    assert (pytester.path / "starts.txt").read_text().count("start") == 2  # pre-flight's, the run's (was 3)
    assert sent_description(model_server) == "The signed-in user."
    assert sorted(p.name for p in temporary.iterdir()) == []  # no mcpeval-overlay-* nor mcpeval-preflight-*
    # without the pre-flight, the overlay's check lists the catalog itself: once, and leaves nothing either
    result = run(pytester, "--mcp-models=fake", "--mcp-record=off", "--mcp-overlay=overlay.yaml",
                 "--mcp-no-preflight")
    assert result.ret == 0, result.stdout.str()
    assert (pytester.path / "starts.txt").read_text().count("start") == 4
    assert sorted(p.name for p in temporary.iterdir()) == []


def sent_description(model_server: ScriptedModelServer) -> str:
    tools = model_server.requests[-1]["tools"]
    assert isinstance(tools, list)
    return str(tools[0]["function"]["description"])


def test_a_dead_server_is_the_preflight_line_within_the_connect_timeout(
        pytester: pytest.Pytester, model_server: ScriptedModelServer, temporary: Path) -> None:
    files = {f"{name}.mcpeval.yaml": server("hang.py") + CASES.replace("q0", name) for name in "abc"}
    make_project(pytester, model_server, {"hang.py": HANG, "overlay.yaml": OVERLAY, **files})
    started = time.monotonic()
    result = run(pytester, "--mcp-models=fake", "--mcp-overlay=overlay.yaml", "--mcp-connect-timeout=2")
    took = time.monotonic() - started
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: pre-flight check failed, no model was called*",
                                 "  server of a.mcpeval.yaml (command: *hang.py): * within 2 s*"])
    assert took < 20, took  # three servers at once, 2 s each (was 60 s each, one after another, first)
    assert model_server.requests == []
    assert [p.name.startswith("mcpeval-preflight-") for p in temporary.iterdir()] == [True]  # its logs, named


def test_mcp_tools_with_a_misspelt_overlay_tool_says_so(pytester: pytest.Pytester,
                                                        model_server: ScriptedModelServer) -> None:
    tools = [{"name": "get_me", "description": "Who am I", "inputSchema": {"type": "object", "properties": {}}}]
    make_project(pytester, model_server, {"a.mcpeval.yaml": "server: {tools_file: tools.json}\n" + CASES,
                                          "overlay.yaml": OVERLAY.replace("get_me", "get_mee")}, tools=tools)
    result = run(pytester, "--mcp-tools", "--mcp-overlay=overlay.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines == ["ERROR: --mcp-overlay=overlay.yaml: tool `get_mee` is not in the catalog; did you "
                                   "mean `get_me`?", ""]


def test_snapshot_update_with_an_overlay_is_refused(pytester: pytest.Pytester,
                                                    model_server: ScriptedModelServer) -> None:
    tools = [{"name": "get_me", "description": "Who am I", "inputSchema": {"type": "object", "properties": {}}}]
    make_project(pytester, model_server, {"a.mcpeval.yaml": "server: {tools_file: tools.json}\n" + CASES,
                                          "overlay.yaml": OVERLAY}, tools=tools)
    result = run(pytester, "--mcp-snapshots", "--snapshot-update", "--mcp-overlay=overlay.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines == [
        "ERROR: --mcp-overlay=overlay.yaml with --snapshot-update: the catalog snapshots would record the overlay's "
        "descriptions as the server's; update them without --mcp-overlay", ""]
    assert not (pytester.path / "__snapshots__").exists()
