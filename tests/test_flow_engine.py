"""The flow engine (run.flow) through real litellm HTTP: the loop, the answers (mock / live / unmatched), ids,
the turn limit, recovery after an error result, live tools over stdio and in-process, replay and xdist.

The model is the scripted server (``ScriptedModelServer.flow``: one reply per turn); the tools are the
tracker example server's, imported in-process (``python:``) or started over stdio (``command:``).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import make_project, read_report, run

from pytest_mcpeval.testing import ScriptedModelServer

TRACKER = Path(__file__).parent.parent / "examples" / "tracker" / "server.py"
IN_PROCESS = 'server: {python: "tracker_server:server"}\n'
STDIO = f"server: {{command: [{json.dumps(sys.executable)}, tracker_server.py]}}\n"


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def project(pytester: pytest.Pytester, server: ScriptedModelServer, bench: str,
            extra: dict[str, str] | None = None) -> None:
    make_project(pytester, server, {"flows.mcpeval.yaml": bench, **(extra or {})})
    shutil.copy(TRACKER, pytester.path / "tracker_server.py")


def evaluate(pytester: pytest.Pytester, *args: str, report: str = "report.json") -> dict[str, dict[str, Any]]:
    result = run(pytester, "--mcp-models=fake", f"--mcp-report={report}", *args)
    assert result.ret in (0, 1), result.stdout.str()
    return {case["id"]: case for case in read_report(pytester, report)["cases"]}


def tool_messages(request: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["tool_call_id"], m["content"]) for m in request["messages"] if m["role"] == "tool"]


def requests_of(server: ScriptedModelServer, text: str) -> list[dict[str, Any]]:
    """The requests of the flow whose input is ``text``, in the order they were made."""
    return [r for r in server.requests if r["messages"][0]["content"] == text]


# -- three calls, mocks, from_result ------------------------------------------------------------------------

THREE_CALLS = IN_PROCESS + """\
cases:
  - id: reporter
    input: Who reported the login timeout bug, and what is their email?
    expect:
      - tool: search_issues
        args: {query: {regex: "(?i).*login.*"}}
        extra_args: allow
      - tool: get_issue
        args: {issue_key: {from_result: {tool: search_issues, path: items.0.key}}}
      - tool: get_user
        args: {username: {from_result: {tool: get_issue, path: author}}}
    mocks:
      search_issues:
        - result: {structured: {total_count: 1, items: [{key: WEB-17, title: Login times out}]}}
      get_issue:
        - when: {issue_key: WEB-17}
          result: {structured: {key: WEB-17, author: alice, state: open}}
        - result: {error: "no such issue"}
      get_user:
        - result: {text: 'alice: Alice Nguyen <alice@example.com>'}
    claims:
      - {claim: Names the reporter, check: {contains: alice}}
      - {claim: Gives the email, check: {regex: 'alice@example\\.com'}}
"""
THREE_CALLS_INPUT = "Who reported the login timeout bug, and what is their email?"


def script_three_calls(server: ScriptedModelServer) -> None:
    server.flow(THREE_CALLS_INPUT, [call("search_issues", query="login timeout")],
                [call("get_issue", issue_key="WEB-17")], [call("get_user", username="alice")],
                "Alice Nguyen (alice, alice@example.com) reported it.")


def test_three_calls_with_mocks_and_references(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    project(pytester, model_server, THREE_CALLS)
    script_three_calls(model_server)
    case = evaluate(pytester)["reporter"]
    assert case["error"] is None
    assert (case["flow"], case["order"], case["turns"]) == (True, "in_order", 4)
    assert case["final_answer"] == "Alice Nguyen (alice, alice@example.com) reported it."
    assert [[c["tool"] for c in turn["calls"]] for turn in case["trajectory"]] == [
        ["search_issues"], ["get_issue"], ["get_user"], []]
    first = case["trajectory"][0]["calls"][0]
    assert first == {"id": "call-0-0", "tool": "search_issues", "args": {"query": "login timeout"},
                     "answer": {"source": "mock", "is_error": False,
                                "text": '{"items":[{"key":"WEB-17","title":"Login times out"}],"total_count":1}',
                                "structured": {"total_count": 1, "items": [{"key": "WEB-17",
                                                                            "title": "Login times out"}]}}}
    assert case["trajectory"][2]["calls"][0]["answer"] == {
        "source": "mock", "is_error": False, "text": "alice: Alice Nguyen <alice@example.com>"}
    assert case["unmatched"] == []
    assert [c["score"] for c in case["claims"]] == [1.0, 1.0]
    assert (case["order_ok"], case["coverage"], case["passed"]) == (True, 1.0, True)
    assert case["usage"]["cached"] is False and case["usage"]["attempts"] == 1
    assert case["usage"]["prompt_tokens"] == sum(len(json.dumps(r)) // 4 for r in model_server.requests)
    # the conversation the model was sent: each turn's calls and their answers, by id
    assert len(model_server.requests) == 4
    last = model_server.requests[-1]["messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "tool", "assistant", "tool", "assistant", "tool"]
    assert last[1]["tool_calls"] == [{"id": "call-0-0", "type": "function", "function": {
        "name": "search_issues", "arguments": '{"query": "login timeout"}'}}]
    assert tool_messages(model_server.requests[-1]) == [
        ("call-0-0", '{"items":[{"key":"WEB-17","title":"Login times out"}],"total_count":1}'),
        ("call-1-0", '{"author":"alice","key":"WEB-17","state":"open"}'),
        ("call-2-0", "alice: Alice Nguyen <alice@example.com>")]


# -- parallel calls, ids ----------------------------------------------------------------------------------

PARALLEL = IN_PROCESS + """\
cases:
  - id: two-at-once
    input: Compare WEB-12 and WEB-17.
    order: unordered
    expect:
      - {tool: get_issue, args: {issue_key: WEB-17}}
      - {tool: get_issue, args: {issue_key: WEB-12}}
    mocks:
      get_issue:
        - when: {issue_key: WEB-12}
          result: {text: WEB-12 is about checkout}
        - when: {issue_key: WEB-17}
          result: {text: WEB-17 is about login}
