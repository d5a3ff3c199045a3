"""A big run's report and HTML page: their sizes, and how long headless Chromium takes to load the page.

    .venv/bin/python bench/big_report.py                     # 2,000 tools x 2,000 cases, the page loaded once
    .venv/bin/python bench/big_report.py --tools 500 --cases 500 --no-browser --out /tmp/big

The case results are made up (seeded), as a model answering over a catalog of TOOLS tools would give them:
case k expects tool k (modulo the catalog), the model calls it 85 % of the time, else a sibling of the same
service (10 %), no tool (3 %) or a name it invented (2 %).  Everything after the results is the plugin's own:
:func:`pytest_mcpeval.report.model.build_report` builds the report, :mod:`pytest_mcpeval.storage` writes it as
``--mcp-report`` does, :func:`pytest_mcpeval.report.html.render` renders the page as ``--mcp-html`` does.
The load time is ``page.goto(..., wait_until="load")`` through Playwright driving the installed Chromium
(``MCPEVAL_CHROMIUM`` or ``chromium`` on PATH) with a fresh profile; docs/performance.md has the figures.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from anywhere: the plugin of this checkout
    sys.path.insert(0, str(REPO))

SIBLINGS = 10  # tools per service: a miss calls another tool of the same service
ACTIONS = ("list", "get", "create", "update", "delete", "search", "archive", "restore", "export", "import")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def tool_name(i: int) -> str:
    return f"service_{i // SIBLINGS:04d}_{ACTIONS[i % SIBLINGS]}_items"


def big_run(tools: int, cases: int, seed: int = 0) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``(case results, catalogs)`` of one model over ``cases`` cases and a catalog of ``tools`` tools."""
    rng = random.Random(seed)
    names = [tool_name(i) for i in range(tools)]
    catalogs = {"c" * 16: {"server": "tools_file: big-tools.json", "tokens": 90 * tools, "tools": {
        name: {"hash": f"{i:016x}", "description": f"{ACTIONS[i % SIBLINGS].capitalize()} the items of service "
               f"{i // SIBLINGS}: filters by owner, state and date; returns at most 100 items per page.",
               "tokens": 90} for i, name in enumerate(names)}}}
    results: list[dict[str, Any]] = []
    for k in range(cases):
        expected = names[k % tools]
        draw = rng.random()
        invented: list[str] = []
        if draw < 0.85:
            called = expected
        elif draw < 0.95:
            group = (k % tools) // SIBLINGS * SIBLINGS
            called = names[min(tools - 1, group + rng.randrange(SIBLINGS))]
        elif draw < 0.98:
            called = "(none)"
        else:
            called = f"{expected}_v2"
            invented = [called]
        correct = called == expected
        args: dict[str, Any] | None = None
        if correct:
            args = {"malformed": None, "hallucinated": [], "missing_required": [], "missing_expected": [],
                    "unexpected": [], "mismatched": [], "hallucination": False, "all_required": True,
                    "all_expected": True, "exact": rng.random() < 0.9}
        diagnosis = None if correct else ("no_call" if called == "(none)" else
                                          "hallucinated_tool" if invented else "wrong_tool")
        result: dict[str, Any] = {
            "file": "big.mcpeval.yaml", "line": k + 1, "id": f"case-{k:05d}", "model": "big-model", "repeat": 0,
            "tags": [], "error": None, "expected": [{"tool": expected, "args": {"owner": "octo"}}],
            "expected_label": expected,
            "called": [] if called == "(none)" else [{"tool": called, "args": {"owner": "octo"}}],
            "called_label": called, "correct": correct, "passed": correct, "arguments": args,
            "diagnosis": diagnosis, "catalog": "c" * 16, "tools_shown": tools,
            "usage": {"prompt_tokens": 90 * tools, "completion_tokens": 20, "cost_usd": None, "cached": True,
                      "attempts": 1},
            "latency_s": 0.5}
        if invented:
            result["hallucinated_tools"] = invented
        results.append(result)
    return results, catalogs


