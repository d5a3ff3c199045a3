"""Untrusted data (issue 19, items 4, 5, 10, 12): what a model, an MCP server or a file may send that is legal
but hostile in size or shape, and must cost one case or one clear line, never the session.

* tool-call arguments nested past :data:`~pytest_mcpeval.defaults.MAX_DEPTH` (600 deep raised ``RecursionError``
  in the redaction walk: INTERNALERROR, exit 3, every later case "no result"; 5,000 deep made litellm reject the
  whole completion as "not a chat completion") are a ``malformed_call`` miss of that case;
* a live server's structured answer nested past the bound is an error of its case; a tools file past it is a
  collection error;
* YAML alias bombs (500 bytes that expand to millions of values: 43 s, 3.2 GB and a 210 MB report at 6 levels)
  and YAML nested past the bound are one collection error, found before anything is expanded;
* ``NaN``, ``Infinity`` and ``1e400`` in arguments: the report stays strict JSON (RFC 8259).

Every run is the plugin as a user runs it: pytester, the scripted model over HTTP through litellm, real files,
a real in-process MCP server.
"""

from __future__ import annotations

import json
import re
import resource
import time
from pathlib import Path
from typing import Any, NoReturn

import pytest
from conftest import make_project, read_report, run

from pytest_mcpeval.defaults import MAX_ALIAS_NODES, MAX_DEPTH
from pytest_mcpeval.testing import ScriptedModelServer

TOOLS = [
    {"name": "get_me", "description": "Who am I", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "search_users", "description": "Find users",
     "inputSchema": {"type": "object", "properties": {"query": {}}, "required": ["query"]}},
]
FAULT = "the faulty request"
BENCH = (
    "server: {tools_file: tools.json}\ncases:\n"
    "  - id: ok-1\n    input: who am I?\n    expect: [{tool: get_me}]\n"
    f"  - id: fault\n    input: {FAULT}\n    expect: [{{tool: search_users, args: {{query: 1.5}}}}]\n"
    "  - id: ok-2\n    input: and who am I now?\n    expect: [{tool: get_me}]\n"
)
OK = {"tool_calls": [{"name": "get_me", "arguments": {}}]}
SECRET_URL = "https://user:hunter2hunter2@example.com/"  # masked by shape: the redaction walk must reach it


def _no_constant(name: str) -> NoReturn:
    raise AssertionError(f"{name} in what should be strict JSON")


def strict(text: str) -> Any:
    """``text`` parsed as RFC 8259 JSON: NaN, Infinity and -Infinity are refused."""
    return json.loads(text, parse_constant=_no_constant)


def deep_arguments(depth: int) -> str:
    """Argument text whose ``query`` is objects nested ``depth`` deep, a URL with a password at the bottom."""
    return '{"query": ' + '{"a": ' * depth + json.dumps(SECRET_URL) + "}" * depth + "}"


def evaluate(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any], str]:
    (pytester.path / "report.json").unlink(missing_ok=True)
    result = run(pytester, "--mcp-models=fake", "--mcp-retries=0", "--mcp-report=report.json", *args)
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out and "Traceback" not in out, out[-5000:]
    text = (pytester.path / "report.json").read_text(encoding="utf-8")
    strict(text)
    return result, read_report(pytester), out


# -- 4 and 12: deep arguments --------------------------------------------------------------------------------

@pytest.mark.parametrize(("depth", "xdist_args"), [(MAX_DEPTH + 1, []), (600, ["-n", "1"]), (5000, [])],
                         ids=["just-past-the-bound", "600-xdist", "5000"])
def test_deep_arguments_are_a_malformed_call_miss(pytester: pytest.Pytester, model_server: ScriptedModelServer,
                                                  xdist_args: list[str], depth: int) -> None:
    """600 levels was an INTERNALERROR (exit 3, later cases "no result"); 5,000 an error "not a chat completion"."""
    make_project(pytester, model_server, {"bench.mcpeval.yaml": BENCH}, tools=TOOLS)
    model_server.script("*", OK)
    model_server.script(FAULT, {"tool_calls": [{"name": "search_users", "arguments": deep_arguments(depth)}]})
    result, report, out = evaluate(pytester, *xdist_args)
    assert result.ret == pytest.ExitCode.OK  # a miss, and no threshold: the gate passes as for any miss
    cases = {c["id"]: c for c in report["cases"]}
    assert sorted(cases) == ["fault", "ok-1", "ok-2"]
    assert cases["ok-1"]["passed"] is True and cases["ok-2"]["passed"] is True
    fault = cases["fault"]
    assert fault["error"] is None and fault["passed"] is False and fault["diagnosis"] == "malformed_call"
    [called] = fault["called"]
    assert called["tool"] == "search_users" and called["args"] is None
    assert called["malformed"] == f"arguments nested deeper than {MAX_DEPTH} levels"
    # the text is kept cut, so that nothing after the parse walks or prints it whole
    sent = deep_arguments(depth)
    if len(sent) <= 1000:
        assert called["raw"] == sent.replace("hunter2hunter2", "REDACTED")
    else:
        assert called["raw"] == sent[:1000] + f"… [truncated, {len(sent):,} chars]"
    assert fault["arguments"]["malformed"] == called["malformed"]
    assert "hunter2" not in out
    assert report["models"]["fake"]["diagnoses"] == {"malformed_call": 1}


