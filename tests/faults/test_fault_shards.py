"""Shards that cannot be merged as one run (docs/scale.md, docs/reliability.md): each refusal is one line, exit 4
and nothing written; a missing or interrupted shard is a merged report that says so, a failed gate, no baseline."""

from __future__ import annotations

import pytest
import test_shards
from conftest import read_report, run
from test_shards import CASES, SERVER, edited, merge

small = test_shards.small  # the fixture: a project and its three shards' reports


def test_each_refusal_is_one_line_exit_4_and_writes_nothing(small: pytest.Pytester,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_mcpeval import __version__

    assert run(small, "--mcp-models=fake", "--mcp-report=plain.json").ret == 0
    (small.path / "cases.mcpeval.yaml").write_text(SERVER + CASES.replace("question 5", "question five"))
    assert run(small, "--mcp-models=fake", "--mcp-shard=2/3", "--mcp-report=edited.json").ret == 0
    (small.path / "cases.mcpeval.yaml").write_text(SERVER + CASES)
    assert run(small, "--mcp-models=fake", "--mcp-repeat=2", "--mcp-shard=2/3", "--mcp-report=twice.json").ret == 0
    (small.path / "not.json").write_text("{")
    of_four = edited(small, "of4.json", lambda d: d["run"]["shard"].update(count=4))
    older = edited(small, "older.json", lambda d: d.update(plugin_version="0.0.1"))
    damaged = edited(small, "damaged.json", lambda d: d["cases"][1].update(line="x"))
    refusals = {
        ("shard1.json", "plain.json"): "plain.json: not a shard's report (it has no run.shard): run each shard "
                                       "with --mcp-shard=K/N --mcp-report=PATH",
        ("shard1.json", of_four): "shard1.json is shard 1 of 3 and of4.json shard 2 of 4: the shards of one run "
                                  "agree on N",
        ("shard1.json", "shard2.json", "shard2.json"): "shard 2 of 3 given twice: shard2.json and shard2.json",
        ("shard1.json", "edited.json"): "shard1.json and edited.json are shards of different selections: the "
                                        "benchmark file cases.mcpeval.yaml differs (another content)",
        ("shard1.json", "twice.json"): "shard1.json and twice.json are shards of different selections: the "
                                       "option repeat: 1 against 2",
        ("shard1.json", older): f"older.json: made by pytest-mcpeval 0.0.1, and this is {__version__}: merge with "
                                "the version that ran the shards",
        ("shard1.json", "not.json"): "not.json: not valid JSON: Expecting property name enclosed in double quotes "
                                     "(line 1 column 2)",
        ("shard1.json", "gone.json"): "gone.json: no such file",
        ("shard1.json", damaged): 'damaged.json: not a report of this version: cases[1].line: expected an integer, '
                                  'found "x"',
    }
    for reports, message in refusals.items():
        status, out, err = merge(capsys, *reports, "--mcp-report=merged.json", "--junitxml=merged.xml")
        assert (status, out, err) == (4, "", f"python -m pytest_mcpeval merge: {message}\n"), reports
        assert not (small.path / "merged.json").exists() and not (small.path / "merged.xml").exists()


def test_a_missing_shard_fails_the_gate_and_writes_no_baseline(small: pytest.Pytester,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = merge(capsys, "shard3.json", "shard1.json", "--mcp-report=merged.json",
                             "--mcp-save-baseline=base.json")
    assert (status, err) == (1, "")
    report = read_report(small, "merged.json")
    stopped = "merged without shard 2 of 3 (2 case items of 6 not in this report)"
    assert report["run"]["interrupted"] and report["run"]["stopped"] == stopped
    assert report["run"]["merged"]["missing"] == [2] and report["run"]["merged"]["shards"] == [1, 3]
    assert report["gate"]["failures"] == [f"the run did not finish: it was {stopped}; 4 of 4 cases ran"]
    assert not (small.path / "base.json").exists()
    assert f"baseline not written to {small.path / 'base.json'}: the run did not finish" in out
    assert "GATE FAILED the run did not finish" in out


def test_an_interrupted_shard_makes_the_merge_incomplete(small: pytest.Pytester,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    edited(small, "shard2.json", lambda d: d["run"].update(interrupted=True, stopped="interrupted by SIGTERM"))
    status, _, _ = merge(capsys, "shard1.json", "shard2.json", "shard3.json", "--mcp-report=merged.json")
    assert status == 1
    run_info = read_report(small, "merged.json")["run"]
    assert run_info["stopped"] == "merged with shard 2 of 3, which was interrupted by SIGTERM"
    assert run_info["interrupted"] and run_info["merged"]["missing"] == []
