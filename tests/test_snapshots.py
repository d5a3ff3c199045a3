"""Tool-catalog snapshots (``--mcp-snapshots``), and runs without that option leaving committed ones alone.

The runs are in-process (``pytester.runpytest``): each needs a fresh syrupy session, which pytest
gives every in-process run, and nothing here depends on a clean interpreter.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import make_project, read_report

from pytest_mcpeval.testing import ScriptedModelServer

TOOLS: list[dict[str, Any]] = [
    {"name": "list_issues", "description": "List issues in a repository, filtered by state and labels.",
     "inputSchema": {"type": "object", "properties": {"repo": {"type": "string"},
                                                      "state": {"type": "string", "enum": ["OPEN", "CLOSED"]}},
                     "required": ["repo"]}},
    {"name": "search_issues", "description": "Full-text search over issues.",
     "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}},
]
BENCH = """server: {tools_file: tools.json}
cases:
  - id: list0
    input: show the open issues of repo r0
    expect: [{tool: list_issues}]
"""
SNAPSHOT = Path("__snapshots__", "bench.mcpeval", "tool-catalog.json")
NOT_CHECKED = "*tool catalog not compared with its snapshot: that needs --mcp-snapshots*"


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """One pytest run in this process, as a user would type it."""
    return pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", *args)


def run_subprocess(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """For the known limits: syrupy keeps per-process state, so their outcome must not depend on earlier runs.
    The child is not an xdist worker even when this test runs in one: syrupy reads ``PYTEST_XDIST_WORKER`` from
    the environment and, in a worker, prints no report (so it never says "unused"), which made the known limits
    below pass under ``-n 2`` and fail from a shell."""
    with pytest.MonkeyPatch.context() as env:
        for name in [n for n in os.environ if n.startswith("PYTEST_XDIST_")]:
            env.delenv(name)
        return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", *args)


@pytest.fixture
def project(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> pytest.Pytester:
    """One benchmark file against a static tool list, with no snapshot yet."""
    make_project(pytester, model_server, {"bench.mcpeval.yaml": BENCH}, tools=TOOLS)
    return pytester


@pytest.fixture
def recorded(project: pytest.Pytester) -> pytest.Pytester:
    """The same project after `pytest --mcp-snapshots --snapshot-update`, as committed."""
    assert run(project, "--mcp-snapshots", "--snapshot-update").ret == 0
    assert (project.path / SNAPSHOT).is_file()
    return project


def change_description(pytester: pytest.Pytester) -> None:
    changed = [dict(TOOLS[0], description="Search or list issues."), *TOOLS[1:]]
    (pytester.path / "tools.json").write_text(json.dumps(changed))


def test_tool_catalog_snapshot(project: pytest.Pytester) -> None:
    result = run(project, "--mcp-snapshots", "-k", "tool-catalog")
    result.stdout.fnmatch_lines(["*no snapshot of the tool catalog of tools_file: tools.json yet: run "
                                 "`pytest --mcp-snapshots --snapshot-update` to record it "
                                 f"(in {SNAPSHOT}), then commit it"])
    assert result.ret == 1
    assert run(project, "--mcp-snapshots", "--snapshot-update", "-k", "tool-catalog").ret == 0
    assert run(project, "--mcp-snapshots", "-k", "tool-catalog").ret == 0
    reordered = [dict(TOOLS[1]), dict(TOOLS[0], inputSchema=dict(TOOLS[0]["inputSchema"], required=["repo"]))]
    (project.path / "tools.json").write_text(json.dumps(reordered))
    assert run(project, "--mcp-snapshots", "-k", "tool-catalog").ret == 0  # order means nothing
    change_description(project)
    result = run(project, "--mcp-snapshots", "-k", "tool-catalog")
    result.stdout.fnmatch_lines(["*the tool catalog of tools_file: tools.json changed*",
                                 '*"description": "List issues in a repository, filtered by state and labels."*',
                                 '*"description": "Search or list issues."*'])
    assert result.ret == 1
    assert run(project, "--mcp-snapshots", "--snapshot-update").ret == 0  # accepting the change
    assert run(project, "--mcp-snapshots").ret == 0


def test_plain_run_leaves_a_committed_snapshot_alone(recorded: pytest.Pytester, xdist_args: list[str]) -> None:
    result = run(recorded, "-rs", *xdist_args)
    assert result.ret == 0
    assert "unused" not in result.stdout.str() and "--snapshot-update" not in result.stdout.str()
    result.stdout.fnmatch_lines([NOT_CHECKED])
    result.assert_outcomes(skipped=2)  # the case (no model) and the catalog check it did not run


def test_snapshot_update_without_mcp_snapshots_keeps_the_snapshot(recorded: pytest.Pytester,
                                                                  xdist_args: list[str]) -> None:
    result = run(recorded, "--snapshot-update", *xdist_args)
    assert result.ret == 0
    assert "deleted" not in result.stdout.str()
    assert (recorded.path / SNAPSHOT).is_file()


def test_changed_description_fails_with_a_plain_diff(recorded: pytest.Pytester, xdist_args: list[str]) -> None:
    change_description(recorded)
    result = run(recorded, "--mcp-snapshots", *xdist_args)
    result.stdout.fnmatch_lines([
        "the tool catalog of tools_file: tools.json changed; if that is intended, accept it with "
        "`pytest --mcp-snapshots --snapshot-update`:",
        "tools changed: 1 (list_issues)",
        "list_issues:",
        '  -  "description": "List issues in a repository, filtered by state and labels.",',
        '  +  "description": "Search or list issues.",',
    ])
    assert "\x1b[" not in result.stdout.str()
    assert "does not exist" not in result.stdout.str()
    assert result.ret == 1


def test_every_changed_tool_has_its_own_diff_in_the_terminal_and_the_report(recorded: pytest.Pytester) -> None:
    """Two descriptions changed and a tool added: each named in order with its own diff, and counted (issue 32: a
    pull request saw the diff of the first tool only)."""
    tools = [dict(TOOLS[1], description="Changed second."), dict(TOOLS[0], description="Changed first."),
             {"name": "aaa_new", "description": "Brand new.", "inputSchema": {"type": "object"}}]
    (recorded.path / "tools.json").write_text(json.dumps(tools))
    result = run(recorded, "--mcp-snapshots", "-k", "tool-catalog", "--mcp-report=report.json")
    summary = "tools changed: 2 (list_issues, search_issues); added: 1 (aaa_new)"
    result.stdout.fnmatch_lines([summary, "aaa_new (added):", '  +  "description": "Brand new.",', "list_issues:",
                                 '  +  "description": "Changed first.",', "search_issues:",
                                 '  +  "description": "Changed second.",'])
    snapshot = read_report(recorded)["snapshots"]["bench.mcpeval.yaml"]
    assert snapshot["outcome"] == "changed" and snapshot["diff"][0] == summary
    assert result.ret == 1


def test_a_removed_tool_is_named_with_its_whole_definition() -> None:
    from pytest_mcpeval.checks.snapshot_diff import stored_tools, tool_diff

    before = stored_tools(json.dumps(TOOLS))
    assert before is not None and stored_tools("{not json") is None and stored_tools('{"a": 1}') is None
    summary, lines = tool_diff(before, TOOLS[:1])
    assert summary == "removed: 1 (search_issues)"
    assert lines[0] == "search_issues (removed):" and all(line.startswith("  -") for line in lines[1:])


def test_missing_snapshot_fails_under_xdist(project: pytest.Pytester) -> None:
    result = run(project, "--mcp-snapshots", "-n", "1")
    result.stdout.fnmatch_lines(["*no snapshot of the tool catalog of tools_file: tools.json yet*"])
    assert result.ret == 1


@pytest.mark.parametrize("args", [
    ["--mcp-snapshots", "-k", "not tool-catalog"],  # the check itself deselected
    ["-k", "list0"],  # a run without the check, selecting cases only
], ids=["mcp-snapshots", "plain"])
def test_a_deselected_catalog_check_keeps_its_snapshot(recorded: pytest.Pytester, xdist_args: list[str],
                                                       args: list[str]) -> None:
    result = run(recorded, *args, *xdist_args)
    assert result.ret == 0
    assert "unused" not in result.stdout.str()
    result = run(recorded, *args, "--snapshot-update", *xdist_args)
    assert result.ret == 0
    assert (recorded.path / SNAPSHOT).is_file()


def test_without_a_snapshot_a_plain_run_has_no_extra_item(project: pytest.Pytester) -> None:
    result = run(project)
    result.assert_outcomes(skipped=1)  # only the case: nothing to protect, nothing added


def test_without_syrupy_a_plain_run_ignores_the_snapshot(recorded: pytest.Pytester) -> None:
    result = run(recorded, "-p", "no:syrupy")
    assert result.ret == 0
    result.assert_outcomes(skipped=1)


@pytest.mark.xfail(strict=True, reason="syrupy knows a snapshot's owner is kept out of collection only for .py "
                                       "modules, so the catalog of an --ignore'd benchmark file is 'unused'")
def test_ignored_benchmark_file_keeps_its_snapshot(recorded: pytest.Pytester) -> None:
    (recorded.path / "other.mcpeval.yaml").write_text(BENCH)
    assert run_subprocess(recorded, "--mcp-snapshots", "--snapshot-update").ret == 0
    result = run_subprocess(recorded, "--ignore=other.mcpeval.yaml")
    assert "unused" not in result.stdout.str()


@pytest.mark.xfail(strict=True, reason="syrupy matches -k against the snapshot name (`tool-catalog`), which does "
                                       "not name the file, so a -k that deselects a file by name marks its "
                                       "catalog unused when another file's catalog is checked")
def test_deselecting_a_file_by_name_keeps_its_snapshot(recorded: pytest.Pytester) -> None:
    (recorded.path / "other.mcpeval.yaml").write_text(BENCH)
    assert run_subprocess(recorded, "--mcp-snapshots", "--snapshot-update").ret == 0
    result = run_subprocess(recorded, "--mcp-snapshots", "-k", "not other")
    assert "unused" not in result.stdout.str()


def test_recording_snapshots_calls_no_model(project: pytest.Pytester, model_server: ScriptedModelServer,
                                            xdist_args: list[str]) -> None:
    """The documented `--mcp-snapshots --snapshot-update` with models in the ini: it records the catalogs and
    pays for nothing (it used to run every case of every model); a plain --mcp-snapshots run checks both."""
    with (project.path / "pytest.ini").open("a") as ini:
        ini.write("mcp_models = fake\n")
    model_server.call("show the open issues of repo r0", "list_issues", repo="r0")
    result = run(project, "--mcp-snapshots", "--snapshot-update", *xdist_args)
    assert result.ret == 0
    assert (project.path / SNAPSHOT).is_file()
    assert model_server.requests == []
    result.assert_outcomes(passed=1, skipped=1)  # the catalog recorded; the case not run
    result.stdout.fnmatch_lines(["--snapshot-update: 1 case skipped, no model called (snapshots only; run without "
                                 "it to evaluate)"])
    result = run(project, "--mcp-snapshots", *xdist_args)
    assert result.ret == 0
    result.assert_outcomes(passed=2)
    assert len(model_server.requests) == 1


HOSTILE = "Search or list issues. </pre></details><script>window.__pwned=1</script>"
LINTED = """server: {tools_file: tools.json}
cases:
  - id: list0
    input: show the open issues of repo r0
    expect: [{tool: list_issues, args: {repo: r0, colour: red}}]
