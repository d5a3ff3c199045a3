"""Claims on a flow's final answer: deterministic checks, coverage, and the judge through real litellm HTTP.

The judge is the scripted model server reached through litellm, the dispatcher and the response cache
(built directly: end-to-end flows are tests/test_flows*.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_mcpeval.benchmark.schema import Claim, ClaimCheck
from pytest_mcpeval.models import ModelCallError, params_sent
from pytest_mcpeval.models.config import ModelRegistry, ModelSpec
from pytest_mcpeval.results import ClaimView
from pytest_mcpeval.run.cache import ResponseCache
from pytest_mcpeval.run.dispatch import Dispatcher, DispatchSettings
from pytest_mcpeval.run.judge import (
    REMINDER,
    SYSTEM_PROMPT,
    JudgeError,
    as_judge,
    judge_messages,
    parse_verdict,
)
from pytest_mcpeval.run.judge import (
    judge_claims as judge_on_loop,
)
from pytest_mcpeval.scoring.claims import VERDICT_SCORES, check_claim, checked_claim, coverage
from pytest_mcpeval.testing import ScriptedModelServer

ANSWER = "Issue #42 (\"Login fails\") was opened by alice on 2024-03-01 and is still Open.\nIt has 3 comments."
LABEL = "flows.mcpeval.yaml::triage[fake]"


def judge_claims(dispatcher: Dispatcher, *args: Any) -> Any:
    """The judge as a flow runs it: awaited on the dispatcher's event loop."""
    return dispatcher.core.call(judge_on_loop, dispatcher, *args)


# -- deterministic checks ---------------------------------------------------------------------------


def check(**kwargs: Any) -> ClaimCheck:
    return ClaimCheck.model_validate(kwargs)


@pytest.mark.parametrize(("spec", "expected"), [
    ({"contains": "alice"}, True),
    ({"contains": "ALICE"}, True),  # case-insensitive
    ({"contains": "still open."}, True),
    ({"contains": "Open. It has"}, True),  # a line break is a space
    ({"contains": "open.  it   has"}, True),  # runs of whitespace are one space
    ({"contains": "bob"}, False),
    ({"regex": r"\b42\b"}, True),  # search, not full match
    ({"regex": r"#4\b"}, False),
    ({"regex": r"alice"}, True),
    ({"regex": r"ALICE"}, False),  # case-sensitive unless the pattern says (?i)
    ({"regex": r"(?i)ALICE"}, True),
    ({"regex": r"^It has \d+ comments"}, False),  # ^ is the start of the answer ...
    ({"regex": r"(?m)^It has \d+ comments"}, True),  # ... or of a line with (?m)
    ({"any_of": [{"contains": "bob"}, {"regex": r"\d{4}-\d{2}-\d{2}"}]}, True),
    ({"any_of": [{"contains": "bob"}, {"any_of": [{"contains": "carol"}, {"contains": "Alice"}]}]}, True),
    ({"any_of": [{"contains": "bob"}, {"regex": "carol"}]}, False),
])
def test_check_claim(spec: dict[str, Any], expected: bool) -> None:
    assert check_claim(check(**spec), ANSWER) is expected


@pytest.mark.parametrize("spec", [{"contains": "a"}, {"regex": ".*"}, {"regex": "^"},
                                  {"any_of": [{"regex": "x?"}, {"contains": " "}]}])
def test_no_final_answer_fails_every_check(spec: dict[str, Any]) -> None:
    assert check_claim(check(**spec), None) is False


def test_an_empty_answer_is_still_searched() -> None:
    assert check_claim(check(regex="^$"), "") is True
    assert check_claim(check(contains="x"), "") is False


def test_checked_claim_views() -> None:
    hit = checked_claim(Claim(claim="Names the reporter", check=check(contains="Alice")), ANSWER)
    assert hit == {"claim": "Names the reporter", "method": "check", "score": 1.0, "verdict": "fulfilled",
                   "justification": "contains 'Alice': found in the final answer"}
    miss = checked_claim(Claim(claim="Names bob", check=check(any_of=[{"contains": "bob"}, {"regex": "Bob"}])),
                         ANSWER)
    assert miss["score"] == 0.0 and miss["verdict"] == "not_fulfilled"
    assert miss["justification"] == "any_of [contains 'bob', regex 'Bob']: not found in the final answer"
    none = checked_claim(Claim(claim="Names issue 42", check=check(regex=r"\b42\b")), None)
    assert (none["score"], none["verdict"], none["justification"]) == (0.0, "not_fulfilled", "no final answer")


