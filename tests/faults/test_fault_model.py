"""Model-side faults (issue 10), each injected through the scripted model server or a refused port.

Every test runs the plugin as a user runs it (pytester, ``--mcp-models=fake``, a benchmark file) and holds
the run to one rule: every selected case ends in the report exactly once, scored, missed or error, with
the right label (an infrastructure failure is an error with a clear message, never a miss; a model's
mistake is a miss), nothing lost from the cache, in bounded time.  Retries and timeouts are kept small
(``--mcp-retries=1``, ``--mcp-timeout`` of a second or less) so that the file runs in seconds; the
backoff is the real one (at most 1 s before the first retry).
"""

from __future__ import annotations

import errno
import json
import os
import socket
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import make_project, read_report, run
from sklearn.metrics import f1_score

from pytest_mcpeval.models import litellm_client, litellm_failures
from pytest_mcpeval.models.config import ModelRegistry
from pytest_mcpeval.models.reply import CACHE_CONTENT_CAP, ModelReply, RawCall
from pytest_mcpeval.run.cache import ResponseCache
from pytest_mcpeval.run.single import CONTENT_CAP
from pytest_mcpeval.testing import ScriptedModelServer

TOOLS = [
    {"name": "get_me", "description": "Who am I", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "search_users", "description": "Find users",
     "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}},
]
FAULT = "the faulty request"  # the input of the case that meets the fault; the other two are answered well
BENCH = (
    "server: {tools_file: tools.json}\ncases:\n"
    "  - id: ok-1\n    input: who am I?\n    expect: [{tool: get_me}]\n"
    "  - id: ok-2\n    input: and who am I now?\n    expect: [{tool: get_me}]\n"
    f"  - id: fault\n    input: {FAULT}\n    expect: [{{tool: get_me}}]\n"
)
IDS = ["fault", "ok-1", "ok-2"]
OK = {"tool_calls": [{"name": "get_me", "arguments": {}}]}
SURROGATE = "\ud83d"  # half of a surrogate pair: legal in JSON ("\ud83d"), not encodable as UTF-8
PREFIX = "model fake (openai/fake)"
# pytest in this process, the plugin and the report: what a run costs on top of its model calls
OVERHEAD = 8.0


@dataclass
class Outcome:
    result: pytest.RunResult
    report: dict[str, Any]
    cases: dict[str, dict[str, Any]]
    elapsed: float


@pytest.fixture
def project(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> Iterator[pytest.Pytester]:
    make_project(pytester, model_server, {"bench.mcpeval.yaml": BENCH}, tools=TOOLS)
    model_server.script("*", OK)
    yield pytester


def evaluate(pytester: pytest.Pytester, *args: str, timeout: float = 2.0, retries: int = 1) -> Outcome:
    """One run; checks that every case is in the report exactly once (and the report against its schema)."""
    (pytester.path / "report.json").unlink(missing_ok=True)
    started = time.perf_counter()
    result = run(pytester, "--mcp-models=fake", f"--mcp-timeout={timeout:g}", f"--mcp-retries={retries}",
                 "--mcp-report=report.json", *args)
    elapsed = time.perf_counter() - started
    report = read_report(pytester)
    assert sorted(c["id"] for c in report["cases"]) == IDS, result.stdout.str()
    result.stdout.no_fnmatch_line("*Traceback*")
    result.stdout.no_fnmatch_line("*INTERNALERROR*")
    return Outcome(result, report, {c["id"]: c for c in report["cases"]}, elapsed)


def asked(server: ScriptedModelServer, text: str = FAULT) -> int:
    """How many requests the server saw for the case whose input is ``text``."""
    return sum(1 for r in server.requests if r["messages"][-1]["content"] == text)


def assert_error(outcome: Outcome, message: str) -> None:
    """The faulty case is an error with ``message`` (fnmatch pattern), excluded from the metrics; the
    two others passed; pytest shows the message on the item and exits 1."""
    fault = outcome.cases["fault"]
    assert fault["passed"] is None and fault["correct"] is None and fault["diagnosis"] is None
    assert fault["error"] is not None
    from fnmatch import fnmatchcase

    assert fnmatchcase(fault["error"], message), fault["error"]
    assert "\n" not in fault["error"]
    assert [outcome.cases[i]["passed"] for i in ("ok-1", "ok-2")] == [True, True]
    fake = outcome.report["models"]["fake"]
    assert (fake["cases"], fake["scored"], fake["errors"], fake["accuracy"]) == (3, 2, 1, 1.0)
    outcome.result.stdout.fnmatch_lines([f"*fault[[]fake[]]*{message}*"])
    assert outcome.result.ret == 1


def cache_entries(pytester: pytest.Pytester) -> list[Path]:
    return sorted((pytester.path / ".mcpeval" / "cache").rglob("*.json"))


def fault_entry(pytester: pytest.Pytester) -> dict[str, Any]:
    found = [e for p in cache_entries(pytester) if (e := json.loads(p.read_text()))["case"].endswith("::fault[fake]")]
    assert len(found) == 1
    return found[0]


# -- infrastructure failures: an error with a clear message, never a miss -----------------------------

INFRASTRUCTURE = {
    # fault id: (reply, the error after "model fake (openai/fake)", requests for the case, --mcp-timeout)
    "429": ({"status": 429, "error": "slow down"}, " after 2 attempts: RateLimitError (HTTP 429): slow down", 2, 2.0),
    "500": ({"status": 500, "error": "overloaded"},
            " after 2 attempts: InternalServerError (HTTP 500): overloaded", 2, 2.0),
    "503": ({"status": 503, "error": "overloaded"},
            " after 2 attempts: ServiceUnavailableError (HTTP 503): overloaded", 2, 2.0),
    "reset": ({"reset": True}, " after 2 attempts: connection error: [[]Errno 104] Connection reset by peer "
                               "(api_base http://127.0.0.1:*/v1)", 2, 2.0),
    # 1.5 s: at 0.5 s a loaded machine once let the second attempt time out before the server had read it
    "hang": ({"hang": True}, " after 2 attempts: Timeout: no answer within 1.5 s (--mcp-timeout)", 2, 1.5),
    "empty-choices": ({"choices": []}, ": the response has no choices: the provider returned an empty completion "
                                       "(nothing to score)", 1, 2.0),
    "not-utf8": ({"body": b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": '
                          b'{"role": "assistant", "content": "caf\xe9"}}]}'},
                 ": the response could not be decoded (not UTF-8, not JSON or not a chat completion): 'utf-8' codec "
                 "can't decode byte 0xe9 in position *: invalid continuation byte", 1, 2.0),
    "invalid-json": ({"body": '{"id": "x", "choices": [{'},
                     ": the response could not be decoded (not UTF-8, not JSON or not a chat completion): "
                     "Expecting property name enclosed in double quotes: line 1 column * (char *)", 1, 2.0),
}


@pytest.mark.parametrize("fault", list(INFRASTRUCTURE))
def test_infrastructure_failure_is_an_error(project: pytest.Pytester, model_server: ScriptedModelServer,
                                            fault: str) -> None:
    reply, message, requests, timeout = INFRASTRUCTURE[fault]
    model_server.script(FAULT, reply)
    outcome = evaluate(project, timeout=timeout)
    assert_error(outcome, PREFIX + message)
    assert asked(model_server) == requests  # retried once when it may pass, never when it cannot
    # two timeouts at most, one backoff (< 1 s), and the run itself
    assert outcome.elapsed < requests * timeout + 1 + OVERHEAD
    assert not any("fault" in str(p) for p in cache_entries(project))
    assert len(cache_entries(project)) == 2  # the answered cases are stored; an error never is


def test_rate_limit_retry_after_is_honoured(project: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    model_server.script(FAULT, [{"status": 429, "error": "slow down", "headers": {"Retry-After": "1"}}, OK])
    outcome = evaluate(project)
    fault = outcome.cases["fault"]
    assert fault["passed"] is True and fault["usage"]["attempts"] == 2
    assert asked(model_server) == 2
    assert outcome.elapsed >= 1.0  # waited as asked


def test_rate_limit_retry_after_is_capped(project: pytest.Pytester, model_server: ScriptedModelServer,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A Retry-After of an hour is waited RETRY_AFTER_CAP (120 s; 0.3 s here), then the case is an error."""
    assert litellm_failures.RETRY_AFTER_CAP == 120.0
    monkeypatch.setattr(litellm_failures, "RETRY_AFTER_CAP", 0.3)
    model_server.script(FAULT, {"status": 429, "error": "slow down", "headers": {"Retry-After": "3600"}})
    outcome = evaluate(project)
    assert_error(outcome, PREFIX + " after 2 attempts: RateLimitError (HTTP 429): slow down")
    assert asked(model_server) == 2
    assert outcome.elapsed < 0.3 + OVERHEAD


@pytest.mark.parametrize(("header", "seconds"), [
    ("2", 2.0), ("0", 0.0), ("-5", 0.0), ("3600", 120.0), ("inf", 120.0), ("nan", None), ("soon", None),
    ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),  # a date in the past: retry now
])
def test_retry_after_header_values(header: str, seconds: float | None) -> None:
    class Limited(Exception):
        litellm_response_headers = {"retry-after": header}

    assert litellm_failures._retry_after(Limited()) == seconds


def test_retry_after_as_a_future_http_date() -> None:
    from email.utils import formatdate

    class Limited(Exception):
        litellm_response_headers = {"retry-after": formatdate(time.time() + 30, usegmt=True)}

    wait = litellm_failures._retry_after(Limited())
    assert wait is not None and 28 <= wait <= 30


UNDECODABLE = "the response could not be decoded (not UTF-8, not JSON or not a chat completion): "


@pytest.mark.parametrize(("body", "detail"), [
    ({"choices": [{"index": 0, "finish_reason": "stop"}]}, "not a chat completion (KeyError: 'message')"),
    ({"choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": [{"id": "c", "type": "function"}]}}]},
     "not a chat completion (TypeError: ChatCompletionMessageToolCall.__init__() missing 1 required positional "
     "argument: 'function')"),
    ({"choices": None}, "LiteLLM: provider returned 'choices' that is not a list (NoneType). Raw keys: *"),
    ({"body": '{"id": "x"}'}, "LiteLLM: provider returned a response with no 'choices'. Raw keys: ['id']"),
    ({"body": b'{"a": "\xe9t\xe9"}'}, "'utf-8' codec can't decode byte 0xe9 in position 7: invalid continuation byte"),
    ({"body": "<html>proxy login</html>"}, "Expecting value: line 1 column 1 (char 0)"),
], ids=["no-message", "call-without-function", "null-choices", "no-choices", "latin-1", "html"])
def test_a_malformed_completion_is_not_retried(model_server: ScriptedModelServer, body: dict[str, Any],
                                               detail: str) -> None:
    """The same bytes come back next time: one request, whatever the retries, and what litellm said."""
    from fnmatch import fnmatchcase

    from pytest_mcpeval.models import ModelCallError

    model_server.script("*", body)
    with pytest.raises(ModelCallError) as info:
        litellm_client.complete(model(model_server), [{"role": "user", "content": "hi"}], [], retries=3, timeout=5)
    assert fnmatchcase(str(info.value), f"{PREFIX}: {UNDECODABLE}{detail.replace('[', '[[]')}"), str(info.value)
    assert len(model_server.requests) == 1


def test_connection_refused_is_an_error(pytester: pytest.Pytester) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens there once closed
    base = f"http://127.0.0.1:{port}/v1"
    params = json.dumps({"api_base": base, "api_key": "not-a-key"})
    (pytester.path / "pytest.ini").write_text(
        f"[pytest]\nmcp_model_aliases = fake = openai/fake\nmcp_model_params = fake = {params}\n")
    (pytester.path / "tools.json").write_text(json.dumps(TOOLS))
    (pytester.path / "bench.mcpeval.yaml").write_text(BENCH)
    outcome = evaluate(pytester)
    message = f"{PREFIX} after 2 attempts: connection error: [Errno 111] Connection refused (api_base {base})"

    assert {c["error"] for c in outcome.cases.values()} == {message}
    fake = outcome.report["models"]["fake"]
    assert (fake["scored"], fake["errors"], fake["accuracy"]) == (0, 3, None)
    assert outcome.result.ret == 1
    assert outcome.elapsed < 3 * 1 + OVERHEAD  # one backoff per case (in parallel), no timeout to wait for


# -- the model's own mistakes: a miss, never an error ---------------------------------------------------

def test_invalid_json_arguments_are_a_malformed_call(project: pytest.Pytester,
                                                     model_server: ScriptedModelServer) -> None:
    model_server.script(FAULT, {"tool_calls": [{"name": "get_me", "arguments": "{not json"}]})
    outcome = evaluate(project)
    fault = outcome.cases["fault"]
    assert (fault["error"], fault["passed"], fault["correct"], fault["diagnosis"]) == (None, False, True,
                                                                                       "malformed_call")
    assert fault["called"][0]["raw"] == "{not json" and fault["called"][0]["malformed"].startswith("invalid JSON")
    assert asked(model_server) == 1
    fake = outcome.report["models"]["fake"]
    assert (fake["scored"], fake["errors"], fake["pass_rate"]) == (3, 0, pytest.approx(2 / 3))
    outcome.result.stdout.fnmatch_lines(["*malformed arguments: invalid JSON*"])
    assert outcome.result.ret == 0  # a miss fails nothing without a threshold


def test_an_invented_tool_is_a_miss_outside_macro_f1(project: pytest.Pytester,
                                                      model_server: ScriptedModelServer) -> None:
    model_server.script(FAULT, {"tool_calls": [{"name": "get_my_profile", "arguments": {}}]})
    outcome = evaluate(project)
    fault = outcome.cases["fault"]
    assert (fault["error"], fault["passed"], fault["diagnosis"]) == (None, False, "wrong_tool")
    assert fault["called_label"] == "get_my_profile" and fault["hallucinated_tools"] == ["get_my_profile"]
    assert "hallucinated_tools" not in outcome.cases["ok-1"]
    fake = outcome.report["models"]["fake"]
    assert fake["hallucinated_tools"] == {"get_my_profile": 1}
    assert fake["confusion"]["labels"] == ["get_me", "get_my_profile"]  # its own label in the matrix
    assert fake["accuracy"] == pytest.approx(2 / 3) and fake["tools"]["get_me"]["recall"] == pytest.approx(2 / 3)
    expected, called = ["get_me"] * 3, ["get_me", "get_me", "get_my_profile"]  # ok-1, ok-2, fault
    assert fake["macro_f1"] == pytest.approx(f1_score(expected, called, labels=["get_me"], average="macro"))
    assert fake["macro_f1"] == pytest.approx(0.8)  # over all labels it would be 0.4
    outcome.result.stdout.fnmatch_lines([
        "fake: 3 scored, 0 errors | *",
        "  invented tools (not in the catalog; each a miss, left out of macro F1): get_my_profile (1 case)",
    ])


# -- replies that are hard to store: scored and cached whole -------------------------------------------

def test_a_5_mb_answer_is_capped_in_the_report_and_the_cache(project: pytest.Pytester,
                                                            model_server: ScriptedModelServer) -> None:
    size = 5_000_000
    model_server.script(FAULT, {**OK, "content": "x" * size})
    outcome = evaluate(project)
    fault = outcome.cases["fault"]
    assert fault["passed"] is True
    assert len(fault["content"]) == CONTENT_CAP == 20_000 and fault["content_truncated"] == size
    assert "content_truncated" not in outcome.cases["ok-1"]
    assert (project.path / "report.json").stat().st_size < 200_000
    entry = fault_entry(project)
    assert len(entry["reply"]["content"]) == CACHE_CONTENT_CAP and entry["reply"]["content_truncated"] == size
    assert entry["reply"]["calls"] == [{"name": "get_me", "arguments": "{}", "id": "call-0-0"}]
    assert sorted(entry["reply"]) == sorted([*ModelReply().to_entry(), "content_truncated"])  # no raw body
    # a replay gives the same result, with no request
    replay = evaluate(project)
    assert len(model_server.requests) == 3
    again = replay.cases["fault"]
    assert again["usage"]["cached"] is True
    assert (again["content"], again["content_truncated"], again["passed"]) == (fault["content"], size, True)


def test_lone_surrogates_are_scored_cached_and_replayed(project: pytest.Pytester,
                                                        model_server: ScriptedModelServer) -> None:
    """Scored on the text as sent; the cache keeps it as sent; the report (whose results cross xdist as
    UTF-8) shows U+FFFD in its place, the same with and without xdist (test_every_fault_at_once...)."""
    (project.path / "bench.mcpeval.yaml").write_text(BENCH.replace(
        f"input: {FAULT}\n    expect: [{{tool: get_me}}]",
        f"input: {FAULT}\n    expect: [{{tool: search_users, args: {{query: {{regex: '^smile .$'}}}}}}]"))
    arguments = json.dumps({"query": f"smile {SURROGATE}"})  # json.dumps escapes it: "smile \ud83d"
    model_server.script(FAULT, {"content": f"here {SURROGATE}",
                                "tool_calls": [{"name": "search_users", "arguments": arguments}]})
    outcome = evaluate(project)
    fault = outcome.cases["fault"]
    assert (fault["error"], fault["passed"]) == (None, True)  # the regex matched the surrogate itself
    assert fault["content"] == "here \ufffd" and fault["called"][0]["args"] == {"query": "smile \ufffd"}
    reply = ModelReply.from_entry(fault_entry(project)["reply"])
    assert reply.content == f"here {SURROGATE}" and reply.calls == [RawCall("search_users", arguments)]
    assert asked(model_server) == 1
    replay = evaluate(project)
    assert asked(model_server) == 1 and len(model_server.requests) == 3  # every case replayed
    again = replay.cases["fault"]
    assert again["usage"]["cached"] is True
    assert (again["content"], again["called"], again["passed"]) == (fault["content"], fault["called"], True)


def test_result_strings_are_made_utf8_safe() -> None:
    from pytest_mcpeval.text import utf8_safe

    value = {"a": [f"x{SURROGATE}", ("y", 1.5)], f"k{SURROGATE}": None, "ok": "caf\u00e9 \U0001f600"}
    safe = utf8_safe(value)
    assert safe == {"a": ["x\ufffd", ("y", 1.5)], "k\ufffd": None, "ok": "caf\u00e9 \U0001f600"}
    json.dumps(safe, ensure_ascii=False).encode("utf-8")


# -- a cache that cannot be written: the results are kept -----------------------------------------------

def test_a_cache_dir_that_is_a_file_costs_no_result(project: pytest.Pytester,
                                                    model_server: ScriptedModelServer) -> None:
    (project.path / "not-a-dir").write_text("a file where the cache should be\n")
    outcome = evaluate(project, "--mcp-cache-dir=not-a-dir")
    assert [outcome.cases[i]["passed"] for i in IDS] == [True, True, True]
    assert outcome.result.ret == 0
    assert len(model_server.requests) == 3
    assert (project.path / "not-a-dir").read_text() == "a file where the cache should be\n"
    outcome.result.stdout.fnmatch_lines(["*the response cache could not be written (the replies were used*",
                                         "  *not-a-dir*: Not a directory"])


def model(server: ScriptedModelServer | None = None) -> Any:
    params = {"api_base": server.api_base if server else "http://127.0.0.1:1/v1", "api_key": "not-a-key"}
    return ModelRegistry.from_ini(["fake = openai/fake"], [f"fake = {json.dumps(params)}"]).resolve("fake")


def entry(content: str | None = "hi") -> dict[str, Any]:
    return {"model": "openai/fake", "case": "b.mcpeval.yaml::c[fake]", "repeat": 0,
            "reply": ModelReply(calls=[RawCall("get_me", "{}")], content=content).to_entry()}


def test_unwritable_cache_is_noted_once(tmp_path: Path) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("")
    cache = ResponseCache(blocker, "new", "run-1")
    assert cache.put(model(), "a" * 64, entry()) is False
    assert cache.put(model(), "b" * 64, entry()) is False
    assert cache.get(model(), "a" * 64) is None and cache.corrupted == []  # a miss, not a corrupted entry
    assert cache.unwritable == [f"{blocker}: Not a directory"]


@pytest.mark.parametrize("failing", ["mkstemp", "replace"])
def test_a_full_or_read_only_disk_is_noted_and_leaves_no_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   failing: str) -> None:
    def full(*args: Any, **kwargs: Any) -> Any:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def read_only(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

    cache = ResponseCache(tmp_path, "new", "run-1")
    if failing == "mkstemp":
        monkeypatch.setattr(tempfile, "mkstemp", read_only)  # storage.write_atomic, which the cache writes through
    else:
        monkeypatch.setattr(os, "replace", full)
    assert cache.put(model(), "c" * 64, entry()) is False
    monkeypatch.undo()
    reason = "Permission denied" if failing == "mkstemp" else "No space left on device"
    assert cache.unwritable == [f"{tmp_path}: {reason}"]
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []
    assert cache.put(model(), "c" * 64, entry()) is True  # once the disk has room again


def test_a_lone_surrogate_round_trips_through_the_cache(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path, "new", "run-1")
    text = f"a {SURROGATE} b \u00e9 \U0001f600"
    assert cache.put(model(), "d" * 64, entry(text)) is True
    stored = cache.path(model(), "d" * 64).read_bytes()
    assert b"\\ud83d" in stored and stored.isascii()  # escaped, as JSON allows
    found = cache.get(model(), "d" * 64)
    assert found is not None and ModelReply.from_entry(found["reply"]).content == text
    assert cache.put(model(), "e" * 64, entry("caf\u00e9")) is True
    assert "caf\u00e9" in cache.path(model(), "e" * 64).read_text(encoding="utf-8")  # UTF-8 when it can be


# -- all at once, with and without xdist ---------------------------------------------------------------

def test_every_fault_at_once_loses_no_case(pytester: pytest.Pytester, model_server: ScriptedModelServer,
                                           xdist_args: list[str]) -> None:
    """One case per fault in one run: each ends in the report once, with its label."""
    faults: dict[str, tuple[dict[str, Any], str]] = {
        "rate-limited": ({"status": 429, "error": "slow down", "headers": {"Retry-After": "0"}}, "error"),
        "server-error": ({"status": 500, "error": "overloaded"}, "error"),
        "unavailable": ({"status": 503, "error": "overloaded"}, "error"),
        "reset": ({"reset": True}, "error"),
        "hang": ({"hang": True}, "error"),
        "empty-choices": ({"choices": []}, "error"),
        "not-utf8": ({"body": b'{"choices": [{"message": {"content": "\xff"}}]}'}, "error"),
        "invalid-json": ({"body": "{"}, "error"),
        "malformed-call": ({"tool_calls": [{"name": "get_me", "arguments": "{"}]}, "missed"),
        "invented-tool": ({"tool_calls": [{"name": "get_my_profile", "arguments": {}}]}, "missed"),
        "five-mb": ({**OK, "content": "x" * 5_000_000}, "passed"),
        "surrogate": ({**OK, "content": SURROGATE}, "passed"),
        "fine": (OK, "passed"),
    }
    cases = "".join(f"  - id: {name}\n    input: {name}\n    expect: [{{tool: get_me}}]\n" for name in faults)
    make_project(pytester, model_server, {"bench.mcpeval.yaml": "server: {tools_file: tools.json}\ncases:\n" + cases},
                 tools=TOOLS)
    for name, (reply, _) in faults.items():
        model_server.script(name, reply)
    started = time.perf_counter()
    # a deadline the 5 MB reply meets on a loaded machine (at 0.5 s it missed it once under the suite's four workers)
    result = run(pytester, "--mcp-models=fake", "--mcp-timeout=2", "--mcp-retries=1", "--mcp-report=report.json",
                 *xdist_args)
    elapsed = time.perf_counter() - started
    report = read_report(pytester)
    assert sorted(c["id"] for c in report["cases"]) == sorted(faults)

    def label(c: dict[str, Any]) -> str:
        return "error" if c["error"] else "passed" if c["passed"] else "missed"

    assert {c["id"]: label(c) for c in report["cases"]} == {name: want for name, (_, want) in faults.items()}
    result.stdout.no_fnmatch_line("*Traceback*")
    fake = report["models"]["fake"]
    assert (fake["cases"], fake["errors"], fake["scored"]) == (len(faults), 8, 5)
    assert fake["hallucinated_tools"] == {"get_my_profile": 1}
    by_id = {c["id"]: c for c in report["cases"]}
    assert by_id["surrogate"]["content"] == "\ufffd" and by_id["five-mb"]["content_truncated"] == 5_000_000
    assert result.ret == 1  # errors fail the run
    stored = {json.loads(p.read_text())["case"].split("::")[1] for p in cache_entries(pytester)}
    assert stored == {f"{name}[fake]" for name, (_, want) in faults.items() if want != "error"}
    # two timeouts and a backoff at most per case, all in parallel; xdist's workers start and import litellm
    assert elapsed < 2 * 2 + 1 + OVERHEAD + (30 if xdist_args else 0)
