"""Speed benchmarks of pytest-mcpeval, each figure printed next to its target (docs/performance.md).

    .venv/bin/python bench/bench.py            # the full run: every target with its figure (about 10 minutes)
    .venv/bin/python bench/bench.py --quick    # the smallest sizes (tests/test_bench.py runs it: nothing rots)
    .venv/bin/python bench/bench.py --only efficiency,replay

Everything runs on this machine.  The model is the scripted OpenAI-compatible server
(``python -m pytest_mcpeval.testing``) in a process of its own, answering every request after a fixed
latency L, called through litellm exactly as a hosted model is.  Machines here are shared and noisy, so
every target is a ratio of two figures measured within one run.

efficiency  (N x L / C) / the evaluation time pytest reports: N cases x 2 models, C calls in flight per model,
            at L = 1 s and 2 s, with and without -n 2 (targets 0.9 and 0.95)
core        issue 33's floor: a bare litellm async loop (one process, asyncio + litellm.acompletion, a semaphore of C
            per model, the same calls) against the plugin, calls in the pytest process, at L = 1 s and 0.2 s: wall
            (target 1.05 at 1 s), CPU per call of each whole process tree (target 1.1), and with -n 2 at 0.2 s
            (wall, target 1.0); beside them, as figures, bare pytest items making the same calls (one parametrized
            test a call, the calls on one loop): what pytest's per-item protocol costs, and what the plugin costs
            beyond it; the runs of each latency in two rounds, in alternation, each figure the best of its two
replay      a cached replay (--mcp-record=none) of N cases with a 117-tool catalog / plain pytest with N trivial
            tests (target 1.5), and that the replay imported no model library
flows       flows of 4 model turns at L = 1 s (and a judged claim each), C in flight (target 0.85)
collect     pytest --collect-only of 10,000 cases in 20 files (target 3 s)
report      building the report and the gate of 100,000 case results (target 1 s)
startup     pytest --collect-only without benchmark files: plugin loaded vs -p no:mcpeval (target +0.3 s)
naive       a sequential loop (one litellm.completion after another, as a user writes it by hand), measured on a
            sample and multiplied out, vs the plugin's wall time at L = 1 s (a figure, no target)

Where the plugin's CPU per call goes beyond the bare async loop's: bench/profile_core.py (py-spy, by library).
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
GITHUB_TOOLS = REPO / "tests" / "data" / "github-tools.json"
OFFLINE = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true"}
# as on a user's machine: modules compiled once (a shell with PYTHONDONTWRITEBYTECODE set compiles the plugin's
# modules, an editable install, in every run: 0.2-0.3 s that no user pays)
ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
# the plugin of this checkout, whichever checkout the editable install points at (a worktree's bench measured the
# main checkout's code)
ENV["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
SECTIONS = ("efficiency", "core", "replay", "flows", "collect", "report", "startup", "naive")


@dataclass(frozen=True)
class Sizes:
    cases: int  # per model (efficiency, cpu, naive)
    files: int
    tools: int
    concurrency: int
    latencies: tuple[float, ...]  # efficiency
    flow_latency: float
    naive_latency: float
    replay_cases: int
    flows: int
    collect_cases: int
    collect_files: int
    report_results: int
    naive_sample: int
    repeats: int  # best of (replay, startup)
    xdist: bool
    core_latencies: tuple[float, ...]
    core_xdist_latency: float  # the core latency with a -n 2 run too (when xdist)
    core_repeats: int  # rounds of the core section's runs in alternation, each figure the best of its runs


FULL = Sizes(cases=1000, files=1, tools=40, concurrency=32, latencies=(1.0, 2.0),
             flow_latency=1.0, naive_latency=1.0, replay_cases=1000, flows=500, collect_cases=10_000,
             collect_files=20, report_results=100_000, naive_sample=10, repeats=3, xdist=True,
             core_latencies=(1.0, 0.2), core_xdist_latency=0.2, core_repeats=2)
QUICK = Sizes(cases=12, files=2, tools=40, concurrency=4, latencies=(0.05,), flow_latency=0.05,
              naive_latency=0.05, replay_cases=20, flows=4, collect_cases=40, collect_files=2, report_results=1000,
              naive_sample=2, repeats=1, xdist=False,
              core_latencies=(0.05,), core_xdist_latency=0.0, core_repeats=1)


@dataclass
class Row:
    name: str
    measured: str
    target: str = "-"
    ok: bool | None = None  # None: a figure without a target


# -- the project under test ---------------------------------------------------------------------------

def catalog(tools: int) -> list[dict[str, object]]:
    """The first ``tools`` tools of the GitHub MCP server's catalog (tests/data): real descriptions and schemas."""
    data = json.loads(GITHUB_TOOLS.read_text())
    listed: list[dict[str, object]] = data["tools"] if isinstance(data, dict) else data
    return listed[:tools]


