"""JSON nested 200,000 levels deep given to the importers (issue 30, item 6): one line naming the file and where,
exit status 2, never a ``RecursionError``.  Every JSON text an importer reads goes through the bounded, strict
reader of ``bounds.py`` (``bounds.loads``), as the baseline and the cache entries do."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from pytest_mcpeval.__main__ import main

DEEP = "[" * 200_000 + "]" * 200_000
QUESTION = {"id": "simple_python_0", "question": [[{"role": "user", "content": "gcd of 12 and 18?"}]],
            "function": [{"name": "math.gcd", "description": "gcd", "parameters": {
                "type": "dict", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"]}}]}
ANSWER = {"id": "simple_python_0", "ground_truth": [{"math.gcd": {"a": [12], "b": [18]}}]}
TRAJECTORY = [
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "files.list", "arguments": '{"path": "/d"}'}}]},
    {"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": "notes.txt"}]},
]
ROW = {"TASK": "t1", "PROMPT": "What is in /d?", "ENABLED_TOOLS": ["files.list"], "GTFA_CLAIMS": ["notes.txt"],
       "TRAJECTORY": TRAJECTORY}
DEEPER = "nested deeper than 100 levels"


def cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str]:
    code = main(["import", *map(str, args)])
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return code, err.strip()


@pytest.mark.parametrize("where", ["question line", "answer line", "whole question file"])
def test_bfcl_json_nested_200000_deep_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  where: str) -> None:
    questions, answers = tmp_path / "q.json", tmp_path / "a.json"
    questions.write_text(json.dumps(QUESTION) + "\n" + (DEEP if where == "question line" else ""))
    answers.write_text(json.dumps(ANSWER) + "\n" + (DEEP if where == "answer line" else ""))
    if where == "whole question file":
        questions.write_text(DEEP)
    code, err = cli(capsys, "bfcl", questions, answers, "--out", tmp_path / "out")
    shown = {"question line": f"{questions}:2", "answer line": f"{answers}:2", "whole question file": f"{questions}"}
    assert (code, err) == (2, f"python -m pytest_mcpeval import bfcl: {shown[where]}: {DEEPER}")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("form", ["json", "jsonl", "csv trajectory", "csv claims", "arguments"])
def test_atlas_json_nested_200000_deep_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   form: str) -> None:
    if form == "json":
        tasks = tmp_path / "tasks.json"
        tasks.write_text(DEEP)
        expected = f"{tasks}: {DEEPER}"
    elif form == "jsonl":
        tasks = tmp_path / "tasks.jsonl"
        tasks.write_text(json.dumps(ROW) + "\n" + DEEP + "\n")
        expected = f"{tasks}:2: {DEEPER}"
    elif form == "arguments":
        tasks = tmp_path / "tasks.json"
        call = {**TRAJECTORY[0]["tool_calls"][0], "function": {"name": "files.list", "arguments": DEEP}}
        tasks.write_text(json.dumps([{**ROW, "TRAJECTORY": [{**TRAJECTORY[0], "tool_calls": [call]},
                                                            TRAJECTORY[1]]}]))
        expected = f"{tasks}: row 1 (TASK t1): column TRAJECTORY[0].tool_calls[0].function.arguments: {DEEPER}"
    else:
        tasks = tmp_path / "tasks.csv"
        column = "TRAJECTORY" if form == "csv trajectory" else "GTFA_CLAIMS"
        with tasks.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(ROW))
            writer.writeheader()
            writer.writerow({k: (DEEP if k == column else v if isinstance(v, str) else json.dumps(v))
                             for k, v in ROW.items()})
        what = "; expected a JSON list of messages" if column == "TRAJECTORY" else ""
        expected = f"{tasks}: row 1 (line 2) (TASK t1): column {column}: {DEEPER}{what}"
    code, err = cli(capsys, "atlas", tasks, "--out", tmp_path / "out")
    assert (code, err) == (2, f"python -m pytest_mcpeval import atlas: {expected}")
    assert not (tmp_path / "out").exists()
