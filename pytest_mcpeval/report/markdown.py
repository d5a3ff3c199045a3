"""Markdown renderings: the run's own summary, and the comparison with a baseline (``--mcp-markdown``).

Pure functions of finished data (the report, a :class:`~pytest_mcpeval.gate.compare.Comparison`): they
compute nothing, they only render.  Every string that comes from outside the plugin (tool names and
descriptions, case ids, file and model names, error text) goes through the escape function of the place it
lands in (:mod:`pytest_mcpeval.report.escape`), so it cannot end a code span, a fence or an HTML element,
break a table row or inject markup into the page.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from typing import Any

from pytest_mcpeval.gate.compare import Comparison, MetricChange, changed_tools, confidence
from pytest_mcpeval.gate.significance import format_p
from pytest_mcpeval.report.escape import MAX_SENTENCE, code, fenced, html_text, text
from pytest_mcpeval.report.tool_rows import never_expected, weak_tools
from pytest_mcpeval.report.usage import cost_text
from pytest_mcpeval.results import Report
from pytest_mcpeval.scoring import stops
from pytest_mcpeval.text import plural

__all__ = ["code", "comparison_markdown", "summary"]

MAX_ROWS = 20
_LIST_LIMIT = 20


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
        lines += ["", *(f"- {text(f, limit=MAX_SENTENCE)}" for f in failures)]
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
            lines.append(f"| {code(name, table=True)} | {m['scored']} | {m['errors']} | {_pct(m['accuracy'])} "
                         f"| {_num(m['macro_f1'])} | {_pct(m['pass_rate'])} | {exact} |")
        used = {name: m["usage"] for name, m in models.items() if m.get("usage") and m["usage"]["calls"]}
        if any(u["calls"] > u["cached"] for u in used.values()):
            lines += ["", "| model | calls made | replayed | input tokens | read from cache | written to cache "
                      "| output tokens | cost |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
            for name, u in used.items():
                lines.append(f"| {code(name, table=True)} | {u['calls'] - u['cached']} | {u['cached']} "
                             f"| {u['prompt_tokens']:,} | {u.get('cache_read_tokens', 0):,} "
                             f"| {u.get('cache_write_tokens', 0):,} | {u['completion_tokens']:,} "
                             f"| {text(cost_text(u))} |")
        flowing = {name: m for name, m in models.items() if m.get("flows") or m.get("claims")}
        if flowing:
            lines += ["", "| model | flows | flows passed | order held | exact tool set | flow macro F1 "
                      "| claims coverage | top failures |",
                      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
            for name, m in flowing.items():
                fm, cm = m.get("flows"), m.get("claims")
                top = sorted(m["diagnoses"].items(), key=lambda kv: (-kv[1], kv[0]))[:3]
                lines.append(
                    f"| {code(name, table=True)} | {fm['cases'] if fm else 0} "
                    f"| {_pct(fm['pass_rate'] if fm else None)} | {_pct(fm['order_match_rate'] if fm else None)} "
                    f"| {_pct(fm['exact_set_rate'] if fm else None)} | {_num(fm['macro_f1'] if fm else None)} "
                    f"| {_num(cm['mean_coverage'] if cm else None)} "
                    f"| {', '.join(f'{text(mode)} {count}' for mode, count in top)} |")
    for name, m in models.items():
        weak, stray = weak_tools(m.get("tools") or {}), never_expected(m.get("tools") or {})
        confused = m.get("confused_pairs") or []
        if not weak and not stray and not confused:
            continue
        lines += ["", f"### {code(name)}", ""]
        if weak:
            lines += ["| tool | precision | recall | F1 | support |", "| --- | ---: | ---: | ---: | ---: |"]
            lines += [f"| {code(t, table=True)} | {_num(v['precision'])} | {_num(v['recall'])} | {_num(v['f1'])} "
                      f"| {v['support']} |" for t, v in weak[:MAX_ROWS]]
        if stray:
            more = f", … {len(stray) - MAX_ROWS} more" if len(stray) > MAX_ROWS else ""
            lines += ["", f"Called, never expected: {plural(len(stray), 'tool')}, "
                          f"{plural(sum(n for _, n in stray), 'call')} ("
                      + ", ".join(f"{code(t)} {n}x" for t, n in stray[:MAX_ROWS]) + f"{more})."]
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
            cell = " ".join([str(c.get(column)), *(f"({note})" for note in stops.notes(c))])
            lines.append(f"| {code(label, table=True)} | {text(cell)} |")
        if len(rows) > MAX_ROWS:
            lines.append(f"\n… and {len(rows) - MAX_ROWS} more (the JSON report has every case)")
    skipped = report.get("skipped") or []
    if skipped:  # not run, not scored: said, so that a skip never passes for a case that ran
        reasons: dict[str, int] = {}
        for s in skipped:
            reasons[s["reason"]] = reasons.get(s["reason"], 0) + 1
        lines += ["", f"### Skipped ({len(skipped)}: not run, not in the metrics)", ""]
        lines += [f"- {text(reason, limit=MAX_SENTENCE)} ({count}x)"
                  for reason, count in sorted(reasons.items(), key=lambda rc: (-rc[1], rc[0]))[:MAX_ROWS]]
    return "\n".join(lines).rstrip() + "\n"


def _fmt(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "—"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def _marker(change: MetricChange) -> str:
    return "🔻" if change.drop else "🔺" if change.improvement else ""


def _row(name: str, c: MetricChange) -> str:
    ci = "—" if c.ci_low is None or c.ci_high is None else f"[{c.ci_low:+.3f}, {c.ci_high:+.3f}]"
    p = "—" if c.diff is None else format_p(c.p_value)
    if c.diff is not None and c.p_adjusted is not None:  # --mcp-drop-correction=holm: the verdict reads this one
        p += f" (Holm {format_p(c.p_adjusted)})"
    return (f"| {name} | {_fmt(c.before)} | {_fmt(c.after)} | {_fmt(c.diff, signed=True)} | {ci} | {p} "
            f"| {c.discordant} | {_marker(c)} |")


def _sentence(change: MetricChange) -> str:
    """The change's sentence, with the names in it (model, tool) escaped as plain text."""
    metric = f"f1[{text(change.metric[3:-1])}]" if change.metric.startswith("f1[") else change.metric
    return dataclasses.replace(change, model=text(change.model), metric=metric).sentence()


