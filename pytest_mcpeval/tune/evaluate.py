"""One evaluation: pytest in a subprocess (the user's ini, aliases, params and response cache honoured) on the
chosen cases with an overlay, read back from its JSON report.

Each evaluation is ``python -m pytest PATH... --mcp-models=MODEL --mcp-overlay=FILE --mcp-report=FILE
-p pytest_mcpeval.tune.select --mcpeval-tune-select=FILE -p no:cacheprovider`` plus the user's extra pytest
arguments: a fresh process per evaluation, so nothing of one leaks into the next, and every call the response
cache holds is replayed, not paid again.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_mcpeval.overlay import dump_overlay
from pytest_mcpeval.tune import TuneError

NONE = "(none)"  # the label of "no tool" (scoring.case.NONE)
_SELECT = "pytest_mcpeval.tune.select"


@dataclass(frozen=True)
class Outcome:
    """What one case came to, as the report says it (the first repeat)."""

    key: str  # "file::id"
    expected: str  # the expected tool's label, NONE for a case that expects no call
    called: str
    correct: bool
    flow: bool = False
    passed: bool | None = None
    coverage: float | None = None


@dataclass
class Evaluation:
    outcomes: dict[str, Outcome]
    tool_sizes: dict[str, int]  # tool -> the tokens of its own definition (the same in every catalog that has it)
    catalogs: list[tuple[int, frozenset[str]]]  # each catalog the run showed: tokens per request, its tools
    descriptions: dict[str, str]  # tool -> the description its catalog had (overlaid)
    calls: int = 0  # model calls made (not replayed from the cache)
    cost_usd: float = 0.0
    report: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # cases (file::id) with an error and no scored repeat


def outcomes_of(report: Mapping[str, Any]) -> tuple[dict[str, Outcome], list[str]]:
    """Per case, what its first scored repeat (without an error) expected and called; and the cases that have no
    scored repeat (an error: an infrastructure failure is not a model's miss, and is not compared)."""
    out: dict[str, Outcome] = {}
    seen: set[str] = set()
    for case in sorted(report.get("cases", []), key=lambda c: c.get("repeat", 0)):
        key = f"{case['file']}::{case['id']}"
        seen.add(key)
        if key in out or case.get("error") or case.get("correct") is None:
            continue
        out[key] = Outcome(key, str(case.get("expected_label") or NONE), str(case.get("called_label") or NONE),
                           bool(case["correct"]), bool(case.get("flow")), case.get("passed"), case.get("coverage"))
    return out, sorted(seen - set(out))


def catalog_facts(report: Mapping[str, Any]) -> tuple[dict[str, int], list[tuple[int, frozenset[str]]],
                                                      dict[str, str]]:
    """Each tool's own tokens and its description (in the largest catalog holding it), and each catalog's tokens
    per request with its tools."""
    sizes: dict[str, int] = {}
    descriptions: dict[str, str] = {}
    catalogs: list[tuple[int, frozenset[str]]] = []
    for info in sorted(report.get("catalogs", {}).values(), key=lambda i: i.get("tokens", 0)):
        tools = info.get("tools", {})
        catalogs.append((int(info.get("tokens", 0)), frozenset(tools)))
        for name, tool in tools.items():
            sizes[name] = int(tool.get("tokens", 0))
            descriptions[name] = str(tool.get("description", ""))
    return sizes, catalogs, descriptions


Runner = Callable[[list[str]], "subprocess.CompletedProcess[str]"]  # pytest's arguments -> its exit status, output


def pytest_in_a_subprocess(arguments: list[str]) -> subprocess.CompletedProcess[str]:
    """``python -m pytest ARGUMENTS`` in a fresh process: what every evaluation of the command runs."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, "-m", "pytest", *arguments], capture_output=True, text=True, env=env,
                          check=False)


class Evaluator:
    """Runs the evaluations of one tune command and counts what they cost.

    ``runner`` runs pytest with the arguments of one evaluation; the command's is :func:`pytest_in_a_subprocess`.
    Another is a seam for tests (tests/test_tune.py runs the loop's evaluations in the test's process)."""

    def __init__(self, paths: Sequence[str], model: str, pytest_args: Sequence[str], work: Path,
                 max_cost: float | None = None, runner: Runner = pytest_in_a_subprocess) -> None:
        self.runner = runner
        self.paths = list(paths)
        self.model = model
        self.pytest_args = list(pytest_args)
        self.work = work
        self.max_cost = max_cost
        self.evaluations = 0
        self.calls = 0
        self.cost_usd = 0.0
        self.seconds = 0.0
        self.planned: int | None = None  # the most evaluations the command will make (progress: :meth:`_say`)
        work.mkdir(parents=True, exist_ok=True)

    def _say(self, name: str, cases: list[str] | None) -> None:
        """One line on stderr per evaluation: which, of how many at most, on how many cases, and the time left at
        the pace so far (a tune of 2,000 candidates runs for hours: it says so from the start)."""
        from pytest_mcpeval.text import plural

        done = self.evaluations - 1
        of = f" of at most {self.planned:,}" if self.planned else ""
        left = ""
        if self.planned and done and self.seconds:
            seconds = self.seconds / done * max(self.planned - done, 0)
            left = f", about {seconds / 60:.0f} min left" if seconds >= 90 else f", about {seconds:.0f} s left"
        what = plural(len(cases), "case") if cases is not None else "every case"
        calls = f", {plural(self.calls, 'model call')} so far" if done else ""
        print(f"tune: evaluation {self.evaluations:,}{of}: {name} ({what}{calls}{left})", file=sys.stderr, flush=True)

    def _command(self, *extra: str) -> list[str]:
        return [*self.paths, f"--mcp-models={self.model}", "-p", _SELECT,
                "-p", "no:cacheprovider", "-q", *extra, *self.pytest_args]

    def _pytest(self, command: list[str], what: str) -> subprocess.CompletedProcess[str]:
        started = time.perf_counter()
        done = self.runner(command)
        self.seconds += time.perf_counter() - started
        if done.returncode == 2 and "KeyboardInterrupt" in done.stdout + done.stderr:
            raise KeyboardInterrupt  # the evaluation was interrupted (Ctrl-C reaches the whole process group)
        if done.returncode not in (0, 1, 5):  # 1: some case missed (the gate); 5: nothing selected
            lines = [ln for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
            start = next((i + 1 for i, ln in enumerate(lines) if "ERROR collecting" in ln), None)
            shown = lines[start:start + 3] if start is not None else [ln for ln in lines if ln.startswith("ERROR")]
            tail = " | ".join(shown or lines[-3:]) or f"exit status {done.returncode}"
            raise TuneError(f"{what}: pytest failed (exit status {done.returncode}): {tail}")
        return done

    def manifest(self) -> dict[str, Any]:
        """The rootdir and the cases PATH collects (nothing is called)."""
        path = self.work / "manifest.json"
        path.unlink(missing_ok=True)
        self._pytest(self._command("--collect-only", f"--mcpeval-tune-manifest={path}"), "collecting the cases")
        if not path.exists():
            raise TuneError(f"no benchmark cases were collected from {' '.join(self.paths)}")
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return data

    def evaluate(self, extra: list[str], name: str, report_path: Path) -> dict[str, Any]:
        """pytest with ``extra`` arguments (the overlay, the selection, the report's path), and its report."""
        self._pytest(self._command(*extra), f"evaluation {name}")
        if not report_path.exists():
            raise TuneError(f"evaluation {name}: pytest wrote no report ({report_path})")
        report: dict[str, Any] = json.loads(report_path.read_text(encoding="utf-8"))
        return report

    def run(self, overlay: Mapping[str, str], cases: Iterable[str] | None, name: str,
            html: Path | None = None, report_path: Path | None = None) -> Evaluation:
        """Evaluate ``cases`` (``file::id`` keys; ``None``: all) with ``overlay`` (tool -> description)."""
        self.evaluations += 1
        name = re.sub(r"[^\w.-]", "_", name)  # a tool's name may hold `/`: not a directory of the work folder
        cases = sorted(cases) if cases is not None else None
        self._say(name, cases)
        report_path = report_path or self.work / f"{name}.json"
        report_path.unlink(missing_ok=True)
        extra = [f"--mcp-report={report_path}"]
        if overlay:
            overlay_file = self.work / f"{name}.overlay.yaml"
            overlay_file.write_text(dump_overlay(overlay), encoding="utf-8")
            extra.append(f"--mcp-overlay={overlay_file}")
        if cases is not None:
            chosen = self.work / f"{name}.select.json"
            chosen.write_text(json.dumps([key.rsplit("::", 1) for key in cases]), encoding="utf-8")
            extra.append(f"--mcpeval-tune-select={chosen}")
        if html is not None:
            extra.append(f"--mcp-html={html}")
        if self.max_cost is not None:
            left = self.max_cost - self.cost_usd
            if left <= 0:
                raise TuneError(f"--max-cost={self.max_cost:g}: the budget is spent (${self.cost_usd:.4f})")
            extra.append(f"--mcp-max-cost={left:.6f}")
        report = self.evaluate(extra, name, report_path)
        calls, cost = 0, 0.0
        for case in report.get("cases", []):
            usage = case.get("usage") or {}
            if not usage.get("cached", False) and not case.get("error"):
                calls += 1
            cost += float(usage.get("cost_usd") or 0.0)
        self.calls += calls
        self.cost_usd += cost
        sizes, catalogs, descriptions = catalog_facts(report)
        outcomes, errors = outcomes_of(report)
        return Evaluation(outcomes, sizes, catalogs, descriptions, calls, cost, report, errors)
