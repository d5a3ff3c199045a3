"""--mcp-shard=K/N and ``python -m pytest_mcpeval merge`` (docs/scale.md): shards merged are the single run.

The model is the scripted server, two models of it; the tools are the tracker example's, in-process.  The merge
runs in this process, as ``python -m pytest_mcpeval merge`` does (its pytest session is a nested one).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import read_report, run

from pytest_mcpeval.shard import plan
from pytest_mcpeval.testing import ScriptedModelServer

TRACKER = Path(__file__).parent.parent / "examples" / "tracker" / "server.py"
SERVER = 'server: {python: "tracker_server:server"}\n'

SINGLE = SERVER + "cases:\n" + "".join(
    f"  - id: s{i}\n    input: single question {i}\n    tags: [{'even' if i % 2 == 0 else 'odd'}]\n"
    f"    expect: [{{tool: {tool}}}]\n"
    for i, tool in enumerate(["list_projects", "get_issue", "search_issues", "list_issues", "get_user",
                              "list_projects", "search_issues", "get_issue", "list_issues"])
) + "  - id: chat\n    input: just chatting\n    expect: []\n"

FLOWS = SERVER + """\
cases:
  - id: reporter
    input: Who reported WEB-17?
    expect:
      - tool: get_issue
        args: {issue_key: WEB-17}
    mocks:
      get_issue:
        - result: {structured: {key: WEB-17, author: alice, state: open}}
    claims:
      - {claim: Names the reporter, check: {contains: alice}}
      - {claim: Says it is open, check: {contains: open}}
  - id: projects
    input: Which projects are there?
    expect: [{tool: list_projects}]
    mocks:
      list_projects:
        - result: {text: "WEB, API"}
    claims:
      - {claim: Names WEB, check: {contains: WEB}}
  - id: later
    input: not yet
    skip: not written yet
    expect: [{tool: list_projects}]
"""

WRONG = {"get_issue": "list_issues", "search_issues": "list_issues", "list_issues": "search_issues",
         "get_user": "list_projects", "list_projects": "get_user"}


def ini(server: ScriptedModelServer) -> str:
    params = json.dumps({"api_base": server.api_base, "api_key": "not-a-key"})
    return ("[pytest]\n"
            "mcp_model_aliases =\n    fake = openai/fake\n    other = openai/other\n"
            f"mcp_model_params =\n    fake = {params}\n    other = {params}\n")


def script(server: ScriptedModelServer, other_misses: int) -> None:
    """``fake`` right on every single call; ``other`` wrong on the first ``other_misses`` of them."""
    tools = [line.split("tool: ")[1].rstrip("}]") for line in SINGLE.splitlines() if "expect: [{tool:" in line]
    for i, tool in enumerate(tools):
        server.call(f"single question {i}", tool, model="fake")
        server.call(f"single question {i}", WRONG[tool] if i < other_misses else tool, model="other")
    server.script("just chatting", {"content": "hello"})
    server.flow("Who reported WEB-17?", [{"name": "get_issue", "arguments": {"issue_key": "WEB-17"}}],
                "alice reported it; it is open.", model="fake")
    server.flow("Who reported WEB-17?", [{"name": "get_issue", "arguments": {"issue_key": "WEB-17"}}],
                "bob reported it.", model="other")
    server.flow("Which projects are there?", [{"name": "list_projects", "arguments": {}}], "WEB and API.")


@pytest.fixture
def project(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> pytest.Pytester:
    (pytester.path / "pytest.ini").write_text(ini(model_server))
    (pytester.path / "single.mcpeval.yaml").write_text(SINGLE)
    (pytester.path / "flows.mcpeval.yaml").write_text(FLOWS)
    shutil.copy(TRACKER, pytester.path / "tracker_server.py")
    script(model_server, other_misses=3)
    return pytester


RUN = ("--mcp-models=fake,other", "--mcp-repeat=2", "--mcp-record=off")


def merge(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``python -m pytest_mcpeval merge ARGS`` in this process: exit status, stdout, stderr."""
    from pytest_mcpeval.__main__ import main

    capsys.readouterr()
    status = main(["merge", *args])
    out, err = capsys.readouterr()
    return status, out, err


