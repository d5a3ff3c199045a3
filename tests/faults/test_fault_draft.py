"""``python -m pytest_mcpeval draft`` under faults (issue 31), as a user runs it (``main([...])``), the drafter the
public ``ScriptedModelServer``:

- a drafter that fails every attempt (HTTP 500): one line naming the model, exit 3, nothing written; one that
  answered before and then fails: that target is said and drafts nothing, the others are kept;
- a drafter's HTML error page: one line, nothing drafted, nothing cached (a rerun asks again), nothing written (an
  empty benchmark file would fail the next pytest's collection);
- a server that exits at start: one line, exit 3;
- a drafted argument the file format reads as a matcher (``{"regex": "("}``): that draft is dropped as an
  ``invalid case``, never a traceback, never a file that does not load.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pytest_mcpeval.__main__ import main
from pytest_mcpeval.testing import ScriptedModelServer

TOOLS = [{"name": "search_notes", "description": "Search notes by words.",
          "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}},
         {"name": "list_notes", "description": "List every note.", "inputSchema": {"type": "object"}}]
BENCH = """version: 1
server: {tools_file: tools.json}
cases:
  - id: s1
    input: Which note mentions the dentist?
    expect: [{tool: search_notes, args: {query: dentist}}]
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tools.json").write_text(json.dumps(TOOLS))
    (tmp_path / "b.mcpeval.yaml").write_text(BENCH)
    return tmp_path


def draft(server: ScriptedModelServer, *args: str) -> int:
    params = json.dumps({"api_base": server.api_base, "api_key": "not-a-key"})
    return main(["draft", "b.mcpeval.yaml", "--model=openai/drafter", f"--model-params={params}", "--timeout=5",
                 *args])


def test_a_failing_drafter_is_one_line_and_exit_3(project: Path, model_server: ScriptedModelServer,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    model_server.script("*", {"status": 500, "error": "overloaded"})
    assert draft(model_server, "--tools=search_notes") == 3
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith("python -m pytest_mcpeval draft: --model=openai/drafter: ")
    assert "500" in last
    assert not (project / "drafts.mcpeval.yaml").exists()


def test_an_html_page_drafts_nothing_and_is_not_cached(project: Path, model_server: ScriptedModelServer,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    model_server.script("*", {"content": "<html><title>502 Bad Gateway</title></html>"})
    assert draft(model_server, "--tools=search_notes") == 0
    captured = capsys.readouterr()
    assert ("draft: nothing drafted for `search_notes`: its reply holds no request with arguments (expected "
            "{\"cases\": [{\"request\": ..., \"arguments\": {...}}]}): '<html><title>502 Bad Gateway</title></html>'"
            ) in captured.err
    assert captured.out.splitlines()[-2:] == ["  1 reply held no draft", "no draft kept; nothing written to "
                                              "drafts.mcpeval.yaml"]
    assert not (project / "drafts.mcpeval.yaml").exists()
    asked = len(model_server.requests)
    assert draft(model_server, "--tools=search_notes") == 0
    assert len(model_server.requests) == asked + 1  # asked again: nothing was cached


def test_a_server_that_exits_at_start_is_one_line_and_exit_3(project: Path, model_server: ScriptedModelServer,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    command = json.dumps([sys.executable, "-c", "import sys; print('no config', file=sys.stderr); sys.exit(3)"])
    (project / "b.mcpeval.yaml").write_text(BENCH.replace("{tools_file: tools.json}", f"{{command: {command}}}"))
    assert draft(model_server) == 3
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert err[0].startswith("python -m pytest_mcpeval draft: b.mcpeval.yaml: the server did not give its tools: ")
    assert model_server.requests == []


def test_an_argument_read_as_a_matcher_drops_its_draft(project: Path, model_server: ScriptedModelServer,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    reply = {"cases": [{"request": "Notes about the garage door", "arguments": {"query": {"regex": "("}}},
                       {"request": "Anything on the tax return?", "arguments": {"query": "tax return"}}]}
    model_server.script("*", {"content": json.dumps(reply)})
    assert draft(model_server, "--tools=search_notes") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("draft: 1 of 2 drafts kept")
    assert out[1].startswith("  dropped 1: invalid case (e.g. ")
    assert out[1].endswith("; request 'Notes about the garage door')")
    assert "draft-search_notes-1" in (project / "drafts.mcpeval.yaml").read_text()


def test_a_drafter_failing_after_it_answered_skips_that_target(project: Path, model_server: ScriptedModelServer,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    reply = {"cases": [{"request": "Anything on the tax return?", "arguments": {"query": "tax return"}}]}
    model_server.script("The tool: Search notes*", {"content": json.dumps(reply)})
    model_server.script("The tool: List every note.*", {"status": 500, "error": "overloaded"})
    assert draft(model_server, "--tools=search_notes,list_notes") == 0
    captured = capsys.readouterr()
    assert "draft: nothing drafted for `list_notes`: the drafter failed: " in captured.err
    assert captured.out.startswith("draft: 1 of 1 draft kept for 2 targets")
    assert "draft-search_notes-1" in (project / "drafts.mcpeval.yaml").read_text()
