"""collect.py: benchmark tags become markers, each registered once however many files and cases name it."""

from __future__ import annotations

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
