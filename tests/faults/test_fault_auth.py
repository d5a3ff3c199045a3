"""A provider that rejects the key (HTTP 401) on every call (issue 30, item 9): it used to get all 40 calls of a
40-case run, and the terminal showed its message 60 times.  The first rejection stops the model's other calls:
they are errors that say why in one line (never misses), and only the calls already in flight are made."""

from __future__ import annotations

import json

import pytest
from conftest import GITHUB_TOOLS, get_me_cases, make_project, run

from pytest_mcpeval.testing import ScriptedModelServer

REJECTED = "authentication failed (HTTP 401): Incorrect API key provided"


@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_rejected_key_stops_the_models_other_calls(pytester: pytest.Pytester, model_server: ScriptedModelServer,
                                                     concurrency: int) -> None:
    (pytester.path / "tools.json").write_text(GITHUB_TOOLS.read_text())
    make_project(pytester, model_server, {"a.mcpeval.yaml": get_me_cases(40)})
    model_server.script("*", {"status": 401, "error": "Incorrect API key provided: sk-wrong."})
    result = run(pytester, "--mcp-models=fake", "--mcp-record=off", f"--mcp-concurrency={concurrency}",
                 "--mcp-report=report.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert 1 <= len(model_server.requests) <= concurrency  # those in flight when the first answer came (was 40)
    cases = json.loads((pytester.path / "report.json").read_text())["cases"]
    assert all(c["error"] and c["correct"] is None for c in cases)  # errors, never misses
    made = [c for c in cases if REJECTED in c["error"]]
    assert len(made) == len(model_server.requests)
    skipped = {c["error"] for c in cases if c not in made}
    assert len(skipped) == 1 and len(cases) - len(made) >= 40 - concurrency
    assert skipped.pop() in {f"not called: the key of model fake was rejected on the call of {c['file']}::{c['id']}"
                             "[fake] (its other calls are not made)" for c in made}  # the first rejected
    # the errors section and the mcpeval summary, once per call made (pytest's short summary, cut short unless $CI
    # is set, is left out of the count)
    said = result.stdout.str().split("short test summary info", 1)[0]
    assert said.count("Incorrect API key") <= 2 * concurrency
