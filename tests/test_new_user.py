"""What a new user reaches for first: listing a server's tools, the run's Markdown summary, readable messages."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_mcpeval.checks.listing import describe_tool, listing_lines
from pytest_mcpeval.report.markdown import code, summary
from pytest_mcpeval.report.terminal import miss_lines
from pytest_mcpeval.testing import ScriptedModelServer
from pytest_mcpeval.text import plural

TRACKER = Path(__file__).parent.parent / "examples" / "tracker"

NOTES = '''
import sys
from mcp.server import MCPServer

server = MCPServer("notes", log_level="WARNING")


@server.tool(description="List every note in a folder.\\nSecond line is not shown.")
def list_notes(folder: str, limit: int = 20) -> list[str]:
    return []


@server.tool(description="Full-text search over all notes.")
def search_notes(query: str, tags: list[str] | None = None) -> list[str]:
    return []


if __name__ == "__main__":
    server.run()
'''

NOTES_CASES = """
cases:
  - id: list-work
    input: Show the notes in my work folder
    expect: [{tool: list_notes, args: {folder: work}}]
"""


def runpytest(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", *args)


@pytest.fixture
def notes_project(pytester: pytest.Pytester) -> pytest.Pytester:
    (pytester.path / "notes_server.py").write_text(NOTES)
    (pytester.path / "notes.mcpeval.yaml").write_text(
        f"server:\n  command: [{sys.executable!r}, notes_server.py]\n" + NOTES_CASES
    )
    return pytester


@pytest.mark.parametrize("xdist", [[], ["-n", "1"]], ids=["no-xdist", "xdist"])
def test_mcp_tools_lists_a_stdio_servers_tools_without_a_model(notes_project: pytest.Pytester,
                                                               model_server: ScriptedModelServer,
                                                               xdist: list[str]) -> None:
    # a model is configured: --mcp-tools must still call none
    result = runpytest(notes_project, "--mcp-tools", "--mcp-models=openai/x", *xdist)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "*= mcpeval tools =*",
        f"notes.mcpeval.yaml: command: {sys.executable} notes_server.py, 2 tools",
        "  list_notes(folder*: string, limit: integer)",
        "      List every note in a folder.",
        "  search_notes(query*: string, tags: string[]|null)",
        "      Full-text search over all notes.",
        "(* = required parameter; -v shows whole descriptions)",
        "*1 passed*",
    ])
    assert "Second line" not in result.stdout.str()
    assert model_server.requests == []


def test_mcp_tools_on_the_example_tracker_in_process(pytester: pytest.Pytester) -> None:
    for name in ("server.py", "tracker.mcpeval.yaml"):
        (pytester.path / name).write_text((TRACKER / name).read_text())
    result = runpytest(pytester, "--mcp-tools", "-v")
    assert result.ret == 0
    result.stdout.fnmatch_lines([
        "*tracker.mcpeval.yaml::tools PASSED*",
        "tracker.mcpeval.yaml: python: server:server, 12 tools",
        '  close_issue(issue_key*: string, comment: string|null, reason: "completed"|"not_planned"|"duplicate")',
    ])


def test_mcp_tools_reports_an_unreachable_server_as_one_error(pytester: pytest.Pytester) -> None:
    (pytester.path / "x.mcpeval.yaml").write_text("server:\n  command: [definitely-not-a-command-xyz]\n"
                                                  + NOTES_CASES)
    result = runpytest(pytester, "--mcp-tools")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*could not connect to the server (command: definitely-not-a-command-xyz)*"])
    assert "Traceback" not in result.stdout.str()


def test_describe_tool_types() -> None:
    tool = {
        "name": "t",
        "description": "\n  First line.  \nsecond",
        "inputSchema": {
            "type": "object",
            "required": ["b"],
            "properties": {
                "a": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                "b": {"enum": ["x", "y"]},
                "c": {"type": "array", "items": {"type": "object"}},
                "d": {},
            },
        },
    }
    shown = describe_tool(tool)
    assert shown == {
        "name": "t",
        "description": "First line.",
        "full_description": "First line. second",  # for -v
        "params": [
            {"name": "b", "type": '"x"|"y"', "required": True},
            {"name": "a", "type": "integer|null", "required": False},
            {"name": "c", "type": "object[]", "required": False},
            {"name": "d", "type": "any", "required": False},
        ],
    }
    lines = list(listing_lines([{"file": "f.yaml", "server": "s", "tools": [shown]}]))
    assert lines[:3] == ["f.yaml: s, 1 tool", '  t(b*: "x"|"y", a: integer|null, c: object[], d: any)',
                         "      First line."]
    assert lines[-1] == "(* = required parameter; -v shows whole descriptions)"
    assert list(listing_lines([{"file": "f.yaml", "server": "s", "tools": [shown]}], verbose=1))[2] == (
        "      First line. second")


def test_array_types_of_unions_read_as_arrays() -> None:
    """``string|number|boolean|null[][]`` read as a union with an array of arrays of null (issue 32, item 9)."""
    union = {"type": ["string", "number", "boolean", "null"]}
    tool = {"name": "t", "inputSchema": {"type": "object", "properties": {
        "grid": {"type": "array", "items": {"type": "array", "items": union}},
        "pick": {"type": "array", "items": {"enum": ["a", "b"]}},
        "maybe": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]},
    }}}
    types = {p["name"]: p["type"] for p in describe_tool(tool)["params"]}
    assert types == {"grid": "(string|number|boolean|null)[][]", "pick": '("a"|"b")[]', "maybe": "string[]|null"}


@pytest.mark.parametrize(("text", "shown"), [
    ("Short enough.", "Short enough."),
    ("List issues in a repository. " + "Filter by labels, state, assignee and more, sorted as you like. " * 3,
     "List issues in a repository. Filter by labels, state, assignee and more, sorted as you like. …"),
    ("A very long first sentence that goes on and on about what this tool can do for the person who calls it "
     "without stopping",
     "A very long first sentence that goes on and on about what this tool can do for the person who calls it…"),
])
def test_long_descriptions_are_cut_at_a_sentence_or_a_word(text: str, shown: str) -> None:
    cut = describe_tool({"name": "t", "description": text})
    assert cut["description"] == shown and len(shown) <= 110
    assert cut.get("full_description", text.strip()) == text.strip()


def test_markdown_without_compare_is_the_runs_summary(pytester: pytest.Pytester,
                                                     model_server: ScriptedModelServer) -> None:
    from conftest import make_project

    make_project(pytester, model_server, {"t.mcpeval.yaml": """
