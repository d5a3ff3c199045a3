"""The reference MCP servers of examples/servers, for real: mcp-server-git and mcp-server-time (PyPI) and the npm
servers filesystem, memory and everything (Node.js, marked ``node``), as ``make servers`` installs them.

Each benchmark file is run as a user runs it, once per server: the server is started over stdio by its
``server`` block, lists its tools, the single calls are scored and the flows call its tools live on the
throwaway fixtures of examples/servers/conftest.py, answered by the scripted stand-in of
examples/servers/script.json.  What each case should come to (its deliberate mistakes included), the tools each
server publishes and what its live answers hold are pinned here.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import read_report, run

from pytest_mcpeval.benchmark.schema import ServerSpec
from pytest_mcpeval.servers import ServerPool
from pytest_mcpeval.testing import ScriptedModelServer

SERVERS = Path(__file__).resolve().parent.parent / "examples" / "servers"
_spec = importlib.util.spec_from_file_location("mcpeval_example_fixtures", SERVERS / "fixtures.py")
assert _spec is not None and _spec.loader is not None
fixtures: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fixtures)

SHOUT = "978b378bc954072ca8841fdfe7dea513c1c99be1"  # the commit that added --shout: the fixture's hashes are fixed

# per server: the tools it publishes, in its order, and (passed, diagnosis) of every case with the scripted stand-in
TOOLS = {
    "git": ["git_status", "git_diff_unstaged", "git_diff_staged", "git_diff", "git_commit", "git_add", "git_reset",
            "git_log", "git_create_branch", "git_checkout", "git_show", "git_branch"],
    "time": ["get_current_time", "convert_time"],
    "filesystem": ["read_file", "read_text_file", "read_media_file", "read_multiple_files", "write_file", "edit_file",
                   "create_directory", "list_directory", "list_directory_with_sizes", "directory_tree", "move_file",
                   "search_files", "get_file_info", "list_allowed_directories"],
    "memory": ["create_entities", "create_relations", "add_observations", "delete_entities", "delete_observations",
               "delete_relations", "read_graph", "search_nodes", "open_nodes"],
    "everything": ["echo", "get-annotated-message", "get-env", "get-resource-links", "get-resource-reference",
                   "get-structured-content", "get-sum", "get-tiny-image", "gzip-file-as-resource",
                   "toggle-simulated-logging", "toggle-subscriber-updates", "trigger-long-running-operation",
                   "simulate-research-query"],
}
MISSES = {  # the stand-in's deliberate mistakes (examples/README.md); every other case passes
    "git": {"staged-changes": "wrong_tool"},  # the unstaged diff
    "time": {"now-here": "no_tool_use"},  # no clock, it says
    "filesystem": {"read-todo": "wrong_tool"},  # read_file, the deprecated twin of read_text_file
    "memory": {"search-payments": "wrong_tool"},  # reads the whole graph
    "everything": {"add-numbers": "wrong_argument_value",  # numbers as strings
                   "warmest-city": "premature_stop"},  # checks two cities of three
}
FLOWS = {
    "git": {"who-added-shout", "review-before-commit", "what-farewell-adds", "commit-the-changelog"},
    "time": {"tokyo-to-kolkata", "call-for-two-offices", "mumbai-after-an-error"},
    "filesystem": {"meeting-decisions", "q2-revenue", "compare-quarters", "save-todo-summary"},
    "memory": {"who-leads-payments", "remember-dana"},
    "everything": {"sum-then-echo", "warmest-city"},
}
NPM = {"filesystem", "memory", "everything"}


def needs(name: str) -> None:
    reason = fixtures.missing(f"{name}.mcpeval.yaml")
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def scripted() -> Iterator[ScriptedModelServer]:
    """The stand-in of examples/servers/run.py, as model `scripted`: one server for the module."""
    script = json.loads((SERVERS / "script.json").read_text(encoding="utf-8"))
    with ScriptedModelServer() as server:
        for text, reply in script["calls"].items():
            server.script(text, reply, model="scripted")
        for text, turns in script["flows"].items():
            server.flow(text, *turns, model="scripted")
        yield server


def project(pytester: pytest.Pytester, scripted: ScriptedModelServer, *names: str) -> pytest.Pytester:
    """examples/servers as a user has it (the installed servers linked in), with the stand-in configured."""
    target = pytester.path / "servers"
    target.mkdir()
    for name in ("conftest.py", "fixtures.py", *(f"{n}.mcpeval.yaml" for n in names)):
        shutil.copy(SERVERS / name, target / name)
    for installed in (".venv-servers", "node_modules"):
        if (SERVERS / installed).exists():
            (target / installed).symlink_to(SERVERS / installed)
    params = json.dumps({"api_base": scripted.api_base, "api_key": "none", "num_retries": 0})
    (pytester.path / "pytest.ini").write_text(
        f"[pytest]\nmcp_model_aliases = scripted = openai/scripted\nmcp_model_params = scripted = {params}\n")
    return pytester


def answers(case: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(tool, answer source, answer text) of every call of a flow, in order."""
    return [(c["tool"], c["answer"]["source"], c["answer"]["text"]) for t in case["trajectory"] for c in t["calls"]]


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.node] if n in NPM else []) for n in TOOLS])
def test_reference_server(pytester: pytest.Pytester, scripted: ScriptedModelServer, name: str) -> None:
    needs(name)
    result = run(project(pytester, scripted, name), "servers", "--mcp-models=scripted", "--mcp-record=off",
                 "--mcp-report=report.json")
    report = read_report(pytester)
    cases = {c["id"]: c for c in report["cases"]}
    assert [c["error"] for c in cases.values() if c["error"]] == []
    # start-up and tool listing: one server, started once, listed in full
    (catalog,) = report["catalogs"].values()
    assert list(catalog["tools"]) == TOOLS[name]
    assert catalog["server"].startswith("command: mcp-server-")
    # the benchmark run: every case as designed
    assert {i: c["diagnosis"] for i, c in cases.items() if not c["passed"]} == MISSES[name]
    assert {i for i, c in cases.items() if c.get("flow")} == FLOWS[name]
    assert result.ret == 0
    outcomes = result.parseoutcomes()
    assert (outcomes["passed"], outcomes["missed"]) == (len(cases) - len(MISSES[name]), len(MISSES[name]))
    # live calls: the flows' answers come from the server, on the session's fixtures
    calls = {i: answers(c) for i, c in cases.items() if c.get("flow")}
    assert {source for flow in calls.values() for _, source, _ in flow} == (
        {"live", "mock"} if name == "git" else {"live"})
    LIVE_CHECKS[name](calls)