def arguments(tool: dict[str, object]) -> dict[str, object]:
    """A value of the right type for every required argument of ``tool`` (so the scripted calls pass)."""
    schema = tool.get("inputSchema")
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    required = schema.get("required", []) if isinstance(schema, dict) else []
    samples = {"string": "x", "integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}
    out: dict[str, object] = {}
    for name in required:
        spec = props.get(name, {})
        enum = spec.get("enum") if isinstance(spec, dict) else None
        kind = spec.get("type", "string") if isinstance(spec, dict) else "string"
        out[name] = enum[0] if enum else samples.get(kind if isinstance(kind, str) else "string", "x")
    return out


def write_cases(root: Path, cases: int, files: int, tools: list[dict[str, object]],
                prefix: str = "c") -> dict[str, object]:
    """``files`` benchmark files under evals/ sharing one tools.json; returns the server's script."""
    (root / "evals").mkdir(parents=True, exist_ok=True)
    (root / "evals" / "tools.json").write_text(json.dumps(tools))
    script: dict[str, object] = {}
    per_file = -(-cases // files)
    for f in range(files):
        lines = ["server: {tools_file: tools.json}", "cases:"]
        for i in range(f * per_file, min(cases, (f + 1) * per_file)):
            tool = tools[i % len(tools)]["name"]
            text = f"please use {tool} for request {prefix}{i}"
            lines += [f"  - id: {prefix}{i}", f"    input: {text}", f"    expect: [{{tool: {tool}}}]"]
            script[text] = {"tool_calls": [{"name": tool, "arguments": arguments(tools[i % len(tools)])}]}
        (root / "evals" / f"part{f:02d}.mcpeval.yaml").write_text("\n".join(lines) + "\n")
    return script


def write_flows(root: Path, flows: int, tools: list[dict[str, object]]) -> dict[str, object]:
    """``flows`` flows of 4 model turns (3 calls answered by mocks, then the answer) and a judged claim each."""
    names = [str(t["name"]) for t in tools[:3]]
    (root / "flows").mkdir(parents=True, exist_ok=True)
    (root / "flows" / "tools.json").write_text(json.dumps(tools))
    lines = ["server: {tools_file: tools.json}", "cases:"]
    for i in range(flows):
        lines += [f"  - id: f{i}", f"    input: flow number {i}", "    order: in_order",
                  "    expect: [" + ", ".join(f"{{tool: {n}}}" for n in names) + "]",
                  "    mocks:", *(f"      {n}: [{{result: {{text: ok {n}}}}}]" for n in names),
                  "    claims: [It is done.]"]
    (root / "flows" / "flows.mcpeval.yaml").write_text("\n".join(lines) + "\n")
    turns: list[object] = [{"tool_calls": [{"name": n, "arguments": {}}]} for n in names] + [{"content": "done"}]
    verdict = json.dumps({"verdict": "fulfilled", "justification": "it says so"})
    return {"Claim:*": {"content": verdict}, "*": {"turns": turns}}


def write_ini(root: Path, api_base: str, extra: str = "") -> None:
    params = json.dumps({"api_base": api_base, "api_key": "none"})
    (root / "pytest.ini").write_text(
        "[pytest]\nmcp_model_aliases =\n    a = openai/model-a\n    b = openai/model-b\n    j = openai/judge\n"
        f"mcp_model_params =\n    a = {params}\n    b = {params}\n    j = {params}\n{extra}"
    )


@contextmanager
def model_server(script: dict[str, object], latency: float) -> Iterator[str]:
    """The scripted model server in its own process (so its CPU is not ours); yields its api_base."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(script, handle)
    proc = subprocess.Popen([PY, "-m", "pytest_mcpeval.testing", "--latency", str(latency), "--script", handle.name],
                            stdout=subprocess.PIPE, text=True, env=ENV)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.terminate()
        proc.wait()
        os.unlink(handle.name)


def pytest_run(root: Path, *args: str, env: dict[str, str] | None = None) -> tuple[float, float]:
    """``(wall seconds of the command, seconds pytest reports for the session)``."""
    started = time.perf_counter()
    done = subprocess.run([PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *args], cwd=root,
                          capture_output=True, text=True, env={**ENV, **(env or {})})
    wall = time.perf_counter() - started
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    match = re.search(r" in ([\d.]+)s", last)
    if done.returncode not in (0, 5) or match is None:
        sys.exit(f"pytest {' '.join(args)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    return wall, float(match.group(1))


def python_run(args: list[str], root: Path) -> dict[str, float]:
    """Python with ``args`` in a fresh interpreter (offline litellm); the script prints a JSON object of figures
    last."""
    started = time.perf_counter()
    done = subprocess.run([PY, *args], cwd=root, capture_output=True, text=True, env={**ENV, **OFFLINE})
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"benchmark script failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    figures["wall_s"] = wall
    return figures


# -- the bare loops (what litellm itself costs) ---------------------------------------------------------------

BARE_LOOP = """
import json, sys, time
from concurrent.futures import ThreadPoolExecutor, ProcessPoolExecutor
started = time.perf_counter()
if {plugin_import}:  # as the plugin imports it (the collector off): the efficiency section's reference
    from pytest_mcpeval.models.litellm_load import load_litellm
    load_litellm()
import litellm
imported = time.perf_counter()
from pytest_mcpeval.models.litellm_http import keep_alive_pool
# the plugin's HTTP client: litellm's default pool closes surplus idle connections, and httpcore 1.0.9 may close one
# it just handed out (encode/httpcore#1110): a "Connection error" that ended this loop (no retries) now and then
keep_alive_pool(litellm)
API_BASE, CASES, C, PROCESSES = {api_base!r}, {cases}, {concurrency}, {processes}
TOOLS = [{{"type": "function", "function": {{"name": t["name"], "description": t.get("description", ""),
          "parameters": t["inputSchema"]}}}} for t in json.load(open("evals/tools.json"))]

def call(model, i):
    tool = TOOLS[i % len(TOOLS)]["function"]["name"]
    litellm.completion(model=model, api_base=API_BASE, api_key="none", num_retries=0, temperature=0, tools=TOOLS,
                       messages=[{{"role": "user", "content": f"please use {{tool}} for request c{{i}}"}}])

def share(part, parts):
    # this process's calls: every model's calls, C // parts in flight per model (each model its own pool)
    pools = [ThreadPoolExecutor(max(1, C // parts)) for _ in ("a", "b")]
    futures = [pool.submit(call, f"openai/model-{{m}}", i) for i in range(part, CASES, parts)
               for m, pool in zip("ab", pools)]
    for future in futures:
        future.result()
    return len(futures)

if __name__ == "__main__":
    if PROCESSES == 1:
        made = share(0, 1)
    else:  # a process per core, each an ordinary thread-pool loop on its share of the calls
        import multiprocessing
        with ProcessPoolExecutor(PROCESSES, mp_context=multiprocessing.get_context("forkserver")) as pool:
            made = sum(pool.map(share, range(PROCESSES), [PROCESSES] * PROCESSES))
    done = time.perf_counter()
    print(json.dumps({{"calls": made, "import_s": imported - started, "loop_s": done - imported}}))
"""


def bare_loop(root: Path, api_base: str, cases: int, concurrency: int, processes: int = 1,
              plugin_import: bool = False) -> dict[str, float]:
    """The loop as a script file (a process pool's workers import the main module by its path)."""
    path = root / "bare_loop.py"
    path.write_text(BARE_LOOP.format(api_base=api_base, cases=cases, concurrency=concurrency, processes=processes,
                                     plugin_import=plugin_import))
    return python_run([str(path)], root)


NAIVE_LOOP = """
import json, time
import litellm
TOOLS = [{{"type": "function", "function": {{"name": t["name"], "description": t.get("description", ""),
          "parameters": t["inputSchema"]}}}} for t in json.load(open("evals/tools.json"))]
started = time.perf_counter()
for i in range({sample}):
    tool = TOOLS[i % len(TOOLS)]["function"]["name"]
    litellm.completion(model="openai/model-a", api_base={api_base!r}, api_key="none", num_retries=0, tools=TOOLS,
                       messages=[{{"role": "user", "content": f"please use {{tool}} for request c{{i}}"}}])
print(json.dumps({{"per_call_s": (time.perf_counter() - started) / {sample}}}))
"""


# -- the sections -----------------------------------------------------------------------------------------------

def ratio_row(name: str, value: float, target: float, detail: str, at_least: bool = True) -> Row:
    sign = ">=" if at_least else "<="
    ok = value >= target if at_least else value <= target
    return Row(name, f"{value:.2f} ({detail})", f"{sign} {target:g}", ok)


IMPORT_TIME = """
import json, time
started = time.perf_counter()
from pytest_mcpeval.models import litellm_client
litellm_client.load_litellm()  # as the plugin imports it: the garbage collector off, then its objects frozen
print(json.dumps({"import_s": time.perf_counter() - started}))
"""


def efficiency(sizes: Sizes, work: Path, extra: tuple[str, ...] = ()) -> Iterator[Row]:
    tools = catalog(sizes.tools)
    n, c = sizes.cases, sizes.concurrency
    root = work / "efficiency"
    script = write_cases(root, n, sizes.files, tools)
    imported = min(python_run(["-c", IMPORT_TIME], root)["import_s"] for _ in range(sizes.repeats))
    yield Row("efficiency: import litellm as the plugin does (a model call waits for it; it overlaps the collection)",
              f"{imported:.2f} s, best of {sizes.repeats}")
    modes: list[tuple[str, tuple[str, ...]]] = [("", ())] + ([(", -n 2", ("-n", "2"))] if sizes.xdist else [])
    for latency in sizes.latencies:
        target = 0.95 if latency >= 2 else 0.9
        with model_server(script, latency) as api_base:
            write_ini(root, api_base)
            for label, xdist in modes:
                wall, session = pytest_run(root, "--mcp-models=a,b", "--mcp-record=off", f"--mcp-concurrency={c}",
                                           *xdist, *extra)
                ideal = n * latency / c
                # no run can beat: the import before the first call, then whole waves of C calls of L each
                bound = ideal / (imported + -(-n // c) * latency)
                yield ratio_row(f"efficiency: {n} cases x 2 models, {sizes.tools} tools, L={latency:g} s, C={c}{label}",
                                ideal / session, target,
                                f"ideal {ideal:.2f} s / evaluation {session:.2f} s; wall {wall:.2f} s, "
                                f"{ideal / wall:.2f} of it; at most {bound:.2f} after the import")
            # what litellm itself reaches: the same calls from a bare thread-pool loop, litellm imported as the
            # plugin imports it, timed from the start of its import to its last answer
            bare = bare_loop(root, api_base, n, c, plugin_import=True)
            yield Row(f"efficiency: bare litellm loop, the same calls, L={latency:g} s (reference)",
                      f"{ideal / (bare['import_s'] + bare['loop_s']):.2f} (ideal {ideal:.2f} s / import "
                      f"{bare['import_s']:.2f} s + calls {bare['loop_s']:.2f} s)")


def replay(sizes: Sizes, work: Path) -> Iterator[Row]:
    n = sizes.replay_cases
    root = work / "replay"
    tools = catalog(10_000)
    script = write_cases(root, n, 1, tools, prefix="r")
    with model_server(script, 0.0) as api_base:
        write_ini(root, api_base)
        pytest_run(root, "--mcp-models=a", "--mcp-concurrency=32")  # records (mode new)
    # beside the replay's project, not in it: inside it, the replay also collected and ran the trivial tests (2,000
    # tests against 1,000, from f42cebc until this was found)
    plain = work / "replay-plain"
    plain.mkdir(exist_ok=True)
    (plain / "test_trivial.py").write_text("".join(f"def test_{i}():\n    assert True\n" for i in range(n)))
    (plain / "pytest.ini").write_text("[pytest]\n")
    # in alternation, so that a shared machine's slow minutes weigh on both (one block after the other once gave
    # the trivial tests 1.37 s where they take 0.95 s, and a ratio of 1.46 for a replay at 1.9)
    times, trivial = [], []
    for _ in range(2 * sizes.repeats - 1):
        times.append(pytest_run(root, "--mcp-models=a", "--mcp-record=none")[0])
        trivial.append(pytest_run(plain, "-p", "no:mcpeval")[0])
    probe = root / "conftest.py"
    probe.write_text(IMPORT_PROBE)
    pytest_run(root, "--mcp-models=a", "--mcp-record=none")
    heavy = json.loads((root / "imported.json").read_text())
    probe.unlink()
    ours, baseline = min(times), min(trivial)
    yield ratio_row(f"replay: {n} cached cases, {len(tools)}-tool catalog / {n} trivial tests", ours / baseline, 1.5,
                    f"{ours:.2f} s vs {baseline:.2f} s, best of {len(times)} in alternation", at_least=False)
    yield Row("replay: model libraries imported by the replay", ", ".join(heavy) or "none", "none", not heavy)


# written as the replay project's conftest.py: which model libraries the session imported, at its end
IMPORT_PROBE = """
import json, sys
HEAVY = ("litellm", "openai", "tiktoken", "tokenizers", "transformers", "torch", "sentence_transformers")
def pytest_unconfigure(config):
    found = sorted(m for m in HEAVY if m in sys.modules)
    (config.rootpath / "imported.json").write_text(json.dumps(found))
"""


def flows(sizes: Sizes, work: Path) -> Iterator[Row]:
    n, c = sizes.flows, sizes.concurrency
    latency = sizes.flow_latency
    root = work / "flows"
    script = write_flows(root, n, catalog(sizes.tools))
    with model_server(script, latency) as api_base:
        write_ini(root, api_base, f"mcp_concurrency =\n    j = {c}\n")
        wall, session = pytest_run(root, "--mcp-models=a", "--mcp-judge-model=j", "--mcp-record=off",
                                   f"--mcp-concurrency={c}")
    ideal = n * 4 * latency / c
    yield ratio_row(f"flows: {n} flows x 4 turns + a judged claim each, L={latency:g} s, C={c}", ideal / session, 0.85,
                    f"ideal {ideal:.2f} s / evaluation {session:.2f} s; wall {wall:.2f} s")


def collect(sizes: Sizes, work: Path) -> Iterator[Row]:
    root = work / "collect"
    write_cases(root, sizes.collect_cases, sizes.collect_files, catalog(sizes.tools))
    write_ini(root, "http://127.0.0.1:9/v1")
    walls = [pytest_run(root, "--collect-only", "--mcp-models=a") for _ in range(sizes.repeats)]
    wall, session = min(walls)
    yield ratio_row(f"collect: --collect-only of {sizes.collect_cases:,} cases in {sizes.collect_files} files", wall,
                    3.0, f"wall, best of {sizes.repeats}; pytest says {session:.2f} s", at_least=False)


def report(sizes: Sizes) -> Iterator[Row]:
    from pytest_mcpeval.gate.thresholds import catalog_failures, check_names, evaluate, parse_threshold
    from pytest_mcpeval.redact import Redactor
    from pytest_mcpeval.report.model import build_report

    n = sizes.report_results
    rng = random.Random(7)
    tools = [f"tool_{i}" for i in range(40)]
    labels = [*tools, "(none)"]
    results: list[dict[str, object]] = []
    for i in range(n):
        expected = rng.choice(labels)
        called = expected if rng.random() < 0.8 else rng.choice(labels)
        correct = expected == called
        args: dict[str, object] | None = {
            "malformed": None, "hallucinated": [], "missing_required": [], "missing_expected": [], "unexpected": [],
            "mismatched": [], "hallucination": rng.random() < 0.05, "all_required": True, "all_expected": True,
            "exact": rng.random() < 0.9} if correct and expected != "(none)" else None
        results.append({"file": "bench.mcpeval.yaml", "line": i, "id": f"c{i}", "model": f"m{i % 2}", "repeat": 0,
                        "tags": [], "error": None,
                        "expected": [] if expected == "(none)" else [{"tool": expected}], "expected_label": expected,
                        "called": [] if called == "(none)" else [{"tool": called, "args": {}}],
                        "called_label": called, "correct": correct, "passed": correct, "arguments": args,
                        "diagnosis": None if correct else "wrong_tool", "catalog": "x",
                        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "cost_usd": 0.0001, "cached": False,
                                  "attempts": 1}, "latency_s": 0.2})
    catalogs = {"x": {"server": "tools_file: tools.json", "tokens": 40 * 120,
                      "tools": {t: {"hash": f"{i:016x}", "description": t, "tokens": 120}
                                for i, t in enumerate(tools)}}}
    thresholds = [parse_threshold(line, "bench") for line in
                  ("accuracy >= 0.7", "macro_f1 >= 0.6", "f1[tool_3] >= 0.5", "hallucination_rate <= 0.1")]
    build_report(results[:100], catalogs, ["m0", "m1"])  # type: ignore[arg-type]  # imports (numpy, scipy) apart
    redactor = Redactor.for_run([{"api_key": "sk-not-a-real-key-0123456789"}])
    started = time.perf_counter()
    results = [redactor.data([r])[0] for r in results]  # as each case's results are made, during the run
    per_case = (time.perf_counter() - started) / n
    times: list[float] = []
    redacting: list[float] = []
    for _ in range(sizes.repeats):
        started = time.perf_counter()
        built = build_report(results, catalogs, ["m0", "m1"])  # type: ignore[arg-type]
        failures = check_names(thresholds, set(tools), {"m0", "m1"}) + evaluate(thresholds, built["models"])
        failures += catalog_failures(catalogs, 10_000)  # type: ignore[arg-type]
        gated = time.perf_counter()
        redactor.data({k: v for k, v in built.items() if k != "cases"})  # what the session masks at its end
        times.append(time.perf_counter() - started)
        redacting.append(time.perf_counter() - gated)
    best = times.index(min(times))
    yield ratio_row(f"report: build, gate and redact the report of {n:,} case results", times[best], 1.0,
                    f"seconds, best of {sizes.repeats}, of which redaction {redacting[best]:.3f} s; "
                    f"{len(failures)} gate failures; each case masked as it is made: {per_case * 1e6:.0f} us",
                    at_least=False)


def startup(sizes: Sizes, work: Path) -> Iterator[Row]:
    root = work / "startup"
    root.mkdir(parents=True, exist_ok=True)
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "test_some.py").write_text("def test_a():\n    pass\n")
    runs = 2 * sizes.repeats - 1
    with_plugin = statistics.median(pytest_run(root, "--collect-only")[0] for _ in range(runs))
    without = statistics.median(pytest_run(root, "--collect-only", "-p", "no:mcpeval")[0] for _ in range(runs))
    yield Row("startup: --collect-only without benchmark files, plugin vs -p no:mcpeval",
              f"{with_plugin - without:+.3f} s ({with_plugin:.2f} s vs {without:.2f} s, median of {runs})", "<= +0.3 s",
              with_plugin - without <= 0.3)


def naive(sizes: Sizes, work: Path) -> Iterator[Row]:
    tools = catalog(sizes.tools)
    n, c = sizes.cases, sizes.concurrency
    latency = sizes.naive_latency
    root = work / "naive"
    script = write_cases(root, n, sizes.files, tools)
    with model_server(script, latency) as api_base:
        write_ini(root, api_base)
        sample = python_run(["-c", NAIVE_LOOP.format(api_base=api_base, sample=sizes.naive_sample)], root)
        ours, _ = pytest_run(root, "--mcp-models=a,b", "--mcp-record=off", f"--mcp-concurrency={c}")
    loop = sample["per_call_s"] * 2 * n
    yield Row(f"naive: a sequential loop vs the plugin, {n} cases x 2 models, L={latency:g} s",
              f"{loop / ours:.1f}x slower ({sample['per_call_s'] * 1000:.0f} ms/call x {2 * n} calls = {loop:.0f} s, "
              f"from {sizes.naive_sample} calls; ours {ours:.2f} s)")


# -- the core section: the plugin against a bare litellm async loop, wall time and CPU per call ------------------

# Runs a command and writes, to the JSON file named first, the command's wall time (its start to its exit) and the
# CPU (user + sys) of it and of every process it started, to the last one: this process is their reaper
# (PR_SET_CHILD_SUBREAPER), so a descendant whose parent ended first (a pool's worker, a fork server, an xdist
# worker) is still waited for here, and counted.  The scripted model server is started by the bench, outside it.
REAPER = """
import ctypes, glob, json, os, resource, signal, subprocess, sys, time
if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
    sys.exit("prctl(PR_SET_CHILD_SUBREAPER) failed: the CPU of orphaned descendants would be lost")
out, command = sys.argv[1], sys.argv[2:]
started = time.perf_counter()
code = subprocess.call(command)
wall = time.perf_counter() - started
late = killed = 0
deadline = time.monotonic() + 60
while True:
    try:
        pid, _ = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        break
    if pid:
        late += 1  # a descendant that outlived its parent, reaped here after the command ended
    elif time.monotonic() < deadline:
        time.sleep(0.05)
    else:  # still running a minute after the command ended: ended here, and said
        for listing in glob.glob(f"/proc/{os.getpid()}/task/*/children"):
            for left in open(listing).read().split():
                os.kill(int(left), signal.SIGKILL)
                killed += 1
        deadline = float("inf")
used = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(out, "w") as handle:
    json.dump({"code": code, "wall_s": wall, "cpu_s": used.ru_utime + used.ru_stime, "sys_s": used.ru_stime,
               "late": late, "killed": killed}, handle)
"""


def measured(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str],
                                                                          dict[str, float]]:
    """``command`` run under :data:`REAPER`: its output, and its wall time, exit code and CPU with all its
    descendants' (``wall_s``, ``code``, ``cpu_s``, of which in the kernel ``sys_s``; ``late``/``killed``:
    descendants that outlived it)."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        out = Path(handle.name)
    try:
        done = subprocess.run([PY, "-c", REAPER, str(out), *command], cwd=cwd, capture_output=True, text=True,
                              env=env)
        if done.returncode != 0 or not out.read_text():
            sys.exit(f"measuring {' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
        figures: dict[str, float] = json.loads(out.read_text())
    finally:
        out.unlink()
    return done, figures


# The floor of issue 33: what one event loop per process achieves with litellm's async API, as a user writes it
# (asyncio.gather over every call, a semaphore of C per model).  litellm is imported as the plugin imported it at
# 79faf0b (models/litellm_load.py: the offline switches, the collector off during the import, its objects then
# frozen), written out here so that the reference stays the same whatever the plugin's core becomes.  A failed
# call is made again (at most twice) and counted, so that a flaky connection cannot end the reference.
BARE_ASYNC = """
import gc, json, os, time
started, cpu_started = time.perf_counter(), os.times()
gc.disable()
import litellm
gc.enable()
gc.freeze()
import asyncio
API_BASE, CASES, C = {api_base!r}, {cases}, {concurrency}
TOOLS = [{{"type": "function", "function": {{"name": t["name"], "description": t.get("description", ""),
          "parameters": t["inputSchema"]}}}} for t in json.load(open("evals/tools.json"))]
imported, cpu_imported = time.perf_counter(), os.times()

async def call(model, i, limit):
    tool = TOOLS[i % len(TOOLS)]["function"]["name"]
    async with limit:
        for again in range(3):
            try:
                await litellm.acompletion(
                    model=model, api_base=API_BASE, api_key="none", num_retries=0, timeout=120, temperature=0,
                    tools=TOOLS, messages=[{{"role": "user", "content": f"please use {{tool}} for request c{{i}}"}}])
                return again
            except Exception:
                if again == 2:
                    raise

async def main():
    limits = {{m: asyncio.Semaphore(C) for m in "ab"}}
    again = await asyncio.gather(*(call(f"openai/model-{{m}}", i, limits[m]) for i in range(CASES) for m in "ab"))
    return sum(again), len(again), time.perf_counter(), os.times()

again, made, done, cpu_done = asyncio.run(main())
cpu = lambda t: t.user + t.system
print(json.dumps({{"calls": made, "again": again, "import_s": imported - started, "loop_s": done - imported,
                  "cpu_import_s": cpu(cpu_imported) - cpu(cpu_started),
                  "cpu_loop_s": cpu(cpu_done) - cpu(cpu_imported)}}))
"""


def bare_async_loop(root: Path, api_base: str, cases: int, concurrency: int) -> dict[str, float]:
    """:data:`BARE_ASYNC` in a fresh interpreter (offline litellm) under :func:`measured`: the script's own
    figures and the process's ``wall_s``, ``cpu_s``."""
    path = root / "bare_async.py"
    path.write_text(BARE_ASYNC.format(api_base=api_base, cases=cases, concurrency=concurrency))
    done, figures = measured([PY, str(path)], root, {**ENV, **OFFLINE})
    if figures["code"] != 0:
        sys.exit(f"the bare async loop failed ({figures['code']}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return {**json.loads(done.stdout.strip().splitlines()[-1]), **figures}


# The floor of any plugin that makes each call a pytest item: the same calls on one event loop (a thread, as the
# plugin's), all submitted when collection ends, one parametrized test per call waiting for its answer; litellm
# imported as in BARE_ASYNC.  What it costs beyond BARE_ASYNC is pytest's own per-item protocol (setup, call,
# teardown, reports, capture, logging), which no plugin can take back; what the plugin costs beyond it is its own.
BARE_PYTEST_CONFTEST = """
import asyncio, gc, json, threading
gc.disable()
import litellm
gc.enable()
gc.freeze()
import pytest
API_BASE, C = {api_base!r}, {concurrency}
TOOLS = [{{"type": "function", "function": {{"name": t["name"], "description": t.get("description", ""),
          "parameters": t["inputSchema"]}}}} for t in json.load(open({tools!r}))]
LOOP = asyncio.new_event_loop()
threading.Thread(target=LOOP.run_forever, daemon=True).start()
FUTURES = {{}}

async def call(model, i, limit):
    tool = TOOLS[i % len(TOOLS)]["function"]["name"]
    async with limit:
        for again in range(3):
            try:
                return await litellm.acompletion(
                    model=model, api_base=API_BASE, api_key="none", num_retries=0, timeout=120, temperature=0,
                    tools=TOOLS, messages=[{{"role": "user", "content": f"please use {{tool}} for request c{{i}}"}}])
            except Exception:
                if again == 2:
                    raise

async def limits():
    return {{m: asyncio.Semaphore(C) for m in "ab"}}

def pytest_collection_finish(session):
    per_model = asyncio.run_coroutine_threadsafe(limits(), LOOP).result()
    for item in session.items:
        m, i = item.callspec.params["m"], item.callspec.params["i"]
        FUTURES[m, i] = asyncio.run_coroutine_threadsafe(call(f"openai/model-{{m}}", i, per_model[m]), LOOP)

@pytest.fixture
def answer(request):
    params = request.node.callspec.params
    return FUTURES[params["m"], params["i"]].result()
"""
BARE_PYTEST_TEST = """
import pytest

@pytest.mark.parametrize("i", range({cases}))
@pytest.mark.parametrize("m", "ab")
def test_call(m, i, answer):
    assert answer.choices
"""


def bare_pytest_items(root: Path, api_base: str, cases: int, concurrency: int) -> dict[str, float]:
    """pytest (the plugin not loaded) running :data:`BARE_PYTEST_TEST`: one item per call, the calls made as
    :data:`BARE_PYTEST_CONFTEST` says; ``wall_s``, ``cpu_s`` as :func:`pytest_measured` gives them."""
    project = root.parent / f"{root.name}-bare-pytest"  # beside the plugin's project: not collected by its runs
    project.mkdir(exist_ok=True)
    (project / "pytest.ini").write_text("[pytest]\n")
    (project / "conftest.py").write_text(BARE_PYTEST_CONFTEST.format(
        api_base=api_base, concurrency=concurrency, tools=str(root / "evals" / "tools.json")))
    (project / "test_calls.py").write_text(BARE_PYTEST_TEST.format(cases=cases))
    return pytest_measured(project, "-p", "no:mcpeval", env={**ENV, **OFFLINE})


def pytest_measured(root: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, float]:
    """pytest with ``args`` under :func:`measured`: ``wall_s``, ``cpu_s`` (pytest and every process it started)
    and ``session_s``, the seconds pytest reports."""
    command = [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *args]
    done, figures = measured(command, root, env or ENV)
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    match = re.search(r" in ([\d.]+)s", last)
    if figures["code"] not in (0, 5) or match is None:
        sys.exit(f"pytest {' '.join(args)} failed ({figures['code']}):\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    return {**figures, "session_s": float(match.group(1))}


WALL_FIGURES = ("wall_s", "session_s", "import_s", "loop_s")  # a run's time; the rest of its figures are CPU
COUNTS = ("again", "late", "killed")  # what went wrong: the worst of the runs, never hidden by a better one


def best(runs: list[dict[str, float]]) -> dict[str, float]:
    """Of one command's runs in alternation: the time figures of its quickest run, the CPU figures of its run of
    least CPU, and the worst of its counts."""
    quickest = min(runs, key=lambda run: run["wall_s"])
    chosen = dict(min(runs, key=lambda run: run["cpu_s"]))
    chosen.update({key: quickest[key] for key in WALL_FIGURES if key in quickest})
    chosen.update({key: max(run[key] for run in runs) for key in COUNTS if key in chosen})
    return chosen


def core(sizes: Sizes, work: Path) -> Iterator[Row]:
    tools = catalog(sizes.tools)
    n, c = sizes.cases, sizes.concurrency
    root = work / "core"
    script = write_cases(root, n, sizes.files, tools)
    flags = ["--mcp-models=a,b", "--mcp-record=off", f"--mcp-concurrency={c}"]
    how = ""
    calls = 2 * n

    def cpu_ms(figures: dict[str, float]) -> float:
        return figures["cpu_s"] / calls * 1000

    for latency in sizes.core_latencies:
        what = f"{n} cases x 2 models, {sizes.tools} tools, C={c}, L={latency:g} s"
        # in alternation, round after round, each figure the best of its rounds: one run of the bare loop once took
        # 7.2 ms of CPU a call and 9.4 ms in the next, so the ratio of single runs was the machine's as much as ours
        rounds: list[tuple[dict[str, float], ...]] = []
        with model_server(script, latency) as api_base:
            write_ini(root, api_base)
            for _ in range(sizes.core_repeats):
                rounds.append((bare_async_loop(root, api_base, n, c), bare_pytest_items(root, api_base, n, c),
                               pytest_measured(root, *flags))
                              + ((pytest_measured(root, *flags, "-n", "2"),)
                                 if sizes.xdist and latency == sizes.core_xdist_latency else ()))
        bare, items, ours = (best([r[i] for r in rounds]) for i in range(3))
        spread = best([r[3] for r in rounds]) if len(rounds[0]) > 3 else None
        if len(rounds) > 1:
            how = f", best of {len(rounds)} in alternation"
        yield Row(f"core: bare litellm async loop, {what} (reference)",
                  f"wall {bare['wall_s']:.2f} s (import {bare['import_s']:.2f} s, its end to the last answer "
                  f"{bare['loop_s']:.2f} s); CPU {cpu_ms(bare):.2f} ms a call ({bare['cpu_s']:.2f} s / {calls}; "
                  f"the calls {bare['cpu_loop_s'] / calls * 1000:.2f} ms, its import {bare['cpu_import_s']:.2f} s)"
                  + (f"; {bare['again']:.0f} calls made again" if bare["again"] else ""))
        yield Row(f"core: bare pytest items / bare async loop, {what} (pytest's own cost, a figure)",
                  f"wall {items['wall_s'] / bare['wall_s']:.2f}, CPU per call {cpu_ms(items) / cpu_ms(bare):.2f} "
                  f"({cpu_ms(items):.2f} ms / {cpu_ms(bare):.2f} ms)")
        yield Row(f"core: plugin / bare pytest items, L={latency:g} s (the plugin's own cost, a figure)",
                  f"wall {ours['wall_s'] / items['wall_s']:.2f}, CPU per call {cpu_ms(ours) / cpu_ms(items):.2f} "
                  f"({cpu_ms(ours):.2f} ms / {cpu_ms(items):.2f} ms)")
        runs = [("plugin", how, ours)] + ([("plugin -n 2", how, spread)] if spread else [])
        for label, flag, run in runs:
            where = f"L={latency:g} s{flag}"
            detail = (f"{run['wall_s']:.2f} s / {bare['wall_s']:.2f} s; evaluation {run['session_s']:.2f} s"
                      + (f"; {run['late']:.0f} processes outlived pytest" if run["late"] else "")
                      + (f", {run['killed']:.0f} killed a minute after" if run["killed"] else ""))
            ratio = run["wall_s"] / bare["wall_s"]
            target = 1.0 if spread is run else 1.05 if latency >= 1 else None
            name = f"core: {label} wall / bare async loop wall, {where}"
            yield (ratio_row(name, ratio, target, detail, at_least=False) if target
                   else Row(name, f"{ratio:.2f} ({detail})"))
            name = f"core: {label} CPU per call / bare async loop's, {where}"
            detail = (f"{cpu_ms(run):.2f} ms / {cpu_ms(bare):.2f} ms; {run['cpu_s']:.2f} s of CPU in all, "
                      f"{bare['cpu_s']:.2f} s; in the kernel {run['sys_s']:.2f} s, {bare['sys_s']:.2f} s")
            ratio = cpu_ms(run) / cpu_ms(bare)
            yield (Row(name, f"{ratio:.2f} ({detail})") if spread is run
                   else ratio_row(name, ratio, 1.1, detail, at_least=False))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the smallest sizes: checks that every section runs")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated sections ({', '.join(SECTIONS)})")
    parser.add_argument("--extra", default="", help="more pytest arguments for the efficiency runs")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="change one size, e.g. --set cases=300 --set latencies=1,2 --set xdist=0")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    for assignment in args.set:
        name, _, value = assignment.partition("=")
        current: object = getattr(sizes, name, None)
        if current is None:
            parser.error(f"--set {assignment}: no size {name!r}; expected one of {', '.join(vars(sizes))}")
        parsed: Any = (tuple(float(v) for v in value.split(",")) if isinstance(current, tuple)
                       else bool(int(value)) if isinstance(current, bool) else type(current)(value))  # type: ignore[call-arg]
        sizes = replace(sizes, **{name: parsed})
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in SECTIONS]
    if unknown:
        parser.error(f"unknown section {', '.join(unknown)}; expected some of {', '.join(SECTIONS)}")
    sections: dict[str, Callable[[Path], Iterator[Row]]] = {
        "efficiency": lambda work: efficiency(sizes, work, tuple(args.extra.split())),
        "core": lambda work: core(sizes, work),
        "replay": lambda work: replay(sizes, work),
        "flows": lambda work: flows(sizes, work),
        "collect": lambda work: collect(sizes, work),
        "report": lambda work: report(sizes),
        "startup": lambda work: startup(sizes, work),
        "naive": lambda work: naive(sizes, work),
    }
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    if args.quick:
        print("--quick: every section at its smallest size, to check that it runs; its figures mean nothing")
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in chosen:
            for row in sections[name](Path(tmp)):
                rows.append(row)
                met = "-" if row.ok is None else "met" if row.ok else "NOT MET"
                print(f"  {row.name}: {row.measured}  [{row.target}: {met}]", flush=True)
    width = max(len(r.name) for r in rows)
    print(f"\n{'benchmark':<{width}}  {'target':<10}  {'met':<4}  measured")
    for r in rows:
        print(f"{r.name:<{width}}  {r.target:<10}  {'-' if r.ok is None else 'yes' if r.ok else 'NO':<4}  {r.measured}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