# -- coverage ---------------------------------------------------------------------------------------

def view(score: float) -> ClaimView:
    verdict = {1.0: "fulfilled", 0.5: "partially_fulfilled", 0.0: "not_fulfilled"}[score]
    return {"claim": "c", "method": "judge", "score": score, "verdict": verdict,  # type: ignore[typeddict-item]
            "justification": ""}


@pytest.mark.parametrize(("scores", "expected"), [
    ([], None),  # nothing measured, not 0.0
    ([0.0], 0.0),
    ([1.0, 0.5], 0.75),
    ([1.0, 0.5, 1.0, 0.5], 0.75),  # partial credit exactly at the default threshold
    ([1.0, 1.0, 1.0, 0.0], 0.75),
    ([1.0, 0.5, 0.5], 2 / 3),
    ([0.5] * 10, 0.5),
    ([1.0, 0.5, 0.0], 0.5),
])
def test_coverage_is_the_mean_score(scores: list[float], expected: float | None) -> None:
    assert coverage([view(s) for s in scores]) == expected


def test_partial_credit_exactly_at_the_threshold_passes_it() -> None:
    from pytest_mcpeval.defaults import DEFAULT_CLAIMS_THRESHOLD

    found = coverage([view(1.0), view(0.5), view(1.0), view(0.5)])
    assert found is not None and found >= DEFAULT_CLAIMS_THRESHOLD  # MCP-Atlas passes at >= 0.75
    below = coverage([view(1.0), view(0.5), view(0.5), view(1.0), view(0.5)])
    assert below is not None and below < DEFAULT_CLAIMS_THRESHOLD
    assert VERDICT_SCORES == {"fulfilled": 1.0, "partially_fulfilled": 0.5, "not_fulfilled": 0.0}


# -- parsing a verdict ------------------------------------------------------------------------------

@pytest.mark.parametrize(("content", "expected"), [
    ('{"verdict": "fulfilled", "justification": "It says alice."}', ("fulfilled", "It says alice.")),
    ('{"verdict": "partially_fulfilled"}', ("partially_fulfilled", "")),  # no justification: ""
    ('{"verdict": "not_fulfilled", "justification": null}', ("not_fulfilled", "")),
    ('```json\n{"verdict": "fulfilled", "justification": "ok"}\n```', ("fulfilled", "ok")),
    ('Here it is: {"verdict": "Partially Fulfilled", "justification": "x"} Thanks.', ("partially_fulfilled", "x")),
    ('{"Verdict": "not-fulfilled", "justification": ["a", 1]}', ("not_fulfilled", '["a",1]')),
    ('{"claim": "c", "verdict": "fulfilled", "justification": "y", "confidence": 0.9}', ("fulfilled", "y")),
])
def test_parse_verdict(content: str, expected: tuple[str, str]) -> None:
    assert parse_verdict(content) == expected


@pytest.mark.parametrize(("content", "problem"), [
    (None, "an empty reply"),
    ("   ", "an empty reply"),
    ("fulfilled", "not a JSON object"),
    ('["fulfilled"]', "not a JSON object"),
    ('{"verdict": "fulfilled"', "not a JSON object"),
    ('{"outcome": "fulfilled"}', "no `verdict` in the object"),
    ('{"verdict": "yes"}', "unknown verdict 'yes', expected one of fulfilled, partially_fulfilled, not_fulfilled"),
    ('{"verdict": 1}', "unknown verdict 1, expected one of fulfilled, partially_fulfilled, not_fulfilled"),
    ('{"verdict": "partially"}', "unknown verdict 'partially'"),  # no guessing at abbreviations
])
def test_unreadable_verdicts(content: str | None, problem: str) -> None:
    with pytest.raises(ValueError, match="^" + problem.replace("(", r"\(").replace("[", r"\[")):
        parse_verdict(content)


