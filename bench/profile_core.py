"""Where the CPU of a model run goes, beside the bare litellm async loop of bench.py's core section.

    .venv/bin/python bench/profile_core.py                     # 1000 cases x 2 models, 40 tools, C=32, L=0.2 s
    .venv/bin/python bench/profile_core.py --cases 200 --latency 1 --extra=--mcp-processes=0 --keep /tmp/prof

Both run once under py-spy (``record --gil``: 200 samples a second of the thread that holds the GIL, so of the
CPU that Python code uses; not installed in the venv: ``pip install --target /tmp/pyspy py-spy`` and give
``--py-spy /tmp/pyspy/bin/py-spy``), the scripted model server apart: the plugin as ``pytest`` with its calls in
the pytest process (``--mcp-processes=0`` where that option exists, or give ``--extra``), and bench.py's bare
async loop; each also once unprofiled, for its CPU (the whole process tree, as bench.py's core section measures
it), and the profiled runs count the garbage collector's passes and time (``gc.callbacks``).  A function's own
time (a builtin's is its Python caller's) is grouped by where it lives (litellm, the openai SDK, the HTTP stack,
pydantic, pytest, the plugin's modules, threading, asyncio, the standard library's modules).  Each group's share
of the samples times the process's unprofiled CPU in user space gives ms per call (2N calls): what each group costs the
plugin, what the bare loop pays for the same, and the difference.  (cProfile was tried first: with a per-thread
CPU timer it inflated the CPU 4-5x, the many small calls most; with its default wall-clock timer a thread's
functions are charged for its waits for the GIL.)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bench

# imported by each run (``-p mcpeval_gc``, or the bare loop's runner below): the garbage collector's passes by
# generation and their time, and the main thread's CPU, written out at exit (atexit, registered first: runs last)
GC_METER = """
import atexit, gc, json, os, time

_gc = {"s": 0.0, "n": [0, 0, 0], "at": 0.0}
_main_started = time.thread_time()  # imported on the main thread


def _collected(phase, info):
    if phase == "start":
        _gc["at"] = time.perf_counter()
    else:
        _gc["s"] += time.perf_counter() - _gc["at"]
        _gc["n"][info["generation"]] += 1


def _dump():
    with open(os.environ["MCPEVAL_GC_OUT"], "w") as handle:
        json.dump({"gc_s": _gc["s"], "gc_n": _gc["n"], "main_s": time.thread_time() - _main_started}, handle)


