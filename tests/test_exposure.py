"""Tool exposure: a case's `tools` and `distractors` decide which tools the model is shown (run.exposure)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import GITHUB_TOOLS, make_project, read_report, run
from test_servers import SERVER

from pytest_mcpeval.benchmark.schema import Case
from pytest_mcpeval.catalog import catalog_from_json
from pytest_mcpeval.run.exposure import case_seed, draw_distractors, expose, relevant_tools
from pytest_mcpeval.scoring.confusable import tokenize
from pytest_mcpeval.testing import ScriptedModelServer

GITHUB = catalog_from_json(json.loads(GITHUB_TOOLS.read_text()))


def reference_similarities(base: list[str]) -> dict[str, float]:
    """scikit-learn's TF-IDF (smooth idf, l2 rows, raw counts) over the same texts: each tool's highest cosine
    similarity to a tool of ``base``."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    texts = [f"{t['name']} {o['function']['description']}" for t, o in zip(GITHUB.tools, GITHUB.openai_tools,
                                                                          strict=True)]
    matrix = TfidfVectorizer(analyzer=tokenize).fit_transform(texts)
    sims = (matrix @ matrix[[GITHUB.names.index(b) for b in base]].T).toarray().max(axis=1)
    return dict(zip(GITHUB.names, sims, strict=True))


def test_distractors_come_from_the_most_similar_tools_as_scikit_learn_ranks_them() -> None:
    base = ["list_issues"]
    sims = reference_similarities(base)
    ranked = sorted((n for n in GITHUB.names if n not in base), key=lambda n: (-round(sims[n], 9), n))
    for count in (1, 3, 8):
        drawn = draw_distractors(GITHUB, base, count, seed=7)
        assert len(drawn) == count and len(set(drawn)) == count
        assert set(drawn) <= set(ranked[: 2 * count]), (count, drawn, ranked[: 2 * count])
        assert drawn == [n for n in GITHUB.names if n in drawn]  # the server's order
    assert "search_issues" in ranked[:6]  # the confusable pair the GitHub team names


def test_a_draw_is_seeded_per_case_and_the_same_in_every_process() -> None:
    assert case_seed("april") == int("0x" + __import__("hashlib").sha256(b"april").hexdigest()[:8], 16)
    draws = {tuple(draw_distractors(GITHUB, ["get_me"], 4, seed)) for seed in range(40)}
    assert len(draws) > 1  # the seed matters: not always the same four
    assert draw_distractors(GITHUB, ["get_me"], 4, 11) == draw_distractors(GITHUB, ["get_me"], 4, 11)


def test_hand_worked_draw_on_a_three_tool_catalog() -> None:
    """Tools sharing no word with the base have similarity 0; the most similar other tool is the only one in the
    pool of 2 x 1 that shares words, so one distractor is always it or the next by name."""
    catalog = catalog_from_json([
        {"name": "list_notes", "description": "List the notes in a folder", "inputSchema": {"type": "object"}},
        {"name": "search_notes", "description": "Search notes by text", "inputSchema": {"type": "object"}},
        {"name": "get_weather", "description": "Weather forecast for a city", "inputSchema": {"type": "object"}},
        {"name": "zap", "description": "Zap", "inputSchema": {"type": "object"}},
    ])
    assert draw_distractors(catalog, ["list_notes"], 1, seed=0) in (["search_notes"], ["get_weather"])
    picks = {draw_distractors(catalog, ["list_notes"], 1, seed=s)[0] for s in range(20)}
    assert picks == {"search_notes", "get_weather"}  # pool = search_notes (shares "notes"), then get_weather by name
    assert draw_distractors(catalog, ["list_notes"], 10, seed=0) == ["search_notes", "get_weather", "zap"]
    assert draw_distractors(catalog, [], 1, seed=0, query="what's the weather in Paris?") in (["get_weather"],
                                                                                             ["list_notes"])


def test_the_shown_catalog() -> None:
    case = Case.model_validate({"id": "c", "input": "x", "expect": [{"tool": "list_issues"}],
                                "mocks": {"get_me": [{"result": {"text": "me"}}]}, "forbid": ["search_issues"]})
    assert expose(case, GITHUB).catalog is GITHUB  # no `tools`, no `distractors`: everything
    assert relevant_tools(case) == ["list_issues", "get_me", "search_issues"]
    case = case.model_copy(update={"distractors": 2})
    shown = expose(case, GITHUB)
    assert len(shown.catalog.tools) == 5 and len(shown.distractors) == 2 and shown.seed == case_seed("c")
    assert {"list_issues", "get_me", "search_issues"} <= set(shown.catalog.names)
    restricted = Case.model_validate({"id": "r", "input": "x", "expect": [], "tools": ["get_me", "list_issues"]})
    only = expose(restricted, GITHUB)
    assert only.catalog.names == ["get_me", "list_issues"] if GITHUB.names.index("get_me") < GITHUB.names.index(
        "list_issues") else ["list_issues", "get_me"]
    assert only.seed is None and only.distractors == ()


BENCH = """
server: {tools_file: tools.json}
cases:
  - id: restricted
    input: restricted question
    tools: [list_issues, search_issues]
    expect: [{tool: list_issues}]
  - id: distracted
    input: distracted question
    distractors: 3
    expect: [{tool: list_issues}]
  - id: both
    input: both question
    tools: [get_me]
    distractors: 2
    expect: [{tool: get_me}]
  - id: everything
    input: everything question
    expect: [{tool: get_me}]
"""


def sent_tools(server: ScriptedModelServer) -> dict[str, list[str]]:
    return {r["messages"][-1]["content"]: [t["function"]["name"] for t in r["tools"]] for r in server.requests}


