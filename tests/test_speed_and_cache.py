"""Concurrency, record/replay, retries, timeouts, repeats and usage: checked by behaviour, not by timing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import GITHUB_TOOLS, get_me_cases, make_project, read_report, run, run_subprocess

from pytest_mcpeval.testing import ScriptedModelServer

N = 24


@pytest.fixture
def project(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> pytest.Pytester:
    make_project(pytester, model_server, {"bench.mcpeval.yaml": get_me_cases(N)})
    (pytester.path / "tools.json").write_text(GITHUB_TOOLS.read_text())
    model_server.script("*", {"tool_calls": [{"name": "get_me", "arguments": {}}]})
    return pytester


def cache_files(pytester: pytest.Pytester) -> list[Path]:
    return sorted((pytester.path / ".mcpeval" / "cache").rglob("*.json"))  # the entries (not the .tokens files)


def test_concurrency_is_bounded(project: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    model_server.latency = 0.2
    assert run(project, "--mcp-models=fake", "--mcp-concurrency=3", "--mcp-record=off").ret == 0
    assert 1 < model_server.max_in_flight <= 3


def test_calls_run_concurrently_and_a_replay_makes_none(project: pytest.Pytester, model_server: ScriptedModelServer,
                                                        xdist_args: list[str]) -> None:
    """The recording run's calls are made concurrently (and once each, also across xdist workers); the replay
    that follows makes none and costs nothing."""
    model_server.latency = 0.3
    result = run(project, "--mcp-models=fake", "--mcp-concurrency=8", *xdist_args)
    result.stdout.fnmatch_lines([f"*{N} passed*"])
    assert len(model_server.requests) == N  # every call made once, also across xdist workers
    assert model_server.max_in_flight >= 4  # sequential would be 1; 8 allowed in all
    assert len(cache_files(project)) == N
    model_server.latency = 0.0
    result = run(project, "--mcp-models=fake", "--mcp-report=report.json", *xdist_args)
    result.stdout.fnmatch_lines([f"*{N} passed*"])
    assert len(model_server.requests) == N  # nothing new
    usage = read_report(project)["models"]["fake"]["usage"]
    assert (usage["calls"], usage["cached"], usage["prompt_tokens"]) == (N, N, 0)
    if xdist_args:
        return  # the modes below behave the same on workers (one ResponseCache each); -n 2 costs seconds a run
    # replay only, as CI without keys runs: still no call
    assert run(project, "--mcp-models=fake", "--mcp-record=none").ret == 0
    assert len(model_server.requests) == N
    # record all: every call again
    assert run(project, "--mcp-models=fake", "--mcp-record=all").ret == 0
    assert len(model_server.requests) == 2 * N


def test_replay_only_miss_is_an_error_naming_the_case(project: pytest.Pytester,
                                                      model_server: ScriptedModelServer) -> None:
    result = run(project, "--mcp-models=fake", "--mcp-record=none", "bench.mcpeval.yaml::q3[fake]")
    result.stdout.fnmatch_lines(["*bench.mcpeval.yaml::q3[[]fake[]]: no recorded response (--mcp-record=none*",
                                 "*1 error*"])
    assert model_server.requests == []


def test_changed_description_remakes_exactly_its_calls(pytester: pytest.Pytester,
                                                      model_server: ScriptedModelServer) -> None:
    tools = json.loads(GITHUB_TOOLS.read_text())
    for folder, prefix in (("a", "a"), ("b", "b")):
        make_project(pytester, model_server, {f"{folder}/bench.mcpeval.yaml": get_me_cases(5, prefix)})
        (pytester.path / folder / "tools.json").write_text(json.dumps(tools))
    model_server.script("*", {"tool_calls": [{"name": "get_me", "arguments": {}}]})
    assert run(pytester, "--mcp-models=fake").ret == 0
    assert len(model_server.requests) == 10
    changed = [dict(t, description="Who am I? Your GitHub profile.") if t["name"] == "get_me" else t for t in tools]
    (pytester.path / "b" / "tools.json").write_text(json.dumps(changed))
    assert run(pytester, "--mcp-models=fake").ret == 0
    assert len(model_server.requests) == 15  # b's five calls carried the changed description
    assert all(r["messages"][-1]["content"].startswith("b ") for r in model_server.requests[10:])


def test_corrupted_entry_is_reported_and_called_again(project: pytest.Pytester,
                                                      model_server: ScriptedModelServer) -> None:
    assert run(project, "--mcp-models=fake").ret == 0
    victim = cache_files(project)[0]
    victim.write_text(victim.read_text()[:40])  # truncated mid-write, as after a crash
    result = run(project, "--mcp-models=fake")
    result.stdout.fnmatch_lines(["*1 cache entry could not be used and was called again:*", f"*{N} passed*"])
    assert len(model_server.requests) == N + 1
    assert json.loads(victim.read_text())["reply"]["calls"][0]["name"] == "get_me"  # rewritten whole


def test_no_secret_is_written(project: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    assert run(project, "--mcp-models=fake", "--mcp-report=report.json").ret == 0
    for path in [*cache_files(project), project.path / "report.json"]:
        assert "not-a-key" not in path.read_text(), path


def test_rate_limits_are_retried_honouring_retry_after(project: pytest.Pytester,
                                                       model_server: ScriptedModelServer) -> None:
    ok = {"tool_calls": [{"name": "get_me", "arguments": {}}]}
    limited = {"status": 429, "error": "slow down", "headers": {"Retry-After": "0"}}
    model_server.script("q question 1", [limited, limited, ok])
    result = run(project, "--mcp-models=fake", "--mcp-report=report.json", "bench.mcpeval.yaml::q1[fake]")
    result.stdout.fnmatch_lines(["*1 passed*"])
    case = read_report(project)["cases"][0]
    assert case["usage"]["attempts"] == 3 and case["passed"] is True


def test_exhausted_retries_are_an_error_not_a_miss(project: pytest.Pytester,
                                                   model_server: ScriptedModelServer) -> None:
    model_server.script("q question 2", {"status": 429, "error": "slow down", "headers": {"Retry-After": "0"}})
    result = run(project, "--mcp-models=fake", "--mcp-retries=2", "--mcp-report=report.json")
    result.stdout.fnmatch_lines(["*q2[[]fake[]]: model fake (openai/fake) after 3 attempts: RateLimitError*"])
    fake = read_report(project)["models"]["fake"]
    assert (fake["errors"], fake["scored"], fake["accuracy"]) == (1, N - 1, 1.0)
    assert result.ret == 1


def test_timeout(project: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    model_server.script("q question 0", {"tool_calls": [{"name": "get_me", "arguments": {}}], "delay": 3})
    result = run(project, "--mcp-models=fake", "--mcp-timeout=0.5", "--mcp-retries=0", "bench.mcpeval.yaml::q0[fake]")
    result.stdout.fnmatch_lines(["*q0[[]fake[]]: model fake (openai/fake): Timeout: no answer within 0.5 s "
                                 "(--mcp-timeout)*", "*1 error*"])


def test_repeats_give_pass_k_and_flaky_cases(project: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    good = {"tool_calls": [{"name": "get_me", "arguments": {}}]}
    bad = {"tool_calls": [{"name": "search_users", "arguments": {"query": "me"}}]}
    model_server.script("q question 0", [good, bad, good])  # passes 2 of 3
    model_server.script("q question 1", bad)  # passes 0 of 3
    result = run(project, "--mcp-models=fake", "--mcp-repeat=3", "--mcp-report=report.json", "--mcp-concurrency=1",
                 "-v", "bench.mcpeval.yaml::q0[fake]", "bench.mcpeval.yaml::q1[fake]")
    result.stdout.fnmatch_lines(["*q0[[]fake[]] FLAKY 2/3*"])
    result.stdout.fnmatch_lines(["*q1[[]fake[]] MISS*"])
    report = read_report(project)
    repeats = report["models"]["fake"]["repeats"]
    assert repeats["runs"] == 3
    assert repeats["flaky"] == ["bench.mcpeval.yaml::q0"]
    # pass@1 = mean(2/3, 0) ; pass@2 = mean(1 - C(1,2)/C(3,2), 0) = 1/2 ; pass^2 = mean(C(2,2)/C(3,2), 0) = 1/6
    assert repeats["pass_at_k"]["1"] == pytest.approx(1 / 3)
    assert repeats["pass_at_k"]["2"] == pytest.approx(1 / 2)
    assert repeats["pass_hat_k"]["2"] == pytest.approx(1 / 6)
    assert repeats["pass_hat_k"]["3"] == 0.0
    assert sorted(c["repeat"] for c in report["cases"] if c["id"] == "q0") == [0, 1, 2]
    assert len({json.dumps(r["messages"]) for r in model_server.requests}) == 2  # same prompt, 3 keys each
    assert len(model_server.requests) == 6


def test_cost_from_the_offline_cost_map(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    params = json.dumps({"api_base": model_server.api_base, "api_key": "not-a-key"})
    (pytester.path / "pytest.ini").write_text(f"[pytest]\nmcp_model_params = openai/gpt-4o-mini = {params}\n")
    (pytester.path / "bench.mcpeval.yaml").write_text(get_me_cases(2))
    (pytester.path / "tools.json").write_text(GITHUB_TOOLS.read_text())
    model_server.script("*", {"tool_calls": [{"name": "get_me", "arguments": {}}]})
    assert run(pytester, "--mcp-models=openai/gpt-4o-mini", "--mcp-report=report.json").ret == 0
    usage = read_report(pytester)["models"]["openai/gpt-4o-mini"]["usage"]
    assert usage["priced_calls"] == 2 and usage["cost_usd"] > 0
    assert usage["prompt_tokens"] > 1000  # the full catalog travels with every request


# -- speed: the whole request hashed once per catalog, replays without litellm, the pipe kept full ----------------

def test_the_request_key_is_the_hash_of_the_request_with_the_tool_list_hashed_once() -> None:
    """Version 2: the key hashes the request with the tool list's own SHA-256 in its place (made once per
    catalog); the legacy key (version 1, still read) hashes the whole request, the list included."""
    import hashlib

    from pytest_mcpeval.catalog import catalog_from_json
    from pytest_mcpeval.models.config import ModelRegistry
    from pytest_mcpeval.run.cache import ENTRY_VERSION, LEGACY_VERSION, legacy_request_key, request_key
    from pytest_mcpeval.text import canonical_json

    assert (ENTRY_VERSION, LEGACY_VERSION) == (2, 1)
    model = ModelRegistry.from_ini([], ['m = {"api_key": "k", "api_base": "http://x", "max_tokens": 9}']).resolve("m")
    messages = [{"role": "system", "content": "é"}, {"role": "user", "content": "q"}]
    for tools in (catalog_from_json(json.loads(GITHUB_TOOLS.read_text())).openai_tools, []):
        request = {"model": "m", "params": {"temperature": 0, "max_tokens": 9}, "messages": messages, "repeat": 2}
        tools_digest = hashlib.sha256(canonical_json(tools).encode()).hexdigest()
        current = {**request, "v": 2, "tools": tools_digest}
        assert request_key(model, messages, tools, 2) == hashlib.sha256(canonical_json(current).encode()).hexdigest()
        legacy = {**request, "v": 1, "tools": tools}
        assert legacy_request_key(model, messages, tools, 2) == hashlib.sha256(
            canonical_json(legacy).encode()).hexdigest()
        assert request_key(model, messages, list(tools), 2) == request_key(model, messages, tools, 2)  # a copy


def test_a_cache_recorded_with_version_1_keys_still_replays(project: pytest.Pytester,
                                                            model_server: ScriptedModelServer,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache of an earlier release (every entry under its version 1 key) is read in modes none and new: no
    call is made again, no entry is written again, the results are the same."""
    from pytest_mcpeval.run import dispatch
    from pytest_mcpeval.run.cache import legacy_request_key

    with monkeypatch.context() as patch:  # the earlier release: its keys
        patch.setattr(dispatch, "request_key", legacy_request_key)
        assert run(project, "--mcp-models=fake", "--mcp-report=recorded.json").ret == 0
    entries = cache_files(project)
    assert len(entries) == len(model_server.requests) == N
    for mode in ("none", "new"):
        assert run(project, "--mcp-models=fake", f"--mcp-record={mode}", f"--mcp-report={mode}.json").ret == 0
        assert cache_files(project) == entries and len(model_server.requests) == N
        replayed = read_report(project, f"{mode}.json")["cases"]
        assert [c["passed"] for c in replayed] == [True] * N and all(c["usage"]["cached"] for c in replayed)
    assert run(project, "--mcp-models=fake", "--mcp-record=all").ret == 0  # recorded again: current keys
    assert len(model_server.requests) == 2 * N and len(cache_files(project)) == 2 * N


