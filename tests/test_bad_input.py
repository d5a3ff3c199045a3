"""Every user mistake is a clear error naming file, line and field (all of a file's at once), never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import GITHUB_TOOLS, make_project, run

from pytest_mcpeval.benchmark.loader import MAX_SHOWN, BenchmarkError, load
from pytest_mcpeval.benchmark.schema import keys_at
from pytest_mcpeval.testing import ScriptedModelServer

GOOD_CASE = """
  - id: one
    input: list the issues of github/docs
    expect: [{tool: list_issues, args: {owner: github, repo: docs}}]
"""


def collect_error(pytester: pytest.Pytester, server: ScriptedModelServer, text: str, *args: str) -> str:
    make_project(pytester, server, {"bench.mcpeval.yaml": text})
    (pytester.path / "tools.json").write_text(GITHUB_TOOLS.read_text())
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--mcp-models=fake", *args)
    out = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in out
    assert result.ret != 0
    return out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("server: {tools_file: tools.json}\ncases:\n  - id: a\n    input: [unclosed\n",  # line 5 before: one too far
         "bench.mcpeval.yaml:4: invalid YAML at column 12: *the line reads `    input: [[]unclosed`"),
        ("server: {tools_file: tools.json}\ncases:" + GOOD_CASE + "    exepct: []\n",
         "bench.mcpeval.yaml:6: cases[[]0[]] (`one`): unknown field `exepct`; did you mean `expect`?"),
        ("server: {tools_file: tools.json}\ncases:" + GOOD_CASE + GOOD_CASE,
         "bench.mcpeval.yaml:7: cases[[]1[]] (`one`).id: duplicate case id `one` (first at line 3)"),
        ("server: {tools_file: tools.json, url: http://x}\ncases:" + GOOD_CASE,
         "bench.mcpeval.yaml:1: server: give exactly one of tools_file, command, url, python (found: tools_file, url)"),
        ("server: {tools_file: tools.json}\ncases:" + GOOD_CASE.replace("list_issues", "list_issue"),
         "bench.mcpeval.yaml:5: cases[[]0[]] (`one`): expected tool `list_issue` is not published by the server;"
         " did you mean `list_issues`?"),
        ("server: {tools_file: tools.json}\ncases:" + GOOD_CASE.replace("repo: docs", "repo: {regx: d.*}"),
         "bench.mcpeval.yaml:5: cases[[]0[]] (`one`).expect[[]0[]].args.repo: unknown matcher `regx`; "
         "did you mean `regex`?*"),
        ("server: {tools_file: tools.json}\ncases:" + GOOD_CASE.replace("repo: docs", "repo: {regex: '('}"),
         "bench.mcpeval.yaml:5: cases[[]0[]] (`one`).expect[[]0[]].args.repo.regex: invalid regular expression*"),
        ("server: {tools_file: missing.json}\ncases:" + GOOD_CASE,
         "bench.mcpeval.yaml:1: server.tools_file: tools_file */missing.json does not exist"),
        ("server: {tools_file: ../elsewhere/missing.json}\ncases:" + GOOD_CASE,  # the path it leads to is said
         "bench.mcpeval.yaml:1: server.tools_file: tools_file */../elsewhere/missing.json (that is */elsewhere/"
         "missing.json) does not exist"),
        ("server: {tools_file: tools.json}\ncases:\n  - id: a b\n    input: x\n    expect: []\n",
         "bench.mcpeval.yaml:3: cases[[]0[]] (`a b`).id: String should match pattern*"),
        ("server: {tools_file: tools.json}\nserver: {url: http://x}\ncases:" + GOOD_CASE,
         "bench.mcpeval.yaml:2: duplicate key `server` (first at line 1)"),
        ("server: {tools_file: tools.json}\ncases: []\n",
         "bench.mcpeval.yaml:2: cases: List should have at least 1 item*"),
        ("", "bench.mcpeval.yaml:1: the file is empty*"),
    ],
    ids=["yaml", "unknown-field", "duplicate-id", "two-servers", "unknown-tool", "unknown-matcher", "bad-regex",
         "missing-tools-file", "relative-tools-file", "bad-id", "duplicate-key", "no-cases", "empty"],
)
def test_collection_errors(pytester: pytest.Pytester, model_server: ScriptedModelServer,
                           text: str, expected: str) -> None:
    out = collect_error(pytester, model_server, text)
    assert "ERROR collecting bench.mcpeval.yaml" in out
    pytest.LineMatcher(out.splitlines()).fnmatch_lines([expected])


def test_a_broken_file_loses_nothing_else(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    good = "server: {tools_file: tools.json}\ncases:" + GOOD_CASE
    make_project(pytester, model_server, {"good.mcpeval.yaml": good, "bad.mcpeval.yaml": "cases: [\n"})
    (pytester.path / "tools.json").write_text(GITHUB_TOOLS.read_text())
    model_server.call("list the issues of github/docs", "list_issues", owner="github", repo="docs")
    result = run(pytester, "--mcp-models=fake", "--continue-on-collection-errors")
    result.stdout.fnmatch_lines(["*bad.mcpeval.yaml:2: invalid YAML*", "*1 passed, 1 error*"])


def load_error(tmp_path: Path, text: str) -> BenchmarkError:
    path = tmp_path / "bench.mcpeval.yaml"
    path.write_text(text)
    with pytest.raises(BenchmarkError) as info:
        load(path)
    info.value.path = "bench.mcpeval.yaml"  # as collection does, after the fact
    return info.value


SERVER = "server: {tools_file: tools.json}\ncases:\n"


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("  - id: one\n    imput: hi\n    expect: []\n",
         "bench.mcpeval.yaml:4: cases[0] (`one`): unknown field `imput`; did you mean `input`?"),
        ("  - id: one\n    input: hi\n    exepct: []\n",
         "bench.mcpeval.yaml:5: cases[0] (`one`): unknown field `exepct`; did you mean `expect`?"),
        ("  - id: one\n    input: hi\n    expect: [{tol: x}]\n",
         "bench.mcpeval.yaml:5: cases[0] (`one`).expect[0]: unknown field `tol`; did you mean `tool`?"),
        ("  - ide: one\n    input: hi\n    expect: []\n",
         "bench.mcpeval.yaml:3: cases[0]: unknown field `ide`; did you mean `id`?"),
    ],
    ids=["imput", "exepct", "tol-in-expect", "ide"],
)
def test_a_typo_in_a_required_key_is_said_once(tmp_path: Path, case: str, expected: str) -> None:
    error = load_error(tmp_path, SERVER + case)
    assert str(error) == expected  # the did-you-mean alone: no "this field is required" for the same key
    assert len(error.problems) == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (SERVER + "  - id: one\n    input: hi\n    expect: []\n    tol: 3\n",
         # `tool`: not a case's key
         "bench.mcpeval.yaml:6: cases[0] (`one`): unknown field `tol`; did you mean `tools`?"),
        (SERVER + "  - id: one\n    input: hi\n    expect: []\n    comand: [x]\n",
         "bench.mcpeval.yaml:6: cases[0] (`one`): unknown field `comand`"),
        ("server: {comand: [x]}\ncases:\n  - {id: one, input: hi, expect: []}\n",
         "bench.mcpeval.yaml:1: server: unknown field `comand`; did you mean `command`?"),
        ("server: {tools_file: tools.json}\nmodel: [x]\ncases:\n  - {id: one, input: hi, expect: []}\n",
         "bench.mcpeval.yaml:2: unknown field `model`; did you mean `models`?"),
        (SERVER + "  - id: one\n    input: [{rol: user, content: hi}]\n    expect: []\n",
         "bench.mcpeval.yaml:4: cases[0] (`one`).input[0]: unknown field `rol`; did you mean `role`?"),
    ],
    ids=["tol-in-case", "server-key-in-case", "server-key-in-server", "top-level", "message-key"],
)
def test_did_you_mean_picks_from_the_keys_of_the_place(tmp_path: Path, text: str, expected: str) -> None:
    assert str(load_error(tmp_path, text)) == expected


def test_keys_at_each_place() -> None:
    assert keys_at(("cases", 3)) == ("id", "input", "expect", "tags", "skip", "draft", "tools", "distractors",
                                      "tool_search", "order", "forbid", "mocks", "execute", "claims", "max_turns",
                                      "claims_threshold")
    assert keys_at(("cases", 3, "tool_search")) == keys_at(("tool_search",)) == ("method", "top_k", "max_searches",
                                                                                "always_loaded")
    assert keys_at(("cases", 3, "mocks", "search_issues", 0)) == ("when", "result")
    assert keys_at(("cases", 3, "mocks", "search_issues", 0, "result")) == ("text", "structured", "error")
    assert keys_at(("cases", 3, "claims", 0, "check")) == ("contains", "regex", "any_of")
    assert keys_at(("cases", 3, "expect", 0)) == ("tool", "args", "extra_args")
    assert keys_at(("cases", 3, "input", 1)) == ("role", "content")
    assert "url" in keys_at(("server",)) and "cases" in keys_at(())
    assert keys_at(("cases", 3, "expect", 0, "args")) == ()  # any key goes there


def test_every_problem_of_a_file_at_once(tmp_path: Path) -> None:
    text = (
        SERVER
        + "  - id: one\n"                                          # 3
        + "    input: hi\n"
        + "    expect: [{tool: a, args: {repo: {regx: d.*}}}]\n"  # 5: matcher
        + "  - id: two\n"
        + "    input: hi\n"
        + "    expect: []\n"
        + "    tags: [not ok]\n"                                   # 9: pydantic
        + "  - id: one\n"                                          # 10: duplicate id
        + "    input: hi\n"
        + "    expect: []\n"
    )
    error = load_error(tmp_path, text)
    assert str(error).splitlines() == [
        "bench.mcpeval.yaml:5: cases[0] (`one`).expect[0].args.repo: unknown matcher `regx`; did you mean `regex`?"
        " (to expect a literal object with this key, write {equals: {...}})",
        "bench.mcpeval.yaml:9: cases[1] (`two`).tags: tag 'not ok' must be a Python identifier (it becomes a pytest "
        "marker)",
        "bench.mcpeval.yaml:10: cases[2] (`one`).id: duplicate case id `one` (first at line 3)",
    ]
    assert (error.line, error.where) == (5, "cases[0] (`one`).expect[0].args.repo")  # the first problem
    assert error.message.startswith("unknown matcher `regx`")
    error.path = "elsewhere/bench.mcpeval.yaml"
    assert all(line.startswith("elsewhere/bench.mcpeval.yaml:") for line in str(error).splitlines())


def test_duplicate_keys_do_not_hide_other_problems(tmp_path: Path) -> None:
    text = SERVER + "  - id: one\n    input: hi\n    input: ho\n    expect: [{tool: a, extar_args: allow}]\n"
    assert str(load_error(tmp_path, text)).splitlines() == [
        "bench.mcpeval.yaml:5: cases[0] (`one`): duplicate key `input` (first at line 4)",
        "bench.mcpeval.yaml:6: cases[0] (`one`).expect[0]: unknown field `extar_args`; did you mean `extra_args`?",
    ]


def test_more_problems_than_the_cap_are_counted(tmp_path: Path) -> None:
    n = MAX_SHOWN + 3
    text = SERVER + "".join(f"  - {{id: c{i}, input: hi, expect: [], skp: true}}\n" for i in range(n))
    error = load_error(tmp_path, text)
    lines = str(error).splitlines()
    assert len(error.problems) == n
    assert lines[:MAX_SHOWN] == [
        f"bench.mcpeval.yaml:{3 + i}: cases[{i}] (`c{i}`): unknown field `skp`; did you mean `skip`?"
        for i in range(MAX_SHOWN)
    ]
    assert lines[MAX_SHOWN:] == ["... and 3 more problems in this file"]


def test_a_syntax_error_stays_one_error(tmp_path: Path) -> None:
    error = load_error(tmp_path, SERVER + "  - id: one\n    imput: [unclosed\n  - ide: two\n")
    assert len(error.problems) == 1 and error.message.startswith("invalid YAML")


def test_all_problems_reach_the_user(pytester: pytest.Pytester) -> None:
    (pytester.path / "bench.mcpeval.yaml").write_text(
        SERVER + "  - id: one\n    imput: hi\n    expect: []\n  - id: two\n    input: hi\n    expect: [{tol: x}]\n"
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly")
    out = result.stdout.str()
    assert "Traceback" not in out and "required" not in out
    result.stdout.fnmatch_lines([
        "*ERROR collecting bench.mcpeval.yaml*",
        "bench.mcpeval.yaml:4: cases[[]0[]] (`one`): unknown field `imput`; did you mean `input`?",
        "bench.mcpeval.yaml:8: cases[[]1[]] (`two`).expect[[]0[]]: unknown field `tol`; did you mean `tool`?",
        "*1 error*",
    ])
    assert result.ret == pytest.ExitCode.INTERRUPTED


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--mcp-min-accuracy=abc"], "*--mcp-min-accuracy: 'abc' is not a number between 0 and 1"),
        (["--mcp-min-f1=1.5"], "*--mcp-min-f1: '1.5' is not between 0 and 1"),
        (["--mcp-models= , "], "*--mcp-models: ' , ' names no model*"),
        (["--mcp-record=sometimes"], "*--mcp-record: 'sometimes' is not one of new, none, all, off"),
        (["--mcp-concurrency=0"], "*--mcp-concurrency: '0' is not at least 1"),
        (["--mcp-retries=-1"], "*--mcp-retries: '-1' is not at least 0"),
        (["--mcp-timeout=0"], "*--mcp-timeout: '0' is not a positive number of seconds"),
        (["--mcp-repeat=two"], "*--mcp-repeat: 'two' is not a whole number"),
        (["--mcp-min-recall-at=7:0.9"], "*--mcp-min-recall-at: '7:0.9' is not K:X with K one of 1, 3, 5, 10*"),
    ],
)
def test_bad_option_values(pytester: pytest.Pytester, args: list[str], expected: str) -> None:
    result = run(pytester, *args)
    result.stderr.fnmatch_lines([expected])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


@pytest.mark.parametrize(("args", "expected"), [
    (["--mcp-model=local/minilm"], "ERROR: unknown option --mcp-model; did you mean --mcp-models?"),
    (["--mcp-modles", "local/minilm"], "ERROR: unknown option --mcp-modles; did you mean --mcp-models?"),
    (["--mcp-min-acuracy=0.5"], "ERROR: unknown option --mcp-min-acuracy; did you mean --mcp-min-accuracy?"),
    (["-q", "--mcp-zzzzzzzz"], "ERROR: unknown option --mcp-zzzzzzzz (pytest --help lists the * --mcp-* options)"),
])
def test_a_misspelt_option_gets_the_nearest_one(pytester: pytest.Pytester, args: list[str], expected: str) -> None:
    """pytest alone says ``unrecognized arguments``: one line naming the option meant, exit 4."""
    result = run(pytester, *args)
    result.stderr.fnmatch_lines([expected])
    assert [line for line in result.stderr.lines if line.strip()] == [result.stderr.lines[0]]  # that one line
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_a_relative_command_not_found_says_where_it_was_looked_for(pytester: pytest.Pytester) -> None:
    (pytester.path / "sub").mkdir()
    (pytester.path / "sub" / "bench.mcpeval.yaml").write_text(
        "server: {command: [./bin/server.sh]}\ncases:\n  - id: x\n    input: hi\n    expect: []\n")
    result = run(pytester, "--mcp-models=local/minilm", "sub")
    where = pytester.path / "sub"
    result.stderr.fnmatch_lines([
        "  server of sub/bench.mcpeval.yaml (command: ./bin/server.sh): could not connect to the server (command: "
        f"./bin/server.sh): FileNotFoundError: *; ./bin/server.sh was resolved from {where} (the file's directory, "
        f"or its `cwd`) to {where}/bin/server.sh; *"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_a_value_after_double_dash_is_not_an_option(pytester: pytest.Pytester) -> None:
    result = run(pytester, "--collect-only", "--", "--mcp-not-an-option-but-a-path")
    assert "unknown option" not in result.stderr.str()


@pytest.mark.parametrize(
    ("ini", "expected"),
    [
        ("mcp_thresholds = acuracy >= 0.9", "*unknown metric `acuracy`*did you mean `accuracy`?*"),
        ("mcp_thresholds = f1 >= 0.9", "*`f1` is per tool: write `f1[[]TOOL[]]`*"),
        ("mcp_thresholds = accuracy > 0.9", "*cannot read threshold 'accuracy > 0.9'*"),
        ("mcp_model_params = fake = {temperature: 0}", "*mcp_model_params: the value for 'fake' is not JSON*"),
        ("mcp_record = maybe", "*ini key mcp_record: 'maybe' is not one of new, none, all, off"),
        ("mcp_concurrency = fake = lots", "*ini key mcp_concurrency: expected `MODEL = N` with N >= 1*"),
    ],
)
def test_bad_ini_values(pytester: pytest.Pytester, ini: str, expected: str) -> None:
    (pytester.path / "pytest.ini").write_text(f"[pytest]\n{ini}\n")
    result = run(pytester)
    result.stderr.fnmatch_lines([expected])
    assert "Traceback" not in result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_unreachable_server_is_an_error_for_each_case(pytester: pytest.Pytester,
                                                      model_server: ScriptedModelServer) -> None:
    text = "server: {command: [definitely-not-a-command-xyz]}\ncases:" + GOOD_CASE + GOOD_CASE.replace("one", "two")
    make_project(pytester, model_server, {"bench.mcpeval.yaml": text})
    result = run(pytester, "--mcp-models=fake", "--mcp-report=report.json", "--mcp-no-preflight")
    result.stdout.fnmatch_lines(
        ["*could not connect to the server (command: definitely-not-a-command-xyz)*", "*2 error*"]
    )
    assert "Traceback" not in result.stdout.str()
    assert result.ret == 1
    report = json.loads((pytester.path / "report.json").read_text())
    assert report["models"]["fake"]["errors"] == 2 and report["models"]["fake"]["accuracy"] is None
    assert model_server.requests == []  # no model call is paid for when the server is down


@pytest.mark.parametrize(("argv", "status", "expected"), [
    (["tune", "evals", "--models", "local/minilm"], 4,
     "python -m pytest_mcpeval tune: unrecognized arguments: --models local/minilm; did you mean --model?"),
    (["import", "bfcl", "q.json", "--out", "x", "--surce", "y"], 2,
     "usage: python -m pytest_mcpeval import bfcl *"),
])
def test_a_subcommand_says_its_own_usage_error(argv: list[str], status: int, expected: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """An argument a subcommand does not know is its error, with its own exit status (tune: 4, as docs/tuning.md
    says; the importers: 2), not the top-level usage and argparse's 2."""
    from pytest_mcpeval.__main__ import main

    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == status
    err = capsys.readouterr().err
    assert pytest.LineMatcher(err.splitlines()).fnmatch_lines([expected]) is None
    assert "usage: python -m pytest_mcpeval [-h] COMMAND" not in err
    if argv[0] == "import":
        assert "unrecognized arguments: --surce y; did you mean --source?" in err


