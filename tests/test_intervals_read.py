"""The headline intervals are computed for a report that something reads (an output, the baseline, a users'
``pytest_mcpeval_report`` hook) and only for it: the terminal shows none (pytest_mcpeval/outputs.py, ``is_read``)."""

from __future__ import annotations

import json

import pytest
from conftest import get_me_cases, make_project, run

from pytest_mcpeval.report.model import build_report
from pytest_mcpeval.testing import ScriptedModelServer

# a conftest that keeps what the session's report had: the plugin's session object is public ("mcpeval-session")
KEEP = """
import json
def pytest_unconfigure(config):
    report = config.pluginmanager.get_plugin("mcpeval-session").report
    (config.rootpath / "had.json").write_text(json.dumps(
        {"model": "intervals" in report["models"]["fake"], "method": "intervals" in report}))
"""
HOOK = "def pytest_mcpeval_report(config, report):\n    pass\n"


def test_build_report_leaves_the_intervals_out_when_told() -> None:
    results = [{"file": "f", "line": 1, "id": f"c{i}", "model": "m", "repeat": 0, "error": None, "expected_label": "a",
                "called_label": "a" if i % 2 else "b", "correct": bool(i % 2), "passed": bool(i % 2)}
               for i in range(6)]
    with_them = build_report(results, {}, ["m"])  # type: ignore[arg-type]
    without = build_report(results, {}, ["m"], intervals=False)  # type: ignore[arg-type]
    assert "intervals" in with_them and with_them["models"]["m"]["intervals"]["accuracy"]["value"] == 0.5
    assert "intervals" not in without and "intervals" not in without["models"]["m"]
    with_them["models"]["m"].pop("intervals")
    with_them.pop("intervals")
    assert with_them == without  # nothing else differs


@pytest.mark.parametrize(("args", "hook", "had"), [
    ([], False, False),  # the terminal only
    (["--mcp-report=report.json"], False, True),
    (["--mcp-html=report.html"], False, True),
    (["--mcp-save-baseline=baseline.json"], False, True),
    ([], True, True),  # a users' hook gets the report whole
])
def test_intervals_are_computed_for_a_report_that_is_read(pytester: pytest.Pytester, model_server: ScriptedModelServer,
                                                          monkeypatch: pytest.MonkeyPatch, args: list[str], hook: bool,
                                                          had: bool) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)  # a summary to append to is a reader too
    make_project(pytester, model_server, {"a.mcpeval.yaml": get_me_cases(3), "conftest.py": KEEP + (HOOK * hook)},
                 tools=[{"name": "get_me", "description": "Who am I", "inputSchema": {"type": "object"}}])
    model_server.script("*", {"tool_calls": [{"name": "get_me", "arguments": {}}]})
    result = run(pytester, "--mcp-models=fake", *args)
    result.assert_outcomes(passed=3)
    assert json.loads((pytester.path / "had.json").read_text()) == {"model": had, "method": had}
