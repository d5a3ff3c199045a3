"""The flow keys of the benchmark format: the issue's example loads, and every mistake is one clear error.

Load-time checks run on :func:`load` directly; the checks against a static tool list and the judge usage
error run through pytest as a user runs it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import GITHUB_TOOLS, make_project, run

from pytest_mcpeval.benchmark.loader import (
    BenchmarkError,
    load,
    unknown_mock_tools,
    unknown_tools,
    unknown_when_arguments,
)
from pytest_mcpeval.benchmark.matchers import Matcher, MatcherError, Reference, compile_args, compile_value, references
from pytest_mcpeval.benchmark.schema import keys_at
from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.defaults import DEFAULT_MAX_TURNS
from pytest_mcpeval.testing import ScriptedModelServer

ROOT = Path(__file__).parent.parent

ISSUE_EXAMPLE = """\
version: 1
server: {tools_file: tools.json}
max_turns: 8
cases:
  - id: login-timeout-owner
    input: Find the open issue in acme/web about the login timeout and tell me who opened it.
    order: in_order
    expect:
      - tool: search_issues
        args: {query: {regex: "(?i).*login.*timeout.*"}}
        extra_args: allow
      - tool: issue_read
        args: {owner: acme, repo: web, method: get,
               issue_number: {from_result: {tool: search_issues, path: items.0.number}}}
    forbid: [delete_repository]
    mocks:
      search_issues:
        - result: {structured: {total_count: 1, items: [{number: 42, title: "Login timeout on Safari"}]}}
      issue_read:
        - when: {issue_number: 42}
          result: {structured: {number: 42, state: open, user: {login: alice}}}
        - result: {error: "issue not found"}
    execute: mock
    claims:
      - Issue 42 was opened by alice.
      - {claim: "Names issue 42", check: {regex: "\\\\b42\\\\b"}}
      - {claim: "Names the reporter", check: {contains: alice}}
  - id: plain
    input: list the issues of github/docs
    expect: [{tool: list_issues, args: {owner: github, repo: docs}}]