atexit.register(_dump)
gc.callbacks.append(_collected)
"""

# the bare loop with the same meter: imported first, then the loop's script as __main__
RUN_METERED = "import sys, runpy, mcpeval_gc; runpy.run_path(sys.argv[1], run_name='__main__')"

# where a function lives -> its group; the first match wins
GROUPS = (
    ("/pytest_mcpeval/", "plugin"),
    ("/litellm/", "litellm"),
    ("/openai/", "openai SDK"),
    ("/pydantic/", "pydantic"), ("/pydantic_core/", "pydantic"),
    ("/httpx/", "HTTP stack"), ("/httpcore/", "HTTP stack"), ("/h11/", "HTTP stack"), ("/anyio/", "HTTP stack"),
    ("/aiohttp/", "HTTP stack"), ("/yarl/", "HTTP stack"), ("/multidict/", "HTTP stack"), ("/ssl.py", "HTTP stack"),
    ("/http/", "HTTP stack"), ("/socket.py", "HTTP stack"), ("/selectors.py", "HTTP stack"),
    ("/_pytest/", "pytest"), ("/pytest/", "pytest"), ("/pluggy/", "pytest"), ("/xdist/", "pytest"),
    ("/execnet/", "pytest"),
    ("/tiktoken", "tiktoken"),
    ("/threading.py", "threading"), ("/concurrent/", "threading"), ("/queue.py", "threading"),
    ("/contextvars", "threading"),
    ("/asyncio/", "asyncio"),
    ("importlib", "imports"), ("<frozen", "imports"),
    ("/json/", "json"), ("/logging/", "logging"), ("/copy.py", "copy"),
    ("/site-packages/", "other packages"),
)


def group(where: tuple[str, int, str]) -> str:
    path = where[0]
    for part, name in GROUPS:
        if part in path:
            return f"plugin: {path.split('/pytest_mcpeval/', 1)[1]}" if name == "plugin" else name
    if "/lib/python3" in path:  # the standard library, by module
        return "stdlib: " + path.split("/lib/python3", 1)[1].split("/", 2)[1].removesuffix(".py")
    return "other"


Where = tuple[str, int, str]  # a function: its file, first line, name


@dataclass
class Profile:
    """py-spy's samples by stack (outermost first), the thread's name its first entry; the collector's figures."""

    stacks: list[tuple[tuple[Where, ...], float]]
    gc_s: float
    gc_n: list[int]

    @classmethod
    def read(cls, raw: Path, gc_meter: Path) -> Profile:
        stacks = []
        for line in raw.read_text().splitlines():
            frames, _, count = line.rpartition(" ")
            if not frames:
                continue
            thread, *rest = frames.split(";")
            name = thread.partition(": ")[2].rstrip("0123456789").rstrip("_-") or "(unnamed)"
            stack = [("thread", 0, name)]
            for frame in rest:
                function, _, where = frame.rpartition(" (")
                path = where.rstrip(")").rpartition(":")[0]
                stack.append((path, 0, function))
            stacks.append((tuple(stack), float(count)))
        metered = json.loads(gc_meter.read_text())
        return cls(stacks, metered["gc_s"], metered["gc_n"])

    def scaled(self, scale: float, main: float | None = None) -> Profile:
        """The samples made CPU seconds: each worth ``scale``, or the main thread's ``main``."""
        stacks = [(stack, count * (main if main is not None and stack[0][2] == "MainThread" else scale))
                  for stack, count in self.stacks]
        return Profile(stacks, self.gc_s, self.gc_n)

    def threads(self) -> dict[str, float]:
        out: dict[str, float] = defaultdict(float)
        for stack, count in self.stacks:
            out[stack[0][2]] += count
        return out

    @property
    def total(self) -> float:
        return sum(cpu for _, cpu in self.stacks)

    def own(self) -> dict[Where, float]:
        """CPU by the innermost Python function (a builtin's time is its caller's)."""
        out: dict[Where, float] = defaultdict(float)
        for stack, cpu in self.stacks:
            out[stack[-1]] += cpu
        return out

    def cumulative(self) -> dict[Where, float]:
        out: dict[Where, float] = defaultdict(float)
        for stack, cpu in self.stacks:
            for where in set(stack):
                out[where] += cpu
        return out

    def groups(self) -> dict[str, float]:
        out: dict[str, float] = defaultdict(float)
        for where, cpu in self.own().items():
            out[group(where)] += cpu
        return out

    def imports(self) -> float:
        """CPU under the import system."""
        return sum(cpu for stack, cpu in self.stacks if any(where[2] == "_find_and_load" for where in stack))


def top(found: dict[Where, float], keep: Any, count: int) -> list[tuple[float, str]]:
    rows = sorted(((cpu, where) for where, cpu in found.items() if keep(where)), reverse=True)
    return [(cpu, label(where)) for cpu, where in rows[:count]]


