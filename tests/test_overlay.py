"""--mcp-overlay: descriptions replaced before any model sees the catalog (docs/tuning.md)."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest
from conftest import make_project, run

from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.overlay import OverlayError, dump_overlay, load_overlay, parse_overlay
from pytest_mcpeval.results.schema import validate_report
from pytest_mcpeval.testing import ScriptedModelServer

TOOLS = [
    {"name": "list_issues", "description": "List issues in a repository.",
     "inputSchema": {"type": "object", "properties": {"repo": {"type": "string", "description": "the repo"}}}},
    {"name": "search_issues", "description": "Full-text search over issues.",
     "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}}},
]
BENCH = """server: {tools_file: tools.json}
models: [fake]
cases:
  - id: search0
    input: find issues about dark mode
    expect: [{tool: search_issues}]
"""
NEW = "Search issues by words in their titles and comments."
OVERLAY = f"version: 1\ntools:\n  search_issues: {{description: {NEW!r}, parameters: {{query: 'the words'}}}}\n"


@pytest.fixture
def project(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> pytest.Pytester:
    model_server.call("find issues about dark mode", "search_issues", query="dark mode")
    make_project(pytester, model_server, {"bench.mcpeval.yaml": BENCH, "overlay.yaml": OVERLAY}, tools=TOOLS)
    return pytester


def sent_description(request: dict[str, object], tool: str) -> str:
    tools = request["tools"]
    assert isinstance(tools, list)
    return next(str(t["function"]["description"]) for t in tools if t["function"]["name"] == tool)


def test_overlay_reaches_the_model_the_report_and_the_cache_key(project: pytest.Pytester,
                                                                 model_server: ScriptedModelServer) -> None:
    result = run(project, "--mcp-overlay=overlay.yaml", "--mcp-report=report.json")
    assert result.ret == 0
    assert len(model_server.requests) == 1
    assert sent_description(model_server.requests[0], "search_issues") == NEW
    sent = model_server.requests[0]["tools"][1]["function"]["parameters"]  # type: ignore[index]
    assert sent["properties"]["query"]["description"] == "the words"
    report = json.loads((project.path / "report.json").read_text())
    validate_report(report)
    overlay = report["run"]["overlay"]
    assert overlay["path"] == "overlay.yaml" and overlay["tools"] == ["search_issues"]
    assert len(overlay["digest"]) == 16
    (digest,) = overlay["catalogs"]
    assert report["catalogs"][digest]["tools"]["search_issues"]["description"] == NEW
    assert report["cases"][0]["catalog"] == digest
    assert run(project, "--mcp-overlay=overlay.yaml").ret == 0
    assert len(model_server.requests) == 1  # replayed: same request, same key
    assert run(project, "--mcp-report=plain.json").ret == 0
    assert len(model_server.requests) == 2  # without the overlay: another request, another key
    assert sent_description(model_server.requests[1], "search_issues") == "Full-text search over issues."
    assert "overlay" not in json.loads((project.path / "plain.json").read_text())["run"]


OVERLAID = ("overlay overlay.yaml (1 tool: search_issues): their descriptions are the overlay's, not the "
            "server's")


def test_comparison_shows_the_description_change(project: pytest.Pytester) -> None:
    assert run(project, "--mcp-save-baseline=base.json").ret == 0
    result = run(project, "--mcp-overlay=overlay.yaml", "--mcp-compare=base.json", "--mcp-markdown=cmp.md",
                 "--mcp-html=cmp.html")
    assert result.ret == 0
    markdown = (project.path / "cmp.md").read_text()
    assert "description of search_issues changed" in markdown and NEW in markdown
    # every description of the run says it ran with the overlay (issue 32 item 3)
    assert f"> {OVERLAID}" in markdown.splitlines()
    assert OVERLAID in result.stdout.lines
    page = (project.path / "cmp.html").read_text()
    assert html.unescape(page.split('<p class="overlay">', 1)[1].split("</p>", 1)[0]) == OVERLAID
    plain = run(project, "--mcp-markdown=plain.md")
    assert "overlay" not in (project.path / "plain.md").read_text() and OVERLAID not in plain.stdout.lines


def test_snapshot_sees_the_overlaid_catalog(project: pytest.Pytester) -> None:
    assert run(project, "--mcp-snapshots", "--snapshot-update").ret == 0
    result = run(project, "--mcp-snapshots", "--mcp-overlay=overlay.yaml", "-k", "tool-catalog")
    assert result.ret == 1
    result.stdout.fnmatch_lines([f'  +*"description": "{NEW}",'])


@pytest.mark.parametrize(("text", "message"), [
    ("version: 1\ntools:\n  search_issue: {description: x}\n",
     "ERROR: --mcp-overlay=overlay.yaml: tool `search_issue` is not in the catalog; did you mean `search_issues`?"),
    ("version: 1\ntools:\n  list_issues: {parameters: {rep: x}}\n",
     "ERROR: --mcp-overlay=overlay.yaml: tool `list_issues` has no parameter `rep`; did you mean `repo`?"),
    ("version: 2\ntools: {}\n", "ERROR: --mcp-overlay=overlay.yaml: `version` must be 1 (got 2)"),
    ("version: 1\ntools:\n  list_issues: {descripton: x}\n",
     "ERROR: --mcp-overlay=overlay.yaml: tools.list_issues: unknown key `descripton`; did you mean `description`?"),
])
def test_bad_overlay_is_a_usage_error(project: pytest.Pytester, model_server: ScriptedModelServer, text: str,
                                      message: str) -> None:
    (project.path / "overlay.yaml").write_text(text)
    result = run(project, "--mcp-overlay=overlay.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.lines
    assert "Traceback" not in result.stderr.str()
    assert not model_server.requests


def test_missing_overlay_file(project: pytest.Pytester) -> None:
    result = run(project, "--mcp-overlay=nope.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "ERROR: --mcp-overlay=nope.yaml: no such file" in result.stderr.lines


def test_apply_keeps_other_tools_and_identity(tmp_path: Path) -> None:
    catalog = Catalog([dict(t) for t in TOOLS])
    path = tmp_path / "o.yaml"
    path.write_text(dump_overlay({"list_issues": "Only open issues."}))
    overlay = load_overlay(path)
    overlaid = overlay.apply(catalog)
    assert overlaid is overlay.apply(catalog)
    assert overlaid.by_name["list_issues"]["description"] == "Only open issues."
    assert overlaid.by_name["search_issues"] == catalog.by_name["search_issues"]
    assert catalog.by_name["list_issues"]["description"] == "List issues in a repository."  # not edited in place
    assert overlaid.digest != catalog.digest
    untouched = Catalog([{"name": "other", "description": "x"}])
    assert overlay.apply(untouched) is untouched
    assert parse_overlay({"version": 1, "tools": {}}, "x").tools == {}
    with pytest.raises(OverlayError, match="expected a mapping"):
        parse_overlay([1], "x")


def test_an_alias_bomb_in_an_overlay_or_a_candidates_file_is_refused_before_it_expands(tmp_path: Path) -> None:
    from pytest_mcpeval.tune.candidates import load_candidates
    from pytest_mcpeval.tune.command import TuneError

    levels = ["a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"] + [
        f"{b}: &{b} [{', '.join([f'*{a}'] * 10)}]" for a, b in zip("abcde", "bcdef", strict=True)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("version: 1\n" + "\n".join(levels) + "\ntools: {}\n")
    with pytest.raises(OverlayError, match="alias"):
        load_overlay(bomb)
    with pytest.raises(TuneError, match="alias"):
        load_candidates(bomb)


def test_a_tune_selection_checks_the_overlay_against_every_collected_file(project: pytest.Pytester) -> None:
    """tune's select plugin: a candidate's run may select no case of the server whose tool it changes; the overlay
    is checked against every collected file's catalog before the selection, so that run is not refused."""
    other = [{"name": "get_weather", "description": "Weather.", "inputSchema": {"type": "object", "properties": {}}}]
    (project.path / "weather.json").write_text(json.dumps(other))
    (project.path / "weather.mcpeval.yaml").write_text(
        "server: {tools_file: weather.json}\nmodels: [fake]\ncases:\n  - id: w0\n    input: rain?\n"
        "    expect: [{tool: get_weather}]\n")
    (project.path / "overlay.yaml").write_text("version: 1\ntools:\n  get_weather: {description: Forecasts.}\n")
    (project.path / "select.json").write_text(json.dumps([["bench.mcpeval.yaml", "search0"]]))
    plugin = ["-p", "pytest_mcpeval.tune.select", "--mcpeval-tune-select=select.json", "--mcp-report=report.json"]
    result = run(project, "--mcp-overlay=overlay.yaml", *plugin)
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    report = json.loads((project.path / "report.json").read_text())
    assert [c["id"] for c in report["cases"]] == ["search0"] and report["run"]["overlay"]["tools"] == ["get_weather"]
    (project.path / "overlay.yaml").write_text("version: 1\ntools:\n  get_weathr: {description: Forecasts.}\n")
    result = run(project, "--mcp-overlay=overlay.yaml", *plugin)  # a tool no file has is still refused
    assert result.ret == pytest.ExitCode.USAGE_ERROR and "did you mean `get_weather`?" in result.stderr.str()
