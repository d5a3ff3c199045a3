"""Static checks of benchmark expectations against tool schemas, and confusable tool pairs."""

from __future__ import annotations

import json
import random
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import make_project, read_report, run

from pytest_mcpeval.benchmark.loader import Benchmark, load
from pytest_mcpeval.catalog import Catalog, catalog_from_json
from pytest_mcpeval.checks.lint import LintProblem, check_expectations
from pytest_mcpeval.scoring.confusable import (
    DEFAULT_THRESHOLD,
    confusable_pairs,
    confusion_counts,
    tfidf_matrix,
    tokenize,
    tool_texts,
)
from pytest_mcpeval.testing import ScriptedModelServer

ROOT = Path(__file__).parent.parent
GITHUB_TOOLS = ROOT / "tests" / "data" / "github-tools.json"


def _tool(name: str, description: str, props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required is not None:
        schema["required"] = required
    return {"name": name, "description": description, "inputSchema": schema}


SMALL = Catalog(
    [
        _tool(
            "list_issues",
            "List issues of a repository, optionally filtered by state and labels.",
            {
                "owner": {"type": "string"},
                "repo": {"type": "string"},
                "state": {"type": "string", "enum": ["OPEN", "CLOSED"]},
                "perPage": {"type": "number", "minimum": 1, "maximum": 100},
                "labels": {"type": "array", "items": {"type": "string"}},
                "since": {"type": ["string", "null"]},
            },
            ["owner", "repo"],
        ),
        _tool(
            "get_issue",
            "Get one issue of a repository by its number.",
            {
                "owner": {"type": "string"},
                "repo": {"type": "string"},
                "issue_number": {"type": "integer"},
                "include_comments": {"type": "boolean"},
            },
            ["owner", "repo", "issue_number"],
        ),
        _tool(
            "search_issues",
            "Search issues across repositories with a free-text query.",
            {"query": {"type": "string"}, "anything": {}},
            ["query"],
        ),
        {"name": "ping", "description": "Check that the server is alive."},
    ]
)


@pytest.fixture(scope="module")
def github() -> Catalog:
    return catalog_from_json(json.loads(GITHUB_TOOLS.read_text(encoding="utf-8")))


def bench_of(tmp_path: Path, cases: str) -> Benchmark:
    """A benchmark whose ``cases:`` key is on line 2, so the first case starts on line 3."""
    path = tmp_path / "b.mcpeval.yaml"
    path.write_text("version: 1\ncases:\n" + textwrap.indent(textwrap.dedent(cases).strip("\n"), "  ") + "\n")
    return load(path)


def lint(tmp_path: Path, cases: str, catalog: Catalog = SMALL) -> list[str]:
    return [str(p) for p in check_expectations(bench_of(tmp_path, cases), catalog, "b.yaml")]


# -- LintProblem ------------------------------------------------------------------------------------------------


def test_problem_str_with_and_without_line() -> None:
    problem = LintProblem("f.yaml", 7, "c1", "expect[0].tool", "unknown_tool", "nope")
    assert str(problem) == "f.yaml:7: case `c1`: expect[0].tool: nope"
    assert str(LintProblem("f.yaml", None, "c1", "expect[0].tool", "unknown_tool", "nope")) == (
        "f.yaml: case `c1`: expect[0].tool: nope"
    )


# -- one test per kind -----------------------------------------------------------------------------------------


def test_unknown_tool(tmp_path: Path) -> None:
    bench = bench_of(
        tmp_path,
        """
        - id: c1
          input: show issues
          expect:
            - tool: list_isues
              args: {owner: a, repo: b}
        """,
    )
    problems = check_expectations(bench, SMALL, "b.yaml")
    assert [p.kind for p in problems] == ["unknown_tool"]
    assert str(problems[0]) == (
        "b.yaml:6: case `c1`: expect[0].tool: expected tool `list_isues` is not published by the server; "
        "did you mean `list_issues`?"
    )


def test_unknown_tool_without_suggestion(tmp_path: Path) -> None:
    assert lint(
        tmp_path,
        """
        - id: c1
          input: x
          expect:
            - tool: frobnicate
        """,
    ) == ["b.yaml:6: case `c1`: expect[0].tool: expected tool `frobnicate` is not published by the server"]


def test_unknown_argument(tmp_path: Path) -> None:
    bench = bench_of(
        tmp_path,
        """
        - id: c1
          input: open issues
          expect:
            - tool: list_issues
              args:
                owner: a
                repo: b
                stat: OPEN
                zzz: 1
        """,
    )
    problems = check_expectations(bench, SMALL, "b.yaml")
    assert [p.kind for p in problems] == ["unknown_argument", "unknown_argument"]
    assert [str(p) for p in problems] == [
        "b.yaml:10: case `c1`: expect[0].args.stat: `list_issues` has no argument `stat`; did you mean `state`?",
        "b.yaml:11: case `c1`: expect[0].args.zzz: `list_issues` has no argument `zzz`",
    ]


def test_argument_of_a_tool_without_input_schema_is_unknown(tmp_path: Path) -> None:
    assert lint(
        tmp_path,
        """
        - id: c1
          input: ping
          expect:
            - {tool: ping, args: {verbose: true}}
        """,
    ) == ["b.yaml:6: case `c1`: expect[0].args.verbose: `ping` has no argument `verbose`"]


def test_wrong_type(tmp_path: Path) -> None:
    bench = bench_of(
        tmp_path,
        """
        - id: c1
          input: issue 123
          expect:
            - tool: get_issue
              args:
                owner: a
                repo: b
                issue_number: "123"
        """,
    )
    problems = check_expectations(bench, SMALL, "b.yaml")
    assert [p.kind for p in problems] == ["wrong_type"]
    assert str(problems[0]) == (
        "b.yaml:10: case `c1`: expect[0].args.issue_number: `issue_number` must be of type integer (got '123')"
    )


def test_enum_violation(tmp_path: Path) -> None:
    bench = bench_of(
        tmp_path,
        """
        - id: c1
          input: open issues
          expect:
            - tool: list_issues
              args:
                owner: a
                repo: b
                state: open
        """,
    )
    problems = check_expectations(bench, SMALL, "b.yaml")
    assert [p.kind for p in problems] == ["enum_violation"]
    assert str(problems[0]) == (
        "b.yaml:10: case `c1`: expect[0].args.state: `state` must be one of OPEN, CLOSED (got 'open')"
    )


def test_missing_required(tmp_path: Path) -> None:
    bench = bench_of(
        tmp_path,
        """
        - id: c1
          input: issue 5
          expect:
            - tool: get_issue
              args:
                issue_number: 5
        """,
    )
    problems = check_expectations(bench, SMALL, "b.yaml")
    assert [p.kind for p in problems] == ["missing_required", "missing_required"]
    assert [str(p) for p in problems] == [
        "b.yaml:7: case `c1`: expect[0].args: required argument `owner` of `get_issue` is not in the expected args",
        "b.yaml:7: case `c1`: expect[0].args: required argument `repo` of `get_issue` is not in the expected args",
    ]


def test_problems_on_the_github_catalog(tmp_path: Path, github: Catalog) -> None:
    assert lint(
        tmp_path,
        """
        - id: c1
          input: open issues of octo/web
          expect:
            - tool: list_issues
              args: {owner: octo, state: open}
            - tool: merge_pull_request
              args: {owner: octo, repo: web, pullNumber: "123"}
        """,
        github,
    ) == [
        "b.yaml:7: case `c1`: expect[0].args.state: `state` must be one of OPEN, CLOSED (got 'open')",
        "b.yaml:7: case `c1`: expect[0].args: required argument `repo` of `list_issues` is not in the expected args",
        "b.yaml:9: case `c1`: expect[1].args.pullNumber: `pullNumber` must be of type number (got '123')",
    ]


# -- clean files ------------------------------------------------------------------------------------------------


def test_clean_benchmark(tmp_path: Path) -> None:
    assert (
        lint(
            tmp_path,
            """
            - id: c1
              input: open bugs
              expect:
                - tool: list_issues
                  args:
                    owner: a
                    repo: b
                    state: OPEN
                    perPage: 50
                    labels: [bug, ui]
                    since: null
            - id: c2
              input: issue 5
              expect:
                - tool: get_issue
                  args: {owner: a, repo: b, issue_number: 5.0, include_comments: true}
            - id: c3
              input: anything
              expect:
                - tool: search_issues
                - tool: ping
                  args: {}
            - id: c4
              input: hello
              expect: []
            """,
        )
        == []
    )


def test_github_example_is_clean(github: Catalog) -> None:
    path = ROOT / "examples" / "github" / "github.mcpeval.yaml"
    bench = load(path)
    assert sum(m is not None for m in bench.matchers.values()) > 10  # it does check arguments
    assert check_expectations(bench, github, "examples/github/github.mcpeval.yaml") == []


# -- matchers ---------------------------------------------------------------------------------------------------


def test_any_of_reports_the_first_bad_alternative(tmp_path: Path) -> None:
    assert lint(
        tmp_path,
        """
        - id: c1
          input: issues
          expect:
            - tool: list_issues
              args:
                owner: {any_of: [a, b]}
                repo: r
                state:
                  any_of:
                    - OPEN
                    - closed
                    - 3
        """,
    ) == [
        "b.yaml:13: case `c1`: expect[0].args.state: `state` must be one of OPEN, CLOSED (got 'closed') "
        "(any_of alternative 2)"
    ]


def test_any_of_with_a_wrong_type(tmp_path: Path) -> None:
    assert lint(
        tmp_path,
        """
        - id: c1
          input: issue 5
          expect:
            - tool: get_issue
              args: {owner: a, repo: b, issue_number: {any_of: [5, {regex: "5+"}]}}
        """,
    ) == [
        "b.yaml:7: case `c1`: expect[0].args.issue_number: `issue_number` must be of type integer "
        "(got a `regex` matcher, which expects a string) (any_of alternative 2)"
    ]


def test_regex_text_and_approx_need_a_matching_type(tmp_path: Path) -> None:
    assert lint(
        tmp_path,
        """
        - id: c1
          input: issues
          expect:
            - tool: list_issues
              args:
                owner: {regex: "oct.*"}
                repo: {text: "web app"}
                perPage: {approx: 50, tol: 1}
                since: {regex: "2025-.*"}
            - tool: get_issue
              args:
                owner: {approx: 1}
                repo: r
                issue_number: {approx: 5}
                include_comments: {text: "yes"}
            - tool: search_issues
              args: {query: q, anything: {approx: 1}}
        """,
    ) == [
        "b.yaml:14: case `c1`: expect[1].args.owner: `owner` must be of type string "
        "(got an `approx` matcher, which expects a number)",
        "b.yaml:17: case `c1`: expect[1].args.include_comments: `include_comments` must be of type boolean "
        "(got a `text` matcher, which expects a string)",
    ]


def test_optional_and_ignore(tmp_path: Path) -> None:
    # an optional literal is still checked when given; an optional or ignored required argument is present
    assert lint(
        tmp_path,
        """
        - id: c1
          input: issues
          expect:
            - tool: list_issues
              args:
                owner: {any_of: [a], optional: true}
                repo: {ignore: true}
                state: {equals: OPEN, optional: true}
                perPage: {equals: "50", optional: true}
                labels: {optional: true}
        """,
    ) == ["b.yaml:11: case `c1`: expect[0].args.perPage: `perPage` must be of type number (got '50')"]


def test_list_and_object_literals_are_checked_item_by_item(tmp_path: Path) -> None:
    assert lint(
        tmp_path,
        """
        - id: c1
          input: bugs
          expect:
            - tool: list_issues
              args:
                owner: a
                repo: b
                labels:
                  - bug
                  - 3
            - tool: list_issues
              args:
                owner: a
                repo: b
                labels: [bug, {regex: "ui.*"}]
            - tool: list_issues
              args: {owner: {equals: {x: 1}}, repo: [b]}
        """,
    ) == [
        "b.yaml:12: case `c1`: expect[0].args.labels: `labels[1]` must be of type string (got 3)",
        "b.yaml:19: case `c1`: expect[2].args.owner: `owner` must be of type string (got {'x': 1})",
        "b.yaml:19: case `c1`: expect[2].args.repo: `repo` must be of type string (got ['b'])",
    ]


def test_other_schema_keywords_are_wrong_type(tmp_path: Path) -> None:
    assert lint(
        tmp_path,
        """
        - id: c1
          input: issues
          expect:
            - tool: list_issues
              args: {owner: a, repo: b, perPage: 0}
        """,
    ) == ["b.yaml:7: case `c1`: expect[0].args.perPage: `perPage`: 0 is less than the minimum of 1"]


# -- schemas the lint cannot check: `unchecked` ------------------------------------------------------------------

BROKEN = Catalog(
    [
        _tool("typo", "Its schema misspells a type.", {"query": {"type": "string"}, "limit": {"type": "integr"}},
              ["query"]),
        _tool(
            "dangling",
            "Its references point nowhere.",
            {
                "query": {"type": "string"},
                "state": {"$ref": "#/defs/State"},
                "remote": {"$ref": "https://example.com/state.json"},
                "loop": {"$ref": "#/properties/loop"},
            },
        ),
        {
            "name": "defs",
            "description": "Its reference resolves in the schema's own $defs.",
            "inputSchema": {
                "type": "object",
                "properties": {"state": {"$ref": "#/$defs/State"}},
                "$defs": {"State": {"type": "string", "enum": ["OPEN", "CLOSED"]}},
            },
        },
    ]
)


def test_invalid_tool_schema_is_unchecked_once_per_call(tmp_path: Path) -> None:
    bench = bench_of(
        tmp_path,
        """
        - id: c1
          input: q
          expect:
            - tool: typo
              args:
                query: 5
                limit: 3
                nope: 1
            - tool: typo
              args: {}
            - tool: typo
              args: {query: {ignore: true}}
        """,
    )
    problems = check_expectations(bench, BROKEN, "b.yaml")
    assert [str(p) for p in problems] == [
        "b.yaml:7: case `c1`: expect[0].args: cannot check against the schema of `typo`: invalid schema at "
        "properties.limit.type: 'integr' is not valid under any of the given schemas",
        "b.yaml:10: case `c1`: expect[0].args.nope: `typo` has no argument `nope`",
        "b.yaml:12: case `c1`: expect[1].args: required argument `query` of `typo` is not in the expected args",
    ]
    assert [(p.kind, p.fails) for p in problems] == [
        ("unchecked", False), ("unknown_argument", True), ("missing_required", True),
    ]  # fmt: skip


def test_a_tool_schema_is_checked_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import jsonschema

    checked: list[Any] = []
    original = jsonschema.Draft202012Validator.check_schema

    def check_schema(schema: Any, *args: Any, **kwargs: Any) -> None:
        checked.append(schema)
        original(schema, *args, **kwargs)

    monkeypatch.setattr(jsonschema.Draft202012Validator, "check_schema", staticmethod(check_schema))
    problems = lint(
        tmp_path,
        """
        - id: c1
          input: q
          expect:
            - {tool: typo, args: {query: q}}
            - {tool: typo, args: {query: r}}
            - {tool: defs, args: {state: OPEN}}
            - {tool: defs, args: {state: CLOSED}}
        """,
        BROKEN,
    )
    assert len(problems) == 2
    assert [sorted(s["properties"]) for s in checked] == [["limit", "query"], ["state"]]


def test_unresolvable_refs_are_unchecked_per_argument(tmp_path: Path) -> None:
    problems = lint(
        tmp_path,
        """
        - id: c1
          input: q
          expect:
            - tool: dangling
              args:
                query: 7
                state: OPEN
                remote: x
                loop: 1
            - tool: defs
              args: {state: open}
        """,
        BROKEN,
    )
    loop = problems.pop(3)  # Python words the rest of a RecursionError's message by where it struck
    assert loop.startswith("b.yaml:11: case `c1`: expect[0].args.loop: cannot check against the schema of "
                           "`dangling`: RecursionError: maximum recursion depth exceeded")
    assert problems == [
        "b.yaml:8: case `c1`: expect[0].args.query: `query` must be of type string (got 7)",
        "b.yaml:9: case `c1`: expect[0].args.state: cannot check against the schema of `dangling`: "
        "unresolvable $ref '#/defs/State'",
        "b.yaml:10: case `c1`: expect[0].args.remote: cannot check against the schema of `dangling`: "
        "unresolvable $ref 'https://example.com/state.json'",
        "b.yaml:13: case `c1`: expect[1].args.state: `state` must be one of OPEN, CLOSED (got 'open')",
    ]


UNCHECKED_TOOLS = [
    {"name": "search", "description": "Search.", "inputSchema": {
        "type": "object", "properties": {"query": {"type": "string"}, "state": {"$ref": "#/defs/State"}}}},
]


def test_unchecked_is_shown_and_reported_but_does_not_fail(pytester: pytest.Pytester,
                                                          model_server: ScriptedModelServer,
                                                          xdist_args: list[str]) -> None:
    only = "server: {tools_file: tools.json}\ncases:\n  - id: a\n    input: a\n" \
           "    expect: [{tool: search, args: {query: q, state: OPEN}}]\n"
    both = only.replace("query: q", "query: 5")
    make_project(pytester, model_server, {"a.mcpeval.yaml": only, "b.mcpeval.yaml": both}, tools=UNCHECKED_TOOLS)
    result = run(pytester, "--mcp-lint", "--mcp-report=report.json", "-k", "lint", *xdist_args)
    unchecked = "case `a`: expect[[]0[]].args.state: cannot check against the schema of `search`: " \
                "unresolvable $ref '#/defs/State'"
    result.stdout.fnmatch_lines([
        "*1 problem in the expected calls:",
        "b.mcpeval.yaml:5: case `a`: expect[[]0[]].args.query: `query` must be of type string (got 5)",
    ])
    result.stdout.fnmatch_lines([f"  a.mcpeval.yaml:5: UncheckedSchemaWarning: {unchecked}"])
    result.stdout.fnmatch_lines([f"  b.mcpeval.yaml:5: UncheckedSchemaWarning: {unchecked}"])
    result.assert_outcomes(passed=1, failed=1, warnings=2)
    assert result.ret == 1
    lint_report = read_report(pytester)["lint"]
    assert [p["kind"] for p in lint_report["a.mcpeval.yaml"]["problems"]] == ["unchecked"]
    assert [p["kind"] for p in lint_report["b.mcpeval.yaml"]["problems"]] == ["wrong_type", "unchecked"]
    assert lint_report["a.mcpeval.yaml"]["problems"][0]["message"] == (
        "a.mcpeval.yaml:5: case `a`: expect[0].args.state: cannot check against the schema of `search`: "
        "unresolvable $ref '#/defs/State'"
    )


def test_unchecked_fails_when_its_warning_is_an_error(pytester: pytest.Pytester,
                                                      model_server: ScriptedModelServer) -> None:
    bench = "server: {tools_file: tools.json}\ncases:\n  - id: a\n    input: a\n" \
            "    expect: [{tool: search, args: {query: q, state: OPEN}}]\n"
    make_project(pytester, model_server, {"a.mcpeval.yaml": bench}, tools=UNCHECKED_TOOLS)
    result = run(pytester, "--mcp-lint", "-k", "lint", "-W", "error::pytest_mcpeval.checks.lint.UncheckedSchemaWarning")
    result.stdout.fnmatch_lines([
        "1 problem in the expected calls:",
        "a.mcpeval.yaml:5: case `a`: expect[[]0[]].args.state: cannot check against the schema of `search`: "
        "unresolvable $ref '#/defs/State'",
    ])
    assert "Traceback" not in result.stdout.str()
    result.assert_outcomes(failed=1)


def test_args_none_checks_only_the_tool_name(tmp_path: Path) -> None:
    assert lint(
        tmp_path,
        """
        - id: c1
          input: issue 5
          expect:
            - tool: get_issue
            - tool: get_isue
        """,
    ) == ["b.yaml:7: case `c1`: expect[1].tool: expected tool `get_isue` is not published by the server; "
          "did you mean `get_issue`?"]


# -- confusable pairs -------------------------------------------------------------------------------------------


def test_tokenize() -> None:
    assert tokenize("list_pull-requests getFileContents HTTPServer a GitHub repo: the e.g. v2") == [
        "list", "pull", "requests", "get", "file", "contents", "http", "server", "git", "hub", "repo", "v2",
    ]  # fmt: skip


@pytest.mark.parametrize("which", ["small", "github"])
def test_tfidf_equals_sklearn(which: str, github: Catalog) -> None:
    from sklearn.feature_extraction.text import TfidfVectorizer

    catalog = SMALL if which == "small" else github
    texts = tool_texts(catalog)
    vocab, ours = tfidf_matrix(texts)
    vectorizer = TfidfVectorizer(
        vocabulary=vocab, tokenizer=tokenize, lowercase=False, token_pattern=None, smooth_idf=True, norm="l2"
    )
    theirs = vectorizer.fit_transform(texts).toarray()
    assert ours.shape == theirs.shape
    assert abs(ours - theirs).max() < 1e-9
    assert abs(ours @ ours.T - theirs @ theirs.T).max() < 1e-9


def test_small_catalog_pairs() -> None:
    pairs = confusable_pairs(SMALL, threshold=0.0)
    assert len(pairs) == 6
    assert all(a < b for a, b, _ in pairs)
    sims = [s for _, _, s in pairs]
    assert sims == sorted(sims, reverse=True)
    assert all(s == round(s, 4) for s in sims)
    assert pairs[0][:2] in {("get_issue", "list_issues"), ("list_issues", "search_issues")}
    assert confusable_pairs(SMALL, threshold=0.0, top=2) == pairs[:2]
    assert confusable_pairs(SMALL, threshold=1.01) == []
    assert confusable_pairs(Catalog([SMALL.tools[0]])) == []


def test_list_issues_and_search_issues_are_confusable(github: Catalog) -> None:
    pairs = confusable_pairs(github)
    assert all(s >= DEFAULT_THRESHOLD for _, _, s in pairs)
    found = [(rank, sim) for rank, (a, b, sim) in enumerate(pairs, 1) if (a, b) == ("list_issues", "search_issues")]
    assert found, "list_issues / search_issues must be a confusable pair at the default threshold"
    assert pairs[0] == ("assign_copilot_to_issue", "assign_copilot_to_issue_with_intent", 0.9546)


def test_pairs_are_deterministic(github: Catalog) -> None:
    first = confusable_pairs(github, threshold=0.3)
    assert confusable_pairs(github, threshold=0.3) == first
    shuffled = list(github.tools)
    random.Random(7).shuffle(shuffled)
    assert confusable_pairs(Catalog(shuffled), threshold=0.3) == first
    assert first == sorted(first, key=lambda p: (-p[2], p[0], p[1]))  # ties in name order


# -- confusion counts -------------------------------------------------------------------------------------------


REPORT: dict[str, Any] = {
    "version": 1,
    "models": {
        "m1": {
            "confused_pairs": [
                {"expected": "list_issues", "called": "search_issues", "count": 3},
                {"expected": "search_issues", "called": "list_issues", "count": 1},
                {"expected": "get_issue", "called": "(none)", "count": 2},
            ]
        },
        "m2": {
            "confused_pairs": [
                {"expected": "search_issues", "called": "list_issues", "count": 4},
            ]
        },
        "m3": {"confused_pairs": []},
    },
}


def test_confusion_counts() -> None:
    assert confusion_counts(REPORT) == {("list_issues", "search_issues"): 8, ("(none)", "get_issue"): 2}
    assert confusion_counts(REPORT, "m1") == {("list_issues", "search_issues"): 4, ("(none)", "get_issue"): 2}
    assert confusion_counts(REPORT, "m2") == {("list_issues", "search_issues"): 4}
    assert confusion_counts(REPORT, "m3") == {}
    assert confusion_counts(REPORT, "nobody") == {}
    assert confusion_counts({"models": {}}) == {}