def test_a_run_shows_each_case_its_tools_and_reports_them(pytester: pytest.Pytester,
                                                          model_server: ScriptedModelServer) -> None:
    make_project(pytester, model_server, {"bench.mcpeval.yaml": BENCH}, tools=json.loads(GITHUB_TOOLS.read_text()))
    model_server.call("restricted question", "list_issues", owner="o", repo="r")
    model_server.call("distracted question", "search_issues", query="q")
    model_server.call("*", "get_me")
    result = run(pytester, "--mcp-models=fake", "--mcp-report=report.json")
    assert result.ret == 0, result.stdout.str()
    sent = sent_tools(model_server)
    assert sent["restricted question"] == [n for n in GITHUB.names if n in ("list_issues", "search_issues")]
    assert len(sent["distracted question"]) == 4 and "list_issues" in sent["distracted question"]
    assert len(sent["both question"]) == 3 and "get_me" in sent["both question"]
    assert len(sent["everything question"]) == len(GITHUB.names)
    report = read_report(pytester)
    cases = {c["id"]: c for c in report["cases"]}
    assert [cases[i]["tools_shown"] for i in ("restricted", "distracted", "both", "everything")] == [2, 4, 3, 117]
    distracted = cases["distracted"]
    assert distracted["distractor_seed"] == case_seed("distracted")
    assert sorted(distracted["distractors"]) == sorted(set(sent["distracted question"]) - {"list_issues"})
    assert "distractors" not in cases["restricted"] and "distractors" not in cases["everything"]
    assert report["models"]["fake"]["by_tools_shown"] == [
        {"tools_shown": 2, "cases": 1, "accuracy": 1.0, "flows": 0, "flow_pass_rate": None},
        {"tools_shown": 3, "cases": 1, "accuracy": 1.0, "flows": 0, "flow_pass_rate": None},
        {"tools_shown": 4, "cases": 1, "accuracy": 0.0, "flows": 0, "flow_pass_rate": None},
        {"tools_shown": 117, "cases": 1, "accuracy": 1.0, "flows": 0, "flow_pass_rate": None},
    ]
    assert len(report["catalogs"]) == 4  # each shown tool set is a catalog of its own, with its token count
    result.stdout.fnmatch_lines(["*117 tools*; 4 tool sets shown, 2-117 tools*",
                                 "*by tools shown: 2 tools 100.0% of 1, 3 tools 100.0% of 1, 4 tools 0.0% of 1*"])
    # the same draw in another process (and with xdist), from the cache too
    first = distracted["distractors"]
    run(pytester, "--mcp-models=fake", "--mcp-report=again.json", "-n", "1")
    again = {c["id"]: c for c in read_report(pytester, "again.json")["cases"]}
    assert again["distracted"]["distractors"] == first


@pytest.mark.parametrize(("change", "message"), [
    ("tools: [list_issues, search_isues]",
     "*bench.mcpeval.yaml:4*tool `search_isues` in `tools` is not published by the server; did you mean "
     "`search_issues`?*"),
    ("tools: [search_issues]",
     "*bench.mcpeval.yaml:5*expected tool `list_issues` is not among the case's `tools`*"),
    ("tools: [list_issues, list_issues]", "*bench.mcpeval.yaml:4*`list_issues` is listed twice in `tools`*"),
    ("distractors: -1", "*bench.mcpeval.yaml:4*distractors*greater than or equal to 0*"),
    ("tools: []", "*bench.mcpeval.yaml:4*tools*"),
])
def test_bad_exposure_is_one_clear_collection_error(pytester: pytest.Pytester, model_server: ScriptedModelServer,
                                                    change: str, message: str) -> None:
    bench = f"server: {{tools_file: tools.json}}\ncases:\n  - id: c\n    {change}\n" \
            "    input: q\n    expect: [{tool: list_issues}]\n"
    bench = bench.replace("    input: q\n    expect", "    input: q\n    expect") if "expected" not in message else (
        f"server: {{tools_file: tools.json}}\ncases:\n  - id: c\n    {change}\n    expect: [{{tool: list_issues}}]\n"
        "    input: q\n")
    make_project(pytester, model_server, {"bench.mcpeval.yaml": bench}, tools=json.loads(GITHUB_TOOLS.read_text()))
    result = run(pytester, "--mcp-models=fake")
    assert result.ret != 0
    result.stdout.fnmatch_lines([message])
    assert "Traceback" not in result.stdout.str()


def test_a_live_server_checks_tools_when_it_lists_them(pytester: pytest.Pytester,
                                                       model_server: ScriptedModelServer) -> None:
    bench = ("server:\n  python: notes_server:server\ncases:\n  - id: shown\n    input: Show my notes\n"
             "    tools: [list_notes]\n    expect: [{tool: list_notes}]\n"
             "  - id: typo\n    input: Find the dentist\n    tools: [search_note]\n    expect: []\n")
    make_project(pytester, model_server, {"notes_server.py": SERVER, "notes.mcpeval.yaml": bench})
    model_server.call("*", "list_notes", folder="x")
    result = run(pytester, "--mcp-models=fake", "--mcp-report=report.json")
    result.stdout.fnmatch_lines(["*notes.mcpeval.yaml:8: case `typo`: tool `search_note` in `tools` is not published "
                                 "by the server; did you mean `search_notes`?*", "*1 passed, 1 error*"])
    cases: dict[str, Any] = {c["id"]: c for c in read_report(pytester)["cases"]}
    assert cases["shown"]["tools_shown"] == 1 and cases["shown"]["correct"] is True
    assert [t["function"]["name"] for t in model_server.requests[0]["tools"]] == ["list_notes"]