def build(tools: int, cases: int, seed: int = 0) -> Any:
    """The report of :func:`big_run`, built as the plugin builds every report."""
    from pytest_mcpeval.report.model import build_report

    results, catalogs = big_run(tools, cases, seed)
    return build_report(results, catalogs, ["big-model"])  # type: ignore[arg-type]


def write(report: Any, out: Path) -> tuple[Path, Path, float, float]:
    """The report and its page written as ``--mcp-report`` and ``--mcp-html`` write them; with the seconds
    each took (serialising included)."""
    from pytest_mcpeval.report.html import render
    from pytest_mcpeval.storage import write_json, write_text

    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    write_json(report, out / "report.json")
    json_s = time.perf_counter() - started
    started = time.perf_counter()
    write_text(render(report), out / "report.html")
    return out / "report.json", out / "report.html", json_s, time.perf_counter() - started


def chromium() -> str | None:
    path = os.environ.get("MCPEVAL_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    return path if path and Path(path).is_file() else None


def load_seconds(page_path: Path, executable: str, timeout_s: float = 600.0) -> tuple[float, int]:
    """Seconds from navigation to the page's load event in headless Chromium (a fresh profile), and the number
    of ``td`` cells the page holds."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="mcpeval-chromium-") as profile, sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=executable, args=ARGS, headless=True, timeout=timeout_s * 1000)
        try:
            page = context.new_page()
            page.set_default_timeout(timeout_s * 1000)
            page.set_default_navigation_timeout(timeout_s * 1000)
            started = time.perf_counter()
            page.goto(page_path.as_uri(), wait_until="load")
            seconds = time.perf_counter() - started
            cells = int(page.evaluate("document.getElementsByTagName('td').length"))
        finally:
            context.close()
    return seconds, cells


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tools", type=int, default=2000)
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="keep the report and page here (default: a temporary "
                        "directory, removed)")
    parser.add_argument("--no-browser", action="store_true", help="sizes only, no Chromium")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mcpeval-big-report-") as tmp:
        out = args.out or Path(tmp)
        started = time.perf_counter()
        report = build(args.tools, args.cases, args.seed)
        built_s = time.perf_counter() - started
        report_path, page_path, json_s, html_s = write(report, out)
        html = page_path.read_text(encoding="utf-8")
        heat = html.split('<table class="heat">', 1)[1].split("</table>", 1)[0] if 'class="heat"' in html else ""
        confusion = report["models"]["big-model"]["confusion"]
        print(f"{args.tools:,} tools x {args.cases:,} cases (seed {args.seed}): "
              f"{len(confusion['labels']):,} labels, {len(report['models']['big-model']['confused_pairs']):,} "
              "confused pairs")
        print(f"report built in {built_s:.2f} s; report.json {report_path.stat().st_size / 1e6:.1f} MB "
              f"(written in {json_s:.2f} s), of which the confusion "
              f"{_confusion_bytes(confusion) / 1e6:.2f} MB")
        print(f"report.html {page_path.stat().st_size / 1e6:.1f} MB (rendered and written in {html_s:.2f} s), "
              f"heatmap {len(re.findall('<td', heat)):,} cells")
        if not args.no_browser:
            executable = chromium()
            if executable is None:
                print("no Chromium found (apt-get install -y chromium, or MCPEVAL_CHROMIUM): load time not measured")
                return 1
            seconds, cells = load_seconds(page_path, executable)
            print(f"headless Chromium: the page loads in {seconds:.2f} s ({cells:,} td cells in all)")
    return 0


def _confusion_bytes(confusion: Any) -> int:
    from pytest_mcpeval.storage import json_bytes

    # as it sits in the report: 2-space indent at the depth of models.MODEL.confusion
    return len(json_bytes({"models": {"m": {"confusion": confusion}}})) - len(json_bytes({"models": {"m": {
        "confusion": None}}}))


if __name__ == "__main__":
    sys.exit(main())
