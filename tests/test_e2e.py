"""The core pipeline end to end: benchmark file -> items -> model over HTTP -> report -> gate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import GITHUB_TOOLS, make_project, read_report, run, status

from pytest_mcpeval.testing import ScriptedModelServer

APRIL = "How many issues were created in the github/github-mcp-server repository during April 2025?"
WEATHER = "What's the weather like today?"
SEARCH = "Find issues mentioning login timeouts in github/github-mcp-server"
MERGE = 'Merge PR 123 in github/docs using squash merge with title "Update installation guide"'

BENCHMARK = f"""
server:
  tools_file: tools.json
cases:
  - id: count-april-issues
    input: "{APRIL}"
    tags: [issues]
    expect:
      - tool: list_issues
        args: {{owner: github, repo: github-mcp-server, since: "2025-04-01T00:00:00Z"}}
  - id: weather-smalltalk
    input: "{WEATHER}"
    expect: []
  - id: search-login
    input: "{SEARCH}"
    tags: [issues, confusable]
    expect:
      - tool: search_issues
        args: {{query: {{regex: ".*login.*"}}, owner: {{optional: true, equals: github}},
                repo: {{optional: true, equals: github-mcp-server}}}}
  - id: merge-docs
    input: '{MERGE}'
    expect:
      - tool: merge_pull_request
        args: {{owner: github, repo: docs, pullNumber: 123, merge_method: squash,
                commit_title: {{text: Update installation guide}}}}
