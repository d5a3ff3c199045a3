"""``python -m pytest_mcpeval import atlas``: MCP-Atlas tasks -> offline flows (docs/import-atlas.md).

The 10 public sample tasks (examples/atlas/sample_tasks.json) are imported, and a scripted stand-in replays each
reference trajectory turn by turn (its calls exactly as recorded, through litellm over HTTP) against the imported
file: every flow must pass its call checks, every call answered by its recorded output.  In the same run, variants
imported from a CSV file deviate (a call left out, a wrong argument) and fail with the right diagnosis, and a task
whose tool names are not valid function names passes through the catalog's name mapping.  The claims are decided
by a scripted judge (fulfilled for every claim): the verdicts are not what is tested here (tests/test_claims.py).
"""

from __future__ import annotations

import csv
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import read_report, run

from pytest_mcpeval.__main__ import main
from pytest_mcpeval.benchmark.matchers import compile_args
from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.importers.atlas import (
    PRESENT,
    Notes,
    Policy,
    RecordedCall,
    Task,
    argument_rule,
    load_tasks,
    mocks_for,
)
from pytest_mcpeval.scoring.case import Expectation, check_arguments
from pytest_mcpeval.testing import ScriptedModelServer

EXAMPLE = Path(__file__).parent.parent / "examples" / "atlas"
SOURCE = EXAMPLE / "sample_tasks.json"
ROWS: list[dict[str, Any]] = json.loads(SOURCE.read_text(encoding="utf-8"))
MET = next(r for r in ROWS if r["TASK"] == "6896416f7b30e5d8ccd7c8be")  # list-departments, search, get, ddg search


def cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = main(["import", "atlas", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def replay(row: dict[str, Any], tools: list[dict[str, Any]]) -> list[list[dict[str, Any]] | str]:
    """The recorded trajectory as a scripted model's turns: each assistant message's calls, their arguments as the
    recorded JSON text, under the names the model is shown (the catalog's API names); then a final answer."""
    shown = Catalog([t for t in tools if t["name"] in row["ENABLED_TOOLS"]])
    api = {mcp: name for name, mcp in shown.from_openai_name.items()}
    turns: list[list[dict[str, Any]] | str] = [
        [{"name": api[c["function"]["name"]], "arguments": c["function"]["arguments"]} for c in m["tool_calls"]]
        for m in row["TRAJECTORY"] if m["role"] == "assistant" and m.get("tool_calls")]
    return [*turns, " ".join(row["GTFA_CLAIMS"])]


def variants() -> list[dict[str, Any]]:
    """Three tasks in MCP-Atlas's CSV shape: the Met task with a call left out, with a wrong argument, and a small
    task whose tool names have dots (not valid function names for providers)."""
    skip = {**MET, "TASK": "met-skips-search", "PROMPT": MET["PROMPT"] + " (variant: the model skips a call)"}
    wrong = {**MET, "TASK": "met-wrong-object", "PROMPT": MET["PROMPT"] + " (variant: a wrong object id)"}
    dotted = {
        "TASK": "dotted-names",
        "PROMPT": "How long is notes.txt?",
        "ENABLED_TOOLS": ["files.list", "files.read", "calc.add"],
        "GTFA_CLAIMS": ["notes.txt has 3 lines."],
        "TRAJECTORY": [
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "files.list", "arguments": '{"path": "/d"}'}}]},
            {"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": "notes.txt"}]},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "b", "type": "function",
                 "function": {"name": "files.read", "arguments": '{"path": "/d/notes.txt"}'}}]},
            {"role": "tool", "tool_call_id": "b", "content": [{"type": "text", "text": "one\ntwo\nthree"}]},
        ],
    }
    return [skip, wrong, dotted]


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """As MCP-Atlas's sample_tasks.csv: list columns as JSON text, the claims as a Python list literal."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, ["TASK", "ENABLED_TOOLS", "PROMPT", "TRAJECTORY", "GTFA_CLAIMS"])
        writer.writeheader()
        for row in rows:
            writer.writerow({"TASK": row["TASK"], "PROMPT": row["PROMPT"],
                             "ENABLED_TOOLS": json.dumps(row["ENABLED_TOOLS"]),
                             "TRAJECTORY": json.dumps(row["TRAJECTORY"]), "GTFA_CLAIMS": repr(row["GTFA_CLAIMS"])})


# -- the examples and the replay -------------------------------------------------------------------------------


def test_the_committed_example_is_what_the_importer_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, SOURCE, "--out", tmp_path)
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == "10 tasks -> 10 flows, 42 expected calls; 99 tools (99 with inferred schemas)"
    for name in ("atlas.mcpeval.yaml", "atlas-tools.json", "README.md"):
        assert (tmp_path / name).read_text(encoding="utf-8") == (EXAMPLE / name).read_text(encoding="utf-8"), name
    bench = yaml.safe_load((EXAMPLE / "atlas.mcpeval.yaml").read_text(encoding="utf-8"))
    for row, case in zip(ROWS, bench["cases"], strict=True):  # the recorded outputs, byte for byte
        outputs = {m["tool_call_id"]: "\n".join(p["text"] for p in m["content"])
                   for m in row["TRAJECTORY"] if m["role"] == "tool"}
        mocked = {mock["result"]["text"] for mocks in case["mocks"].values() for mock in mocks}
        assert mocked == set(outputs.values())
        assert (case["id"], case["tools"], case["claims"]) == (row["TASK"], row["ENABLED_TOOLS"], row["GTFA_CLAIMS"])
    tools = json.loads((EXAMPLE / "atlas-tools.json").read_text(encoding="utf-8"))
    find = next(t for t in tools if t["name"] == "osm-mcp-server_find_nearby_places")
    assert find["inputSchema"] == {  # every name recorded in any task, typed by its values, none required
        "type": "object", "additionalProperties": True,
        "properties": {"categories": {"type": "array", "items": {"type": "string"}}, "latitude": {"type": "number"},
                       "longitude": {"type": "number"}, "radius": {"type": "number"}}}
    assert find["annotations"] == {"inferredSchema": True} and "inferred from 2 recorded calls" in find["description"]


@pytest.fixture
def atlas_project(pytester: pytest.Pytester, model_server: ScriptedModelServer,
                  capsys: pytest.CaptureFixture[str]) -> pytest.Pytester:
    """examples/atlas, and the variants imported from a CSV file; the stand-in replays each trajectory (the
    variants deviating from it), the judge fulfils every claim."""
    shutil.copytree(EXAMPLE, pytester.path / "atlas", ignore=shutil.ignore_patterns("sample_tasks.json"))
    write_csv(pytester.path / "variants.csv", variants())
    code, _, _ = cli(capsys, pytester.path / "variants.csv", "--out", pytester.path / "variants", "--name", "variants")
    assert code == 0
    tools = json.loads((EXAMPLE / "atlas-tools.json").read_text(encoding="utf-8"))
    for row in ROWS:
        model_server.flow(row["PROMPT"], *replay(row, tools), model="replay")
    skip, wrong, dotted = variants()
    met = replay(MET, tools)
    model_server.flow(skip["PROMPT"], *met[:3], met[4], model="replay")  # no ddg-search_search
    bad = [[{**met[2][0], "arguments": '{"objectId": 1}'}]]  # type: ignore[index,dict-item]
    model_server.flow(wrong["PROMPT"], *met[:2], *bad, *met[3:], model="replay")
    dotted_tools = json.loads((pytester.path / "variants" / "variants-tools.json").read_text(encoding="utf-8"))
    model_server.flow(dotted["PROMPT"], *replay(dotted, dotted_tools), model="replay")
    model_server.script("Claim:*", {"content": '{"verdict": "fulfilled", "justification": "stated"}'}, model="judge")
    params = json.dumps({"api_base": model_server.api_base, "api_key": "none", "num_retries": 0})
    (pytester.path / "pytest.ini").write_text(
        "[pytest]\nmcp_model_aliases =\n    replay = openai/replay\n    judge = openai/judge\n"
        f"mcp_model_params =\n    replay = {params}\n    judge = {params}\n")
    return pytester


def test_replayed_trajectories_pass_and_deviations_fail_with_their_diagnosis(
        atlas_project: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    result = run(atlas_project, "atlas", "variants", "--mcp-models=replay", "--mcp-judge-model=judge",
                 "--mcp-record=off", "--mcp-report=report.json")
    report = read_report(atlas_project)
    cases = {c["id"]: c for c in report["cases"]}
    assert all(c["error"] is None and c["flow"] and c["order"] == "superset" for c in cases.values())
    for row in ROWS:  # 10/10: every recorded call made, each answered by its recorded output
        case = cases[row["TASK"]]
        calls = [call for turn in case["trajectory"] for call in turn["calls"]]
        assert (case["passed"], case["diagnosis"], case["unmatched"], case["coverage"]) == (True, None, [], 1.0)
        assert {call["answer"]["source"] for call in calls} == {"mock"}
        assert case["tools_shown"] == len(row["ENABLED_TOOLS"])
    assert (cases["met-skips-search"]["passed"], cases["met-skips-search"]["diagnosis"]) == (False, "premature_stop")
    wrong = cases["met-wrong-object"]
    assert (wrong["passed"], wrong["diagnosis"]) == (False, "wrong_argument_value")
    assert wrong["unmatched"] == [{"tool": "met-museum_get-museum-object", "args": {"objectId": 1}}]
    assert (cases["dotted-names"]["passed"], cases["dotted-names"]["diagnosis"]) == (True, None)
    assert [c["tool"] for t in cases["dotted-names"]["trajectory"] for c in t["calls"]] == ["files.list", "files.read"]
    first = next(r for r in model_server.requests if r["model"] == "replay" and MET["PROMPT"] in json.dumps(r))
    assert sorted(t["function"]["name"] for t in first["tools"]) == sorted(MET["ENABLED_TOOLS"])  # only its tools
    assert first["messages"][0]["content"].startswith("Role: You are a factual, tool-aware assistant")
    result.stdout.fnmatch_lines(["misses (2):", "*met-skips-search[[]replay[]]  premature_stop*",
                                 "*met-wrong-object[[]replay[]]  wrong_argument_value*"])


# -- formats, options and errors -----------------------------------------------------------------------------------


def test_csv_json_and_jsonl_give_the_same_flows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = variants()
    write_csv(tmp_path / "t.csv", rows)
    (tmp_path / "t.json").write_text(json.dumps({"tasks": rows}))
    (tmp_path / "t.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    texts = []
    for name in ("t.csv", "t.json", "t.jsonl"):
        code, _, err = cli(capsys, tmp_path / name, "--out", tmp_path / name.replace(".", "-"), "--no-claims")
        assert (code, err) == (0, "")
        text = (tmp_path / name.replace(".", "-") / "atlas.mcpeval.yaml").read_text(encoding="utf-8")
        texts.append(text.replace(name, "SOURCE"))
    assert texts[0] == texts[1] == texts[2]
    bench = yaml.safe_load(texts[0])
    assert all("claims" not in case for case in bench["cases"]) and "--mcp-judge-model" not in texts[0]
    dotted = bench["cases"][2]
    assert dotted["mocks"] == {
        "files.list": [{"when": {"path": "/d"}, "result": {"text": "notes.txt"}}],
        "files.read": [{"when": {"path": "/d/notes.txt"}, "result": {"text": "one\ntwo\nthree"}}]}


def test_tools_file_gives_the_real_definitions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "t.json").write_text(json.dumps([MET]))
    get = {"name": "met-museum_get-museum-object", "description": "Get a museum object by its id.",
           "inputSchema": {"type": "object", "properties": {"objectId": {"type": "integer"},
                                                            "returnImage": {"type": "boolean"}},
                           "required": ["objectId"]}}
    search = {"name": "met-museum_search-museum-objects", "description": "Search the collection.",
              "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}}  # no departmentId
    (tmp_path / "tools.json").write_text(json.dumps({"tools": [get, search]}))
    code, out, err = cli(capsys, tmp_path / "t.json", "--out", tmp_path / "o", "--tools", tmp_path / "tools.json")
    assert code == 0 and "14 tools (12 with inferred schemas)" in out
    assert err.splitlines() == [
        "note: row 1 (TASK 6896416f7b30e5d8ccd7c8be): `met-museum_search-museum-objects` was called with "
        "`departmentId`, which its schema does not define: left out of the expected arguments and the mock",
        f"note: 12 enabled tools of 14 not in {tmp_path / 'tools.json'}: schemas inferred from the recorded arguments "
        "(`ddg-search_search`, `github_get_commit`, `github_get_file_contents`, `github_get_issue`, "
        "`github_get_issue_comments`, ...)",
    ]
    tools = {t["name"]: t for t in json.loads((tmp_path / "o" / "atlas-tools.json").read_text())}
    assert tools["met-museum_get-museum-object"] == get and tools["met-museum_search-museum-objects"] == search
    case = yaml.safe_load((tmp_path / "o" / "atlas.mcpeval.yaml").read_text())["cases"][0]
    assert case["expect"][1] == {"tool": "met-museum_search-museum-objects", "args": {"q": {"regex": PRESENT}},
                                 "extra_args": "allow"}
    readme = (tmp_path / "o" / "README.md").read_text()
    assert "12 tools of 14 have no definition here" in readme and "- `met-museum_list-departments`" in readme
    assert "--tools tools.json" in readme


def test_argument_rules() -> None:
    rules = {name: argument_rule(name, value) for name, value in [
        ("objectId", 73779), ("departmentId", 6), ("path", "/data/Top Movies.csv"), ("url", "https://x"),
        ("mode", "foot"), ("categories", ["subway"]), ("title", "Frank Gehry"), ("repo_name", "docs"),
        ("query", "Toronto Main Public Library"), ("q", "Rooster "), ("code", "print(1)"), ("command", "ls"),
        ("expression", "1+1"), ("address", "Eiffel Tower"), ("latitude", 43.67), ("from_longitude", 4.38),
        ("limit", 1), ("radius", 200), ("max_length", 999999), ("maxResults", 5), ("query_id", 7)]}
    assert rules == {
        "objectId": "exact", "departmentId": "exact", "path": "exact", "url": "exact", "mode": "exact",
        "categories": "exact", "title": "text", "repo_name": "text", "query": "present", "q": "present",
        "code": "present", "command": "present", "expression": "present", "address": "present",
        "latitude": "approx", "from_longitude": "approx", "limit": "ignore", "radius": "ignore",
        "max_length": "ignore", "maxResults": "ignore", "query_id": "exact"}
    assert argument_rule("query", "  ") == "exact"  # blank: not the agent's wording, and its own mock must answer it
    assert argument_rule("query", "x", Policy(exact=frozenset({"query"}))) == "exact"
    assert argument_rule("path", "/d", Policy(loose=frozenset({"path"}))) == "present"


def test_mocks_tell_recorded_calls_apart() -> None:
    """Two calls of one tool whose loose `when`s would answer each other get `text` (then exact) ones; a call
    without arguments is the default answer, last."""
    calls = [RecordedCall("calc", {"expression": "1 + 1"}, "2", False),
             RecordedCall("calc", {"expression": "2*3"}, "6", False),
             RecordedCall("ls", {}, "a b", False), RecordedCall("ls", {"path": "/d"}, "c", False),
             RecordedCall("q", {"query": "x", "limit": 1}, "one", False),
             RecordedCall("q", {"query": "x", "limit": 2}, "two", False)]
    task = Task("row 1", "t", "p", ["calc", "ls", "q"], [], [calls])
    notes = Notes()
    assert mocks_for(task, "calc", Policy(), notes) == [
        {"when": {"expression": {"text": "1 + 1"}}, "result": {"text": "2"}},
        {"when": {"expression": {"text": "2*3"}}, "result": {"text": "6"}}]
    assert mocks_for(task, "ls", Policy(), notes) == [{"when": {"path": "/d"}, "result": {"text": "c"}},
                                                      {"result": {"text": "a b"}}]
    assert mocks_for(task, "q", Policy(), notes) == [  # same query: the knob tells them apart
        {"when": {"query": {"text": "x"}, "limit": 1}, "result": {"text": "one"}},
        {"when": {"query": {"text": "x"}, "limit": 2}, "result": {"text": "two"}}]
    assert notes.lines == []


TRICKY = [  # values YAML could misread, and objects whose keys look like matchers
    {"flag": "yes", "n": "1.0", "none": "null", "path": " /lead space", "tabbed": "a\tb", "crlf": "a\r\nb\n"},
    {"filter": {"regex": "x", "state": "open"}, "items": [{"any_of": 1}], "empty": {}, "when": True},
    {"unicode": "Léon — “quoted” 東京", "title": "#not a comment", "query": "  "},
]


def test_tricky_values_survive_the_benchmark_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What is written is read back by the plugin's loader as recorded: each recorded call meets its expected call
    and is answered by its own output, byte for byte."""
    from pytest_mcpeval.benchmark.loader import load
    from pytest_mcpeval.benchmark.matchers import check_object

    outputs = ["yes", "line 1\n  line 2  \n\n", "\ttab first\r\nthen crlf \u2028 sep"]
    messages: list[dict[str, Any]] = []
    for i, (args, output) in enumerate(zip(TRICKY, outputs, strict=True)):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "t.x", "arguments": json.dumps(args)}}
        messages += [{"role": "assistant", "content": None, "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": f"c{i}", "content": [{"type": "text", "text": output}]}]
    row = {"TASK": "tricky", "PROMPT": "p", "ENABLED_TOOLS": ["t.x"], "GTFA_CLAIMS": ["c"], "TRAJECTORY": messages}
    (tmp_path / "t.json").write_text(json.dumps([row]))
    assert cli(capsys, tmp_path / "t.json", "--out", tmp_path / "o")[0] == 0
    bench = load(tmp_path / "o" / "atlas.mcpeval.yaml")
    case = bench.spec.cases[0]
    for j, args in enumerate(TRICKY):
        matchers = bench.matchers[("tricky", j)]
        assert matchers is not None and check_object(matchers, args, allow_extra=True) == []
        first = next(k for k in range(len(case.mocks["t.x"]))
                     if check_object(bench.mock_matchers[("tricky", "t.x", k)] or {}, args, allow_extra=True) == [])
        assert case.mocks["t.x"][first].result.text == outputs[j]