def test_deep_json_as_the_reply_text_is_text(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    """Text is never parsed (nothing is scored on it): JSON nested 5,000 deep in ``content`` is a plain answer."""
    make_project(pytester, model_server, {"bench.mcpeval.yaml": BENCH}, tools=TOOLS)
    model_server.script("*", OK)
    deep = "[" * 5000 + json.dumps(SECRET_URL) + "]" * 5000
    model_server.script(FAULT, {"content": deep})
    _, report, out = evaluate(pytester)
    fault = next(c for c in report["cases"] if c["id"] == "fault")
    assert fault["error"] is None and fault["diagnosis"] == "no_tool_use"
    assert fault["content"] == deep.replace("hunter2hunter2", "REDACTED") and "hunter2" not in out


def test_deep_arguments_in_a_flow_are_answered_as_invalid_and_the_flow_goes_on(
        pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    bench = (
        "server: {tools_file: tools.json}\ncases:\n"
        f"  - id: flow\n    input: {FAULT}\n    expect: [{{tool: search_users, args: {{query: x}}}}]\n"
        "    mocks:\n      search_users: [{when: {query: x}, result: {text: found}}]\n"
    )
    make_project(pytester, model_server, {"bench.mcpeval.yaml": bench}, tools=TOOLS)
    model_server.flow(FAULT, [{"name": "search_users", "arguments": deep_arguments(5000)}],
                      [{"name": "search_users", "arguments": {"query": "x"}}], "Found.")
    _, report, _ = evaluate(pytester)
    [case] = report["cases"]
    assert case["error"] is None, case["error"]
    first, second = (turn["calls"][0] for turn in case["trajectory"][:2])
    assert first["malformed"] == f"arguments nested deeper than {MAX_DEPTH} levels" and first["args"] is None
    assert first["answer"] == {"source": "invalid", "is_error": True,
                               "text": f"invalid arguments: arguments nested deeper than {MAX_DEPTH} levels"}
    assert second["args"] == {"query": "x"} and second["answer"]["text"] == "found"


# -- a live server's deep answer, a deep tools file ---------------------------------------------------------

DEEP_SERVER = '''\
from typing import Any

from mcp.server import MCPServer

server = MCPServer("deep", log_level="WARNING")


@server.tool()
def deep(levels: int) -> dict[str, Any]:
    """An answer nested `levels` deep."""
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(levels):
        value = {"a": value}
    return value
'''


def test_a_live_answer_nested_too_deep_is_an_error_of_its_case(pytester: pytest.Pytester,
                                                               model_server: ScriptedModelServer) -> None:
    """The SDK itself refuses to send an answer past about 250 levels (an error result); between the bound and
    that, the answer reaches the plugin and is refused there, as an error of its case (the server's fault)."""
    bench = 'server: {python: "deep_server:server"}\ncases:\n' + "".join(
        f"  - id: {name}\n    input: Go {name}.\n    execute: live\n    expect: [{{tool: deep}}]\n"
        for name in ("deep", "shallow"))
    make_project(pytester, model_server, {"live.mcpeval.yaml": bench, "deep_server.py": DEEP_SERVER})
    model_server.flow("Go deep.", [{"name": "deep", "arguments": {"levels": 190}}], "Done.")
    model_server.flow("Go shallow.", [{"name": "deep", "arguments": {"levels": MAX_DEPTH - 1}}], "Done.")
    result, report, _ = evaluate(pytester)
    cases = {c["id"]: c for c in report["cases"]}
    assert cases["deep"]["error"].startswith(
        "live.mcpeval.yaml:3: case `deep`: the server (python: deep_server:server) answered a call of `deep` with "
        f"structured content nested deeper than {MAX_DEPTH} levels; its log: ")
    shallow = cases["shallow"]
    assert shallow["error"] is None and shallow["passed"] is True
    assert shallow["trajectory"][0]["calls"][0]["answer"]["structured"]["a"]["a"]["a"] is not None
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # an error fails the gate


def test_a_tools_file_nested_too_deep_is_a_collection_error(pytester: pytest.Pytester,
                                                            model_server: ScriptedModelServer) -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(2000):
        schema = {"type": "object", "properties": {"x": schema}}
    tools = [TOOLS[0], {"name": "search_users", "description": "Find", "inputSchema": schema}]
    make_project(pytester, model_server, {"bench.mcpeval.yaml": BENCH})
    (pytester.path / "tools.json").write_text(_dump_deep(tools))
    result = run(pytester, "--mcp-models=fake")
    out = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out, out[-3000:]
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([
        "*bench.mcpeval.yaml:1: server.tools_file: tools_file tools.json is not a valid tool list:*",
        f"*tools.json: not valid JSON: nested deeper than {MAX_DEPTH} levels*"])
    assert model_server.requests == []


def _dump_deep(value: Any) -> str:
    """``json.dumps`` past its own recursion limit: the text is written by hand for nested schemas."""
    import sys

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(20_000)
    try:
        return json.dumps(value)
    finally:
        sys.setrecursionlimit(old)


# -- 5: YAML alias bombs and deep YAML ------------------------------------------------------------------------

def alias_bomb(levels: int) -> str:
    """A benchmark file whose one mock result holds ``levels`` levels of lists of 9 aliases of the level before:
    9 ** (levels + 1) values once expanded, from about 500 bytes."""
    anchors = ['            a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    anchors += [f"            a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels + 1)]
    return ("server: {tools_file: tools.json}\ncases:\n  - id: bomb\n    input: hi\n    expect: [{tool: get_me}]\n"
            "    mocks:\n      get_me:\n        - result:\n            structured:\n" + "\n".join(anchors) + "\n")


def collection_error(pytester: pytest.Pytester, model_server: ScriptedModelServer, text: str) -> tuple[str, float]:
    make_project(pytester, model_server, {"bench.mcpeval.yaml": text}, tools=TOOLS)
    started = time.perf_counter()
    result = run(pytester, "--mcp-models=fake", "--mcp-report=report.json")
    elapsed = time.perf_counter() - started
    out = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out and "RecursionError" not in out, out[-3000:]
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*ERROR collecting bench.mcpeval.yaml*", "*1 error*"])
    report = read_report(pytester)
    assert report["run"]["collect_errors"] == ["bench.mcpeval.yaml"] and report["cases"] == []
    assert model_server.requests == []
    return out, elapsed


@pytest.mark.parametrize("levels", [6, 9])
def test_a_yaml_alias_bomb_is_one_collection_error_at_once(pytester: pytest.Pytester,
                                                           model_server: ScriptedModelServer, levels: int) -> None:
    text = alias_bomb(levels)
    assert len(text) < 800
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    out, elapsed = collection_error(pytester, model_server, text)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert elapsed < 5.0, elapsed  # 0.07 s here; was 43 s and 3.2 GB at 6 levels, and 9 levels exhausted memory
    assert grown_mib < 100, grown_mib
    # the second alias of a4 (on a5's line) passes the bound: each repeats a4's 66,430 values
    pytest.LineMatcher(out.splitlines()).fnmatch_lines([
        f"bench.mcpeval.yaml:15: the alias `*a4` makes the aliases of the file repeat more than {MAX_ALIAS_NODES:,} "
        "values in all (an alias of a list repeats each of its values): refused, as expanding them could exhaust "
        "time and memory"])
    assert (pytester.path / "report.json").stat().st_size < 20_000


def test_shared_mocks_through_aliases_still_load(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    """Aliases are how a file shares a mock: a few hundred uses are far inside the bound."""
    cases = "".join(f"  - id: c{i}\n    input: question {i}\n    expect: [{{tool: get_me}}]\n"
                    f"    mocks: {{get_me: [{{result: *me}}]}}\n" for i in range(1, 200))
    text = ("server: {tools_file: tools.json}\ncases:\n"
            "  - id: c0\n    input: question 0\n    expect: [{tool: get_me}]\n"
            "    mocks: {get_me: [{result: &me {structured: {login: octocat, teams: [a, b, c]}}}]}\n" + cases)
    make_project(pytester, model_server, {"bench.mcpeval.yaml": text}, tools=TOOLS)
    model_server.script("*", OK)
    result = run(pytester, "--mcp-models=fake", "--co", "-q")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["200 tests collected*"])


@pytest.mark.parametrize("depth", [MAX_DEPTH, 900, 100_000])
def test_yaml_nested_too_deep_is_one_collection_error(pytester: pytest.Pytester, model_server: ScriptedModelServer,
                                                      depth: int) -> None:
    text = ("server: {tools_file: tools.json}\ncases:\n  - id: deep\n    input: hi\n    expect: [{tool: get_me}]\n"
            "    mocks: {get_me: [{result: {structured: {x: " + "[" * depth + "]" * depth + "}}}]}\n")
    out, elapsed = collection_error(pytester, model_server, text)
    assert elapsed < 5.0, elapsed
    lines = [line for line in out.splitlines() if line.startswith("bench.mcpeval.yaml:")]
    # libyaml refuses past its own limit (1,000 levels) in its words; below that, the plugin's bound
    assert lines in ([f"bench.mcpeval.yaml:6: nested deeper than {MAX_DEPTH} levels"],
                     ["bench.mcpeval.yaml:6: invalid YAML at column 1040: while increasing flow level: exceeded "
                      "maximum nesting depth"]), lines
    if depth < 1000:
        assert lines == [f"bench.mcpeval.yaml:6: nested deeper than {MAX_DEPTH} levels"]


def test_a_benchmark_file_past_the_size_bound_is_refused_unread(pytester: pytest.Pytester,
                                                                model_server: ScriptedModelServer) -> None:
    filler = "# " + "x" * 98 + "\n"
    text = "server: {tools_file: tools.json}\ncases:\n  - {id: a, input: hi, expect: [{tool: get_me}]}\n"
    text += filler * 500_000  # 50 MB of comments
    out, elapsed = collection_error(pytester, model_server, text)
    assert elapsed < 5.0, elapsed  # the file is not read
    pytest.LineMatcher(out.splitlines()).fnmatch_lines([
        "bench.mcpeval.yaml: the file has 50,*,* bytes, more than the 20,000,000 a benchmark file may have: split "
        "it into several files"])


# -- 10: NaN, Infinity and numbers too large for a double ------------------------------------------------------

NUMBERS = {  # case id: (argument text, what the report shows)
    "nan": ('{"query": NaN}', "invalid JSON: NaN is not a JSON value"),
    "infinity": ('{"query": Infinity}', "invalid JSON: Infinity is not a JSON value"),
    "minus-infinity": ('{"query": -Infinity}', "invalid JSON: -Infinity is not a JSON value"),
    "huge": ('{"query": 1e400}', "Infinity"),
    "minus-huge": ('{"query": -1e400}', "-Infinity"),
}


def test_non_finite_numbers_keep_the_report_strict_json(pytester: pytest.Pytester,
                                                        model_server: ScriptedModelServer) -> None:
    """NaN and Infinity literals are not JSON (RFC 8259): a ``malformed_call``.  ``1e400`` is JSON, read as
    infinity: scored (infinity is not the expected 1.5) and shown as the string ``"Infinity"``; a YAML ``.nan``
    in a mock result is written as ``"NaN"``.  The report, its HTML page's data and the cache are strict JSON."""
    cases = "".join(f"  - id: {name}\n    input: {name} please\n"
                    "    expect: [{tool: search_users, args: {query: 1.5}}]\n" for name in NUMBERS)
    cases += ("  - id: mocked\n    input: mocked please\n    expect: [{tool: search_users}]\n"
              "    mocks: {search_users: [{result: {structured: {score: .nan, top: .inf}}}]}\n")
    make_project(pytester, model_server, {"bench.mcpeval.yaml": "server: {tools_file: tools.json}\ncases:\n" + cases},
                 tools=TOOLS)
    for name, (arguments, _) in NUMBERS.items():
        model_server.script(f"{name} please", {"tool_calls": [{"name": "search_users", "arguments": arguments}]})
    model_server.flow("mocked please", [{"name": "search_users", "arguments": {"query": "x"}}], "Done.")
    result, report, _ = evaluate(pytester, "--mcp-html=report.html")
    got = {c["id"]: c for c in report["cases"]}
    for name, (_, shown) in NUMBERS.items():
        case = got[name]
        assert case["error"] is None and case["passed"] is False
        [called] = case["called"]
        if "invalid JSON" in shown:
            assert case["diagnosis"] == "malformed_call" and called["malformed"] == shown
        else:
            assert case["diagnosis"] == "wrong_argument_value" and called["args"] == {"query": shown}
            assert case["arguments"]["mismatched"] == [{"name": "query", "expected": 1.5, "got": shown}]
    answer = got["mocked"]["trajectory"][0]["calls"][0]["answer"]
    assert answer["structured"] == {"score": "NaN", "top": "Infinity"}
    page = (pytester.path / "report.html").read_text(encoding="utf-8")
    data = re.search(r'<script type="application/json" id="mcpeval-data">(.*?)</script>', page, re.S)
    assert data is not None
    strict(data.group(1))
    for entry in (pytester.path / ".mcpeval" / "cache").rglob("*.json"):
        strict(entry.read_text(encoding="utf-8"))
    assert result.ret == pytest.ExitCode.OK


@pytest.mark.parametrize("text", ["[" * 5000 + "]" * 5000, '{"kind": "mcpeval-baseline", "version": NaN}'],
                         ids=["deep", "nan"])
def test_a_baseline_that_is_not_strict_json_is_one_usage_error(pytester: pytest.Pytester,
                                                               model_server: ScriptedModelServer, text: str) -> None:
    make_project(pytester, model_server, {"bench.mcpeval.yaml": BENCH, "baseline.json": text}, tools=TOOLS)
    result = run(pytester, "--mcp-models=fake", "--mcp-compare=baseline.json")
    out = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in out and "RecursionError" not in out, out[-3000:]
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    deep = text.startswith("[")
    reason = "nested too deep (more than * levels)" if deep else "not valid JSON: NaN is not a JSON value"
    result.stderr.fnmatch_lines([f"ERROR: --mcp-compare: baseline *baseline.json: {reason}"])
    assert model_server.requests == []


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.parametrize(("text", "line"), [
    # a key that is itself a deep list: met by the walk without the bound check, which then runs
    (f"server: {{tools_file: t.json}}\ncases:\n  - input:\n      ? {deep(150)}\n      : 1\n", 4),
    (f"server: {{tools_file: t.json}}\ncases:\n  - input:\n      ? {deep(900)}\n      : 1\n", 4),
    # too deep first, a syntax error after: the depth, as the bound check finds it first
    (f"server: {{tools_file: t.json}}\ncases:\n  - input: {deep(150)}\n  - id: [unclosed\n", 3),
    (f"server: {{tools_file: t.json}}\ncases:\n  - input: {deep(MAX_DEPTH)}\n", 3),
])
def test_a_file_without_aliases_gets_the_errors_of_the_full_bound_check(tmp_path: Path, text: str, line: int) -> None:
    """parse_yaml composes a file without aliases at once and checks its depth as it walks it (yaml_source.py);
    what fails that way is read again with the bound check first: the same one error, with its line, never a
    RecursionError or another error of the same file."""
    from pytest_mcpeval.benchmark.problems import BenchmarkError
    from pytest_mcpeval.benchmark.yaml_source import parse_yaml

    with pytest.raises(BenchmarkError) as raised:
        parse_yaml(tmp_path / "b.mcpeval.yaml", text, [])
    assert str(raised.value).endswith(f"b.mcpeval.yaml:{line}: nested deeper than {MAX_DEPTH} levels"), raised.value


def test_a_file_without_aliases_is_not_passed_over_twice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bound check's pass over every event is skipped for a file without aliases that composes (libyaml bounds
    the nesting itself), and still made for one with an alias."""
    from pytest_mcpeval.benchmark import yaml_source

    passes: list[str] = []
    original = yaml_source.check_yaml_bounds
    monkeypatch.setattr(yaml_source, "check_yaml_bounds",
                        lambda path, text: (passes.append(text), original(path, text)))
    plain = "server: {tools_file: t.json}\ncases:\n  - {id: a, input: hi, expect: [{tool: get_me}]}\n"
    data, _ = yaml_source.parse_yaml(tmp_path / "a.yaml", plain, [])
    fast = yaml_source._composer_bounds_nesting()  # libyaml 0.2.6 on (this machine's); else the full way, as before
    assert data["cases"][0]["id"] == "a" and passes == ([] if fast else [plain])
    aliased = "server: {tools_file: t.json}\ncases:\n  - &a {id: a, input: hi, expect: [{tool: get_me}]}\n  - *a\n"
    data, _ = yaml_source.parse_yaml(tmp_path / "b.yaml", aliased, [])
    assert len(data["cases"]) == 2 and passes == [aliased]
