"""Speed benchmarks of pytest-mcpeval, printed next to their targets (issue: speed and cost).

    .venv/bin/python bench/bench.py [--cases 1000] [--latency 0.2] [--concurrency 32]

Everything runs here, against a local OpenAI-compatible server (the scripted model server, in its own
process, answering after a fixed latency).  Machines are shared and noisy, so the targets are ratios
measured within one run, not absolute times.

(a) efficiency: ideal time N*L/C divided by the measured evaluation time, N cases x 2 models
(b) the same suite as a naive sequential loop (litellm.completion one call after another) vs ours
(c) fully cached replay of N cases vs plain pytest with N trivial tests
(d) pytest --collect-only on a project without benchmarks: plugin loaded vs -p no:mcpeval
(e) aggregating 100k synthetic case results into the report
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
TOOLS = [
    {"name": "list_issues", "description": "List issues of a project, filtered by state and labels.",
     "inputSchema": {"type": "object", "properties": {"project": {"type": "string"}}, "required": ["project"]}},
    {"name": "search_issues", "description": "Full-text search over all issues.",
     "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}},
    {"name": "get_issue", "description": "Get one issue by its key.",
     "inputSchema": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}},
]


def write_suite(root: Path, cases: int) -> None:
    (root / "tools.json").write_text(json.dumps(TOOLS))
    lines = ["server: {tools_file: tools.json}", "cases:"]
    for i in range(cases):
        lines += [f"  - id: c{i}", f"    input: list the issues of project P{i}",
                  f"    expect: [{{tool: list_issues, args: {{project: P{i}}}}}]"]
    (root / "bench.mcpeval.yaml").write_text("\n".join(lines) + "\n")
    script = {f"list the issues of project P{i}": {"tool_calls": [{"name": "list_issues",
                                                                   "arguments": {"project": f"P{i}"}}]}
              for i in range(cases)}
    (root / "script.json").write_text(json.dumps(script))


def start_server(root: Path, latency: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([PY, "-m", "pytest_mcpeval.testing", "--latency", str(latency),
                             "--script", str(root / "script.json")], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def write_ini(root: Path, api_base: str) -> None:
    params = json.dumps({"api_base": api_base, "api_key": "none"})
    (root / "pytest.ini").write_text(
        "[pytest]\nmcp_model_aliases =\n    a = openai/model-a\n    b = openai/model-b\n"
        f"mcp_model_params =\n    a = {params}\n    b = {params}\n"
    )


def pytest_run(root: Path, *args: str) -> tuple[float, float]:
    """(wall seconds of the whole command, seconds pytest reports for the session)."""
    started = time.perf_counter()
    done = subprocess.run([PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=root,
                          capture_output=True, text=True)
    wall = time.perf_counter() - started
    match = re.search(r" in ([\d.]+)s", done.stdout.splitlines()[-1] if done.stdout else "")
    if done.returncode not in (0, 5) or match is None:
        sys.exit(f"pytest {' '.join(args)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    return wall, float(match.group(1))


def bench_efficiency(root: Path, n: int, latency: float, concurrency: int, *xdist: str) -> dict[str, float]:
    wall, session = pytest_run(root, "--mcp-models=a,b", "--mcp-record=off", f"--mcp-concurrency={concurrency}",
                               *xdist)
    ideal = n * latency / concurrency
    return {"ideal_s": ideal, "session_s": session, "wall_s": wall, "efficiency": ideal / session}


def bench_sequential(root: Path, api_base: str, sample: int) -> float:
    """Seconds per call of a naive loop (one litellm call after another), measured on a sample."""
    code = f"""
import json, os, time
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"; os.environ["LITELLM_OFFLINE_MODE"] = "true"
import litellm
from pytest_mcpeval.catalog import catalog_from_json
tools = catalog_from_json(json.load(open("tools.json"))).openai_tools
start = time.perf_counter()
for i in range({sample}):
    litellm.completion(model="openai/model-a", api_base="{api_base}", api_key="none", num_retries=0, tools=tools,
                       messages=[{{"role": "user", "content": f"list the issues of project P{{i}}"}}])
