"""The pre-flight check: models (provider, key) and servers (start, list tools) tried before any call.

``pytest --mcp-models=gpt-5,claude`` without keys used to print 266 errors and 846 lines after 15 s; a server
command that does not exist, 21 lines.  Now: one line per model or server that fails, exit 4, no model called.
"""

from __future__ import annotations

import json
import sys

import pytest
from conftest import GITHUB_TOOLS, get_me_cases, make_project, run

from pytest_mcpeval.testing import ScriptedModelServer

GET_ME = {"tool_calls": [{"name": "get_me", "arguments": {}}]}
HEADLINE = "ERROR: pre-flight check failed, no model was called (--mcp-no-preflight skips the check):"

# a stdio server that counts its starts (one line per start in starts.txt) and lists get_me
COUNTING_SERVER = '''
import sys
from mcp.server import MCPServer

with open("starts.txt", "a") as f:
    f.write("start\\n")
server = MCPServer("counting", log_level="WARNING")


@server.tool(description="Who am I")
def get_me() -> str:
    return "me"


if __name__ == "__main__":
    server.run()
'''


def cases(n: int, prefix: str = "q") -> str:
    """The ``cases:`` part of :func:`get_me_cases`, for a file with a server of its own."""
    return get_me_cases(n, prefix).split("\n", 1)[1]


def project(pytester: pytest.Pytester, server: ScriptedModelServer, extra_files: dict[str, str] | None = None) -> None:
    (pytester.path / "tools.json").write_text(GITHUB_TOOLS.read_text())
    make_project(pytester, server, {"a.mcpeval.yaml": get_me_cases(2), **(extra_files or {})})
    params = json.dumps({"api_base": server.api_base, "api_key": "not-a-key"})
    (pytester.path / "pytest.ini").write_text(
        "[pytest]\nmcp_model_aliases =\n    fake = openai/fake\n    claude = anthropic/claude-sonnet-4-5\n"
        f"    nokey = openai/gpt-5\nmcp_model_params = fake = {params}\n")
    server.script("*", GET_ME)


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def test_models_without_a_key_or_a_provider_are_one_line_each(pytester: pytest.Pytester,
                                                              model_server: ScriptedModelServer,
                                                              xdist_args: list[str]) -> None:
    project(pytester, model_server)
    result = run(pytester, "--mcp-models=fake,claude,nokey,gpt-unknown-thing", "--mcp-report=report.json",
                 *xdist_args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        HEADLINE,
        "  model claude (anthropic/claude-sonnet-4-5): no API key: set ANTHROPIC_API_KEY (or api_key in "
        "mcp_model_params)",
        "  model nokey (openai/gpt-5): no API key: set OPENAI_API_KEY (or api_key in mcp_model_params)",
        "  model gpt-unknown-thing: litellm cannot tell its provider: write PROVIDER/MODEL (e.g. openai/gpt-5, "
        "anthropic/claude-sonnet-4-5), or map the name in mcp_model_aliases",
    ])
    assert len(result.stderr.lines) < 12  # one line per model, nothing per case
    assert model_server.requests == []  # fake, which would work, is not called either
    assert not (pytester.path / "report.json").exists()


def test_servers_that_cannot_start_are_one_line_each(pytester: pytest.Pytester,
                                                     model_server: ScriptedModelServer) -> None:
    """(Without xdist: the controller's path under -n is the models test's.)"""
    xdist_args: list[str] = []
    hang = "import time\ntime.sleep(60)\n"
    project(pytester, model_server, {
        "hang.py": hang,
        "b.mcpeval.yaml": "server: {command: [no-such-server-xyz, --api-key=s3cr3t-VALUE-123456]}\n" + cases(3, "b"),
        "c.mcpeval.yaml": f"server: {{command: [{json.dumps(sys.executable)}, hang.py]}}\n" + cases(1, "c"),
    })
    result = run(pytester, "--mcp-models=fake", "--mcp-connect-timeout=1", *xdist_args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        HEADLINE,
        "  server of b.mcpeval.yaml (command: no-such-server-xyz --api-key=REDACTED): could not connect to the "
        "server (command: no-such-server-xyz --api-key=REDACTED): FileNotFoundError: *; its log: *.log",
        "  server of c.mcpeval.yaml (command: *hang.py): * within 1 s*",
    ])
    assert model_server.requests == []
    assert "s3cr3t" not in result.stdout.str() + result.stderr.str()


def test_a_good_run_checks_each_server_once_and_keeps_no_log(pytester: pytest.Pytester,
                                                             model_server: ScriptedModelServer,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The check starts each server once (before the run starts it again); nothing of it is left behind."""
    xdist_args: list[str] = []  # (under -n each worker starts it too: one start more per worker)
    import tempfile

    temporary = pytester.path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))  # this run's own: other tests keep their checks' logs
    bench = f"server: {{command: [{json.dumps(sys.executable)}, counting.py]}}\n" + cases(3)
    make_project(pytester, model_server, {"counting.py": COUNTING_SERVER, "a.mcpeval.yaml": bench})
    model_server.script("*", GET_ME)
    result = run(pytester, "--mcp-models=fake", "--mcp-record=off", *xdist_args)
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=3)
    starts = (pytester.path / "starts.txt").read_text().count("start")
    assert starts == (3 if xdist_args else 2)  # the check's, then each process of the run
    assert list(temporary.glob("mcpeval-preflight-*")) == []
    result = run(pytester, "--mcp-models=fake", "--mcp-record=off", "--mcp-no-preflight", *xdist_args)
    assert (pytester.path / "starts.txt").read_text().count("start") == starts + (2 if xdist_args else 1)


def test_what_the_run_cannot_need_is_not_checked(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    project(pytester, model_server)
    # replay only: no key needed (every case without an answer in the cache is an error of its own)
    result = run(pytester, "--mcp-models=claude", "--mcp-record=none")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*no recorded response*"])
    # the opt-out: each case an error, as before the check
    result = run(pytester, "--mcp-models=claude", "--mcp-record=off", "--mcp-no-preflight")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*no API key: set ANTHROPIC_API_KEY*"])
    # a cache that holds answers of the model: they replay without a key
    assert run(pytester, "--mcp-models=fake").ret == 0  # records fake's answers
    folder = next((pytester.path / ".mcpeval" / "cache").iterdir())
    folder.rename(folder.parent / "anthropic_claude-sonnet-4-5")  # as if recorded with a key, under claude
    result = run(pytester, "--mcp-models=claude")
    assert HEADLINE not in result.stderr.str()
    # ... but --mcp-record=all calls everything again: the key is needed
    result = run(pytester, "--mcp-models=claude", "--mcp-record=all")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([HEADLINE, "  model claude (anthropic/claude-sonnet-4-5): no API key*"])
    # a judge without a key, configured but needed by no selected case (no claims here), is not checked
    assert run(pytester, "--mcp-models=fake", "--mcp-judge-model=nokey").ret == 0
    # --collect-only, --mcp-tools and a skipped run check nothing
    assert run(pytester, "--mcp-models=nokey", "--collect-only").ret == 0
    assert run(pytester, "--mcp-models=nokey", "--mcp-tools").ret == 0
    assert run(pytester, "--mcp-models=nokey", "-k", "nothing-matches").ret == pytest.ExitCode.NO_TESTS_COLLECTED