"""


def test_parallel_calls_are_all_answered_in_order_with_their_ids(pytester: pytest.Pytester,
                                                                 model_server: ScriptedModelServer) -> None:
    project(pytester, model_server, PARALLEL)
    no_id = {**call("get_issue", issue_key="WEB-17"), "id": None}  # litellm makes one up: the engine's replaces it
    model_server.flow("Compare WEB-12 and WEB-17.", [call("get_issue", issue_key="WEB-12"), no_id],
                      "WEB-12 is checkout, WEB-17 is login.")
    case = evaluate(pytester)["two-at-once"]
    assert case["turns"] == 2 and case["passed"] is True
    calls = case["trajectory"][0]["calls"]
    assert [(c["id"], c["answer"]["text"]) for c in calls] == [("call-0-0", "WEB-12 is about checkout"),
                                                               ("call_0_1", "WEB-17 is about login")]
    second = model_server.requests[1]
    assert [c["id"] for c in second["messages"][1]["tool_calls"]] == ["call-0-0", "call_0_1"]
    assert tool_messages(second) == [("call-0-0", "WEB-12 is about checkout"), ("call_0_1", "WEB-17 is about login")]


def test_the_first_turns_are_made_ahead(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    cases = "".join(f"  - id: c{i}\n    input: question {i}\n    expect: [{{tool: list_projects}}]\n"
                    f"    mocks: {{list_projects: [{{result: {{text: WEB}}}}]}}\n" for i in range(3))
    project(pytester, model_server, IN_PROCESS + "cases:\n" + cases)
    for i in range(3):
        model_server.flow(f"question {i}", {**{"tool_calls": [call("list_projects")]}, "gather": 3}, "WEB.")
    assert all(case["passed"] for case in evaluate(pytester).values())
    assert model_server.max_in_flight == 3  # the three turns 0 at once (the prefetch); later turns on demand


# -- the turn limit ---------------------------------------------------------------------------------------

def test_turn_limit(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    bench = IN_PROCESS + """\
max_turns: 5
cases:
  - id: loops
    input: Find the checkout bug.
    max_turns: 3
    expect: [{tool: search_issues}]
    mocks:
      search_issues: [{result: {text: nothing found}}]