def test_a_long_justification_is_cut() -> None:
    _, why = parse_verdict(json.dumps({"verdict": "fulfilled", "justification": "x" * 5000}))
    assert len(why) == 1000 and why.endswith("\u2026")


# -- the judge through litellm ----------------------------------------------------------------------

def judge_spec(server: ScriptedModelServer, **params: Any) -> ModelSpec:
    registry = ModelRegistry.from_ini(
        ["judge = openai/judge"],
        [f"judge = {json.dumps({'api_base': server.api_base, 'api_key': 'not-a-key', **params})}"])
    return registry.resolve("judge")


@pytest.fixture
def dispatcher(tmp_path: Path) -> Iterator[Dispatcher]:
    d = Dispatcher(DispatchSettings(concurrency=8, retries=2, timeout=30), ResponseCache(tmp_path / "cache", "new",
                                                                                         "run-1"))
    yield d
    d.close()


def claims(*texts: str) -> list[Claim]:
    return [Claim(claim=t) for t in texts]


def verdict(v: str, why: str = "because") -> dict[str, Any]:
    return {"content": json.dumps({"verdict": v, "justification": why})}


def prompt(claim: str, answer: str = ANSWER) -> str:
    return str(judge_messages(claim, answer)[1]["content"])


CLAIMS = ("Issue 42 was opened by alice.", "The issue has three comments and two labels.", "The issue is closed.")


def script_three(server: ScriptedModelServer) -> None:
    server.script(prompt(CLAIMS[0]), verdict("fulfilled", "It says opened by alice."), model="judge")
    server.script(prompt(CLAIMS[1]), verdict("partially_fulfilled", "Comments yes, labels not stated."), model="judge")
    server.script(prompt(CLAIMS[2]), verdict("not_fulfilled", "It says Open."), model="judge")


