"""bench/bench.py runs (at its smallest sizes) and prints every figure next to its target: it cannot rot unseen.

The model-call sections (efficiency, core, flows, naive) need litellm in every pytest they start, seconds each,
so only the sections that share their machinery cheaply run here: the replay (which records through the scripted
model server and litellm once), the report, the collection and the start-up; and the core section (the plugin
against a bare async loop), whose measuring (a reaper of the process tree, a script) nothing else runs.  The full
benchmark is ``.venv/bin/python bench/bench.py`` (docs/performance.md)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench.py"


def test_the_benchmark_runs_and_prints_each_figure_next_to_its_target() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--quick", "--only", "replay,report,collect,startup"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    table = done.stdout.split("\nbenchmark", 1)[1].splitlines()[1:]
    rows = {line.split("  ", 1)[0]: line for line in table if line.strip()}
    assert sorted(rows) == [
        "collect: --collect-only of 40 cases in 2 files",
        "replay: 20 cached cases, 117-tool catalog / 20 trivial tests",
        "replay: model libraries imported by the replay",
        "report: build, gate and redact the report of 1,000 case results",
        "startup: --collect-only without benchmark files, plugin vs -p no:mcpeval",
    ]
    for line in rows.values():  # the target, whether it is met, and the figure
        assert re.search(r"  ((<=|>=) [\d.+]+ ?s?|none)\s+(yes|NO)\s+\S", line), line
    assert rows["replay: model libraries imported by the replay"].endswith("yes   none")


def test_the_core_section_measures_the_plugin_against_a_bare_async_loop() -> None:
    # the one model-call section run here (three litellm imports, about 10 s): its wall and CPU figures come from a
    # reaper process and a script of its own, which nothing else exercises
    done = subprocess.run([sys.executable, str(BENCH), "--quick", "--only", "core"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    table = done.stdout.split("\nbenchmark", 1)[1].splitlines()[1:]
    rows = {line.split("  ", 1)[0]: line for line in table if line.strip()}
    assert sorted(rows) == [
        "core: bare litellm async loop, 12 cases x 2 models, 40 tools, C=4, L=0.05 s (reference)",
        "core: bare pytest items / bare async loop, 12 cases x 2 models, 40 tools, C=4, L=0.05 s (pytest's own "
        "cost, a figure)",
        "core: plugin / bare pytest items, L=0.05 s (the plugin's own cost, a figure)",
        "core: plugin CPU per call / bare async loop's, L=0.05 s",
        "core: plugin wall / bare async loop wall, L=0.05 s",
    ]
    pytest_cost = rows["core: plugin / bare pytest items, L=0.05 s (the plugin's own cost, a figure)"]
    assert re.search(r"-\s+-\s+wall [\d.]+, CPU per call [\d.]+ \([\d.]+ ms / [\d.]+ ms\)$", pytest_cost)
    reference = rows["core: bare litellm async loop, 12 cases x 2 models, 40 tools, C=4, L=0.05 s (reference)"]
    assert re.search(r"-\s+-\s+wall [\d.]+ s \(import [\d.]+ s, its end to the last answer [\d.]+ s\); "
                     r"CPU [\d.]+ ms a call \([\d.]+ s / 24; the calls [\d.]+ ms, its import [\d.]+ s\)$", reference)
    cpu = rows["core: plugin CPU per call / bare async loop's, L=0.05 s"]
    assert re.search(r"<= 1\.1\s+(yes|NO)\s+[\d.]+ \([\d.]+ ms / [\d.]+ ms; [\d.]+ s of CPU in all, [\d.]+ s; "
                     r"in the kernel [\d.]+ s, [\d.]+ s\)$", cpu)


def test_bad_arguments_are_one_clear_line() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--only", "speed"], capture_output=True, text=True)
    assert done.returncode == 2
    assert "unknown section speed; expected some of efficiency, core, replay, flows, collect, report, " \
           "startup, naive" in done.stderr
    done = subprocess.run([sys.executable, str(BENCH), "--set", "speed=1"], capture_output=True, text=True)
    assert done.returncode == 2
    assert "--set speed=1: no size 'speed'; expected one of cases, " in done.stderr