"""


def github_tools() -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = json.loads(GITHUB_TOOLS.read_text())
    return tools


def script_seed_model(server: ScriptedModelServer) -> None:
    """Right on three cases; calls list_issues for the search case (the seed's classic confusion)."""
    server.call(APRIL, "list_issues", owner="github", repo="github-mcp-server", since="2025-04-01T02:00:00+02:00")
    server.call(SEARCH, "list_issues", owner="github", repo="github-mcp-server")
    server.call(MERGE, "merge_pull_request", owner="github", repo="docs", pullNumber=123.0,
                merge_method="squash", commit_title="update installation guide")


@pytest.fixture
def project(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> pytest.Pytester:
    make_project(pytester, model_server, {"evals/issues.mcpeval.yaml": BENCHMARK}, tools=github_tools())
    (pytester.path / "evals" / "tools.json").write_text(GITHUB_TOOLS.read_text())
    script_seed_model(model_server)
    return pytester


HOOKS = (
    "import json\n"
    "def pytest_mcpeval_case_result(item, result):\n"
    "    result['node'] = item.nodeid\n"
    "def pytest_mcpeval_report(config, report):\n"
    "    (config.rootpath / 'headline.json').write_text(json.dumps(\n"
    "        {m: v['accuracy'] for m, v in report['models'].items()}))\n"
)


def check_pass_miss_and_report(project: pytest.Pytester, model_server: ScriptedModelServer, result: pytest.RunResult,
                               xdist_args: list[str]) -> dict[str, Any]:
    # under xdist items finish in any order: check each status line on its own
    result.stdout.fnmatch_lines([status("count-april-issues[fake]", "PASSED", xdist_args)])
    result.stdout.fnmatch_lines([status("search-login[fake]", "MISS", xdist_args)])
    result.stdout.fnmatch_lines(
        [
            "*mcpeval summary*",
            "fake: 4 scored, 0 errors | accuracy 75.0% | macro F1 * | passed 75.0%",
            "*confused: expected search_issues -> called list_issues (1x)",
            "misses (1):",
            "evals/issues.mcpeval.yaml:*::search-login[[]fake[]]  wrong_tool",
            "  - expected search_issues *",
            '  + called   list_issues {"owner": "github", "repo": "github-mcp-server"}',
            "*3 passed, 1 missed*",
        ]
    )
    assert result.ret == 0
    report = read_report(project)
    assert report["version"] == 2
    fake = report["models"]["fake"]
    assert fake["accuracy"] == 0.75
    assert fake["tools"]["list_issues"]["precision"] == 0.5
    assert fake["tools"]["search_issues"]["recall"] == 0.0
    assert fake["tools"]["search_issues"]["precision"] is None  # never called: no data, not 0
    assert fake["confusion"]["labels"] == ["list_issues", "merge_pull_request", "search_issues", "(none)"]
    assert fake["confusion"]["diagonal"] == [1, 1, 0, 1]
    assert fake["confusion"]["off_diagonal"] == [[2, 0, 1]]  # search_issues expected, list_issues called
    assert fake["arguments"]["evaluated"] == 2
    assert fake["arguments"]["exact_match_rate"] == 1.0
    assert "search_repositories" in fake["untested_tools"]
    by_id = {c["id"]: c for c in report["cases"]}
    ids = [c["id"] for c in report["cases"]]
    assert ids == ["count-april-issues", "weather-smalltalk", "search-login", "merge-docs"]
    assert by_id["search-login"]["called"] == [{"tool": "list_issues", "args": {"owner": "github",
                                                                                "repo": "github-mcp-server"}}]
    assert by_id["weather-smalltalk"]["called_label"] == "(none)" and by_id["weather-smalltalk"]["passed"]
    # every request carried the full catalog, converted to the OpenAI tools format
    assert len(model_server.requests) == 4
    for request in model_server.requests:
        assert len(request["tools"]) == 117
        assert request["tools"][0]["type"] == "function"
        assert request["temperature"] == 0
    # the report says what was sent: defaults the model accepts, no secret
    assert report["run"]["models"]["fake"]["params_sent"] == {"api_base": model_server.api_base, "temperature": 0}
    return report


def check_hooks(project: pytest.Pytester) -> None:
    """The hooks of HOOKS extended each case's result and saw the whole report."""
    nodes = sorted(c["node"] for c in read_report(project)["cases"])
    assert nodes[0] == "evals/issues.mcpeval.yaml::count-april-issues[fake]"
    assert json.loads((project.path / "headline.json").read_text()) == {"fake": 0.75}


def test_pass_miss_report_and_hooks_identical_with_and_without_xdist(project: pytest.Pytester,
                                                                     model_server: ScriptedModelServer) -> None:
    """One run without xdist and one with ``-n 2`` (each making its calls: --mcp-record=off), each checked on its
    own (statuses, summary, report, requests, the hooks' effects), then the two reports compared: identical."""
    (project.path / "conftest.py").write_text(HOOKS)
    reports = []
    for xdist_args in ([], ["-n", "2"]):
        model_server.requests.clear()
        (project.path / "headline.json").unlink(missing_ok=True)
        result = run(project, "--mcp-models=fake", "--mcp-report=report.json", "--mcp-record=off", "-v", *xdist_args)
        report = check_pass_miss_and_report(project, model_server, result, xdist_args)
        check_hooks(project)
        for case in report["cases"]:
            case.pop("latency_s", None)
        for model in report["models"].values():
            model["usage"].pop("latency_s")
        reports.append(report)
    assert reports[0] == reports[1]


def test_what_a_hook_adds_to_a_result_is_masked_and_made_utf8_safe_in_the_report(project: pytest.Pytester) -> None:
    """Results are masked and made UTF-8 safe as they come out (run/item.py); a hook runs after that, so with a hook
    the report masks them again: a token and a lone surrogate it adds do not reach the report as they were."""
    (project.path / "conftest.py").write_text(
        "def pytest_mcpeval_case_result(item, result):\n"
        "    result['note'] = 'Bearer abcdefghijklmnopqrstuvwxyz012345 ' + chr(0xD83D)\n")
    result = run(project, "--mcp-models=fake", "--mcp-report=report.json")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    notes = {case["note"] for case in read_report(project)["cases"]}
    assert len(notes) == 1
    (note,) = notes
    assert "abcdefghijklmnopqrstuvwxyz012345" not in note and note.endswith(" \ufffd"), note


def test_gate_fails_with_a_sentence(project: pytest.Pytester, xdist_args: list[str]) -> None:
    result = run(project, "--mcp-models=fake", "--mcp-min-accuracy=0.9", "--mcp-min-f1=0.5", *xdist_args)
    result.stdout.fnmatch_lines(["GATE FAILED model fake: accuracy = 0.750, required >= 0.9 (from --mcp-min-accuracy)"])
    assert "macro_f1" not in result.stdout.str().split("GATE FAILED", 1)[1]  # macro F1 0.667 holds
    assert result.ret == 1


def test_gate_passes(project: pytest.Pytester) -> None:
    result = run(project, "--mcp-models=fake", "--mcp-min-accuracy=0.75")
    result.stdout.fnmatch_lines(["gate passed: accuracy >= 0.75"])
    assert result.ret == 0


def test_ini_thresholds_per_tool_and_model(project: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    ini = (project.path / "pytest.ini").read_text()
    (project.path / "pytest.ini").write_text(
        ini + "mcp_thresholds =\n    f1[list_issues] >= 0.5\n    fake: recall[search_issues] >= 0.5\n"
    )
    result = run(project, "--mcp-models=fake")
    result.stdout.fnmatch_lines(
        ["GATE FAILED model fake: recall[search_issues] = 0.000, required >= 0.5 (from ini mcp_thresholds)"]
    )
    assert "f1[list_issues]" not in result.stdout.str().split("GATE FAILED", 1)[1]
    assert result.ret == 1


def test_threshold_on_unknown_tool_is_a_usage_error(project: pytest.Pytester) -> None:
    ini = (project.path / "pytest.ini").read_text()
    (project.path / "pytest.ini").write_text(ini + "mcp_thresholds = f1[serch_issues] >= 0.5\n")
    result = run(project, "--mcp-models=fake")
    result.stdout.fnmatch_lines(["*no server publishes a tool `serch_issues`; did you mean `search_issues`?"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_strict_makes_misses_fail_and_lf_reruns_them(project: pytest.Pytester) -> None:
    first = project.runpytest_subprocess("--mcp-models=fake", "--mcp-strict")
    first.stdout.fnmatch_lines(["*- expected search_issues*", "*1 failed, 3 passed*"])
    assert "Traceback" not in first.stdout.str()
    assert first.ret == 1
    again = project.runpytest_subprocess("--mcp-models=fake", "--mcp-strict", "--lf", "-v")
    again.stdout.fnmatch_lines(["*search-login?fake? FAILED*", "*1 failed*"])


def test_select_with_k_and_tags_as_markers(project: pytest.Pytester) -> None:
    result = run(project, "--mcp-models=fake", "-m", "confusable", "--strict-markers", "-v")
    result.stdout.fnmatch_lines(["*search-login?fake? MISS*", "*3 deselected, 1 missed*"])
    result = run(project, "--mcp-models=fake", "-k", "april", "-v")
    result.stdout.fnmatch_lines(["*count-april-issues?fake? PASSED*", "*1 passed, 3 deselected*"])


def test_two_models_make_two_items_per_case(project: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    ini = (project.path / "pytest.ini").read_text()
    ini = ini.replace("mcp_model_aliases = fake = openai/fake", "mcp_model_aliases =\n    fake = openai/fake\n"
                      "    other = openai/other")
    params = ini.split("mcp_model_params = ")[1].split("\n")[0].split(" = ", 1)[1]
    ini = ini.replace("mcp_model_params = fake", f"mcp_model_params =\n    other = {params}\n    fake")
    (project.path / "pytest.ini").write_text(ini)
    model_server.call(SEARCH, "search_issues", model="other", query="login timeouts")
    result = run(project, "--mcp-models=fake,other", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["evals/issues.mcpeval.yaml::count-april-issues[[]fake[]]",
                                 "evals/issues.mcpeval.yaml::count-april-issues[[]other[]]", "*8 tests collected*"])
    result = run(project, "--mcp-models=fake,other", "--mcp-report=report.json")
    report = read_report(project)
    assert list(report["models"]) == ["fake", "other"]
    assert report["models"]["other"]["tools"]["search_issues"]["recall"] == 1.0
    assert report["run"]["models"]["other"]["target"] == "openai/other"


def test_without_a_model_cases_are_collected_and_skipped(project: pytest.Pytester, xdist_args: list[str]) -> None:
    result = run(project, "-rs", *xdist_args)
    result.stdout.fnmatch_lines(["*no model configured: pass --mcp-models=*", "*4 skipped*"])
    assert result.ret == 0
    result = run(project, *xdist_args)  # without -rs: the summary says it in one line (it used to say nothing)
    result.stdout.fnmatch_lines(["*= mcpeval summary =*",
                                 "no model configured: 4 cases skipped; pass --mcp-models=NAME[[],NAME...[]] *",
                                 "*4 skipped*"])
    assert result.ret == 0  # pytest's own status: nothing failed
    result = run(project, "--mcp-min-accuracy=0.9", *xdist_args)  # a gate was asked for: it cannot pass on nothing
    result.stdout.fnmatch_lines(["no model configured: 4 cases skipped*",
                                 "GATE FAILED accuracy >= 0.9 (from --mcp-min-accuracy) was not measured: no model*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result = run(project, "--collect-only", "-q")
    result.stdout.fnmatch_lines(["evals/issues.mcpeval.yaml::count-april-issues", "*4 tests collected*"])


def test_file_models_are_used_when_none_is_configured(pytester: pytest.Pytester,
                                                      model_server: ScriptedModelServer) -> None:
    text = BENCHMARK.replace("server:", "models: [fake]\nserver:", 1)
    make_project(pytester, model_server, {"issues.mcpeval.yaml": text}, tools=github_tools())
    script_seed_model(model_server)
    result = run(pytester, "-q")
    result.stdout.fnmatch_lines(["*3 passed, 1 missed*"])


def test_model_api_error_is_an_error_not_a_miss(project: pytest.Pytester, model_server: ScriptedModelServer,
                                                xdist_args: list[str]) -> None:
    model_server.script(MERGE, {"status": 500, "error": "upstream overloaded"})
    result = run(project, "--mcp-models=fake", "--mcp-report=report.json", "--mcp-retries=0", *xdist_args)
    result.stdout.fnmatch_lines(["*errors, excluded from the metrics (1):*", "*merge-docs[[]fake[]]: model fake*"])
    assert "Traceback" not in result.stdout.str()
    assert result.ret == 1
    fake = read_report(project)["models"]["fake"]
    assert (fake["errors"], fake["scored"], fake["accuracy"]) == (1, 3, 2 / 3)


def test_malformed_arguments_are_a_scored_miss(project: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    model_server.script(MERGE, {"tool_calls": [{"name": "merge_pull_request", "arguments": '{"owner": "github",'}]})
    result = run(project, "--mcp-models=fake", "--mcp-report=report.json")
    result.stdout.fnmatch_lines(["*merge-docs*malformed_call", "*malformed arguments: invalid JSON*"])
    assert result.ret == 0
    case = {c["id"]: c for c in read_report(project)["cases"]}["merge-docs"]
    assert case["correct"] is True and case["passed"] is False and case["called"][0]["raw"] == '{"owner": "github",'


def test_messages_and_system_prompt(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    text = """
system: You are a GitHub assistant.
server: {tools_file: tools.json}
cases:
  - id: chat
    input:
      - {role: user, content: "I work on github/docs."}
      - {role: assistant, content: "Noted."}
      - {role: user, content: "List its open issues."}
    expect: [{tool: list_issues, args: {owner: github, repo: docs, state: OPEN}}]
"""
    make_project(pytester, model_server, {"chat.mcpeval.yaml": text}, tools=github_tools())
    model_server.call("List its open issues.", "list_issues", owner="github", repo="docs", state="OPEN")
    result = run(pytester, "--mcp-models=fake", "-q")
    result.stdout.fnmatch_lines(["*1 passed*"])
    roles = [m["role"] for m in model_server.requests[0]["messages"]]
    assert roles == ["system", "user", "assistant", "user"]


def test_plugin_load_imports_nothing_heavy(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import sys
        def test_light():
            heavy = [m for m in ("litellm", "numpy", "mcp", "pydantic", "yaml") if m in sys.modules]
            assert heavy == []
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:syrupy", "-p", "no:anyio", "-p", "no:xdist")
    result.assert_outcomes(passed=1)


def test_works_without_xdist_installed_plugin(project: pytest.Pytester) -> None:
    result = run(project, "--mcp-models=fake", "-p", "no:xdist")
    result.stdout.fnmatch_lines(["*3 passed, 1 missed*"])


def test_schema_doc_is_current() -> None:
    from pytest_mcpeval.benchmark.schema import json_schema

    path = Path(__file__).parents[1] / "docs" / "benchmark.schema.json"
    assert json.loads(path.read_text()) == json_schema(), "run `make schema` to refresh docs/benchmark.schema.json"


def test_report_schema_doc_is_current() -> None:
    from pytest_mcpeval.results.schema import report_schema

    path = Path(__file__).parents[1] / "docs" / "report.schema.json"
    assert json.loads(path.read_text()) == report_schema(), "run `make schema` to refresh docs/report.schema.json"
