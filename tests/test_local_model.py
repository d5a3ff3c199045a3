"""The embedded offline model (local/minilm) for real, and retrieval metrics by hand.

These runs load the real all-MiniLM-L6-v2 (a few seconds each), so they are few and each checks a lot.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import GITHUB_TOOLS, read_report, run, run_subprocess

from pytest_mcpeval.models.local import BUNDLED, Retriever
from pytest_mcpeval.scoring.case import Expectation
from pytest_mcpeval.scoring.retrieval import retrieval_metrics, retrieval_ranks

BENCHMARK = """
server: {tools_file: tools.json}
cases:
  - id: merge
    input: 'Merge PR 123 in github/docs using squash merge with title "Update installation guide"'
    expect: [{tool: merge_pull_request, args: {owner: github, repo: docs, pullNumber: 123}}]
  - id: april
    input: How many issues were created in the github/github-mcp-server repository during April 2025?
    expect: [{tool: list_issues}]
  - id: weather
    input: What's the weather like today?
    expect: []
  - id: login
    input: Find issues mentioning login timeouts in github/github-mcp-server
    expect: [{tool: search_issues}]
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    (pytester.path / "tools.json").write_text(GITHUB_TOOLS.read_text())
    (pytester.path / "bench.mcpeval.yaml").write_text(BENCHMARK)
    return pytester


def test_local_minilm_choices_are_pinned(project: pytest.Pytester, minilm: object,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # in this process, where torch is imported already (the `minilm` fixture), but the model is loaded again by the
    # run (taken out of the process's models for this test): the run makes the load and reports it
    monkeypatch.delitem(Retriever._loaded, BUNDLED)
    result = run(project, "--mcp-models=local/minilm", "--mcp-report=report.json", "--mcp-html=report.html")
    result.stdout.fnmatch_lines([
        "local/minilm: 4 scored, 0 errors | accuracy 50.0% | *",
        "  arguments: not applicable (a retriever picks a tool and fills no arguments)",
        "  retrieval (3 cases): recall@1 33.3%, *",
        "*2 passed, 2 missed*",
    ])
    assert result.ret == 0
    report = read_report(project)
    called = {c["id"]: c["called_label"] for c in report["cases"]}
    # pinned: what all-MiniLM-L6-v2 picks from the 117 GitHub tools (deterministic on CPU)
    assert called == {"merge": "merge_pull_request", "april": "issue_read", "weather": "(none)",
                      "login": "issue_read"}
    cases = {c["id"]: c for c in report["cases"]}
    assert cases["merge"]["passed"] is True and cases["merge"]["arguments"] is None
    assert cases["merge"]["retrieval"]["expected"]["merge_pull_request"]["rank"] == 1
    assert cases["april"]["retrieval"]["expected"]["list_issues"]["rank"] > 1
    assert cases["april"]["retrieval"]["top"][0][0] == "issue_read"
    assert cases["weather"]["retrieval"]["top"][0][1] < 0.2  # under the similarity floor: no tool
    model = report["models"]["local/minilm"]
    assert model["arguments"]["applicable"] is False and model["arguments"]["exact_match_rate"] is None
    assert model["retrieval"]["recall_at"]["1"] == pytest.approx(1 / 3)
    # the model's load (once per process) is reported apart, not in the latency: no case's latency holds it
    usage = model["usage"]
    loaded = [c["load_s"] for c in report["cases"] if "load_s" in c]
    assert usage["loads"] == len(loaded) >= 1 and usage["load_s"] == pytest.approx(sum(loaded), abs=1e-3)
    assert usage["latency_s"]["max"] < min(loaded), (usage, loaded)  # a query is fast; the load is seconds
    page = (project.path / "report.html").read_text(encoding="utf-8")
    assert f"; model load {usage['load_s']:.2f} s ({usage['loads']} load" in page


def test_recall_gate_and_floor(project: pytest.Pytester, minilm: object) -> None:
    ini = '[pytest]\nmcp_model_params = local/minilm = {"min_similarity": 0.0}\n'
    (project.path / "pytest.ini").write_text(ini)
    result = run(project, "--mcp-models=local/minilm", "--mcp-min-recall-at=1:0.9", "--mcp-report=report.json")
    result.stdout.fnmatch_lines(["GATE FAILED model local/minilm: recall_at_1 = 0.333, required >= 0.9 "
                                 "(from --mcp-min-recall-at)"])
    assert result.ret == 1
    weather = {c["id"]: c for c in read_report(project)["cases"]}["weather"]
    assert weather["called_label"] != "(none)"  # with no floor the retriever always names a tool


def test_unknown_local_model_is_an_error(project: pytest.Pytester, tmp_path: Path) -> None:
    result = run(project, f"--mcp-models=local/{tmp_path}/nowhere")
    result.stdout.fnmatch_lines(["*no sentence-transformers model directory at*", "*4 error*"])
    assert "Traceback" not in result.stdout.str()


def _case(case_id: str, ranks: dict[str, int], ranking: list[str]) -> dict[str, Any]:
    full = [(name, 1.0 - i / 100) for i, name in enumerate(ranking)]
    retrieval = retrieval_ranks([Expectation(t, None) for t in ranks], full, top_k=3)
    assert {t: e["rank"] for t, e in retrieval["expected"].items()} == ranks
    return {"file": "f", "id": case_id, "error": None, "retrieval": retrieval}


def test_retrieval_metrics_by_hand() -> None:
    tools = ["a", "b", "c", "d", "e", "f", "g"]
    cases = [
        _case("one", {"a": 1}, tools),  # rank 1
        _case("two", {"c": 3}, tools),  # rank 3
        _case("three", {"g": 7}, tools),  # rank 7: outside the top 5, outranked by a..e
        _case("both", {"b": 2, "f": 6}, tools),  # two expected tools: share 1/2 within top 5
    ]
    metrics = retrieval_metrics(cases)
    assert metrics is not None
    assert metrics["recall_at"] == {"1": 0.25, "3": (1 + 1 + 0 + 0.5) / 4, "5": (1 + 1 + 0 + 0.5) / 4,
                                    "10": 1.0}
    assert metrics["mrr"] == pytest.approx((1 + 1 / 3 + 1 / 7 + 1 / 2) / 4)
    assert metrics["tools"]["g"]["outside_top_5"] == ["f::three"]
    assert metrics["tools"]["g"]["outranked_by"] == {"a": 1, "b": 1, "c": 1, "d": 1, "e": 1}
    assert metrics["tools"]["a"]["recall_at_5"] == 1.0 and metrics["tools"]["f"]["mean_rank"] == 6
    assert retrieval_metrics([{"id": "x", "error": None}]) is None  # not a retriever: no section
    json.dumps(metrics)  # builtin types only


def test_without_the_extra_the_error_says_what_to_install(project: pytest.Pytester) -> None:
    # make sentence-transformers unimportable in the run, as on an install without [local]
    (project.path / "conftest.py").write_text("import sys\nsys.modules['sentence_transformers'] = None\n")
    result = run_subprocess(project, "--mcp-models=local/minilm")  # a process where the model was never loaded
    result.stdout.fnmatch_lines(["*the local model needs the optional extra: pip install 'pytest-mcpeval?local?'*",
                                 "*4 error*"])
    assert "Traceback" not in result.stdout.str()
