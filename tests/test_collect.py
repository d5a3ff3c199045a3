"""collect.py: benchmark tags become markers, each registered once however many files and cases name it; and the
garbage collector once the files are collected (run/gc_pause.py)."""

from __future__ import annotations

import json

import pytest
from conftest import GITHUB_TOOLS, make_project, run

from pytest_mcpeval.testing import ScriptedModelServer


def tagged(prefix: str) -> str:
    cases = "".join(f"  - id: {prefix}{i}\n    input: q {i}\n    tags: [issues{', slow' if i else ''}]\n"
                    "    expect: [{tool: get_me, args: {}}]\n" for i in range(3))
    return "server: {tools_file: tools.json}\ntags: [github]\ncases:\n" + cases


def test_each_tag_is_registered_once_and_an_ini_marker_is_kept(pytester: pytest.Pytester,
                                                              model_server: ScriptedModelServer) -> None:
    make_project(pytester, model_server, {"a.mcpeval.yaml": tagged("a"), "b.mcpeval.yaml": tagged("b")},
                 ini_extra="markers =\n    slow: the user's own description\n")
    (pytester.path / "tools.json").write_text(GITHUB_TOOLS.read_text())
    reprec = pytester.inline_run("-p", "no:cacheprovider", "--mcp-models=fake", "--collect-only")
    config = reprec.getcalls("pytest_collection_finish")[0].session.config
    names = [line.split(":")[0].strip() for line in config.getini("markers")]
    assert names.count("github") == names.count("issues") == names.count("slow") == 1
    assert "slow: the user's own description" in config.getini("markers")
    result = run(pytester, "--mcp-models=fake", "--strict-markers", "-m", "slow", "--co", "-q")
    result.stdout.fnmatch_lines(["*4/6 tests collected (2 deselected)*"])


GC_PROBE = """
import gc, json
def pytest_sessionfinish(session):
    (session.config.rootpath / "gc.json").write_text(json.dumps({"frozen": gc.get_freeze_count(),
                                                                 "enabled": gc.isenabled()}))
"""


@pytest.mark.parametrize("nested", [False, True])
def test_what_collection_built_is_frozen_only_where_the_session_owns_its_process(
        pytester: pytest.Pytester, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch,
        nested: bool) -> None:
    """After collecting benchmark files the collector is back on, and what the collection built is frozen
    (run/gc_pause.py), unless the session runs while a test does (PYTEST_CURRENT_TEST: pytester in process, or a
    test's subprocess), whose process may go on after it.  A fresh process is the point: the collector's state."""
    from conftest import run_subprocess

    make_project(pytester, model_server, {"evals/a.mcpeval.yaml": "server: {tools_file: ../tools.json}\ncases:\n"
                                          "  - {id: a, input: hi, expect: [{tool: get_me}]}\n",
                                          "conftest.py": GC_PROBE},
                 tools=[{"name": "get_me", "description": "me", "inputSchema": {"type": "object"}}])
    if not nested:
        monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)
    result = run_subprocess(pytester)  # no model: the case is collected and skipped
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    probe = json.loads((pytester.path / "gc.json").read_text())
    assert probe["enabled"] is True
    assert (probe["frozen"] > 10_000) is not nested, probe