def comparison_markdown(comparison: Comparison, baseline: Mapping[str, Any], current: Mapping[str, Any]) -> str:
    """A pull request summary of the comparison: gate result, metric and tool tables, flipped cases."""
    conf = confidence(comparison.level)
    changed = changed_tools(baseline, current)
    lines = ["## pytest-mcpeval: comparison with the baseline", ""]
    failures = [_sentence(c) for c in comparison.changes if c.drop]  # comparison.failures(), escaped
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
        lines += ["", f"### {text(model)} ({n} paired cases)", ""]
        headline = [c for c in own if not c.metric.startswith("f1[")]
        if headline:
            lines += [header.format("metric"), rule]
            lines += [_row(c.metric, c) for c in headline]
        tools = [c for c in own if c.metric.startswith("f1[")]
        if tools:
            lines += ["", f"**Tool F1** ({text(model)})", "", header.format("tool"), rule]
            for c in tools:
                tool = c.metric[3:-1]
                lines.append(_row(f"{'✏️ ' if tool in changed else ''}{code(tool, table=True)}", c))
    if changed:
        lines += ["", "✏️ tool definition changed since the baseline", ""]
        for tool, (old, new) in changed.items():
            if old == new:
                lines += [f"<details><summary>definition of {html_text(tool)} changed (description unchanged: "
                          "input schema or annotations)</summary>", "", "</details>", ""]
                continue
            diff = difflib.unified_diff(old.splitlines(), new.splitlines(), "baseline", "current", lineterm="")
            lines += [f"<details><summary>description of {html_text(tool)} changed</summary>", "",
                      *fenced("\n".join(diff), "diff"), "", "</details>", ""]
    if comparison.flipped:
        shown = comparison.flipped[:_LIST_LIMIT]
        lines += ["", f"### Flipped cases ({len(comparison.flipped)})", "",
                  "| case | expected | before | after |", "| --- | --- | --- | --- |"]
        for f in shown:
            mark = {True: "✓", False: "✗"}
            lines.append(f"| {code(f['case'], table=True)} | {code(f['expected_label'], table=True)} "
                         f"| {mark[f['before']]} {code(f['called_before'], table=True)} "
                         f"| {mark[f['after']]} {code(f['called_after'], table=True)} |")
        if len(comparison.flipped) > len(shown):
            lines.append(f"\n… and {len(comparison.flipped) - len(shown)} more")
    for title, keys in (("Only in the baseline", comparison.only_in_baseline),
                        ("Only in this run", comparison.only_in_current),
                        ("Left out (error on either side)", comparison.excluded)):
        if keys:
            lines += ["", f"### {title} ({len(keys)})", ""]
            lines += [f"- {code(k)}" for k in keys[:_LIST_LIMIT]]
            if len(keys) > _LIST_LIMIT:
                lines.append(f"- … and {len(keys) - _LIST_LIMIT} more")
    return "\n".join(lines).rstrip() + "\n"