TIMINGS = {"latency_s", "load_s", "startup_s"}


def without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


def assert_same_run(merged: dict[str, Any], single: dict[str, Any]) -> None:
    """Field by field, timings and run metadata aside (the first field that differs is named)."""
    a, b = without_timings(merged), without_timings(single)
    assert sorted(a) == sorted(b)
    for key in a:
        if key == "run":
            continue
        if key == "models":
            for model in b["models"]:
                for field, value in b["models"][model].items():
                    assert a["models"][model][field] == value, (model, field)
        assert a[key] == b[key], key


def test_merged_shards_equal_the_single_run(project: pytest.Pytester, model_server: ScriptedModelServer,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    base = run(project, *RUN, "--mcp-save-baseline=base.json")
    assert base.ret == 0, base.stdout.str()
    script(model_server, other_misses=6)  # `other` gets worse: the comparison flips cases and finds a drop
    outputs = ("--mcp-compare=base.json", "--mcp-fail-on-drop=0.0", "--mcp-min-accuracy=0.5")
    single = run(project, *RUN, *outputs, "--mcp-report=single.json", "--mcp-markdown=single.md",
                 "--mcp-html=single.html", "--junitxml=single.xml")
    assert single.ret == 1, single.stdout.str()
    shards = []
    for k in (1, 2, 3):
        xdist = ("-n", "2") if k == 2 else ()  # xdist inside a shard: the same share, the same report
        shard = run(project, *RUN, *xdist, *outputs, f"--mcp-shard={k}/3", f"--mcp-report=shard{k}.json")
        assert shard.ret == 0, shard.stdout.str()  # its gate failed, and is not applied to a shard
        shards.append(read_report(project, f"shard{k}.json"))
    shard2 = shards[1]["run"]["shard"]
    assert (shard2["index"], shard2["count"]) == (2, 3)
    assert [s["run"]["shard"]["items"] for s in shards] == [10, 8, 8]  # 13 cases x 2 models, one skipped
    assert shard2["selection"]["items"] == 26
    for shard in shards:  # every case in one shard, with its models and repeats
        ids = [(c["file"], c["id"]) for c in shard["cases"]]
        assert all(ids.count(case) == 4 for case in ids)
    cases = [{(c["file"], c["id"]) for c in s["cases"]} for s in shards]
    assert not cases[0] & cases[1] and not cases[1] & cases[2] and not cases[0] & cases[2]
    assert len(cases[0] | cases[1] | cases[2]) == 12

    status, out, err = merge(capsys, "shard1.json", "shard2.json", "shard3.json", *outputs,
                             "--mcp-report", "merged.json", "--mcp-markdown=merged.md", "--mcp-html=merged.html",
                             "--junitxml=merged.xml")
    assert (status, err) == (1, ""), out
    merged, single_report = read_report(project, "merged.json"), read_report(project, "single.json")
    assert len(merged["comparison"]["flipped"]) == 3  # the comparison is there to compare
    assert merged["models"]["fake"]["claims"]["cases"] == 4 and merged["models"]["other"]["repeats"]["runs"] == 2
    assert merged["skipped"] == single_report["skipped"] != []
    assert_same_run(merged, single_report)
    assert merged["run"]["merged"] == {"count": 3, "shards": [1, 2, 3], "missing": [],
                                       "selection": shard2["selection"]}
    assert merged["run"]["models"] == single_report["run"]["models"] and not merged["run"]["interrupted"]
    assert (project.path / "merged.md").read_text() == (project.path / "single.md").read_text()
    assert "GATE FAILED" in out and "report written to" in out
    assert junit_cases(project.path / "merged.xml") == junit_cases(project.path / "single.xml")


def junit_cases(path: Path) -> list[tuple[str, str, str, list[tuple[str, str]]]]:
    """Each test case of a JUnit XML file: its class and name, how it ended, its properties (no times)."""
    import xml.etree.ElementTree as ET

    out = []
    for case in ET.parse(path).getroot().iter("testcase"):
        ended = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
        properties = [(p.get("name", ""), p.get("value", "")) for p in case.iter("property")]
        out.append((case.get("classname", ""), case.get("name", ""), ended, properties))
    return sorted(out)