REPLAY_PROBE = """
import json, sys
def pytest_unconfigure(config):
    heavy = ("litellm", "openai", "tiktoken", "tokenizers", "transformers", "torch", "sentence_transformers")
    found = sorted(m for m in sys.modules if m.split(".")[0] in heavy)
    (config.rootpath / "imported.json").write_text(json.dumps(found))
"""


def test_a_replay_imports_no_model_library(project: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    """A cache-only replay (what CI runs on every push) costs what plain tests cost: no litellm (seconds to
    import), no tokenizer (the catalog's token counts are kept with the cache), no params_sent from litellm."""
    assert run(project, "--mcp-models=fake", "--mcp-report=recorded.json").ret == 0
    assert sorted(p.name for p in (project.path / ".mcpeval" / "cache" / "catalog-tokens").iterdir()) == [
        f"{read_report(project, 'recorded.json')['cases'][0]['catalog']}.tokens"]
    (project.path / "conftest.py").write_text(REPLAY_PROBE)
    result = run_subprocess(project, "--mcp-models=fake", "--mcp-record=none", "--mcp-report=replayed.json")
    result.stdout.fnmatch_lines([f"*{N} passed*"])
    assert json.loads((project.path / "imported.json").read_text()) == []
    recorded, replayed = read_report(project, "recorded.json"), read_report(project, "replayed.json")
    assert replayed["catalogs"] == recorded["catalogs"]  # token counts included, read back from the cache
    assert replayed["catalogs"][recorded["cases"][0]["catalog"]]["tokens"] == 30_780  # o200k_base, 117 tools
    assert replayed["run"]["models"] == recorded["run"]["models"]  # params_sent from the entries
    assert len(model_server.requests) == N


def test_every_call_of_the_session_is_made_ahead(pytester: pytest.Pytester,
                                                 model_server: ScriptedModelServer) -> None:
    """Without an mcp_server override the calls of every file are submitted when the first case runs, so the
    pipe does not drain between files; with one, per file (its items share the override's value)."""
    files = {f"{d}/bench.mcpeval.yaml": get_me_cases(4, d) for d in "ab"}
    make_project(pytester, model_server, files)
    for d in "ab":
        (pytester.path / d / "tools.json").write_text(GITHUB_TOOLS.read_text())
    model_server.script("*", {"tool_calls": [{"name": "get_me", "arguments": {}}], "gather": 8})
    assert run(pytester, "--mcp-models=fake", "--mcp-record=off", "--mcp-concurrency=8").ret == 0
    assert model_server.max_in_flight == 8  # both files' calls at once (each answer waited for all 8)
    (pytester.path / "b" / "conftest.py").write_text(
        "import pytest\n@pytest.fixture(scope='session')\ndef mcp_server():\n    return None\n")
    model_server.max_in_flight = 0
    model_server.script("*", {"tool_calls": [{"name": "get_me", "arguments": {}}], "gather": 4})
    assert run(pytester, "--mcp-models=fake", "--mcp-record=off", "--mcp-concurrency=8").ret == 0
    assert model_server.max_in_flight == 4  # one file at a time


def test_turns_of_different_flows_interleave(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    """Each flow runs on a thread of its own, so its later turns overlap other flows' (before, only the first
    turns were made ahead and the rest one flow after another); the model's concurrency still holds."""
    cases = "".join(f"  - id: f{i}\n    input: flow {i}\n    expect: [{{tool: get_me}}]\n"
                    f"    mocks: {{get_me: [{{result: {{text: me}}}}]}}\n" for i in range(8))
    make_project(pytester, model_server, {"flows.mcpeval.yaml": "server: {tools_file: tools.json}\ncases:\n" + cases})
    (pytester.path / "tools.json").write_text(GITHUB_TOOLS.read_text())
    model_server.flow("*", [{"name": "get_me", "arguments": {}}], {"content": "You are octocat.", "delay": 0.4})
    result = run(pytester, "--mcp-models=fake", "--mcp-record=off", "--mcp-concurrency=4", "--mcp-report=report.json")
    assert result.ret == 0
    assert [c["turns"] for c in read_report(pytester)["cases"]] == [2] * 8
    assert len(model_server.requests) == 16 and model_server.max_in_flight == 4  # the slow second turns at once


def test_the_retired_processes_option_is_a_notice(project: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    """--mcp-processes is no longer used (every call of a process runs on its event loop): a command line that still
    gives it runs as before, with one line that says so."""
    result = run(project, "--mcp-models=fake", "--mcp-processes=2", "--mcp-report=report.json")
    result.stdout.fnmatch_lines(["pytest-mcpeval: --mcp-processes is no longer used: the model calls of a process "
                                 "run on its event loop; -n N (pytest-xdist) uses more cores", f"*{N} passed*"])
    assert len(model_server.requests) == N and read_report(project)["models"]["fake"]["accuracy"] == 1.0


def test_a_bad_process_count_is_one_line(pytester: pytest.Pytester) -> None:
    result = run(pytester, "--mcp-processes=all")
    result.stderr.fnmatch_lines(["*--mcp-processes: 'all' is not auto or a whole number"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


CALLBACK_CONFTEST = """
import litellm
from litellm.integrations.custom_logger import CustomLogger

class Count(CustomLogger):
    calls = 0
    def log_success_event(self, kwargs, response_obj, start_time, end_time):
        Count.calls += 1

litellm.callbacks = [Count()]

def pytest_unconfigure(config):
    (config.rootpath / "counted.txt").write_text(str(Count.calls))
"""


def test_litellm_set_up_in_a_conftest_sees_every_call(pytester: pytest.Pytester,
                                                      model_server: ScriptedModelServer) -> None:
    """A conftest.py that imports litellm and sets it up (here a success callback): the calls are made in the
    pytest process, where the setting is, so the callback sees each of them."""
    calls = 32  # twice the default concurrency: they overlap on the loop, as a run's calls do
    make_project(pytester, model_server, {"bench.mcpeval.yaml": get_me_cases(calls)})
    (pytester.path / "tools.json").write_text(GITHUB_TOOLS.read_text())
    (pytester.path / "conftest.py").write_text(CALLBACK_CONFTEST)
    model_server.script("*", {"tool_calls": [{"name": "get_me", "arguments": {}}]})
    result = run_subprocess(pytester, "--mcp-models=fake", "--mcp-record=off")  # a fresh process
    result.stdout.fnmatch_lines([f"*{calls} passed*"])
    assert len(model_server.requests) == calls
    counted = int((pytester.path / "counted.txt").read_text())
    assert counted == calls


def test_a_lone_surrogate_in_a_request_gets_a_key() -> None:
    """A tool answer or a description may hold a lone surrogate (legal JSON): the request still gets a key,
    its own, instead of a UnicodeEncodeError."""
    from pytest_mcpeval.models.config import ModelRegistry
    from pytest_mcpeval.run.cache import legacy_request_key, request_key

    model = ModelRegistry().resolve("openai/gpt-5")
    tools = [{"type": "function", "function": {"name": "t", "description": "half \ud83d", "parameters": {}}}]
    keys = {request_key(model, [{"role": "tool", "content": text}], tools, 0) for text in ("a \ud83d", "a \ud83e", "a")}
    assert len(keys) == 3
    assert legacy_request_key(model, [{"role": "tool", "content": "a \ud83d"}], tools, 0) not in keys
