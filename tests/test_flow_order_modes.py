"""The five order modes on the same transcripts, end to end: the scripted model answers over HTTP through
litellm, the tracker's tools are mocked, and the report says which mode held.

Two transcripts against ``expect: [get_issue WEB-12, list_issue_comments WEB-12]``:

* *with a detour*: get_issue, get_user (not expected), list_issue_comments;
* *reversed*: list_issue_comments, get_issue.

| mode | with a detour | reversed |
| --- | --- | --- |
| strict | fails (extra call) | fails (order) |
| in_order | passes | fails (order) |
| unordered | fails (extra call) | passes |
| superset | passes | passes |
| subset | fails (extra call) | passes |

And a forbidden call fails the case in every mode.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import make_project, read_report, run

from pytest_mcpeval.testing import ScriptedModelServer

TRACKER = Path(__file__).parent.parent / "examples" / "tracker" / "server.py"
MODES = ("strict", "in_order", "unordered", "superset", "subset")
TABLE = {  # (transcript, mode) -> passed
    ("detour", "strict"): False, ("detour", "in_order"): True, ("detour", "unordered"): False,
    ("detour", "superset"): True, ("detour", "subset"): False,
    ("reversed", "strict"): False, ("reversed", "in_order"): False, ("reversed", "unordered"): True,
    ("reversed", "superset"): True, ("reversed", "subset"): True,
}
GET = {"name": "get_issue", "arguments": {"issue_key": "WEB-12"}}
COMMENTS = {"name": "list_issue_comments", "arguments": {"issue_key": "WEB-12"}}
USER = {"name": "get_user", "arguments": {"username": "carol"}}
MOCKS = """\
    mocks:
      get_issue: [{result: {structured: {key: WEB-12, author: carol}}}]
      list_issue_comments: [{result: {structured: {result: []}}}]
      get_user: [{result: {structured: {username: carol, name: Carol Diaz}}}]
"""


def case(transcript: str, mode: str, forbid: str = "") -> str:
    return (f"  - id: {transcript}-{mode}{'-forbid' if forbid else ''}\n"
            f"    input: {transcript} transcript\n"
            f"    order: {mode}\n"
            "    expect:\n"
            "      - {tool: get_issue, args: {issue_key: WEB-12}}\n"
            "      - {tool: list_issue_comments, args: {issue_key: WEB-12}}\n"
            + (f"    forbid: [{forbid}]\n" if forbid else "") + MOCKS)


def test_each_order_mode_on_the_same_transcripts(pytester: pytest.Pytester,
                                                 model_server: ScriptedModelServer) -> None:
    """(Under -n 2 the same scoring runs on workers: tests/test_flow_examples.py checks the report is equal.)"""
    cases = [case(t, m) for t in ("detour", "reversed") for m in MODES]
    cases += [case("detour", m, forbid="get_user") for m in MODES]
    bench = 'server: {python: "tracker_server:server"}\ncases:\n' + "".join(cases)
    make_project(pytester, model_server, {"modes.mcpeval.yaml": bench})
    shutil.copy(TRACKER, pytester.path / "tracker_server.py")
    model_server.flow("detour transcript", [GET], [USER], [COMMENTS], "done")
    model_server.flow("reversed transcript", [COMMENTS], [GET], "done")
    result = run(pytester, "--mcp-models=fake", "--mcp-record=off", "--mcp-report=report.json")
    assert result.ret == pytest.ExitCode.OK  # misses are reported, not failed (no --mcp-strict)
    got = {c["id"]: c for c in read_report(pytester)["cases"]}
    assert {key: got[f"{key[0]}-{key[1]}"]["passed"] for key in TABLE} == TABLE
    assert {key: got[f"{key[0]}-{key[1]}"]["order_ok"] for key in TABLE} == TABLE  # no claims: order decides
    for mode in MODES:  # a forbidden call fails the case in every mode, whatever the order says
        forbidden = got[f"detour-{mode}-forbid"]
        assert (forbidden["passed"], forbidden["forbidden_called"], forbidden["diagnosis"]) == (
            False, ["get_user"], "forbidden_tool")
    assert got["detour-strict"]["diagnosis"] == "extra_calls"
    assert got["reversed-in_order"]["diagnosis"] == "wrong_order"
    assert all(len(c["trajectory"]) == (4 if c["id"].startswith("detour") else 3) for c in got.values())
