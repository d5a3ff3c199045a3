"""--mcp-shard=K/N and ``python -m pytest_mcpeval merge`` (docs/scale.md): shards merged are the single run.

The model is the scripted server, two models of it; the tools are the tracker example's, in-process.  The merge
runs in this process, as ``python -m pytest_mcpeval merge`` does (its pytest session is a nested one).
"""

from __future__ import annotations

import json
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
    expect: [{tool: list_projects, args: {bogus: 1}}]
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
    single = run(project, *RUN, *outputs, "--mcp-lint", "--mcp-report=single.json", "--mcp-markdown=single.md",
                 "--mcp-html=single.html", "--junitxml=single.xml")
    assert single.ret == 1, single.stdout.str()
    shards = []
    for k in (1, 2, 3):
        xdist = ("-n", "2") if k == 2 else ()  # xdist inside a shard: the same share, the same report
        shard = run(project, *RUN, *xdist, *outputs, "--mcp-lint", f"--mcp-shard={k}/3",
                    f"--mcp-report=shard{k}.json")
        assert shard.ret == 1, shard.stdout.str()  # its lint item failed (its gate failed too: not applied)
        shards.append(read_report(project, f"shard{k}.json"))
    shard2 = shards[1]["run"]["shard"]
    assert (shard2["index"], shard2["count"]) == (2, 3)
    assert [s["run"]["shard"]["items"] for s in shards] == [10, 8, 8]  # 13 cases x 2 models, one skipped
    assert shard2["selection"]["items"] == 26
    for report in shards:  # every case in one shard, with its models and repeats
        ids = [(c["file"], c["id"]) for c in report["cases"]]
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
    assert merged["lint"]["flows.mcpeval.yaml"]["problems"] and merged["lint"]["single.mcpeval.yaml"]["confusable"]
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