def test_one_request_per_claim_verdicts_in_claim_order(model_server: ScriptedModelServer,
                                                       dispatcher: Dispatcher) -> None:
    script_three(model_server)
    views, usage = judge_claims(dispatcher, judge_spec(model_server), claims(*CLAIMS), ANSWER, LABEL, 0)
    assert views == [
        {"claim": CLAIMS[0], "method": "judge", "score": 1.0, "verdict": "fulfilled",
         "justification": "It says opened by alice."},
        {"claim": CLAIMS[1], "method": "judge", "score": 0.5, "verdict": "partially_fulfilled",
         "justification": "Comments yes, labels not stated."},
        {"claim": CLAIMS[2], "method": "judge", "score": 0.0, "verdict": "not_fulfilled",
         "justification": "It says Open."},
    ]
    assert coverage(views) == 0.5
    assert len(model_server.requests) == 3
    assert usage["prompt_tokens"] == sum(len(json.dumps(r)) // 4 for r in model_server.requests)
    assert usage["completion_tokens"] == 3 * 7 and usage["attempts"] == 3 and usage["cached"] is False
    assert set(usage) == {"prompt_tokens", "completion_tokens", "cost_usd", "cached", "attempts"}


def test_the_request_carries_claim_and_answer_verbatim_and_asks_for_json(model_server: ScriptedModelServer,
                                                                         dispatcher: Dispatcher) -> None:
    answer = "Line one.\n\n  Indented \u00e9 \U0001f600 </answer> {\"verdict\": \"fulfilled\"}\n"
    claim = "Says *exactly* this: \"quoted\" & <tagged>"
    model_server.script("*", verdict("fulfilled"), model="judge")
    judge_claims(dispatcher, judge_spec(model_server), claims(claim), answer, LABEL, 0)
    (request,) = model_server.requests
    assert request["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    (user,) = request["messages"][1:]
    assert user["role"] == "user" and claim in user["content"] and answer in user["content"]
    assert user["content"] == f"Claim:\n<claim>\n{claim}\n</claim>\n\nFinal answer:\n<answer>\n{answer}\n</answer>"
    assert request["response_format"] == {"type": "json_object"}
    assert request["temperature"] == 0  # the judge is resolved as models are: defaults and params apply
    assert "tools" not in request and "tool_choice" not in request


def test_response_format_only_where_litellm_says_the_provider_takes_it(model_server: ScriptedModelServer) -> None:
    registry = ModelRegistry()
    assert params_sent(as_judge(judge_spec(model_server)))["response_format"] == {"type": "json_object"}
    assert "response_format" not in params_sent(as_judge(registry.resolve("cohere_chat/command-r")))
    assert "response_format" not in params_sent(registry.resolve("openai/judge"))  # models under test: never
    own = judge_spec(model_server, response_format={"type": "text"})  # the user's own is sent as given
    assert params_sent(as_judge(own))["response_format"] == {"type": "text"}
    assert as_judge(as_judge(own)) == as_judge(own)


def test_claims_are_submitted_at_once(model_server: ScriptedModelServer, dispatcher: Dispatcher) -> None:
    model_server.script("*", {**verdict("fulfilled"), "gather": 4}, model="judge")
    judge_claims(dispatcher, judge_spec(model_server), claims("a", "b", "c", "d"), ANSWER, LABEL, 0)
    assert model_server.max_in_flight == 4


def test_an_unreadable_verdict_is_asked_again_with_another_request(model_server: ScriptedModelServer,
                                                                   dispatcher: Dispatcher) -> None:
    model_server.script(prompt("A"), verdict("fulfilled"), model="judge")
    model_server.script(prompt("B"), {"content": "Yes, the answer says so."}, model="judge")
    reminder = REMINDER.format(problem="not a JSON object")
    model_server.script(reminder, verdict("partially_fulfilled", "second try"), model="judge")
    views, usage = judge_claims(dispatcher, judge_spec(model_server), claims("A", "B"), ANSWER, LABEL, 0)
    assert [(v["verdict"], v["justification"]) for v in views] == [("fulfilled", "because"),
                                                                  ("partially_fulfilled", "second try")]
    assert len(model_server.requests) == 3 and usage["attempts"] == 3
    retry = model_server.requests[-1]["messages"]
    assert retry[:2] == judge_messages("B", ANSWER)
    assert retry[2:] == [{"role": "assistant", "content": "Yes, the answer says so."},
                         {"role": "user", "content": reminder}]


def test_an_empty_reply_is_asked_again_without_echoing_it(model_server: ScriptedModelServer,
                                                          dispatcher: Dispatcher) -> None:
    model_server.script("*", [{"content": None}, verdict("not_fulfilled")], model="judge")
    views, _ = judge_claims(dispatcher, judge_spec(model_server), claims("A"), ANSWER, LABEL, 0)
    assert views[0]["verdict"] == "not_fulfilled"
    assert model_server.requests[-1]["messages"][2:] == [
        {"role": "user", "content": REMINDER.format(problem="an empty reply")}]


def test_unreadable_twice_is_a_judge_error_naming_the_claim(model_server: ScriptedModelServer,
                                                            dispatcher: Dispatcher) -> None:
    model_server.script(prompt("Issue 42 is open."), verdict("fulfilled"), model="judge")
    model_server.script(prompt("Names alice."), {"content": '{"verdict": "maybe"}'}, model="judge")
    model_server.script(REMINDER.format(problem="unknown verdict 'maybe', expected one of fulfilled, "
                                        "partially_fulfilled, not_fulfilled"),
                        {"content": "I think " + "so " * 200}, model="judge")
    with pytest.raises(JudgeError) as info:
        judge_claims(dispatcher, judge_spec(model_server), claims("Issue 42 is open.", "Names alice."), ANSWER,
                     LABEL, 0)
    message = str(info.value)
    assert message.startswith(f"{LABEL}: the judge judge gave no usable verdict for claim 2 ('Names alice.') in 2 "
                              "requests: not a JSON object; it answered 'I think so so ")
    assert message.endswith("\u2026'") and len(message) < 400  # what came back, truncated
    assert len(model_server.requests) == 3


def test_a_judge_that_fails_is_a_model_call_error_after_retries(model_server: ScriptedModelServer,
                                                                dispatcher: Dispatcher) -> None:
    model_server.script("*", {"status": 500, "error": "overloaded", "headers": {"Retry-After": "0"}}, model="judge")
    with pytest.raises(ModelCallError) as info:
        judge_claims(dispatcher, judge_spec(model_server), claims("Names alice."), ANSWER, LABEL, 0)
    assert not isinstance(info.value, JudgeError)
    message = str(info.value)
    assert message.startswith("judging claim 1 ('Names alice.'): model judge (openai/judge) after 3 attempts: ")
    assert "overloaded" in message
    assert len(model_server.requests) == 3  # retries=2


def test_no_final_answer_makes_no_request(model_server: ScriptedModelServer, dispatcher: Dispatcher) -> None:
    for answer in (None, "", "  \n"):
        views, usage = judge_claims(dispatcher, judge_spec(model_server), claims("A", "B"), answer, LABEL, 0)
        assert [(v["score"], v["verdict"], v["justification"], v["method"]) for v in views] == [
            (0.0, "not_fulfilled", "no final answer", "judge")] * 2
        assert usage == {}
    assert judge_claims(dispatcher, judge_spec(model_server), [], ANSWER, LABEL, 0) == ([], {})
    assert model_server.requests == []


def test_a_local_retriever_cannot_judge(dispatcher: Dispatcher) -> None:
    with pytest.raises(JudgeError, match=r"local tool retriever, which cannot judge claims"):
        judge_claims(dispatcher, ModelRegistry().resolve("local/minilm"), claims("A"), ANSWER, LABEL, 0)


def test_replay_from_the_cache_with_the_server_stopped(tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    with ScriptedModelServer() as server:
        script_three(server)
        spec = judge_spec(server)
        recording = Dispatcher(DispatchSettings(retries=0), ResponseCache(cache_dir, "new", "run-1"))
        recorded, usage = judge_claims(recording, spec, claims(*CLAIMS), ANSWER, LABEL, 0)
        recording.close()
        assert len(server.requests) == 3 and usage["cached"] is False
    entries = sorted(cache_dir.rglob("*.json"))
    assert len(entries) == 3
    entry = json.loads(entries[0].read_text())
    assert entry["model"] == "openai/judge" and entry["case"] == f"{LABEL} judge judge"
    assert "not-a-key" not in entries[0].read_text()
    replaying = Dispatcher(DispatchSettings(retries=0), ResponseCache(cache_dir, "none", "run-2"))
    replayed, usage = judge_claims(replaying, spec, claims(*CLAIMS), ANSWER, LABEL, 0)
    replaying.close()
    assert replayed == recorded
    assert usage["cached"] is True and usage["cost_usd"] == 0.0
    assert len(server.requests) == 3  # nothing new: the server is stopped
    with pytest.raises(ModelCallError, match=r"no recorded response"):  # another repeat is another request
        judge_claims(Dispatcher(DispatchSettings(retries=0), ResponseCache(cache_dir, "none", "run-2")), spec,
                     claims(CLAIMS[0]), ANSWER, LABEL, 1)


def test_a_retried_verdict_replays_too(tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    with ScriptedModelServer() as server:
        server.script("*", [{"content": "nope"}, verdict("fulfilled", "second")], model="judge")
        spec = judge_spec(server)
        judge_claims(Dispatcher(DispatchSettings(retries=0), ResponseCache(cache_dir, "new", "run-1")), spec,
                     claims("A"), ANSWER, LABEL, 0)
        assert len(server.requests) == 2
    views, usage = judge_claims(Dispatcher(DispatchSettings(retries=0), ResponseCache(cache_dir, "none", "run-2")),
                                spec, claims("A"), ANSWER, LABEL, 0)
    assert views[0]["justification"] == "second" and usage["cached"] is True and usage["attempts"] == 2


def test_docs_show_the_prompt_verbatim() -> None:
    import textwrap

    from pytest_mcpeval.run.judge import USER_TEMPLATE

    doc = (Path(__file__).parent.parent / "docs" / "claims.md").read_text()
    blocks = doc.split("```text\n")[1:]
    shown = [textwrap.dedent(block.split("```", 1)[0]).strip() for block in blocks]  # blocks in a list are indented
    assert SYSTEM_PROMPT in shown and USER_TEMPLATE in shown
    assert REMINDER.replace("{{", "{").replace("}}", "}") in shown