def label(where: Where) -> str:
    path, _, name = where
    for cut in ("/site-packages/", "/lib/python3.11/", "/pytest_mcpeval/"):
        if cut in path:
            path = ("pytest_mcpeval/" if cut == "/pytest_mcpeval/" else "") + path.split(cut, 1)[1]
            break
    return f"{path}({name})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--tools", type=int, default=40)
    parser.add_argument("--extra", default=None,
                        help="pytest arguments for the plugin's run (default: --mcp-processes=0 where it exists)")
    parser.add_argument("--py-spy", default=shutil.which("py-spy"), help="py-spy's executable (default: on PATH)")
    parser.add_argument("--rate", type=int, default=200, help="py-spy's samples a second")
    parser.add_argument("--top", type=int, default=25, help="rows of each list")
    parser.add_argument("--keep", type=Path, help="a folder to keep py-spy's raw samples in")
    args = parser.parse_args(argv)
    if not args.py_spy or not Path(args.py_spy).exists():
        parser.error("py-spy not found: install it apart from the venv (pip install --target /tmp/pyspy py-spy) and "
                     "give --py-spy /tmp/pyspy/bin/py-spy")
    n, c, calls = args.cases, args.concurrency, 2 * args.cases
    spy = [args.py_spy, "record", "--gil", "--threads", "--full-filenames", "-r", str(args.rate), "-f", "raw", "-o"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        script = bench.write_cases(root, n, 1, bench.catalog(args.tools))
        (root / "mcpeval_gc.py").write_text(GC_METER)
        bench.write_ini(root, "http://127.0.0.1:9/v1")
        if args.extra is None:
            helped = subprocess.run([bench.PY, "-m", "pytest", "--help"], cwd=root, capture_output=True, text=True,
                                    env=bench.ENV)
            args.extra = "--mcp-processes=0" if "--mcp-processes" in helped.stdout else ""
        flags = ["--mcp-models=a,b", "--mcp-record=off", f"--mcp-concurrency={c}", *args.extra.split()]
        pytest = [bench.PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
        env = {**bench.ENV, "PYTHONPATH": f"{root}:{bench.ENV['PYTHONPATH']}"}
        with bench.model_server(script, args.latency) as api_base:
            bench.write_ini(root, api_base)
            metered = {**bench.ENV, "PYTHONPATH": env["PYTHONPATH"], "MCPEVAL_GC_OUT": str(root / "plain.gc")}
            plain = bench.pytest_measured(root, *flags, "-p", "mcpeval_gc", env=metered)
            plain_main = json.loads((root / "plain.gc").read_text())["main_s"]
            bare = bench.bare_async_loop(root, api_base, n, c)
            runs = (("plugin", [*pytest, "-p", "mcpeval_gc", *flags], env),
                    ("bare", [bench.PY, "-c", RUN_METERED, str(root / "bare_async.py")], {**env, **bench.OFFLINE}))
            for name, command, run_env in runs:
                done = subprocess.run([*spy, str(root / f"{name}.raw"), "--", *command], cwd=root, capture_output=True,
                                      text=True, env={**run_env, "MCPEVAL_GC_OUT": str(root / f"{name}.gc")})
                if done.returncode != 0:
                    sys.exit(f"the profiled {name} run failed ({done.returncode}):\n{done.stdout[-3000:]}\n"
                             f"{done.stderr[-2000:]}")
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            for name in ("plugin.raw", "bare.raw"):
                shutil.copy(root / name, args.keep / name)
        ours = Profile.read(root / "plugin.raw", root / "plugin.gc")
        theirs = Profile.read(root / "bare.raw", root / "bare.gc")

    def ms(seconds: float) -> str:
        return f"{seconds / calls * 1000:7.2f}"

    # a sample stands for its share of the process's unprofiled CPU in user space (the Python code's; what it spent
    # in the kernel, system calls and thread switches, is printed apart); the plugin's main thread for its share of
    # that thread's own unprofiled CPU, the other threads for theirs of the rest: the GIL's holder is sampled even
    # while the machine's other work preempts it, which weighed the main thread twice its CPU in a loaded run
    samples, main_samples = ours.total, ours.threads().get("MainThread", 0.0)
    user, bare_user = plain["cpu_s"] - plain["sys_s"], bare["cpu_s"] - bare["sys_s"]
    ours = ours.scaled((user - plain_main) / (samples - main_samples), plain_main / main_samples)
    theirs_samples = theirs.total
    theirs = theirs.scaled(bare_user / theirs_samples)
    print(f"{n} cases x 2 models = {calls} calls, {args.tools} tools, C={c}, L={args.latency:g} s; plugin: "
          f"pytest {' '.join(flags)}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"CPU a call, whole process tree, unprofiled: plugin {ms(plain['cpu_s']).strip()} ms (in the kernel "
          f"{ms(plain['sys_s']).strip()}; wall {plain['wall_s']:.1f} s), bare async loop "
          f"{ms(bare['cpu_s']).strip()} ms (in the kernel {ms(bare['sys_s']).strip()}; wall {bare['wall_s']:.1f} s); "
          f"py-spy's samples with the GIL held: plugin {samples:.0f} ({ms(samples / args.rate).strip()} ms a "
          f"call at {args.rate}/s), bare {theirs_samples:.0f} ({ms(theirs_samples / args.rate).strip()} ms)")
    print(f"under imports: plugin {ms(ours.imports()).strip()} ms, bare {ms(theirs.imports()).strip()} ms a call; "
          f"the garbage collector (profiled runs): plugin "
          f"{ms(ours.gc_s).strip()} ms ({ours.gc_n} passes by generation), bare {ms(theirs.gc_s).strip()} ms "
          f"({theirs.gc_n})")
    print(f"the plugin's main thread (pytest's loop), unprofiled: {ms(plain_main).strip()} ms a call; py-spy gave "
          f"it {main_samples / samples:.0%} of the samples")
    for name, profile in (("plugin", ours), ("bare", theirs)):
        print(f"{name}: threads, ms a call: " + ", ".join(
            f"{thread} {ms(count).strip()}"
            for thread, count in sorted(profile.threads().items(), key=lambda kv: -kv[1])))
    mine, bare_own = ours.groups(), theirs.groups()
    print(f"\nown time by group, ms a call\n{'group':<40} {'plugin':>7} {'bare':>7} {'extra':>7}")
    for name in sorted(set(mine) | set(bare_own), key=lambda g: -(mine.get(g, 0.0) - bare_own.get(g, 0.0))):
        if max(mine.get(name, 0.0), bare_own.get(name, 0.0)) < 0.002 * plain["cpu_s"]:
            continue  # under 0.2% of the plugin's CPU
        print(f"{name:<40} {ms(mine.get(name, 0.0))} {ms(bare_own.get(name, 0.0))} "
              f"{ms(mine.get(name, 0.0) - bare_own.get(name, 0.0))}")
    print(f"{'kernel (system calls, thread switches)':<40} {ms(plain['sys_s'])} {ms(bare['sys_s'])} "
          f"{ms(plain['sys_s'] - bare['sys_s'])}")
    mine["kernel"], bare_own["kernel"] = plain["sys_s"], bare["sys_s"]
    print(f"{'plugin, all its modules':<40} {ms(sum(v for k, v in mine.items() if k.startswith('plugin: ')))}")
    print(f"{'all':<40} {ms(sum(mine.values()))} {ms(sum(bare_own.values()))} "
          f"{ms(sum(mine.values()) - sum(bare_own.values()))}")
    ours_cumulative, theirs_cumulative = ours.cumulative(), theirs.cumulative()
    for title, found, keep in (
            ("plugin: functions by own time", ours.own(), lambda w: True),
            ("plugin: the plugin's functions by cumulative time", ours_cumulative,
             lambda w: "/pytest_mcpeval/" in w[0]),
            ("plugin: pytest's functions by cumulative time", ours_cumulative,
             lambda w: "/_pytest/" in w[0] or "/pluggy/" in w[0]),
            ("plugin: litellm's functions by cumulative time", ours_cumulative,
             lambda w: "/litellm/" in w[0]),
            ("plugin: threading and the HTTP stack by cumulative time", ours_cumulative,
             lambda w: group(w) in ("threading", "HTTP stack")),
            ("bare loop: functions by own time", theirs.own(), lambda w: True),
            ("bare loop: litellm's functions by cumulative time", theirs_cumulative,
             lambda w: "/litellm/" in w[0]),
            ("bare loop: asyncio and the HTTP stack by cumulative time", theirs_cumulative,
             lambda w: group(w) in ("asyncio", "HTTP stack"))):
        print(f"\n{title}, ms a call")
        for count, where in top(found, keep, args.top):
            print(f"{ms(count)}  {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
