"""examples/github as a user runs it: the two benchmark files load, every expectation fits the tool schemas of
github-tools.json, the families have the cases they claim, and the demo's scripted stand-in
(examples/demo_script.json, wired by examples/demo.py) scores exactly as designed.

The figures are pinned: a change to the examples, the script or the scoring that moves them shows here.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from conftest import read_report, run

from pytest_mcpeval.benchmark.loader import Benchmark, load
from pytest_mcpeval.catalog import catalog_from_json
from pytest_mcpeval.checks.lint import check_expectations

EXAMPLES = Path(__file__).parent.parent / "examples"
GITHUB = EXAMPLES / "github"
FAMILIES = ("list_search_issues", "list_search_prs", "method_enum", "granular", "me", "no_tool")

# The article's four examples (GitHub's post on evaluating the GitHub MCP Server), argument for argument.
ARTICLE = {
    "article-count-april-issues": (
        "How many issues were created in the github/github-mcp-server repository during April 2025?",
        "list_issues", {"owner": "github", "repo": "github-mcp-server", "since": "2025-04-01T00:00:00Z"}),
    "article-merge-squash": (
        'Merge PR 123 in github/docs using squash merge with title "Update installation guide"',
        "merge_pull_request", {"owner": "github", "repo": "docs", "pullNumber": 123, "merge_method": "squash",
                               "commit_title": "Update installation guide"}),
    "article-request-reviews": (
        "Request reviews from alice456 and bob123 for PR 67 in team/project-alpha",
        "update_pull_request", {"owner": "team", "repo": "project-alpha", "pullNumber": 67,
                                "reviewers": ["alice456", "bob123"]}),
    "article-discussion-comments": (
        "Summarize the comments in discussion 33801, in the facebook/react repository",
        "get_discussion_comments", {"owner": "facebook", "repo": "react", "discussionNumber": 33801}),
}

# What the stand-in's deliberate mistakes make of each case that misses: the diagnosis.  Every other case passes.
MISSES = {
    # single calls
    "article-count-april-issues": "wrong_tool",  # search_issues for a date-bounded listing
    "list-recently-updated-closed": "hallucinated_argument",  # `sort` (the tool calls it orderBy)
    "search-flaky-tests-k8s": "wrong_tool",  # list_issues for a topic
    "list-most-commented-open": "wrong_tool",  # search_issues for a sorted listing
    "list-closed-prs": "wrong_argument_value",  # `CLOSED`, list_issues' enum, for list_pull_requests' `closed`
    "search-prs-by-author": "wrong_tool",  # list_pull_requests, which has no author filter
    "issue-details": "missing_required_argument",  # no `method`
    "pr-review-comments": "wrong_argument_value",  # method get_comments
    "workflow-run-details": "wrong_argument_value",  # resource_id as a number; the schema says string
    "create-label": "wrong_argument_value",  # color "#fbca04"; the tool wants no '#'
    "create-issue": "wrong_tool",  # the feature-flagged create_issue
    "rename-issue": "wrong_tool",  # the feature-flagged update_issue_title
    "suggest-close-completed": "wrong_tool",  # closes it with issue_write instead of suggesting
    "my-teams": "wrong_tool",  # get_me where get_teams answers directly
    "smalltalk-good-morning": "tool_use_not_expected",  # get_me on small talk
    # flows
    "cargo-locked-pr-diff": "wrong_argument_value",  # get_files where the diff was asked for
    "close-dark-mode-duplicate": "wrong_tool",  # update_issue_state instead of issue_write
    "latest-release-commit": "premature_stop",  # never reads the tag
    "pr-ready-to-merge": "answer_incomplete",  # calls fine, but says "mergeable" for a blocked PR
}


def load_example(path: Path) -> ModuleType:
    """An example script as a module (examples/ is not a package): demo.py's wiring, cost.py's pricing."""
    spec = importlib.util.spec_from_file_location(f"mcpeval_example_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def benches() -> dict[str, Benchmark]:
    return {name: load(GITHUB / f"{name}.mcpeval.yaml") for name in ("github", "flows")}


def test_every_expectation_fits_the_catalog(benches: dict[str, Benchmark]) -> None:
    catalog = catalog_from_json(json.loads((GITHUB / "github-tools.json").read_text(encoding="utf-8")))
    tune = load(EXAMPLES / "tune" / "issues.mcpeval.yaml")  # make tune-demo's extra cases, same catalog
    for name, bench in {**benches, "tune/issues": tune}.items():  # tool, argument names, enums, types, required
        assert check_expectations(bench, catalog, f"{name}.mcpeval.yaml") == []
    expected = Counter(c.expect[0].tool for c in tune.spec.cases)
    assert expected == {"list_issues": 8, "search_issues": 8} and all("list_search_issues" in c.tags
                                                                        for c in tune.spec.cases)
    for case in benches["flows"].spec.cases:  # mocked and forbidden tools exist too
        assert set(case.mocks) | set(case.forbid) <= set(catalog.by_name), case.id


def test_the_families_and_flows_are_there(benches: dict[str, Benchmark]) -> None:
    single = benches["github"].spec.cases
    flows = benches["flows"].spec.cases
    assert len(single) == 85 and not any(c.mocks or c.order or c.claims for c in single)
    families = Counter(t for c in single for t in c.tags if t in FAMILIES)
    assert families == {"list_search_issues": 14, "list_search_prs": 9, "method_enum": 21, "granular": 13,
                        "me": 7, "no_tool": 6}
    assert all(c.expect == [] for c in single if "no_tool" in c.tags)
    assert {c.expect[0].tool for c in single if "granular" in c.tags} >= {"update_issue_state", "update_issue_type"}
    assert len(flows) == 10
    assert {c.order for c in flows} == {"in_order", "strict", "unordered", "superset"}
    for case in flows:  # offline (mocks), decided without a judge (checks), most with a value from an earlier answer
        assert case.mocks and case.claims and all(claim.check is not None for claim in case.claims), case.id
    with_reference = [c.id for c in flows if "from_result" in json.dumps([e.args for e in c.expect])]
    assert len(with_reference) == 8


def test_the_article_examples_keep_their_arguments(benches: dict[str, Benchmark]) -> None:
    cases = {c.id: c for c in benches["github"].spec.cases}
    for case_id, (text, tool, args) in ARTICLE.items():
        case = cases[case_id]
        assert (case.input, [e.tool for e in case.expect]) == (text, [tool])
        expected = case.expect[0].args or {}
        required = {k: v for k, v in expected.items() if not (isinstance(v, dict) and v.get("optional"))}
        if case_id == "article-request-reviews":  # the article's list, in either order
            assert required.pop("reviewers") == {"any_of": [args["reviewers"], ["bob123", "alice456"]]}
            args = {k: v for k, v in args.items() if k != "reviewers"}
        assert required == args


def test_every_case_has_a_scripted_answer(benches: dict[str, Benchmark]) -> None:
    script = json.loads((EXAMPLES / "demo_script.json").read_text(encoding="utf-8"))
    for bench in benches.values():
        for case in bench.spec.cases:
            assert case.input in script, case.id
            assert ("turns" in script[case.input]) == bool(case.mocks), case.id


def test_the_scripted_stand_in_scores_as_designed(pytester: pytest.Pytester) -> None:
    shutil.copytree(GITHUB, pytester.path / "github")
    demo = load_example(EXAMPLES / "demo.py")
    with ExitStack() as stack:
        server = demo.script_server(stack)  # the demo's own wiring of examples/demo_script.json
        params = json.dumps({"api_base": server.api_base, "api_key": "none", "num_retries": 0})
        (pytester.path / "pytest.ini").write_text(
            f"[pytest]\nmcp_model_aliases = scripted-demo = openai/scripted-demo\n"
            f"mcp_model_params = scripted-demo = {params}\n")
        result = run(pytester, "github", "--mcp-models=scripted-demo", "--mcp-record=off", "--mcp-report=report.json")
    assert result.ret == 0  # no collection error; misses do not fail a run without thresholds
    report = read_report(pytester)
    cases: dict[str, dict[str, Any]] = {c["id"]: c for c in report["cases"]}
    assert len(cases) == 95 and all(c["error"] is None for c in cases.values())
    assert {i: c["diagnosis"] for i, c in cases.items() if not c["passed"]} == MISSES
    assert all(c["diagnosis"] is None for c in cases.values() if c["passed"])
    passed = Counter(t for c in cases.values() if c["passed"] for t in c["tags"] if t in FAMILIES)
    assert passed == {"list_search_issues": 10, "list_search_prs": 7, "method_enum": 17, "granular": 10,
                      "me": 6, "no_tool": 5}
    model = report["models"]["scripted-demo"]
    assert (model["scored"], model["flows"]["cases"], model["flows"]["pass_rate"]) == (95, 10, 0.6)
    assert model["accuracy"] == 76 / 85  # single calls: the first call's tool is the expected one
    assert cases["latest-release-commit"]["coverage"] == 0.5 and cases["pr-ready-to-merge"]["coverage"] == 0.5
    assert cases["close-dark-mode-duplicate"]["coverage"] == 1.0  # right answer, wrong tool: the calls fail it
    result.stdout.fnmatch_lines([
        "catalog tools_file: github-tools.json: 117 tools, * tokens per request*",
        "scripted-demo: 95 scored (85 single calls, 10 flows), 0 errors | accuracy 89.4% | * | passed 82.4%",
        "  flows (10 cases): passed 60.0%*",
    ])


def test_the_cost_table_prices_requests_as_worked_by_hand() -> None:
    """examples/github/cost.py (docs/cost.md): two requests of a 30,839-token catalog, priced one by one."""
    cost = load_example(GITHUB / "cost.py")
    import litellm

    rows = [(30839, 31000, 100), (30839, 31500, 40)]  # (catalog, input, output) tokens
    for model in ("gpt-5", "claude-sonnet-4-5"):
        rate = litellm.model_cost[model]
        i, o, read = rate["input_cost_per_token"], rate["output_cost_per_token"], rate["cache_read_input_token_cost"]
        write = rate.get("cache_creation_input_token_cost") or i  # no write rate: the first request at the input rate
        plain = (31000 + 31500) * i + (100 + 40) * o
        cached = (161 * i + 30839 * write + 100 * o) + (661 * i + 30839 * read + 40 * o)
        assert cost.price(model, rows) == pytest.approx((plain, cached), rel=1e-12)
    assert litellm.model_cost["claude-sonnet-4-5"]["cache_creation_input_token_cost"] > litellm.model_cost[
        "claude-sonnet-4-5"]["input_cost_per_token"]  # Anthropic's cache write costs more: the path is exercised