server: {tools_file: tools.json}
cases:
  - {id: a, input: one, expect: [{tool: list_x}]}
  - {id: b, input: two, expect: [{tool: search_x}]}
"""}, tools=[{"name": "list_x", "inputSchema": {}}, {"name": "search_x", "inputSchema": {}}])
    model_server.call("one", "list_x")
    model_server.call("two", "list_x")
    summary_file = pytester.path / "step-summary.md"
    pytester._monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary_file))
    result = runpytest(pytester, "--mcp-models=fake", "--mcp-markdown=out/summary.md", "--mcp-min-accuracy=0.4")
    assert result.ret == 0, result.stdout.str()
    text = (pytester.path / "out" / "summary.md").read_text()
    assert text.startswith("## pytest-mcpeval: run summary\n\n✅ **gate passed**: `accuracy >= 0.4`")
    assert "| `fake` | 2 | 0 | 50.0% |" in text
    assert "- expected `search_x`, called `list_x` (1x)" in text
    assert "| `t.mcpeval.yaml::b[fake]` | wrong_tool |" in text
    assert summary_file.read_text() == text + "\n"


def test_markdown_escapes_what_it_did_not_write() -> None:
    assert code("a`b") == "``a`b``"
    assert code("`x`") == "`` `x` ``"
    report = {
        "gate": {"passed": False, "failures": ["<img src=x onerror=alert(1)> | broke"], "usage_errors": []},
        "models": {},
        "cases": [{"file": "f", "id": "c", "model": "m", "error": "</details><h2>boom", "passed": None}],
    }
    text = summary(report)
    assert "<img" not in text and "</details>" not in text and "<h2>" not in text
    assert "&lt;img src=x onerror=alert(1)&gt; \\| broke" in text


def test_ignored_arguments_are_not_shown_in_a_miss() -> None:
    case = {"file": "f", "line": 3, "id": "c", "model": "m", "diagnosis": "wrong_argument_value",
            "expected": [{"tool": "t", "args": {"a": 1, "b": {"ignore": True},
                                                "c": {"ignore": True, "optional": True}}}],
            "called": [{"tool": "t", "args": {"a": 2, "b": 5}}], "arguments": None}
    assert miss_lines(case)[1] == '  - expected t {"a": 1}'


def test_plural() -> None:
    assert [plural(n, "case") for n in (0, 1, 2)] == ["0 cases", "1 case", "2 cases"]
    assert plural(1, "entry", "entries") == "1 entry" and plural(3, "entry", "entries") == "3 entries"
