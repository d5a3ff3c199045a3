"""Markdown renderings: the run's own summary, and the comparison with a baseline (``--mcp-markdown``).

Pure functions of finished data (the report, a :class:`~pytest_mcpeval.gate.compare.Comparison`): they
compute nothing, they only render.  Every string that comes
from outside the plugin (tool names, case ids, model names, error text) goes through :func:`code` or
:func:`cell`, so it cannot end a code span, break a table row or inject markup into the page.
"""

from __future__ import annotations

import difflib
import html
import re
from collections.abc import Mapping
from typing import Any

from pytest_mcpeval.gate.compare import Comparison, MetricChange, changed_tools, confidence
from pytest_mcpeval.gate.significance import format_p
from pytest_mcpeval.report.types import Report
from pytest_mcpeval.text import plural

MAX_ROWS = 20
_LIST_LIMIT = 20
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


def _plain_cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _fmt(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "—"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def _marker(change: MetricChange) -> str:
    return "🔻" if change.drop else "🔺" if change.improvement else ""


def _row(name: str, c: MetricChange) -> str:
    ci = "—" if c.ci_low is None or c.ci_high is None else f"[{c.ci_low:+.3f}, {c.ci_high:+.3f}]"
    p = "—" if c.diff is None else format_p(c.p_value)
    return (f"| {name} | {_fmt(c.before)} | {_fmt(c.after)} | {_fmt(c.diff, signed=True)} | {ci} | {p} "
            f"| {c.discordant} | {_marker(c)} |")


def comparison_markdown(comparison: Comparison, baseline: Mapping[str, Any], current: Mapping[str, Any]) -> str:
    """A pull request summary of the comparison: gate result, metric and tool tables, flipped cases."""
    conf = confidence(comparison.level)
    changed = changed_tools(baseline, current)
    lines = ["## pytest-mcpeval: comparison with the baseline", ""]
    failures = comparison.failures()
    if failures:
        lines.append(f"❌ **{len(failures)} significant drop{'s' if len(failures) != 1 else ''}** "
                     f"(margin {comparison.margin:g}, level {comparison.level:g})")
        lines += ["", *(f"- {s}" for s in failures)]
    else:
        lines.append(f"✅ **No significant drop** (margin {comparison.margin:g}, level {comparison.level:g})")
    header = f"| {{}} | before | after | change | {conf} CI | p | cases changed | |"
    rule = "| --- | ---: | ---: | ---: | :---: | ---: | ---: | --- |"
    for model, n in comparison.paired.items():
        own = [c for c in comparison.changes if c.model == model]
        lines += ["", f"### {model} ({n} paired cases)", ""]
        headline = [c for c in own if not c.metric.startswith("f1[")]
        if headline:
            lines += [header.format("metric"), rule]
            lines += [_row(c.metric, c) for c in headline]
        tools = [c for c in own if c.metric.startswith("f1[")]
        if tools:
            lines += ["", f"**Tool F1** ({model})", "", header.format("tool"), rule]
            for c in tools:
                tool = c.metric[3:-1]
                lines.append(_row(f"{'✏️ ' if tool in changed else ''}`{_plain_cell(tool)}`", c))
    if changed:
        lines += ["", "✏️ tool definition changed since the baseline", ""]
        for tool, (old, new) in changed.items():
            if old == new:
                lines += [f"<details><summary>definition of {tool} changed (description unchanged: input schema "
                          "or annotations)</summary>", "", "</details>", ""]
                continue
            diff = difflib.unified_diff(old.splitlines(), new.splitlines(), "baseline", "current", lineterm="")
            lines += [f"<details><summary>description of {tool} changed</summary>", "", "```diff", *diff, "```", "",
                      "</details>", ""]
    if comparison.flipped:
        shown = comparison.flipped[:_LIST_LIMIT]
        lines += ["", f"### Flipped cases ({len(comparison.flipped)})", "",
                  "| case | expected | before | after |", "| --- | --- | --- | --- |"]
        for f in shown:
            mark = {True: "✓", False: "✗"}
            lines.append(f"| `{_plain_cell(f['case'])}` | `{_plain_cell(f['expected_label'])}` "
                         f"| {mark[f['before']]} `{_plain_cell(f['called_before'])}` "
                         f"| {mark[f['after']]} `{_plain_cell(f['called_after'])}` |")
        if len(comparison.flipped) > len(shown):
            lines.append(f"\n… and {len(comparison.flipped) - len(shown)} more")
    for title, keys in (("Only in the baseline", comparison.only_in_baseline),
                        ("Only in this run", comparison.only_in_current),
                        ("Left out (error on either side)", comparison.excluded)):
        if keys:
            lines += ["", f"### {title} ({len(keys)})", ""]
            lines += [f"- `{k}`" for k in keys[:_LIST_LIMIT]]
            if len(keys) > _LIST_LIMIT:
                lines.append(f"- … and {len(keys) - _LIST_LIMIT} more")
    return "\n".join(lines).rstrip() + "\n"
