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


@pytest.mark.parametrize(("args", "nested", "frozen"), [
    (["--mcp-record=none"], False, True),  # a replay: no model is called here
    (["--collect-only"], False, True),
    (["--mcp-record=none"], True, False),  # started while a test runs: the process may go on after it
    ([], False, False),  # a run that may call models
])
def test_what_collection_built_is_frozen_only_where_no_call_is_made_and_the_session_owns_its_process(
        pytester: pytest.Pytester, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch,
        args: list[str], nested: bool, frozen: bool) -> None:
    """After collecting benchmark files the collector is back on; what the collection built is frozen (run/gc_pause.py)
    only in a run that calls no model (a replay, --collect-only) and owns its process (PYTEST_CURRENT_TEST unset: not
    pytester in process, nor a test's subprocess).  A fresh process is the point: the collector's state."""
    from conftest import run_subprocess

    make_project(pytester, model_server, {"evals/a.mcpeval.yaml": "server: {tools_file: ../tools.json}\ncases:\n"
                                          "  - {id: a, input: hi, expect: [{tool: get_me}]}\n",
                                          "conftest.py": GC_PROBE},
                 tools=[{"name": "get_me", "description": "me", "inputSchema": {"type": "object"}}])
    if not nested:
        monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)
    result = run_subprocess(pytester, *args)  # no model: the case is collected (and skipped)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    probe = json.loads((pytester.path / "gc.json").read_text())
    assert probe["enabled"] is True
    assert (probe["frozen"] > 10_000) is frozen, probe


def test_sessions_run_one_after_another_in_a_process_keep_one_sessions_freeze(
        pytester: pytest.Pytester, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest.main in a loop (a script's, not a test's): each session's first benchmark file unfreezes what the
    session before froze, so the frozen objects stay at one session's worth instead of growing by one each time."""
    import sys

    cases = "".join(f"  - {{id: c{i}, input: hi, expect: [{{tool: get_me}}]}}\n" for i in range(200))
    bench = f"server: {{tools_file: ../tools.json}}\ncases:\n{cases}"
    make_project(pytester, model_server, {"evals/a.mcpeval.yaml": bench},
                 tools=[{"name": "get_me", "description": "me", "inputSchema": {"type": "object"}}])
    script = pytester.path / "loop.py"
    script.write_text("import contextlib, gc, io, json, pytest\n"
                      "counts = []\n"
                      "for _ in range(4):\n"
                      "    with contextlib.redirect_stdout(io.StringIO()):\n"
                      "        pytest.main(['-q', '-p', 'no:randomly', '--mcp-record=none'])\n"
                      "    counts.append(gc.get_freeze_count())\n"
                      "print(json.dumps(counts))\n")
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)
    result = pytester.run(sys.executable, str(script))
    assert result.ret == 0, result.stderr.str()
    counts = json.loads(result.stdout.lines[-1])
    # the first session's modules stay; after that no growth (without the unfreeze: 9,000 more each session)
    assert counts[0] > 10_000 and counts[-1] <= counts[1], counts