"""
    project(pytester, model_server, bench)
    model_server.flow("Find the checkout bug.", [call("search_issues", query="checkout")])  # forever
    case = evaluate(pytester)["loops"]
    assert len(model_server.requests) == 3
    assert case["turns"] == 3 and case["final_answer"] is None and case["passed"] is False
    assert [len(turn["calls"]) for turn in case["trajectory"]] == [1, 1, 1]  # the last calls answered too
    assert case["trajectory"][2]["calls"][0]["answer"]["text"] == "nothing found"


# -- error results the model sees: unmatched, invalid arguments, unknown tool, an error mock ------------

ERRORS = IN_PROCESS + """\
cases:
  - id: unmatched
    input: Show me WEB-99.
    expect: [{tool: get_issue, args: {issue_key: WEB-99}}]
    mocks:
      get_issue:
        - when: {issue_key: WEB-17}
          result: {text: login}
  - id: recovers
    input: What is the checkout issue about?
    expect:
      - {tool: search_issues, args: {query: checkout}}
      - {tool: get_issue, args: {issue_key: WEB-12}}
    mocks:
      get_issue:
        - when: {issue_key: WEB-12}
          result: {structured: {key: WEB-12, title: Checkout fails}}
        - result: {error: "no issue with this key"}
      search_issues:
        - result: {structured: {items: [{key: WEB-12}]}}
    claims:
      - {claim: Says checkout fails, check: {contains: checkout fails}}
  - id: bad-arguments
    input: Comment on WEB-12.
    expect: [{tool: add_comment, args: {issue_key: WEB-12, body: {ignore: true}}}]
    mocks:
      add_comment:
        - when: {issue_key: WEB-12}
          result: {text: comment added}
"""


def test_error_results_the_model_sees_and_recovers_from(pytester: pytest.Pytester,
                                                         model_server: ScriptedModelServer) -> None:
    project(pytester, model_server, ERRORS)
    model_server.flow("Show me WEB-99.", [call("get_issue", issue_key="WEB-99")], "I could not find it.")
    model_server.flow("What is the checkout issue about?", [call("get_issue", issue_key="CHECKOUT")],
                      [call("search_issues", query="checkout")], [call("get_issue", issue_key="WEB-12")],
                      "WEB-12: checkout fails.")
    model_server.flow("Comment on WEB-12.",
                      [{"name": "add_comment", "arguments": '{"issue_key": "WEB-12", "body": '},
                       call("make_coffee", size="large")],
                      [call("add_comment", issue_key="WEB-12", body="Looking into it")], "Done.")
    cases = evaluate(pytester)

    unmatched = cases["unmatched"]
    assert unmatched["error"] is None
    assert unmatched["unmatched"] == [{"tool": "get_issue", "args": {"issue_key": "WEB-99"}}]
    text = "no mock matches tool get_issue with these arguments"
    assert unmatched["trajectory"][0]["calls"][0]["answer"] == {"source": "unmatched", "is_error": True, "text": text}
    assert tool_messages(requests_of(model_server, "Show me WEB-99.")[1]) == [("call-0-0", text)]
    assert unmatched["final_answer"] == "I could not find it."

    recovers = cases["recovers"]
    assert recovers["trajectory"][0]["calls"][0]["answer"] == {"source": "mock", "is_error": True,
                                                               "text": "no issue with this key"}
    assert recovers["unmatched"] == [] and recovers["turns"] == 4
    assert (recovers["order_ok"], recovers["coverage"], recovers["passed"]) == (True, 1.0, True)

    bad = cases["bad-arguments"]
    first = bad["trajectory"][0]["calls"]
    assert first[0]["args"] is None and first[0]["raw"] == '{"issue_key": "WEB-12", "body": '
    assert first[0]["malformed"].startswith("invalid JSON")
    assert first[0]["answer"]["is_error"] is True
    assert first[0]["answer"]["text"] == f"invalid arguments: {first[0]['malformed']}"
    assert first[1]["answer"]["text"] == "unknown tool: make_coffee"
    assert [c["answer"]["source"] for c in first] == ["invalid", "invalid"]
    assert bad["unmatched"] == []  # the model's mistakes, not gaps of the file
    sent = tool_messages(requests_of(model_server, "Comment on WEB-12.")[1])
    assert [content for _, content in sent] == [first[0]["answer"]["text"], "unknown tool: make_coffee"]
    assert bad["trajectory"][1]["calls"][0]["answer"]["text"] == "comment added"


# -- live tools ---------------------------------------------------------------------------------------------

LIVE = """\
cases:
  - id: live-reporter
    input: Who opened WEB-12 and what is their email?
    execute: live
    expect:
      - {tool: get_issue, args: {issue_key: WEB-12}}
      - tool: get_user
        args: {username: {from_result: {tool: get_issue, path: author}}}
    claims:
      - {claim: Gives the email, check: {contains: carol@example.com}}
  - id: live-and-mocked
    input: Is there an issue NOPE-1? Then list the projects.
    execute: live
    expect:
      - {tool: get_issue, args: {issue_key: NOPE-1}}
      - {tool: list_projects, args: {}}
    mocks:
      list_projects: [{result: {text: "WEB only"}}]