def _git(calls: dict[str, list[tuple[str, str, str]]]) -> None:
    log, show = calls["who-added-shout"]
    assert log[2].startswith("Commit history:\nCommit: 2a39bd6800e8a21abc2e77a379f72348dc0effb0\nAuthor: Alice Nguyen")
    assert show[2].startswith(f"commit {SHOUT}\nAuthor: Bob Okafor <bob@example.com>\nDate:   2025-06-05 14:30:00 ")
    staged, unstaged = calls["review-before-commit"]
    assert "+++ b/CHANGELOG.md" in staged[2] and "+## License" in unstaged[2]
    sources = [(tool, source) for tool, source, _ in calls["commit-the-changelog"]]
    assert sources == [("git_diff_staged", "live"), ("git_commit", "mock")]


def _time(calls: dict[str, list[tuple[str, str, str]]]) -> None:
    (tokyo,) = calls["tokyo-to-kolkata"]
    assert json.loads(tokyo[2])["target"]["datetime"].endswith("T14:30:00+05:30")
    error, recovered = calls["mumbai-after-an-error"]
    assert "No time zone found with key Asia/Mumbai" in error[2]
    assert json.loads(recovered[2])["target"]["datetime"].endswith("T17:30:00+05:30")


def _filesystem(calls: dict[str, list[tuple[str, str, str]]]) -> None:
    assert calls["meeting-decisions"][0][2] == "[FILE] meeting-2025-06-12.md\n[FILE] todo.md"
    assert calls["q2-revenue"][0][2] == fixtures.FILES["reports/sales-q2.csv"]
    read, write, info = calls["save-todo-summary"]
    assert read[2] == fixtures.FILES["notes/todo.md"]
    assert (write[2], info[2].splitlines()[0]) == ("Successfully wrote to todo-summary.md", "size: 75")