"""

HEAD = "server: {tools_file: tools.json}\ncases:\n"
CASE = "  - id: one\n    input: hi\n"  # lines 3-4; the next line of a case is line 5


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bench.mcpeval.yaml"
    path.write_text(text)
    return path


def load_error(tmp_path: Path, text: str) -> BenchmarkError:
    with pytest.raises(BenchmarkError) as info:
        load(write(tmp_path, text))
    info.value.path = "bench.mcpeval.yaml"  # as collection does, after the fact
    return info.value


# -- the issue's example ----------------------------------------------------------------------------------

def test_the_issue_example_loads(tmp_path: Path) -> None:
    bench = load(write(tmp_path, ISSUE_EXAMPLE))
    flow, plain = bench.spec.cases
    assert (flow.is_flow, plain.is_flow) == (True, False)
    assert flow.order_mode == "in_order" and flow.forbid == ["delete_repository"] and flow.execute == "mock"
    assert [c.check is None for c in flow.claims] == [True, False, False]
    reference = bench.matchers[("login-timeout-owner", 1)]
    assert reference is not None
    assert reference["issue_number"] == Matcher("from_result", Reference("search_issues", ("items", 0, "number")))
    assert bench.matchers[("plain", 0)] == compile_args({"owner": "github", "repo": "docs"})
    assert bench.mock_matchers == {
        ("login-timeout-owner", "search_issues", 0): None,
        ("login-timeout-owner", "issue_read", 0): {"issue_number": Matcher("literal", 42)},
        ("login-timeout-owner", "issue_read", 1): None,
    }
    assert bench.max_turns(flow) == 8
    assert bench.claims_threshold(flow, 0.6) == 0.6  # neither the case nor the file sets it: the run's


def test_effective_max_turns_and_claims_threshold(tmp_path: Path) -> None:
    text = (
        "server: {tools_file: tools.json}\nmax_turns: 5\nclaims_threshold: 0.5\ncases:\n"
        "  - {id: own, input: hi, expect: [], max_turns: 3, claims: [x], claims_threshold: 1}\n"
        "  - {id: file, input: hi, expect: [], claims: [x]}\n"
    )
    bench = load(write(tmp_path, text))
    own, file = bench.spec.cases
    assert (bench.max_turns(own), bench.claims_threshold(own, 0.75)) == (3, 1.0)
    assert (bench.max_turns(file), bench.claims_threshold(file, 0.75)) == (5, 0.5)
    bare = load(write(tmp_path, HEAD + "  - {id: a, input: hi, expect: [], forbid: [x]}\n"))
    assert bare.max_turns(bare.spec.cases[0]) == DEFAULT_MAX_TURNS
    assert bare.claims_threshold(bare.spec.cases[0], 0.75) == 0.75


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*/*.mcpeval.yaml")),
                         ids=lambda p: p.parent.name)
def test_every_example_still_loads(path: Path) -> None:
    bench = load(path)
    for case in bench.spec.cases:
        for tool, mocks in case.mocks.items():
            assert all((case.id, tool, k) in bench.mock_matchers for k in range(len(mocks)))


# -- from_result: grammar, compile and describe -------------------------------------------------------------

@pytest.mark.parametrize(
    ("raw", "reference"),
    [
        ({"tool": "search_issues", "path": "items.0.number"}, Reference("search_issues", ("items", 0, "number"))),
        ({"tool": "t", "path": "a.10.b", "offset": 2}, Reference("t", ("a", 10, "b"), 2)),
        ({"tool": "t", "path": 0}, Reference("t", (0,))),  # YAML reads `path: 0` as a number
        ({"tool": "t", "path": "a.01.-1"}, Reference("t", ("a", "01", "-1"))),  # not indices: keys
    ],
)
def test_from_result_compiles_and_describes_back(raw: dict[str, object], reference: Reference) -> None:
    matcher = compile_value({"from_result": raw})
    assert matcher == Matcher("from_result", reference)
    assert compile_value(matcher.describe()) == matcher  # round trip
    optional = compile_value({"from_result": raw, "optional": True})
    assert optional.optional and optional.describe()["optional"] is True
    assert compile_value(optional.describe()) == optional
    assert not matcher.matches(42)  # unbound: matches nothing until scoring binds it


def test_references_are_found_at_any_depth() -> None:
    ref = {"from_result": {"tool": "t", "path": "x"}}
    compiled = compile_args({"a": ref, "b": {"c": [1, ref]}, "d": {"any_of": [ref, 2]}, "e": 1})
    assert [path for path, _ in references(compiled)] == [("a",), ("b", "c", 1), ("d", "any_of", 0)]
    assert references(None) == []


@pytest.mark.parametrize(
    ("raw", "path", "message"),
    [
        ({"from_reslt": {"tool": "t", "path": "a"}}, ("q",),
         "unknown matcher `from_reslt`; did you mean `from_result`?"),
        ({"from_result": "search_issues.items.0"}, ("q", "from_result"),
         "`from_result` takes a mapping {tool: TOOL, path: DOTTED.PATH, offset: N}"),
        ({"from_result": {"path": "a"}}, ("q", "from_result", "tool"), "`from_result` needs `tool`"),
        ({"from_result": {"tool": " ", "path": "a"}}, ("q", "from_result", "tool"), "`from_result` needs `tool`"),
        ({"from_result": {"tool": "t"}}, ("q", "from_result", "path"), "`from_result` needs `path`: a dotted path"),
        ({"from_result": {"tool": "t", "path": "items..number"}}, ("q", "from_result", "path"),
         "`path` 'items..number' has an empty segment"),
        ({"from_result": {"tool": "t", "path": "a", "offset": -1}}, ("q", "from_result", "offset"),
         "`offset` takes a whole number >= 0"),
        ({"from_result": {"tool": "t", "path": "a", "offset": True}}, ("q", "from_result", "offset"),
         "`offset` takes a whole number >= 0"),
        ({"from_result": {"tool": "t", "path": "a", "ofset": 1}}, ("q", "from_result", "ofset"),
         "unknown key `ofset` in `from_result`; did you mean `offset`? (keys: tool, path, offset)"),
        ({"from_result": {"tool": "t", "path": "a"}, "regex": "x"}, ("q",),
         "`from_result` stands for the whole value: it does not go with `regex`"),
        ({"from_result": {"tool": "t", "path": "a"}, "tol": 1}, ("q",), "it does not go with `tol`"),
    ],
    ids=["misspelt", "not-a-mapping", "no-tool", "blank-tool", "no-path", "empty-segment", "negative-offset",
         "bool-offset", "unknown-key", "with-regex", "with-tol"],
)
def test_from_result_grammar_errors(raw: object, path: tuple[str | int, ...], message: str) -> None:
    with pytest.raises(MatcherError) as info:
        compile_args({"q": raw})
    assert info.value.path == path
    assert message in info.value.message


# -- load-time errors: one clear line each --------------------------------------------------------------

FLOW = "    order: in_order\n"  # line 5: makes the case a flow
SEARCH = "      - {tool: search_issues, args: {query: x}}\n"


def refer(tool: str = "search_issues", path: str = "items.0.number", extra: str = "") -> str:
    reference = f"{{from_result: {{tool: {tool}, path: {path}{extra}}}}}"
    return f"      - {{tool: issue_read, args: {{issue_number: {reference}}}}}\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (HEAD + CASE + "    order: inorder\n    expect: []\n",
         "bench.mcpeval.yaml:5: cases[0] (`one`).order: unknown order mode `inorder`; did you mean `in_order`? "
         "(one of strict, in_order, unordered, subset, superset)"),
        (HEAD + CASE + "    execute: lives\n    expect: []\n",
         "bench.mcpeval.yaml:5: cases[0] (`one`).execute: unknown value `lives`; did you mean `live`? (one of "
         "mock, live)"),
        (HEAD + CASE + FLOW + "    expect:\n" + SEARCH + refer("search_issue"),
         "bench.mcpeval.yaml:8: cases[0] (`one`).expect[1].args.issue_number.from_result: `from_result` refers to "
         "`search_issue`, which no expected call before this one uses; did you mean `search_issues`? "
         "(a reference takes its value from an earlier call)"),
        (HEAD + CASE + FLOW + "    expect:\n" + refer() + SEARCH,
         "bench.mcpeval.yaml:7: cases[0] (`one`).expect[0].args.issue_number.from_result: `from_result` refers to "
         "`search_issues`, which no expected call before this one uses (a reference takes its value from an "
         "earlier call: list that call first)"),
        (HEAD + CASE + FLOW + "    expect:\n" + refer("get_me"),
         "bench.mcpeval.yaml:7: cases[0] (`one`).expect[0].args.issue_number.from_result: `from_result` refers to "
         "`get_me`, which no expected call before this one uses (this is the first expected call: a reference "
         "needs an earlier one)"),
        (HEAD + CASE + FLOW + "    expect:\n" + SEARCH + refer(extra=", offset: 1"),
         "bench.mcpeval.yaml:8: cases[0] (`one`).expect[1].args.issue_number.from_result: `offset: 1` refers "
         "to result 2 "
         "of `search_issues`, but `expect` lists 1 call of it before this one (offset 0 is the first)"),
        (HEAD + CASE + FLOW + "    expect:\n" + SEARCH + refer(path="items..number"),
         "bench.mcpeval.yaml:8: cases[0] (`one`).expect[1].args.issue_number.from_result.path: `path` 'items..number' "
         "has an empty segment (write keys and list indices separated by single dots, such as `items.0.number`)"),
        (HEAD + CASE + "    expect:\n" + SEARCH + refer(),
         "bench.mcpeval.yaml:7: cases[0] (`one`).expect[1].args.issue_number.from_result: `from_result` needs a flow: "
         "a single-call case has no earlier results (a case is a flow when it has `order`, `mocks`, `forbid`, "
         "`claims`, `max_turns` or `execute: live`)"),
        (HEAD + CASE + "    expect: []\n    mocks:\n      issue_read:\n        - when: {issue_number: {regx: '4.'}}\n"
         "          result: {text: x}\n",
         "bench.mcpeval.yaml:8: cases[0] (`one`).mocks.issue_read[0].when.issue_number: unknown matcher `regx`; "
         "did you mean `regex`? (to expect a literal object with this key, write {equals: {...}})"),
        (HEAD + CASE + "    expect: []\n    mocks:\n      issue_read:\n        - when: {n: {regex: '('}}\n"
         "          result: {text: x}\n",
         "bench.mcpeval.yaml:8: cases[0] (`one`).mocks.issue_read[0].when.n.regex: invalid regular expression: "
         "missing ), unterminated subpattern at position 0"),
        (HEAD + CASE + "    expect: []\n    mocks:\n      issue_read:\n"
         "        - when: {n: {from_result: {tool: search_issues, path: a}}}\n          result: {text: x}\n",
         "bench.mcpeval.yaml:8: cases[0] (`one`).mocks.issue_read[0].when.n.from_result: `from_result` does not go in "
         "`when`: a mock's answers are fixed, so write the value itself"),
        (HEAD + CASE + "    expect: []\n    mocks:\n      issue_read:\n        - result: {text: default}\n"
         "        - {when: {n: 1}, result: {text: one}}\n",
         "bench.mcpeval.yaml:9: cases[0] (`one`).mocks.issue_read[1]: this mock is never used: the mock at "
         "line 8 has no "
         "`when` and answers every call of `issue_read` first (put it last)"),
        (HEAD + CASE + "    expect: []\n    claims: ['']\n",
         "bench.mcpeval.yaml:6: cases[0] (`one`).claims[0].claim: a claim needs a text: one fact the final "
         "answer must state"),
        (HEAD + CASE + "    expect: []\n    claims: ['   ']\n",
         "bench.mcpeval.yaml:6: cases[0] (`one`).claims[0].claim: a claim needs a text: one fact the final "
         "answer must state"),
        (HEAD + CASE + "    expect: []\n    claims:\n      - {claim: '', check: {contains: x}}\n",
         "bench.mcpeval.yaml:7: cases[0] (`one`).claims[0].claim: a claim needs a text: one fact the final "
         "answer must state"),
        (HEAD + CASE + "    expect: []\n    claims: [null]\n",
         "bench.mcpeval.yaml:6: cases[0] (`one`).claims[0]: a claim is a string, or a mapping {claim, check}; "
         "not null"),
        (HEAD + CASE + "    expect: []\n    claims:\n      - {claim: x, check: {}}\n",
         "bench.mcpeval.yaml:7: cases[0] (`one`).claims[0].check: give exactly one of contains, regex, any_of "
         "(found: none)"),
        (HEAD + CASE + "    expect: []\n    max_turns: 0\n",
         "bench.mcpeval.yaml:6: cases[0] (`one`).max_turns: Input should be greater than or equal to 1"),
        (HEAD.replace("cases:", "max_turns: 0\ncases:") + "  - {id: one, input: hi, expect: []}\n",
         "bench.mcpeval.yaml:2: max_turns: Input should be greater than or equal to 1"),
        (HEAD + CASE + "    expect: []\n    max_turns: true\n",
         "bench.mcpeval.yaml:6: cases[0] (`one`).max_turns: expected a number, not true/false"),
        (HEAD + CASE + "    expect: []\n    claims: [x]\n    claims_threshold: 1.5\n",
         "bench.mcpeval.yaml:7: cases[0] (`one`).claims_threshold: Input should be less than or equal to 1"),
        (HEAD.replace("cases:", "claims_threshold: 1.5\ncases:") + "  - {id: one, input: hi, expect: []}\n",
         "bench.mcpeval.yaml:2: claims_threshold: Input should be less than or equal to 1"),
        (HEAD + CASE + "    expect: []\n    forbid: [x]\n    claims_threshold: 0.5\n",
         "bench.mcpeval.yaml:7: cases[0] (`one`).claims_threshold: `claims_threshold` applies to claims, and this case "
         "has none"),
        (HEAD + CASE + "    expect: []\n    execute: live\n",
         "bench.mcpeval.yaml:6: cases[0] (`one`).execute: `execute: live` needs a server to call, and this "
         "file's server "
         "is a `tools_file` (a static tool list): answer the calls with `mocks`, or name a server with `command`, "
         "`url` or `python`"),
        (HEAD + CASE + "    expect: [{tool: delete_repository}]\n    forbid: [get_me, delete_repository]\n",
         "bench.mcpeval.yaml:6: cases[0] (`one`).forbid[1]: `delete_repository` is both forbidden and expected "
         "(listed in `expect`)"),
        (HEAD + CASE + "    expect: []\n    mocks: [issue_read]\n",
         "bench.mcpeval.yaml:6: cases[0] (`one`).mocks: expected a mapping of tool names to lists of mocks, "
         "not a list"),
        (HEAD + CASE + "    expect: []\n    mocks:\n      issue_read: {result: {text: x}}\n",
         "bench.mcpeval.yaml:7: cases[0] (`one`).mocks.issue_read: expected a list of mocks (each {when, result}), "
         "not a mapping"),
        (HEAD + CASE + "    expect: []\n    mocks:\n      issue_read: []\n",
         "bench.mcpeval.yaml:7: cases[0] (`one`).mocks.issue_read: List should have at least 1 item after validation, "
         "not 0"),
        (HEAD + CASE + "    expect: []\n    mocks:\n      issue_read: [{result: found}]\n",
         "bench.mcpeval.yaml:7: cases[0] (`one`).mocks.issue_read[0].result: expected a mapping (keys: text, "
         "structured, "
         "error), not a string"),
        (HEAD + CASE + "    expect: []\n    mocks:\n      issue_read: [{result: {}}]\n",
         "bench.mcpeval.yaml:7: cases[0] (`one`).mocks.issue_read[0].result: give exactly one of text, "
         "structured, error "
         "(found: none)"),
        (HEAD + CASE + "    expect: []\n    mocks:\n      issue_read: [{when: [42], result: {text: x}}]\n",
         "bench.mcpeval.yaml:7: cases[0] (`one`).mocks.issue_read[0].when: expected a mapping, not a list"),
        (HEAD + CASE + "    expect: []\n    forbid: delete_repository\n",
         "bench.mcpeval.yaml:6: cases[0] (`one`).forbid: expected a list, not a string"),
        (HEAD + CASE + "    expect: []\n    claims: Issue 42 was opened by alice.\n",
         "bench.mcpeval.yaml:6: cases[0] (`one`).claims: expected a list, not a string"),
    ],
    ids=["order-mode", "execute", "reference-typo", "reference-to-later", "reference-in-first-call",
         "reference-offset", "reference-path", "reference-not-a-flow", "when-matcher", "when-regex",
         "when-reference", "shadowed-mock", "empty-claim", "blank-claim", "empty-claim-mapping", "null-claim",
         "empty-check", "max-turns-0", "file-max-turns-0", "max-turns-true", "claims-threshold",
         "file-claims-threshold", "threshold-without-claims", "live-without-server", "forbid-expected",
         "mocks-list", "mock-entries-mapping", "mock-entries-empty", "result-string", "result-empty",
         "when-list", "forbid-string", "claims-string"],
)
def test_flow_mistakes(tmp_path: Path, text: str, expected: str) -> None:
    error = load_error(tmp_path, text)
    assert str(error) == expected
    assert len(error.problems) == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (HEAD + CASE + "    expect: []\n    mocks:\n      issue_read: [{wen: {n: 1}, result: {text: x}}]\n",
         "bench.mcpeval.yaml:7: cases[0] (`one`).mocks.issue_read[0]: unknown field `wen`; did you mean `when`?"),
        (HEAD + CASE + "    expect: []\n    mocks:\n      issue_read: [{result: {structred: {n: 1}}}]\n",
         "bench.mcpeval.yaml:7: cases[0] (`one`).mocks.issue_read[0].result: unknown field `structred`; "
         "did you mean `structured`?"),
        (HEAD + CASE + "    expect: []\n    claims:\n      - {claim: x, chek: {contains: a}}\n",
         "bench.mcpeval.yaml:7: cases[0] (`one`).claims[0]: unknown field `chek`; did you mean `check`?"),
        (HEAD + CASE + "    expect: []\n    claims:\n      - {claim: x, check: {contain: a}}\n",
         "bench.mcpeval.yaml:7: cases[0] (`one`).claims[0].check: unknown field `contain`; did you mean `contains`?"),
        (HEAD + CASE + "    expect: []\n    claims:\n      - {clam: x}\n",
         "bench.mcpeval.yaml:7: cases[0] (`one`).claims[0]: unknown field `clam`; did you mean `claim`?"),
        (HEAD + CASE + "    expect: []\n    mock: {}\n",
         "bench.mcpeval.yaml:6: cases[0] (`one`): unknown field `mock`; did you mean `mocks`?"),
        (HEAD + CASE + "    expect: []\n    max_turn: 3\n",
         "bench.mcpeval.yaml:6: cases[0] (`one`): unknown field `max_turn`; did you mean `max_turns`?"),
    ],
    ids=["wen", "structred", "chek", "contain", "clam", "mock", "max_turn"],
)
def test_did_you_mean_inside_flow_keys(tmp_path: Path, text: str, expected: str) -> None:
    assert str(load_error(tmp_path, text)) == expected


def test_every_flow_problem_of_a_file_at_once(tmp_path: Path) -> None:
    text = (
        HEAD
        + CASE
        + "    order: inorder\n"                                                      # 5
        + "    expect:\n"
        + SEARCH
        + refer("search_issue")                                                     # 8
        + "    mocks:\n"
        + "      issue_read: [{when: {n: {regx: x}}, result: {text: x}}]\n"        # 10
        + "    claims: ['']\n"                                                        # 11
        + "    max_turns: 0\n"                                                        # 12
    )
    error = load_error(tmp_path, text)
    assert [(p.line, p.where) for p in error.problems] == [
        (5, "cases[0] (`one`).order"),
        (8, "cases[0] (`one`).expect[1].args.issue_number.from_result"),
        (10, "cases[0] (`one`).mocks.issue_read[0].when.n"),
        (11, "cases[0] (`one`).claims[0].claim"),
        (12, "cases[0] (`one`).max_turns"),
    ]


# -- the tool list: unknown_tools / unknown_mock_tools, and at collection ------------------------------------

def test_unknown_tools_against_a_catalog(tmp_path: Path) -> None:
    text = HEAD + CASE + ("    expect: []\n    forbid: [delete_repo, get_me]\n    mocks:\n"
                          "      issue_reed: [{result: {text: x}}]\n      get_me: [{result: {text: x}}]\n")
    case = load(write(tmp_path, text)).spec.cases[0]
    catalog = Catalog([{"name": n, "inputSchema": {"type": "object"}}
                       for n in ("issue_read", "get_me", "delete_repository")])
    assert unknown_tools(case, catalog.names) == [
        (("mocks", "issue_reed"),
         "mocked tool `issue_reed` is not published by the server; did you mean `issue_read`?"),
        (("forbid", 0),
         "forbidden tool `delete_repo` is not published by the server; did you mean `delete_repository`?"),
    ]
    assert unknown_mock_tools(case, catalog) == [  # a live server's check: mocks and forbid alike
        "mocked tool `issue_reed` is not published by the server; did you mean `issue_read`?",
        "forbidden tool `delete_repo` is not published by the server; did you mean `delete_repository`?",
    ]


def test_a_when_naming_an_argument_the_tool_does_not_take(tmp_path: Path) -> None:
    """Such a mock can never match: every call would go unanswered, silently."""
    text = HEAD + CASE + ("    expect: []\n    mocks:\n      issue_read:\n"
                          "        - {when: {issue_numbr: 42, method: get}, result: {text: x}}\n"
                          "        - {result: {text: y}}\n      get_me: [{when: {anything: 1}, result: {text: x}}]\n")
    case = load(write(tmp_path, text)).spec.cases[0]
    catalog = Catalog([
        {"name": "issue_read", "inputSchema": {"type": "object", "properties": {"issue_number": {}, "method": {}}}},
        {"name": "get_me", "inputSchema": {"type": "object"}},  # no properties: nothing to check against
    ])
    assert unknown_when_arguments(case, catalog) == [(
        ("mocks", "issue_read", 0, "when", "issue_numbr"),
        "`when` of a mock of `issue_read` names the argument `issue_numbr`, which `issue_read` does not take; "
        "did you mean `issue_number`?")]
    assert unknown_mock_tools(case, catalog) == [unknown_when_arguments(case, catalog)[0][1]]


def collect(pytester: pytest.Pytester, server: ScriptedModelServer, files: dict[str, str], *args: str,
            ini: str = "") -> pytest.RunResult:
    make_project(pytester, server, files, ini_extra=ini)
    (pytester.path / "tools.json").write_text(GITHUB_TOOLS.read_text())
    result = run(pytester, *args)
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    return result


def test_static_catalog_problems_are_all_said_at_collection(pytester: pytest.Pytester,
                                                            model_server: ScriptedModelServer) -> None:
    text = (
        HEAD
        + CASE
        + "    expect: [{tool: search_issue}]\n"                     # 5
        + "    forbid: [delete_repo]\n"                              # 6
        + "    mocks:\n"
        + "      issue_reed: [{result: {text: x}}]\n"                # 8
        + "      issue_read: [{when: {issue_numbr: 1}, result: {text: x}}]\n"  # 9
        + "  - {id: two, input: hi, expect: [], forbid: [get_me]}\n"  # 10: fine
    )
    result = collect(pytester, model_server, {"bench.mcpeval.yaml": text}, "--mcp-models=fake")
    result.stdout.fnmatch_lines([
        "*ERROR collecting bench.mcpeval.yaml*",
        "bench.mcpeval.yaml:5: cases[[]0[]] (`one`): expected tool `search_issue` is not published by the server;"
        " did you mean `search_issues`?",
        "bench.mcpeval.yaml:6: cases[[]0[]] (`one`): forbidden tool `delete_repo` is not published by the server;"
        " did you mean `delete_repository`?",
        "bench.mcpeval.yaml:8: cases[[]0[]] (`one`): mocked tool `issue_reed` is not published by the server;"
        " did you mean `issue_read`?",
    ])
    result.stdout.fnmatch_lines(["bench.mcpeval.yaml:9: cases[[]0[]] (`one`): `when` of a mock of `issue_read` names "
                                 "the argument `issue_numbr`, which `issue_read` does not take; did you mean "
                                 "`issue_number`?"])
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert model_server.requests == []


# -- the judge: needed by claims without a check, checked once the items are selected ------------------------

JUDGED = HEAD + (
    "  - {id: judged, input: hi, expect: [], claims: [The answer says hello.], tags: [judged]}\n"
    "  - {id: checked, input: hi, expect: [], claims: [{claim: hello, check: {contains: hello}}]}\n"
    "  - {id: skipped, input: hi, expect: [], claims: [Judged but skipped.], skip: true}\n"
)
JUDGE_ERROR = [
    "ERROR: claims without a `check` are judged by a judge model, and none is configured; pass "
    "--mcp-judge-model=NAME (a litellm model string or an alias; ini key mcp_judge_model), or give these cases' "
    "claims a `check` (contains, regex or any_of) to decide them without a judge:",
    "  a.mcpeval.yaml: judged",
    "  sub/b.mcpeval.yaml: judged",
]


@pytest.mark.parametrize("xdist", [[], ["-n", "1"]], ids=["no-xdist", "xdist"])
def test_judge_claims_without_a_judge_are_a_usage_error(pytester: pytest.Pytester, model_server: ScriptedModelServer,
                                                        xdist: list[str]) -> None:
    files = {"a.mcpeval.yaml": JUDGED, "sub/b.mcpeval.yaml": JUDGED.replace("tools.json", "../tools.json"),
             "c.mcpeval.yaml": HEAD + "  - {id: plain, input: hi, expect: []}\n"}
    result = collect(pytester, model_server, files, "--mcp-models=fake", *xdist)
    result.stderr.fnmatch_lines(JUDGE_ERROR)
    assert "c.mcpeval.yaml" not in result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert model_server.requests == []


@pytest.mark.parametrize(
    ("args", "ini"),
    [
        (["--mcp-judge-model=fake"], ""),             # a judge
        ([], "mcp_judge_model = fake\n"),             # a judge from the ini file
        (["-m", "not judged"], ""),                   # the judged case is deselected
        (["-k", "checked"], ""),
        (["-n", "1", "-k", "checked"], ""),
    ],
    ids=["option", "ini", "deselected-m", "deselected-k", "deselected-xdist"],
)
def test_no_usage_error_when_no_selected_claim_needs_a_judge(pytester: pytest.Pytester,
                                                             model_server: ScriptedModelServer,
                                                             args: list[str], ini: str) -> None:
    result = collect(pytester, model_server, {"a.mcpeval.yaml": JUDGED}, "--mcp-models=fake", "--collect-only",
                     *args, ini=ini)
    assert "judge" not in result.stderr.str()
    assert result.ret != pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["*<CaseItem checked[[]fake[]]>*"])


def test_no_model_no_judge_needed(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    result = collect(pytester, model_server, {"a.mcpeval.yaml": JUDGED}, "--collect-only")
    assert "judge" not in result.stderr.str()  # no model: every case is skipped, nothing is judged
    assert result.ret == pytest.ExitCode.OK


def test_keys_at_flow_places() -> None:
    assert keys_at(("cases", 0, "mocks", "any_tool", 2)) == ("when", "result")
    assert keys_at(("cases", 0, "claims", 1)) == ("claim", "check")
    assert keys_at(("cases", 0, "claims", 1, "check", "any_of", 0)) == ("contains", "regex", "any_of")
    assert keys_at(("cases", 0, "mocks", "any_tool", 0, "when")) == ()  # argument names: any key


def test_a_misspelt_choice_gets_a_did_you_mean(tmp_path: Path) -> None:
    text = HEAD + "  - id: one\n    input: [{role: usr, content: hi}]\n    expect: [{tool: x, extra_args: alow}]\n"
    assert str(load_error(tmp_path, text)).splitlines() == [
        "bench.mcpeval.yaml:4: cases[0] (`one`).input[0].role: unknown value `usr`; did you mean `user`? "
        "(one of system, user, assistant)",
        "bench.mcpeval.yaml:5: cases[0] (`one`).expect[0].extra_args: unknown value `alow`; did you mean `allow`? "
        "(one of forbid, allow)",
    ]


def test_a_retriever_cannot_judge(pytester: pytest.Pytester) -> None:
    pytester.makefile(".mcpeval.yaml", a=HEAD + "  - {id: judged, input: hi, expect: [], claims: [It says hi.]}\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "--mcp-models=fake", "--mcp-judge-model=local/minilm")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--mcp-judge-model=local/minilm: a local/... model is a tool retriever and cannot "
                                 "judge claims*"])