"""


def script_live(server: ScriptedModelServer) -> None:
    server.flow("Who opened WEB-12 and what is their email?", [call("get_issue", issue_key="WEB-12")],
                [call("get_user", username="carol")], "Carol Diaz, carol@example.com.")
    server.flow("Is there an issue NOPE-1? Then list the projects.", [call("get_issue", issue_key="NOPE-1")],
                [call("list_projects")], "No; the only project is WEB.")


@pytest.mark.parametrize("server", [IN_PROCESS, STDIO], ids=["in-process", "stdio"])
def test_live_tools(pytester: pytest.Pytester, model_server: ScriptedModelServer, server: str) -> None:
    project(pytester, model_server, server + LIVE)
    script_live(model_server)
    cases = evaluate(pytester)
    reporter = cases["live-reporter"]
    assert reporter["error"] is None and reporter["passed"] is True
    issue = reporter["trajectory"][0]["calls"][0]["answer"]
    assert issue["source"] == "live" and issue["is_error"] is False
    assert issue["structured"]["author"] == "carol" and json.loads(issue["text"]) == issue["structured"]
    user = reporter["trajectory"][1]["calls"][0]["answer"]
    assert user["structured"] == {"username": "carol", "name": "Carol Diaz", "email": "carol@example.com"}
    sent = tool_messages(requests_of(model_server, "Who opened WEB-12 and what is their email?")[-1])
    assert [content for _, content in sent] == [issue["text"], user["text"]]

    mixed = cases["live-and-mocked"]
    missing, projects = (turn["calls"][0]["answer"] for turn in mixed["trajectory"][:2])
    assert missing == {"source": "live", "is_error": True, "text": "Error executing tool get_issue: no issue 'NOPE-1'"}
    assert projects == {"source": "mock", "is_error": False, "text": "WEB only"}
    assert mixed["passed"] is True and mixed["unmatched"] == []


DYING = """\
import os
from mcp.server import MCPServer

server = MCPServer("dying", log_level="WARNING")


@server.tool()
def crash(reason: str) -> str:
    \"\"\"Exit the server process at once.\"\"\"
    os._exit(3)


if __name__ == "__main__":
    server.run()
"""


def test_a_live_server_that_dies_is_an_error_of_the_case(pytester: pytest.Pytester,
                                                           model_server: ScriptedModelServer) -> None:
    bench = f"server: {{command: [{json.dumps(sys.executable)}, dying_server.py]}}\n" + """\
cases:
  - id: dies
    input: Crash it.
    execute: live
    expect: [{tool: crash}]
  - id: after
    input: Crash it again.
    execute: live
    expect: [{tool: crash}]
"""
    project(pytester, model_server, bench, {"dying_server.py": DYING})
    model_server.flow("Crash it.", [call("crash", reason="test")], "It crashed.")
    model_server.flow("Crash it again.", [call("crash", reason="again")], "It crashed.")
    cases = evaluate(pytester, "--mcp-connect-timeout=10")
    dies = cases["dies"]
    assert dies["error"] is not None and dies["passed"] is None
    assert "flows.mcpeval.yaml:3: case `dies`: the server (command: " in dies["error"]
    assert "closed the connection during a call of `crash` (it exited or crashed); its log: " in dies["error"]
    log = Path(dies["error"].rsplit("its log: ", 1)[1])
    assert "mcpeval: the call of `crash` on the server" in log.read_text()  # with the traceback
    assert dies["trajectory"] == [] and dies["turns"] == 0
    assert cases["after"]["error"].endswith(
        "case `after`: the server (command: " + f"{sys.executable} dying_server.py) is no longer connected (it "
        f"closed the connection during a call of `crash`); its log: {log}")


# -- claims: checks and the judge --------------------------------------------------------------------------

JUDGED = IN_PROCESS + """\
cases:
  - id: judged
    input: Who opened WEB-17?
    expect: [{tool: get_issue, args: {issue_key: WEB-17}}]
    mocks:
      get_issue: [{result: {structured: {key: WEB-17, author: alice}}}]
    claims:
      - WEB-17 was opened by alice.
      - {claim: Names alice, check: {contains: alice}}
      - WEB-17 is about the login.
  - id: no-verdict
    input: Who opened WEB-12?
    expect: [{tool: get_issue, args: {issue_key: WEB-12}}]
    mocks:
      get_issue: [{result: {structured: {key: WEB-12, author: carol}}}]
    claims: [WEB-12 was opened by carol.]
