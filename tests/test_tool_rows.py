"""The per-tool rows of the summaries: the expected tools the model got wrong, worst and most expected first; the
tools no case expects but the model called are one line (issue 23, item 9: ``make demo`` printed about 70 rows
for ``local/minilm``, most of them ``support 0``)."""

from __future__ import annotations

import pytest
from conftest import make_project, run

from pytest_mcpeval.testing import ScriptedModelServer

NAMES = ["get_me", "list_issues", "search_issues", "stray_a", "stray_b", "stray_c"]
TOOLS = [{"name": n, "description": f"The {n} tool.", "inputSchema": {"type": "object"}} for n in NAMES]
# what each case expects, and what the model calls
CASES = [("me", "get_me", "get_me"), ("list1", "list_issues", "stray_a"), ("list2", "list_issues", "list_issues"),
         ("search1", "search_issues", "stray_a"), ("search2", "search_issues", "stray_b"),
         ("search3", "search_issues", "stray_c"), ("search4", "search_issues", "stray_a")]
BENCH = "server: {tools_file: tools.json}\ncases:\n" + "".join(
    f"  - id: {case}\n    input: {case}?\n    expect: [{{tool: {tool}}}]\n" for case, tool, _ in CASES)


@pytest.mark.parametrize("verbose", [[], ["-v"]], ids=["default", "verbose"])
def test_only_expected_tools_are_rows_and_the_stray_calls_one_line(
        pytester: pytest.Pytester, model_server: ScriptedModelServer, verbose: list[str]) -> None:
    make_project(pytester, model_server, {"bench.mcpeval.yaml": BENCH}, tools=TOOLS)
    for case, _, called in CASES:
        model_server.call(f"{case}?", called)
    result = run(pytester, "--mcp-models=fake", "--mcp-record=off", "--mcp-markdown=summary.md", *verbose)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "  search_issues                P n/a  R 0.000  F1 0.000  support 4  detects blind",  # the point
        "  list_issues                  P 1.000  R 0.500  F1 0.667  support 2  detects blind",
        "  called, never expected: 3 tools, 5 calls (stray_a 3x, stray_b 1x, stray_c 1x)",
        "  confused: expected search_issues -> called stray_a (2x)",
    ])
    assert "support 0" not in result.stdout.str()  # get_me (F1 1.0) is not a row either
    summary = (pytester.path / "summary.md").read_text()
    assert ("| `search_issues` | — | 0.000 | 0.000 | 4 | blind |\n"
            "| `list_issues` | 1.000 | 0.500 | 0.667 | 2 | blind |\n") in summary
    assert "Called, never expected: 3 tools, 5 calls (`stray_a` 3x, `stray_b` 1x, `stray_c` 1x)." in summary
    assert "| `stray_a` |" not in summary


def test_the_stray_line_is_cut_without_dash_v(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    names = [f"stray_{i}" for i in range(8)]
    tools = [{"name": n, "description": n, "inputSchema": {"type": "object"}} for n in ["get_me", *names]]
    cases = "".join(f"  - id: c{i}\n    input: c{i}?\n    expect: [{{tool: get_me}}]\n" for i in range(8))
    make_project(pytester, model_server, {"bench.mcpeval.yaml": "server: {tools_file: tools.json}\ncases:\n" + cases},
                 tools=tools)
    for i, name in enumerate(names):
        model_server.call(f"c{i}?", name)
    result = run(pytester, "--mcp-models=fake", "--mcp-record=off")
    result.stdout.fnmatch_lines(["  called, never expected: 8 tools, 8 calls (stray_0 1x, stray_1 1x, stray_2 1x, "
                                 "stray_3 1x, stray_4 1x, ... 3 more)"])