def _memory(calls: dict[str, list[tuple[str, str, str]]]) -> None:
    search, opened = calls["who-leads-payments"]
    found = json.loads(search[2])["entities"]
    assert [e["name"] for e in found] == ["Alice Nguyen", "Bob Okafor", "Payments service"]
    assert json.loads(opened[2])["entities"][0]["observations"][-1] == "Prefers email over chat"
    assert json.loads(calls["remember-dana"][2][2])["entities"] == [
        {"name": "Dana Silva", "entityType": "person", "observations": ["Joined Acme as a data analyst"]}]


def _everything(calls: dict[str, list[tuple[str, str, str]]]) -> None:
    assert [text for _, _, text in calls["sum-then-echo"]] == ["The sum of 1234 and 4321 is 5555.", "Echo: 5555"]
    assert [json.loads(text)["temperature"] for _, _, text in calls["warmest-city"]] == [33, 36]


LIVE_CHECKS = {"git": _git, "time": _time, "filesystem": _filesystem, "memory": _memory, "everything": _everything}


def test_start_up_is_timed_once_per_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ServerPool times start, handshake and tools/list, and starts a server once however often it is asked;
    ``${NAME}`` in ``command`` and ``cwd`` is the environment variable."""
    needs("time")
    monkeypatch.setenv("SERVERS_BIN", str(fixtures.PY_BIN))
    monkeypatch.setenv("SERVER_CWD", str(tmp_path))
    spec = ServerSpec.model_validate({"command": ["${SERVERS_BIN}/mcp-server-time", "--local-timezone", "UTC"],
                                      "cwd": "${SERVER_CWD}"})
    pool = ServerPool(tmp_path / "logs")
    try:
        began = time.monotonic()
        catalog = pool.catalog_for_spec(spec, SERVERS, SERVERS)
        elapsed = time.monotonic() - began
        startup = pool.startup_s(catalog)
        assert startup is not None and 0 < startup <= elapsed
        assert pool.catalog_for_spec(spec, SERVERS, SERVERS) is catalog and pool.startup_s(catalog) == startup
        answer = pool.core.call(pool.call_tool, catalog, "convert_time", {
            "source_timezone": "UTC", "time": "06:00", "target_timezone": "Asia/Tokyo"}, 10)
        assert json.loads(answer.text)["target"]["datetime"].endswith("T15:00:00+09:00")
        (tmp_path / "tools.json").write_text(json.dumps([{"name": "t", "inputSchema": {"type": "object"}}]))
        static = pool.catalog_for_spec(ServerSpec.model_validate({"tools_file": "tools.json"}), tmp_path, tmp_path)
        assert pool.startup_s(static) is None  # a static tool list starts nothing
    finally:
        pool.close()


def test_the_report_records_start_up(pytester: pytest.Pytester, scripted: ScriptedModelServer) -> None:
    needs("time")
    result = run(project(pytester, scripted, "time"), "servers", "--mcp-models=scripted", "--mcp-record=off",
                 "--mcp-report=report.json", "-k", "tokyo-to-kolkata")
    (catalog,) = read_report(pytester)["catalogs"].values()
    assert 0 < catalog["startup_s"] < 30
    result.stdout.fnmatch_lines([f"catalog *: * tools, * tokens per request (heaviest: *); started in "
                                 f"{catalog['startup_s']:.2f} s"])  # the terminal says it too


def test_without_node_the_npm_servers_skip_and_deselect(pytester: pytest.Pytester, scripted: ScriptedModelServer,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    project(pytester, scripted, *TOOLS)
    empty = pytester.path / "no-node"
    empty.mkdir()
    with monkeypatch.context() as patched:
        patched.setenv("PATH", str(empty))  # no node, no git: nothing is started
        result = run(pytester, "servers/everything.mcpeval.yaml", "servers/memory.mcpeval.yaml",
                     "--mcp-models=scripted", "-rs", "-k", "echo or everything-remembered")
        assert os.environ["PATH"] == str(empty)  # the session's PATH is restored
    result.stdout.fnmatch_lines(["SKIPPED [[]2[]] *: mcp-server-everything needs Node.js, and there is no `node` on "
                                 "PATH (install Node.js >= 20 and run `make servers`, or deselect these cases with "
                                 "-m 'not node')"])
    result.assert_outcomes(skipped=3)  # echo, sum-then-echo, everything-remembered
    collected = run(pytester, "servers", "--mcp-models=scripted", "--collect-only", "-q", "-m", "not node")
    files = {line.split("::")[0] for line in collected.stdout.lines if "::" in line}
    assert files == {"servers/git.mcpeval.yaml", "servers/time.mcpeval.yaml"}