"""


def test_claims_checked_and_judged_in_the_files_order(pytester: pytest.Pytester,
                                                       model_server: ScriptedModelServer) -> None:
    from pytest_mcpeval.run.judge import judge_messages

    project(pytester, model_server, JUDGED)
    params = json.dumps({"api_base": model_server.api_base, "api_key": "not-a-key"})
    (pytester.path / "pytest.ini").write_text(
        "[pytest]\nmcp_model_aliases =\n    fake = openai/fake\n    judge = openai/judge\n"
        f"mcp_model_params =\n    fake = {params}\n    judge = {params}\n")
    answer = "alice opened WEB-17."
    model_server.flow("Who opened WEB-17?", [call("get_issue", issue_key="WEB-17")], answer)
    model_server.flow("Who opened WEB-12?", [call("get_issue", issue_key="WEB-12")], "carol did.")

    def verdict(claim: str, word: str) -> None:
        reply = {"content": json.dumps({"verdict": word, "justification": f"{word}."})}
        model_server.script(str(judge_messages(claim, answer)[1]["content"]), reply, model="judge")

    verdict("WEB-17 was opened by alice.", "fulfilled")
    verdict("WEB-17 is about the login.", "partially_fulfilled")
    model_server.script("*", {"content": "no idea"}, model="judge")  # WEB-12: never a verdict
    cases = evaluate(pytester, "--mcp-judge-model=judge")
    judged = cases["judged"]
    assert [(c["method"], c["score"]) for c in judged["claims"]] == [("judge", 1.0), ("check", 1.0), ("judge", 0.5)]
    assert judged["coverage"] == pytest.approx(2.5 / 3) and judged["passed"] is True
    usage = judged["judge_usage"]["judge"]
    assert usage["cached"] is False and usage["prompt_tokens"] > 0
    assert judged["usage"]["prompt_tokens"] == sum(
        len(json.dumps(r)) // 4 for r in requests_of(model_server, "Who opened WEB-17?"))  # the judge's apart
    error = cases["no-verdict"]["error"]
    assert error.startswith("the judge judge gave no usable verdict for claim 1")  # the summary names the case
    assert cases["no-verdict"]["passed"] is None and cases["no-verdict"]["turns"] == 2
    assert cases["no-verdict"]["final_answer"]  # kept: the judge's error is about this answer


# -- replay and xdist ----------------------------------------------------------------------------------------

def comparable(cases: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    drop = {"usage", "latency_s", "judge_usage"}
    return {key: {k: v for k, v in case.items() if k not in drop} for key, case in cases.items()}


def test_a_recorded_flow_replays_with_the_model_server_stopped(pytester: pytest.Pytester,
                                                                model_server: ScriptedModelServer) -> None:
    project(pytester, model_server, THREE_CALLS + LIVE.removeprefix("cases:\n"))
    script_three_calls(model_server)
    script_live(model_server)
    first = evaluate(pytester, report="first.json")
    made = len(model_server.requests)
    assert made == 4 + 3 + 3
    model_server.stop()
    again = evaluate(pytester, "--mcp-record=none", report="again.json")
    assert len(model_server.requests) == made
    assert all(case["error"] is None and case["usage"]["cached"] for case in again.values())
    assert all(case["latency_s"] == 0.0 and case["usage"]["cost_usd"] == 0.0 for case in again.values())
    assert comparable(again) == comparable(first)


def test_xdist_gives_the_same_report(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    project(pytester, model_server, THREE_CALLS + LIVE.removeprefix("cases:\n")
            + PARALLEL.split("cases:\n", 1)[1] + ERRORS.split("cases:\n", 1)[1])
    script_three_calls(model_server)
    script_live(model_server)
    model_server.flow("Compare WEB-12 and WEB-17.", [call("get_issue", issue_key="WEB-12"),
                                                     call("get_issue", issue_key="WEB-17")], "Both.")
    model_server.flow("Show me WEB-99.", [call("get_issue", issue_key="WEB-99")], "I could not find it.")
    model_server.flow("What is the checkout issue about?", [call("search_issues", query="checkout")],
                      [call("get_issue", issue_key="WEB-12")], "WEB-12: checkout fails.")
    model_server.flow("Comment on WEB-12.", [call("add_comment", issue_key="WEB-12", body="On it")], "Done.")
    plain = evaluate(pytester, "--mcp-record=off", report="plain.json")
    made = len(model_server.requests)
    spread = evaluate(pytester, "--mcp-record=off", "-n", "2", report="spread.json")
    assert len(model_server.requests) == 2 * made
    assert len(plain) == 7 and all(case["error"] is None for case in plain.values())
    assert comparable(spread) == comparable(plain)