def test_an_argument_no_recording_shows_is_not_a_hallucination() -> None:
    catalog = Catalog(json.loads((EXAMPLE / "atlas-tools.json").read_text(encoding="utf-8")))
    expect = Expectation("ddg-search_search", compile_args({"query": {"regex": PRESENT}}), "allow")
    check = check_arguments(expect, {"tool": "ddg-search_search", "args": {"query": "x", "max_results": 5}}, catalog)
    assert not check["hallucination"]


def trajectory_with(**change: Any) -> list[dict[str, Any]]:
    call = {"id": "a", "type": "function", "function": {"name": "files.list", "arguments": '{"path": "/d"}'}}
    call["function"].update(change)  # type: ignore[attr-defined]
    return [{"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": "x"}]}]


ROW = variants()[2]


@pytest.mark.parametrize(("name", "content", "message"), [
    ("t.txt", "", "{dir}/t.txt: unknown format `.txt`: expected a file ending in .csv, .json, .jsonl, .parquet"),
    ("missing.json", None, "{dir}/missing.json: no such file"),
    ("t.json", "[1, 2", "{dir}/t.json:1: not valid JSON: Expecting ',' delimiter (column 6)"),
    ("t.json", json.dumps({"TASK": "x"}),
     "{dir}/t.json: expected a JSON list of task objects (or {{\"tasks\": [...]}}), got an object"),
    ("t.json", json.dumps([{k: v for k, v in ROW.items() if k != "PROMPT"} | {"PROMT": "hi"}]),
     "{dir}/t.json: row 1: missing column PROMPT; did you mean `PROMT`? (found: TASK, ENABLED_TOOLS, GTFA_CLAIMS, "
     "TRAJECTORY, PROMT)"),
    ("t.json", json.dumps([ROW | {"TRAJECTORY": trajectory_with(arguments='{"path": "/d"')}]),
     "{dir}/t.json: row 1 (TASK dotted-names): column TRAJECTORY[0].tool_calls[0].function.arguments: not valid "
     "JSON: Expecting ',' delimiter (line 1, column 14)"),
    ("t.json", json.dumps([ROW | {"TRAJECTORY": trajectory_with(name="files.lst")}]),
     "{dir}/t.json: row 1 (TASK dotted-names): column TRAJECTORY: call 1 is to `files.lst`, which is not in "
     "ENABLED_TOOLS; did you mean `files.list`? (the model could not be shown it)"),
    ("t.json", json.dumps([ROW | {"TRAJECTORY": trajectory_with()[:1]}]),
     "{dir}/t.json: row 1 (TASK dotted-names): column TRAJECTORY[0].tool_calls[0]: the call of `files.list` has no "
     "tool message with its output, so it cannot be answered offline"),
    ("t.json", json.dumps([ROW | {"ENABLED_TOOLS": "files.list"}]),
     "{dir}/t.json: row 1 (TASK dotted-names): column ENABLED_TOOLS: not valid JSON: Expecting value (line 1, "
     "column 1); expected a JSON list of tool names"),
    ("t.json", json.dumps([ROW, ROW]),
     "{dir}/t.json: row 2: TASK 'dotted-names' gives the case id `dotted-names`, as row 1 does (each task becomes "
     "a case, and case ids must be unique)"),
    ("t.csv", 'TASK,PROMPT\n1,a\n2,"b', "{dir}/t.csv:3: row 2: not valid CSV: unexpected end of data"),
    ("t.csv", 'TASK,PROMPT\n1,a,b\n', "{dir}/t.csv: row 1 (line 2): 3 cells for 2 columns (a quote not closed or "
     "not doubled?)"),
    ("t.csv", "", "{dir}/t.csv: the file is empty: expected a header row with TASK, PROMPT, ENABLED_TOOLS, "
     "GTFA_CLAIMS, TRAJECTORY"),
])
def test_malformed_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str,
                                                content: str | None, message: str) -> None:
    if content is not None:
        (tmp_path / name).write_text(content)
    code, out, err = cli(capsys, tmp_path / name, "--out", tmp_path / "o")
    assert (code, out) == (2, "")
    assert err == "python -m pytest_mcpeval import atlas: " + message.format(dir=tmp_path) + "\n"
    assert not (tmp_path / "o").exists()