print((time.perf_counter() - start) / {sample})
"""
    out = subprocess.run([PY, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def bench_call_cpu(root: Path, api_base: str, calls: int = 60) -> float:
    """CPU seconds litellm spends on one call (server answers at once): the floor under (a)."""
    code = f"""
import json, os, time
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"; os.environ["LITELLM_OFFLINE_MODE"] = "true"
from pytest_mcpeval.catalog import catalog_from_json
from pytest_mcpeval.models.config import ModelSpec
from pytest_mcpeval.models.litellm_client import complete
tools = catalog_from_json(json.load(open("tools.json"))).openai_tools
model = ModelSpec("a", "openai/model-a", {{"api_base": "{api_base}", "api_key": "none"}})
complete(model, [{{"role": "user", "content": "warm up"}}], tools)
start = time.process_time()
for i in range({calls}):
    complete(model, [{{"role": "user", "content": f"list the issues of project P{{i}}"}}], tools)
print((time.process_time() - start) / {calls})
"""
    env = {**os.environ}
    out = subprocess.run([PY, "-c", code], cwd=root, capture_output=True, text=True, check=True, env=env)
    return float(out.stdout.strip().splitlines()[-1])


def bench_replay(root: Path, n: int) -> dict[str, float]:
    pytest_run(root, "--mcp-models=a")  # record (mode new)
    replay = min(pytest_run(root, "--mcp-models=a", "--mcp-record=none")[0] for _ in range(3))
    plain = root / "plain"
    plain.mkdir(exist_ok=True)
    (plain / "test_trivial.py").write_text("".join(f"def test_{i}():\n    assert True\n" for i in range(n)))
    (plain / "pytest.ini").write_text("[pytest]\n")
    baseline = min(pytest_run(plain, "-p", "no:mcpeval")[0] for _ in range(3))
    return {"replay_s": replay, "plain_s": baseline, "ratio": replay / baseline}


def bench_collect_overhead() -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "pytest.ini").write_text("[pytest]\n")
        (root / "test_some.py").write_text("def test_a():\n    pass\n")
        with_plugin, without = [], []
        for _ in range(5):
            with_plugin.append(pytest_run(root, "--collect-only")[0])
            without.append(pytest_run(root, "--collect-only", "-p", "no:mcpeval")[0])
    return {"with_s": statistics.median(with_plugin), "without_s": statistics.median(without),
            "overhead_s": statistics.median(with_plugin) - statistics.median(without)}


def bench_aggregate(n: int = 100_000) -> dict[str, float]:
    from pytest_mcpeval.report.model import build_report

    rng = random.Random(7)
    tools = [f"tool_{i}" for i in range(40)] + ["(none)"]
    results = []
    for i in range(n):
        expected = rng.choice(tools)
        called = expected if rng.random() < 0.8 else rng.choice(tools)
        correct = expected == called
        args = {"malformed": None, "hallucinated": [], "missing_required": [], "missing_expected": [],
                "unexpected": [], "mismatched": [], "hallucination": rng.random() < 0.05, "all_required": True,
                "all_expected": True, "exact": rng.random() < 0.9} if correct and expected != "(none)" else None
        results.append({"file": "bench.mcpeval.yaml", "line": i, "id": f"c{i}", "model": f"m{i % 2}",
                        "repeat": 0, "error": None, "expected": [{"tool": expected}], "expected_label": expected,
                        "called": [{"tool": called, "args": {}}], "called_label": called, "correct": correct,
                        "passed": correct, "arguments": args, "diagnosis": None if correct else "wrong_tool",
                        "catalog": "x", "usage": {"prompt_tokens": 100, "completion_tokens": 10, "cost_usd": 0.0001,
                                                  "cached": False, "attempts": 1}, "latency_s": 0.2})
    started = time.perf_counter()
    build_report(results, {"x": tools[:-1]}, ["m0", "m1"])
    return {"cases": n, "seconds": time.perf_counter() - started}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--sample", type=int, default=100, help="calls of the sequential loop actually made")
    args = parser.parse_args()
    n, latency, concurrency = args.cases, args.latency, args.concurrency
    rows: list[tuple[str, str, str, bool]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_suite(root, n)
        proc, api_base = start_server(root, latency)
        try:
            write_ini(root, api_base)
            ours = float("inf")
            for label, xdist in (("", ()), (", -n 2", ("-n", "2"))):
                eff = bench_efficiency(root, n, latency, concurrency, *xdist)
                ours = min(ours, eff["wall_s"])
                rows.append((f"(a) efficiency, {n} cases x 2 models, L={latency * 1000:.0f} ms, C={concurrency}{label}",
                             f"{eff['efficiency']:.2f} (ideal {eff['ideal_s']:.2f} s / session {eff['session_s']:.2f}"
                             f" s; wall {eff['wall_s']:.2f} s)", ">= 0.8", eff["efficiency"] >= 0.8))
            slow, slow_base = start_server(root, 1.0)  # a provider's typical latency: ~1 s per call
            try:
                write_ini(root, slow_base)
                eff = bench_efficiency(root, n, 1.0, concurrency, "-n", "2")
                rows.append(("(a') the same at L=1000 ms, -n 2",
                             f"{eff['efficiency']:.2f} (ideal {eff['ideal_s']:.2f} s / session {eff['session_s']:.2f}"
                             f" s; wall {eff['wall_s']:.2f} s)", ">= 0.8", eff["efficiency"] >= 0.8))
            finally:
                slow.terminate()
                slow.wait()
                write_ini(root, api_base)
            cpu = bench_call_cpu(root, api_base)
            rows.append(("    CPU per call in litellm (one core; bounds (a) on this machine)",
                         f"{cpu * 1000:.1f} ms -> {2 * n} calls need >= {2 * n * cpu / os.cpu_count():.1f} s on "
                         f"{os.cpu_count()} cores", "-", True))
            per_call = bench_sequential(root, api_base, args.sample)
            sequential = per_call * n * 2
            ratio = sequential / ours
            rows.append(("(b) naive sequential loop vs ours",
                         f"{ratio:.1f}x slower ({per_call * 1000:.0f} ms/call x {2 * n} calls = {sequential:.0f} s, "
                         f"from {args.sample} calls)", ">= 25x", ratio >= 25))
            rep = bench_replay(root, n)
            rows.append((f"(c) cached replay of {n} cases vs {n} trivial tests",
                         f"{rep['ratio']:.2f}x ({rep['replay_s']:.2f} s vs {rep['plain_s']:.2f} s)", "<= 1.5x",
                         rep["ratio"] <= 1.5))
        finally:
            proc.terminate()
            proc.wait()
    col = bench_collect_overhead()
    rows.append(("(d) --collect-only, plugin vs -p no:mcpeval",
                 f"+{col['overhead_s']:.3f} s ({col['with_s']:.2f} s vs {col['without_s']:.2f} s)", "<= +0.3 s",
                 col["overhead_s"] <= 0.3))
    agg = bench_aggregate()
    rows.append((f"(e) aggregate {agg['cases']:,} case results", f"{agg['seconds']:.2f} s", "<= 1 s",
                 agg["seconds"] <= 1.0))
    width = max(len(r[0]) for r in rows)
    print(f"\n{'benchmark':<{width}}  {'measured':<70}  target    ok")
    for name, measured, target, ok in rows:
        print(f"{name:<{width}}  {measured:<70}  {target:<8}  {'yes' if ok else 'NO'}")


if __name__ == "__main__":
    main()