@pytest.mark.parametrize(("text", "expected"), [
    (SERVER + "  - id: duplicate-sheet\n    input: hi\n    expect:\n      - tool: list_issues\n    args: {repo: x}\n",
     "bench.mcpeval.yaml:7: cases[0] (`duplicate-sheet`): unknown field `args`; `args` is a key of an item of "
     "`expect`: indent it under `expect:` (as part of its `- ...` item)"),
    (SERVER + "  - id: one\n    input: hi\n    expect:\n      - tool: list_issues\n        tools: [list_issues]\n",
     "bench.mcpeval.yaml:7: cases[0] (`one`).expect[0]: unknown field `tools`; `tools` is a key of cases[0]: indent "
     "it less, to the level of the other keys there"),
], ids=["dedented-args", "indented-tools"])
def test_a_key_at_the_wrong_indentation_says_so(tmp_path: Path, text: str, expected: str) -> None:
    """Not "did you mean `tags`?": the key is right, its indentation is not (issue 32 item 7)."""
    assert str(load_error(tmp_path, text)) == expected


@pytest.mark.parametrize(("text", "expected"), [
    (SERVER + "  - id: a\n    input: x\n    expect: []\n  expect: []\n",
     "bench.mcpeval.yaml:6: invalid YAML at column 3: while parsing a block collection (line 3): did not find expected "
     "'-' indicator; the line reads `  expect: []`; check the indentation: the keys of one mapping start in the same "
     "column, and so do the `-` of one list"),
    (SERVER + "  - id: a\n\tinput: x\n    expect: []\n",
     "bench.mcpeval.yaml:4: invalid YAML at column 1: while scanning a plain scalar (line 3): found a tab character "
     "that violates indentation; the line reads `\\tinput: x`; YAML is indented with spaces, and this line (or the "
     "one before) starts with a tab"),
    (SERVER + "  - id: a\n    input: Note: this is it\n    expect: []\n",
     "bench.mcpeval.yaml:4: invalid YAML at column 16: mapping values are not allowed *; the line reads `    input: "
     "Note: this is it`; a text holding `: ` must be quoted"),
], ids=["uneven-indent", "tab", "colon-in-value"])
def test_a_yaml_syntax_error_gives_line_column_the_line_and_the_likely_cause(tmp_path: Path, text: str,
                                                                            expected: str) -> None:
    assert pytest.LineMatcher([str(load_error(tmp_path, text))]).fnmatch_lines([expected]) is None