def test_the_command_itself_reports_a_mistake_in_one_line(tmp_path: Path) -> None:
    import subprocess

    completed = subprocess.run([sys.executable, "-m", "pytest_mcpeval", "import", "atlas", str(tmp_path / "no.json"),
                                "--out", str(tmp_path / "o")], capture_output=True, text=True, check=False)
    assert (completed.returncode, completed.stdout) == (2, "")
    assert completed.stderr == f"python -m pytest_mcpeval import atlas: {tmp_path / 'no.json'}: no such file\n"


def test_an_argument_cannot_be_both_exact_and_loose(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, SOURCE, "--out", tmp_path, "--exact", "path,q", "--loose", "q")
    assert (code, err) == (2, "python -m pytest_mcpeval import atlas: --exact and --loose both name q\n")


def test_parquet_without_pyarrow_says_how_to_get_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow -> ImportError
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    code, _, err = cli(capsys, tmp_path / "t.parquet", "--out", tmp_path / "o")
    assert code == 2
    assert err == (f"python -m pytest_mcpeval import atlas: {tmp_path / 't.parquet'}: reading Parquet needs pyarrow, "
                   "which is not installed: `pip install pyarrow` (it is not a dependency of pytest-mcpeval), or "
                   "convert the file to CSV or JSON\n")


