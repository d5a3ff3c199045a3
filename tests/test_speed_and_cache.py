"""Concurrency, record/replay, retries, timeouts, repeats and usage: checked by behaviour, not by timing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import GITHUB_TOOLS, get_me_cases, make_project, read_report, run

from pytest_mcpeval.testing import ScriptedModelServer

N = 24


@pytest.fixture
def project(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> pytest.Pytester:
    make_project(pytester, model_server, {"bench.mcpeval.yaml": get_me_cases(N)})
    (pytester.path / "tools.json").write_text(GITHUB_TOOLS.read_text())
    model_server.script("*", {"tool_calls": [{"name": "get_me", "arguments": {}}]})
    return pytester


def cache_files(pytester: pytest.Pytester) -> list[Path]:
    return sorted((pytester.path / ".mcpeval" / "cache").rglob("*.json"))


def test_calls_run_concurrently(project: pytest.Pytester, model_server: ScriptedModelServer,
                                xdist_args: list[str]) -> None:
    model_server.latency = 0.3
    result = run(project, "--mcp-models=fake", "--mcp-concurrency=8", "--mcp-record=off", *xdist_args)
    result.stdout.fnmatch_lines([f"*{N} passed*"])
    assert len(model_server.requests) == N  # every call made once, also across xdist workers
    assert model_server.max_in_flight >= 4  # sequential would be 1; 8 allowed in all


def test_concurrency_is_bounded(project: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    model_server.latency = 0.2
    assert run(project, "--mcp-models=fake", "--mcp-concurrency=3", "--mcp-record=off").ret == 0
    assert 1 < model_server.max_in_flight <= 3


def test_replay_makes_no_calls_and_costs_nothing(project: pytest.Pytester, model_server: ScriptedModelServer,
                                                 xdist_args: list[str]) -> None:
    assert run(project, "--mcp-models=fake", *xdist_args).ret == 0
    assert len(model_server.requests) == N and len(cache_files(project)) == N
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
    result.stdout.fnmatch_lines(["*1 cache entry could not be read and was called again:*", f"*{N} passed*"])
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