"""


def test_snapshot_outcomes_and_lint_findings_are_in_the_report_and_on_the_page(recorded: pytest.Pytester,
                                                                             xdist_args: list[str]) -> None:
    """A catalog that changed under its snapshot, and a lint finding, reach the JSON report from the items
    (on an xdist worker too) and the HTML page shows both, the tool description of the diff as text."""
    from test_html import assert_only_text

    (recorded.path / "bench.mcpeval.yaml").write_text(LINTED)
    changed = [dict(TOOLS[0], description=HOSTILE), *TOOLS[1:]]
    (recorded.path / "tools.json").write_text(json.dumps(changed))
    result = run(recorded, "--mcp-snapshots", "--mcp-lint", "--mcp-report=report.json", "--mcp-html=report.html",
                 *xdist_args)
    assert result.ret == 1
    report = read_report(recorded)
    snapshot = report["snapshots"]["bench.mcpeval.yaml"]
    assert {k: snapshot[k] for k in ("file", "server", "snapshot", "outcome")} == {
        "file": "bench.mcpeval.yaml", "server": "tools_file: tools.json", "snapshot": str(SNAPSHOT),
        "outcome": "changed"}
    assert snapshot["message"].startswith("the tool catalog of tools_file: tools.json changed;")
    removed = '  -  "description": "List issues in a repository, filtered by state and labels.",'
    added = f"  +  \"description\": {json.dumps(HOSTILE)},"
    assert removed in snapshot["diff"] and added in snapshot["diff"]
    (problem,) = report["lint"]["bench.mcpeval.yaml"]["problems"]
    assert problem["kind"] == "unknown_argument" and problem["field"] == "expect[0].args.colour"
    page = (recorded.path / "report.html").read_text(encoding="utf-8")
    assert_only_text(page, [added, problem["message"]])
    assert '<a href="#checks">checks</a>' in page
    assert ('<tr data-outcome="changed"><td>bench.mcpeval.yaml<td>tools_file: tools.json<td class=wrap><details open>'
            '<summary><span class="bad">changed since its snapshot</span></summary>') in page
    assert "<h3>Lint (1 file, 1 problem)</h3>" in page and '<td class="bad">unknown_argument' in page
    # accepted: the next run's snapshot matches, and says so
    assert run(recorded, "--mcp-snapshots", "--snapshot-update", "--mcp-report=report.json", *xdist_args).ret == 0
    assert read_report(recorded)["snapshots"]["bench.mcpeval.yaml"]["outcome"] \
        == "updated"
    run(recorded, "--mcp-snapshots", "--mcp-report=report.json", "--mcp-html=report.html", *xdist_args)
    snapshot = read_report(recorded)["snapshots"]["bench.mcpeval.yaml"]
    assert (snapshot["outcome"], snapshot["message"], snapshot["diff"]) == ("matched", "", [])
    page = (recorded.path / "report.html").read_text(encoding="utf-8")
    assert '<td class=wrap><span class="ok">matches its snapshot</span>' in page and 'id="lint' not in page


def test_a_catalog_check_whose_server_gives_no_catalog_is_an_error_in_the_report(project: pytest.Pytester) -> None:
    (project.path / "bench.mcpeval.yaml").write_text(BENCH.replace("{tools_file: tools.json}",
                                                                   "{url: 'http://127.0.0.1:9/mcp'}"))
    result = run(project, "--mcp-snapshots", "--mcp-no-preflight", "--mcp-report=report.json", "-k", "tool-catalog")
    assert result.ret == 1
    snapshot = read_report(project)["snapshots"]["bench.mcpeval.yaml"]
    assert (snapshot["outcome"], snapshot["catalog"], snapshot["snapshot"]) == ("error", None, "")
    assert "could not connect to the server" in snapshot["message"]