def test_parquet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = variants()  # list columns as lists, the trajectory as JSON text (as on Hugging Face)
    table = pa.Table.from_pylist([{**r, "TRAJECTORY": json.dumps(r["TRAJECTORY"])} for r in rows])
    pq.write_table(table, tmp_path / "t.parquet")
    write_csv(tmp_path / "t.csv", rows)
    assert cli(capsys, tmp_path / "t.parquet", "--out", tmp_path / "p")[0] == 0
    assert cli(capsys, tmp_path / "t.csv", "--out", tmp_path / "c")[0] == 0
    parquet = (tmp_path / "p" / "atlas.mcpeval.yaml").read_text().replace("t.parquet", "SOURCE")
    assert parquet == (tmp_path / "c" / "atlas.mcpeval.yaml").read_text().replace("t.csv", "SOURCE")


def test_a_bad_tools_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "t.json").write_text(json.dumps([ROW]))
    (tmp_path / "tools.json").write_text(json.dumps([{"name": "files.list"}]))
    code, _, err = cli(capsys, tmp_path / "t.json", "--out", tmp_path / "o", "--tools", tmp_path / "tools.json")
    assert code == 2
    assert err == (f"python -m pytest_mcpeval import atlas: --tools {tmp_path / 'tools.json'}:1: tools[0] "
                   "(`files.list`).inputSchema: this field is required: a JSON Schema object such as "
                   '{"type": "object", "properties": {...}}\n')


def test_load_tasks_reads_the_sample_as_published() -> None:
    tasks = load_tasks(SOURCE)
    assert [len(t.calls) for t in tasks] == [len(r["expected_tool_calls"]) for r in ROWS]  # the data's own count
    assert [[(c.tool, c.args) for c in t.calls] for t in tasks] == [
        [(c["name"], c["arguments"]) for c in r["expected_tool_calls"]] for r in ROWS]
