"""The run's own summary in Markdown (``--mcp-markdown`` without ``--mcp-compare``).

A pure function of the finished report: it computes nothing, it only renders.  Every string that comes
from outside the plugin (tool names, case ids, model names, error text) goes through :func:`code` or
:func:`cell`, so it cannot end a code span, break a table row or inject markup into the page.
"""

from __future__ import annotations

import html
import re
from typing import Any

from pytest_mcpeval.report.types import Report
from pytest_mcpeval.text import plural

MAX_ROWS = 20
MAX_TEXT = 200


def _truncate(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def code(value: Any) -> str:
    """``value`` as an inline code span that its own backticks cannot close (CommonMark's longer fence)."""
    text = _truncate(" ".join(str(value).split())).replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def cell(value: Any) -> str:
    """Plain text for a table cell: one line, HTML escaped, pipes escaped."""
    return html.escape(_truncate(" ".join(str(value).split()))).replace("|", "\\|")


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def summary(report: Report) -> str:
    """Gate verdict, a row of headline numbers per model, each model's weakest tools and its misses."""
    gate = report.get("gate") or {}
    lines = ["## pytest-mcpeval: run summary", ""]
    failures = [*gate.get("usage_errors", []), *gate.get("failures", [])]
    if failures:
        lines.append(f"❌ **gate failed** ({plural(len(failures), 'failure')})")
        lines += ["", *(f"- {cell(f)}" for f in failures)]
    elif gate.get("thresholds"):
        lines.append("✅ **gate passed**: " + ", ".join(code(t) for t in gate["thresholds"]))
    else:
        lines.append("No thresholds were set: nothing gated this run.")
    models = report.get("models") or {}
    if models:
        lines += ["", "| model | scored | errors | accuracy | macro F1 | passed | exact arguments |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for name, m in models.items():
            args = m.get("arguments") or {}
            exact = _pct(args.get("exact_match_rate")) if args.get("applicable", True) else "n/a"
            lines.append(f"| {code(name)} | {m['scored']} | {m['errors']} | {_pct(m['accuracy'])} "
                         f"| {_num(m['macro_f1'])} | {_pct(m['pass_rate'])} | {exact} |")
    for name, m in models.items():
        weak = sorted(((t, v) for t, v in (m.get("tools") or {}).items() if v["f1"] is not None and v["f1"] < 1.0),
                      key=lambda tv: (tv[1]["f1"], tv[0]))
        confused = m.get("confused_pairs") or []
        if not weak and not confused:
            continue
        lines += ["", f"### {code(name)}", ""]
        if weak:
            lines += ["| tool | precision | recall | F1 | support |", "| --- | ---: | ---: | ---: | ---: |"]
            lines += [f"| {code(t)} | {_num(v['precision'])} | {_num(v['recall'])} | {_num(v['f1'])} | {v['support']} |"
                      for t, v in weak[:MAX_ROWS]]
        if confused:
            lines += ["", *(f"- expected {code(p['expected'])}, called {code(p['called'])} ({p['count']}x)"
                           for p in confused[:5])]
    cases = report.get("cases") or []
    misses = [c for c in cases if c.get("passed") is False]
    errors = [c for c in cases if c.get("error")]
    for title, rows, column in (("Misses", misses, "diagnosis"), ("Errors (excluded from the metrics)", errors,
                                                                   "error")):
        if not rows:
            continue
        lines += ["", f"### {title} ({len(rows)})", "", f"| case | {column} |", "| --- | --- |"]
        for c in rows[:MAX_ROWS]:
            label = "{}::{}[{}]".format(c["file"], c["id"], c["model"])
            lines.append(f"| {code(label)} | {cell(c.get(column))} |")
        if len(rows) > MAX_ROWS:
            lines.append(f"\n… and {len(rows) - MAX_ROWS} more (the JSON report has every case)")
    return "\n".join(lines).rstrip() + "\n"