def test_the_page_is_the_single_runs_but_for_timings(project: pytest.Pytester,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    import re

    assert run(project, "--mcp-models=fake", "--mcp-record=off", "--mcp-html=single.html").ret == 0
    for k in (1, 2):
        assert run(project, "--mcp-models=fake", "--mcp-record=off", f"--mcp-shard={k}/2",
                   f"--mcp-report=shard{k}.json").ret == 0
    assert merge(capsys, "shard1.json", "shard2.json", "--mcp-html", "merged.html")[0] == 0

    def page(name: str) -> str:
        return re.sub(r"latency p50 [\d.]+ s, p95 [\d.]+ s", "latency", (project.path / name).read_text())

    assert page("merged.html") == page("single.html")


# -- merging (its refusals and the missing shard: tests/faults/test_fault_shards.py) --------------------------

CASES = "cases:\n" + "".join(f"  - id: q{i}\n    input: question {i}\n    expect: [{{tool: list_projects}}]\n"
                             for i in range(6))


@pytest.fixture
def small(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> pytest.Pytester:
    (pytester.path / "pytest.ini").write_text(ini(model_server))
    (pytester.path / "cases.mcpeval.yaml").write_text(SERVER + CASES)
    shutil.copy(TRACKER, pytester.path / "tracker_server.py")
    model_server.call("*", "list_projects")
    for k in (1, 2, 3):
        result = run(pytester, "--mcp-models=fake", f"--mcp-shard={k}/3", f"--mcp-report=shard{k}.json")
        assert result.ret == 0, result.stdout.str()
    return pytester


def edited(pytester: pytest.Pytester, name: str, change: Any) -> str:
    data = json.loads((pytester.path / "shard2.json").read_text())
    change(data)
    (pytester.path / name).write_text(json.dumps(data))
    return name


def test_all_shards_merged_pass_and_save_the_baseline(small: pytest.Pytester,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = merge(capsys, "shard1.json", "shard2.json", "shard3.json", "--mcp-min-accuracy=0.9",
                           "--mcp-save-baseline=base.json")
    assert status == 0, out
    assert "gate passed: accuracy >= 0.9" in out and (small.path / "base.json").is_file()
    assert len(json.loads((small.path / "base.json").read_text())["cases"]) == 6


def test_the_command_in_a_process_of_its_own(small: pytest.Pytester) -> None:
    """As CI runs it: ``python -m pytest_mcpeval merge``, no warning of pytest's about the plugin imported first."""
    result = small.run(sys.executable, "-m", "pytest_mcpeval", "merge", "shard1.json", "shard2.json", "shard3.json",
                       "-q", "--mcp-report", "merged.json")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    assert "warning" not in result.stdout.str().lower() and result.stderr.str() == ""
    result.stdout.fnmatch_lines(["fake: 6 scored, 0 errors | accuracy 100.0%*", "report written to *merged.json",
                                 "6 passed in *"])


def test_merge_usage_errors_are_one_line(small: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        merge(capsys, "shard1.json", "--mcp-min-accuracy=2")
    assert exited.value.code == 4
    assert capsys.readouterr().err == ("python -m pytest_mcpeval merge: argument --mcp-min-accuracy: '2' is not "
                                       "between 0 and 1\n")
    with pytest.raises(SystemExit):
        merge(capsys, "shard1.json", "--mcp-models=fake")
    assert capsys.readouterr().err == ("python -m pytest_mcpeval merge: unrecognized arguments: --mcp-models=fake; "
                                       "did you mean --mcp-html?\n")


# -- the shard's side --------------------------------------------------------------------------------------------

def test_a_shard_reports_its_gate_and_does_not_apply_it(small: pytest.Pytester) -> None:
    result = run(small, "--mcp-models=fake", "--mcp-shard=1/3", "--mcp-min-accuracy=1", "--mcp-record=off",
                 "--mcp-report=r.json")
    assert result.ret == 0  # every case passes: the gate passes too
    (small.path / "cases.mcpeval.yaml").write_text(SERVER + CASES.replace("list_projects", "get_user"))
    result = run(small, "--mcp-models=fake", "--mcp-shard=1/3", "--mcp-min-accuracy=1", "--mcp-record=off")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["--mcp-shard=1/3: this shard's gate is reported, not applied (exit status 0 for "
                                 "it): `python -m pytest_mcpeval merge` gates the shards' report as one run "
                                 "(--mcp-shard-gate applies it here)", "GATE FAILED *"])
    result = run(small, "--mcp-models=fake", "--mcp-shard=1/3", "--mcp-min-accuracy=1", "--mcp-record=off",
                 "--mcp-shard-gate")
    assert result.ret == 1


@pytest.mark.parametrize(("args", "message"), [
    (["--mcp-shard=4/3"], "argument --mcp-shard: '4/3': K must be between 1 and N (e.g. 2/4)"),
    (["--mcp-shard=2"], "argument --mcp-shard: '2' is not K/N (e.g. 2/4: the second of four shards)"),
    (["--mcp-shard-gate"], "--mcp-shard-gate needs --mcp-shard=K/N"),
    (["--mcp-shard=1/2", "--mcp-save-baseline=b.json"],
     "--mcp-save-baseline with --mcp-shard=1/2: a shard's baseline would hold only its share of the cases; save "
     "it with `python -m pytest_mcpeval merge REPORT... --mcp-save-baseline=PATH`"),
    (["--mcp-shard=1/2", "--mcp-shard-durations=nothing.json"], "--mcp-shard-durations=nothing.json: no such file"),
])
def test_shard_usage_errors(pytester: pytest.Pytester, args: list[str], message: str) -> None:
    result = run(pytester, *args)
    assert result.ret == 4
    assert message in result.stderr.str()


def test_more_shards_than_cases_is_no_error(small: pytest.Pytester) -> None:
    result = run(small, "--mcp-models=fake", "--mcp-shard=9/9", "--mcp-report=empty.json")
    assert result.ret == 0
    assert read_report(small, "empty.json")["run"]["shard"]["items"] == 0


# -- the partition -------------------------------------------------------------------------------------------

def test_plan_is_balanced_and_whole() -> None:
    keys = {f"f.mcpeval.yaml::c{i}": 1.0 for i in range(10)}
    shards = plan(keys, 3)
    assert sorted(list(shards.values()).count(k) for k in (1, 2, 3)) == [3, 3, 4]
    assert plan(dict(reversed(list(keys.items()))), 3) == shards  # the order given does not matter
    timed = plan({"a": 10.0, "b": 4.0, "c": 3.0, "d": 3.0}, 2)
    assert timed == {"a": 1, "b": 2, "c": 2, "d": 2}  # the heavy case alone: 10 s against 10 s


def collected(result: pytest.RunResult) -> list[str]:
    return sorted(line for line in result.stdout.lines if "::" in line)


def test_the_partition_is_the_same_under_every_hash_seed(pytester: pytest.Pytester,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makefile(".mcpeval.yaml", a=SERVER + CASES, b=SERVER + CASES.replace("q", "r"))
    shares, orders = {}, {}
    for seed in ("0", "4242"):
        monkeypatch.setenv("PYTHONHASHSEED", seed)
        shares[seed] = [collected(pytester.runpytest_subprocess("--collect-only", "-q", f"--mcp-shard={k}/3"))
                        for k in (1, 2, 3)]
        # the order too, two models: xdist's workers must collect the same items in the same order, and a user's
        # workers each have a seed of their own (the suite's in-process runs fork workers with one seed)
        every = pytester.runpytest_subprocess("--collect-only", "-q", "--mcp-models=m1,m2")
        orders[seed] = [line for line in every.stdout.lines if "::" in line]
    assert shares["0"] == shares["4242"]
    assert orders["0"] == orders["4242"] and len(orders["0"]) == 24
    every = [name for share in shares["0"] for name in share]
    assert sorted(every) == sorted(set(every)) and len(every) == 12
    assert sorted(map(len, shares["0"])) == [4, 4, 4]


def test_the_shards_share_what_k_selected(pytester: pytest.Pytester) -> None:
    pytester.makefile(".mcpeval.yaml", a=SERVER + CASES)
    shares = [run(pytester, "--collect-only", "-q", "-k", "not q0 and not q1", f"--mcp-shard={k}/2", *xdist)
              for k, xdist in ((1, ()), (2, ("-p", "no:xdist")))]  # its xdist hook is optional
    assert [len(collected(share)) for share in shares] == [2, 2]
    shares[0].stdout.fnmatch_lines(["*2/6 tests collected (4 deselected)*"])


def test_durations_of_an_earlier_report_balance_the_shards(pytester: pytest.Pytester) -> None:
    pytester.makefile(".mcpeval.yaml", a=SERVER + CASES)
    earlier = {"gate": {}, "cases": [{"file": "a.mcpeval.yaml", "id": f"q{i}", "latency_s": 10.0 if i == 3 else 1.0}
                                     for i in range(6)]}
    (pytester.path / "earlier.json").write_text(json.dumps(earlier))
    first = collected(run(pytester, "--collect-only", "-q", "--mcp-shard=1/2", "--mcp-shard-durations=earlier.json"))
    assert first == ["a.mcpeval.yaml::q3"]  # 10 s alone; the five others (5 s) in shard 2
