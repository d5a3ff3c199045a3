"""Markdown renderings: the run's own summary, and the comparison with a baseline (``--mcp-markdown``).

Pure functions of the finished report (its ``comparison`` section for the comparison): they compute nothing,
they only render; numbers are formatted by :mod:`pytest_mcpeval.numbers`, metric names and labels come
from the registry.  Every string that comes from outside the plugin (tool names and descriptions, case ids,
file and model names, error text) goes through the escape function of the place it lands in
(:mod:`pytest_mcpeval.report.escape`), so it cannot end a code span, a fence or an HTML element, break a table
row or inject markup into the page.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from pytest_mcpeval.numbers import DASH, confidence, format_p, interval, metric_value, num, pct, sentence
from pytest_mcpeval.report import case_notes, findability
from pytest_mcpeval.report.escape import MAX_SENTENCE, code, fenced, html_text, text
from pytest_mcpeval.report.tool_rows import detects, never_expected, power_lines, weak_tools
from pytest_mcpeval.report.usage import cost_text
from pytest_mcpeval.results import ComparisonSection, Flipped, MetricChange, ModelMetrics, Report, ToolChange
from pytest_mcpeval.results.registry import HEADLINE, METRICS
from pytest_mcpeval.results.registry import title as metric_title
from pytest_mcpeval.text import plural

__all__ = ["code", "comparison_markdown", "summary"]

MAX_ROWS = 20
MOVED_SHOWN = 5  # cases named per tool and direction among the calls that moved
_LIST_LIMIT = 20


def _overlay(report: Report) -> list[str]:
    from pytest_mcpeval.report.overlay_line import overlay_line

    overlaid = overlay_line(report)
    return [f"> {text(overlaid, limit=MAX_SENTENCE)}", ""] if overlaid else []


def summary(report: Report) -> str:
    """Gate verdict, a row of headline numbers per model, each model's weakest tools and its misses."""
    gate = report.get("gate") or {}
    lines = ["## pytest-mcpeval: run summary", ""]
    lines += _overlay(report)
    failures = [*gate.get("usage_errors", []), *gate.get("failures", [])]
    if failures:
        lines.append(f"❌ **gate failed** ({plural(len(failures), 'failure')})")
        lines += ["", *(f"- {text(f, limit=MAX_SENTENCE)}" for f in failures)]
    elif gate.get("thresholds") or gate.get("checks"):
        stated = [*(code(t) for t in gate.get("thresholds") or []),
                  *(text(c, limit=MAX_SENTENCE) for c in gate.get("checks") or [])]
        lines.append("✅ **gate passed**: " + ", ".join(stated))
    else:
        lines.append("No thresholds were set: nothing gated this run.")
    models = report.get("models") or {}
    lines += _model_tables(models)
    lines += _model_details(models)
    lines += _case_lists(report)
    return "\n".join(lines).rstrip() + "\n"


def _model_tables(models: Mapping[str, ModelMetrics]) -> list[str]:
    """A row of headline numbers per model (the registry's HEADLINE), its usage and its flows."""
    lines: list[str] = []
    if models:
        titles = " | ".join(metric_title(key) for key in HEADLINE)
        lines += ["", f"| model | scored | errors | {titles} | exact arguments |",
                  f"| --- | ---: | ---: | {' | '.join('---:' for _ in HEADLINE)} | ---: |"]
        for name, m in models.items():
            args = m.get("arguments") or {}
            exact = pct(args.get("exact_match_rate")) if args.get("applicable", True) else "n/a"
            shown = " | ".join(metric_value(key, METRICS[key].read(m)) for key in HEADLINE)
            lines.append(f"| {code(name, table=True)} | {m['scored']} | {m['errors']} | {shown} | {exact} |")
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
                    f"| {pct(fm['pass_rate'] if fm else None)} | {pct(fm['order_match_rate'] if fm else None)} "
                    f"| {pct(fm['exact_set_rate'] if fm else None)} | {num(fm['macro_f1'] if fm else None)} "
                    f"| {num(cm['mean_coverage'] if cm else None)} "
                    f"| {', '.join(f'{text(mode)} {count}' for mode, count in top)} |")
    return lines


def _model_details(models: Mapping[str, ModelMetrics]) -> list[str]:
    """Per model: its weakest tools, the tools called but never expected, its confused pairs."""
    lines: list[str] = []
    for name, m in models.items():
        weak, stray = weak_tools(m.get("tools") or {}), never_expected(m.get("tools") or {})
        confused = m.get("confused_pairs") or []
        power = list(power_lines(m.get("power")))
        search = findability.markdown_lines(m, MAX_ROWS)
        if not weak and not stray and not confused and not power and not search:
            continue
        lines += ["", f"### {code(name)}", ""]
        if power:
            lines += [*(f"- {line[0].upper()}{line[1:]}." for line in power), ""]
        if weak:
            lines += ["| tool | precision | recall | F1 | support | detects |",
                      "| --- | ---: | ---: | ---: | ---: | ---: |"]
            lines += [f"| {code(t, table=True)} | {num(v['precision'])} | {num(v['recall'])} | {num(v['f1'])} "
                      f"| {v['support']} | {detects(v) or DASH} |" for t, v in weak[:MAX_ROWS]]
        if stray:
            more = f", … {len(stray) - MAX_ROWS} more" if len(stray) > MAX_ROWS else ""
            lines += ["", f"Called, never expected: {plural(len(stray), 'tool')}, "
                          f"{plural(sum(n for _, n in stray), 'call')} ("
                      + ", ".join(f"{code(t)} {n}x" for t, n in stray[:MAX_ROWS]) + f"{more})."]
        if confused:
            lines += ["", *(f"- expected {code(p['expected'])}, called {code(p['called'])} ({p['count']}x)"
                           for p in confused[:5])]
        lines += search
    return lines


def _case_lists(report: Report) -> list[str]:
    """The misses, the errors, the draft cases (apart: no metric saw them) and the skipped case items."""
    lines: list[str] = []
    cases = [c for c in report.get("cases") or [] if not c.get("draft")]
    misses = [c for c in cases if c.get("passed") is False]
    errors = [c for c in cases if c.get("error")]
    for title, rows, column in (("Misses", misses, "diagnosis"), ("Errors (excluded from the metrics)", errors,
                                                                   "error")):
        if not rows:
            continue
        lines += ["", f"### {title} ({len(rows)})", "", f"| case | {column} |", "| --- | --- |"]
        for c in rows[:MAX_ROWS]:
            label = "{}::{}[{}]".format(c["file"], c["id"], c["model"])
            cell = " ".join([str(c.get(column)), *(f"({note})" for note in case_notes.notes(c))])
            lines.append(f"| {code(label, table=True)} | {text(cell)} |")
        if len(rows) > MAX_ROWS:
            lines.append(f"\n… and {len(rows) - MAX_ROWS} more (the JSON report has every case)")
    lines += _drafts(report)
    skipped = report.get("skipped") or []
    if skipped:  # not run, not scored: said, so that a skip never passes for a case that ran
        reasons: dict[str, int] = {}
        for s in skipped:
            reasons[s["reason"]] = reasons.get(s["reason"], 0) + 1
        lines += ["", f"### Skipped ({len(skipped)}: not run, not in the metrics)", ""]
        lines += [f"- {text(reason, limit=MAX_SENTENCE)} ({count}x)"
                  for reason, count in sorted(reasons.items(), key=lambda rc: (-rc[1], rc[0]))[:MAX_ROWS]]
    return lines


def _drafts(report: Report) -> list[str]:
    """The draft cases (``draft: true``): how each came out, apart from the misses, since no metric and no gate saw
    them (docs/drafting.md)."""
    rows = [(model, d) for model, outcomes in sorted((report.get("drafts") or {}).items()) for d in outcomes]
    if not rows:
        return []
    lines = ["", f"### Draft cases ({len(rows)}: left out of the metrics, the gate and the baseline until their "
             "`draft: true` mark is removed)", "", "| case | outcome |", "| --- | --- |"]
    for model, d in rows[:MAX_ROWS]:
        label = "{}::{}[{}]".format(d["file"], d["id"], model)
        said = d["outcome"] if d["outcome"] != "missed" else (
            f"missed: expected {d['expected_label']}, called {d['called_label']}")
        lines.append(f"| {code(label, table=True)} | {text(said)} |")
    if len(rows) > MAX_ROWS:
        lines.append(f"\n… and {len(rows) - MAX_ROWS} more (the JSON report has every case)")
    return lines


def _marker(change: MetricChange) -> str:
    return "🔻" if change["drop"] else "🔺" if change["improvement"] else ""


def _row(name: str, c: MetricChange) -> str:
    ci = interval(c["ci_low"], c["ci_high"]) or "—"
    p = "—" if c["diff"] is None else format_p(c["p_value"])
    if c["diff"] is not None and c["p_adjusted"] is not None:  # --mcp-drop-correction=holm: the verdict reads it
        p += f" (Holm {format_p(c['p_adjusted'])})"
    return (f"| {name} | {num(c['before'])} | {num(c['after'])} | {num(c['diff'], signed=True)} | {ci} | {p} "
            f"| {c['discordant']} | {_marker(c)} |")


def _sentence(change: MetricChange) -> str:
    """The change's sentence, with the names in it (model, tool) escaped as plain text."""
    metric = change["metric"]
    shown = f"f1[{text(metric[3:-1])}]" if metric.startswith("f1[") else metric
    return sentence(change, model=text(change["model"]), metric=shown)


def comparison_markdown(report: Report) -> str:
    """A pull request summary of the report's comparison with the baseline: gate result, metric and tool tables,
    the tools whose definition changed, flipped cases."""
    comparison: ComparisonSection = report["comparison"]
    level, margin = comparison["level"], comparison["margin"]
    changes = comparison["changes"]
    changed = comparison.get("changed_tools") or {}
    lines = ["## pytest-mcpeval: comparison with the baseline", ""]
    lines += _overlay(report)
    failures = [_sentence(c) for c in changes if c["drop"]]  # the section's drops, escaped
    if failures:
        lines.append(f"❌ **{len(failures)} significant drop{'s' if len(failures) != 1 else ''}** "
                     f"(margin {margin:g}, level {level:g})")
        lines += ["", *(f"- {s}" for s in failures)]
    else:
        lines.append(f"✅ **No significant drop** (margin {margin:g}, level {level:g})")
    header = f"| {{}} | before | after | change | {confidence(level)} CI | p | cases changed | |"
    rule = "| --- | ---: | ---: | ---: | :---: | ---: | ---: | --- |"
    for model, n in (comparison.get("paired") or {}).items():
        own = [c for c in changes if c["model"] == model]
        lines += ["", f"### {text(model)} ({n} paired cases)", ""]
        headline = [c for c in own if not c["metric"].startswith("f1[")]
        if headline:
            lines += [header.format("metric"), rule]
            lines += [_row(c["metric"], c) for c in headline]
        tools = [c for c in own if c["metric"].startswith("f1[")]
        # a tool whose F1 did not move (and whose definition did not change) is one name in a folded line, not a
        # row of +0.000 and p = 1.0000
        moved = [c for c in tools if c["diff"] != 0 or c["metric"][3:-1] in changed]
        still = [c["metric"][3:-1] for c in tools if c not in moved]
        if moved:
            lines += ["", f"**Tool F1** ({text(model)})", "", header.format("tool"), rule]
            for c in moved:
                tool = c["metric"][3:-1]
                lines.append(_row(f"{'✏️ ' if tool in changed else ''}{code(tool, table=True)}", c))
        if still:
            names = ", ".join(code(t) for t in still[:MAX_ROWS]) + (
                f", … and {len(still) - MAX_ROWS} more" if len(still) > MAX_ROWS else "")
            lines += ["", f"Tool F1 unchanged for {len(still)} tool{'s' if len(still) != 1 else ''}: {names}"]
    lines += _changed_tools(changed)
    lines += _flipped_and_left_out(comparison)
    return "\n".join(lines).rstrip() + "\n"


def _changed_tools(changed: Mapping[str, ToolChange]) -> list[str]:
    lines: list[str] = []
    if changed:
        lines += ["", "✏️ tool definition changed since the baseline", ""]
        for tool, change in changed.items():
            old, new = change["before"], change["after"]
            if old == new:
                lines += [f"<details><summary>definition of {html_text(tool)} changed (description unchanged: "
                          "input schema or annotations)</summary>", "", "</details>", ""]
                continue
            diff = difflib.unified_diff(old.splitlines(), new.splitlines(), "baseline", "current", lineterm="")
            lines += [f"<details><summary>description of {html_text(tool)} changed</summary>", "",
                      *fenced("\n".join(diff), "diff"), "", "</details>", ""]
    return lines


def _moved(comparison: ComparisonSection) -> list[str]:
    """Every call that moved, by the tool that gained or lost it (a flip or not)."""
    from pytest_mcpeval.report.moved import by_tool

    moved = comparison.get("moved") or []
    if not moved:
        return []

    def cases(moves: list[Flipped], other: str) -> str:
        shown = [f"{code(m['case'])} ({other} {code(m.get('called_before' if other == 'from' else 'called_after'))}, "
                 f"expected {code(m.get('expected_label'))})" for m in moves[:MOVED_SHOWN]]
        return ", ".join(shown) + (f", … and {len(moves) - MOVED_SHOWN} more" if len(moves) > MOVED_SHOWN else "")

    lines = ["", f"### Calls that moved ({len(moved)} case{'s' if len(moved) != 1 else ''}, passed or missed)", ""]
    for tool, gained, lost in by_tool(moved)[:_LIST_LIMIT]:
        parts = ([f"gained {len(gained)}: {cases(gained, 'from')}"] if gained else []) + (
            [f"lost {len(lost)}: {cases(lost, 'to')}"] if lost else [])
        lines.append(f"- {code(tool)} " + "; ".join(parts))
    return lines


def _flipped_and_left_out(comparison: ComparisonSection) -> list[str]:
    from pytest_mcpeval.report.moved import outcome_share

    lines: list[str] = []
    flipped = comparison["flipped"]
    if flipped:
        shown = flipped[:_LIST_LIMIT]
        lines += ["", f"### Flipped cases ({len(flipped)})", "",
                  "| case | expected | before | after |", "| --- | --- | --- | --- |"]
        for f in shown:
            mark = {True: "✓", False: "✗"}
            before, after = (outcome_share(f, False) or mark[f["before"]]), (outcome_share(f, True) or mark[f["after"]])
            lines.append(f"| {code(f['case'], table=True)} | {code(f['expected_label'], table=True)} "
                         f"| {before} {code(f['called_before'], table=True)} "
                         f"| {after} {code(f['called_after'], table=True)} |")
        if len(flipped) > len(shown):
            lines.append(f"\n… and {len(flipped) - len(shown)} more")
    lines += _moved(comparison)
    for title, keys in (("Only in the baseline", comparison["only_in_baseline"]),
                        ("Only in this run", comparison["only_in_current"]),
                        ("Left out (error on either side)", comparison.get("excluded") or [])):
        if keys:
            lines += ["", f"### {title} ({len(keys)})", ""]
            lines += [f"- {code(k)}" for k in keys[:_LIST_LIMIT]]
            if len(keys) > _LIST_LIMIT:
                lines.append(f"- … and {len(keys) - _LIST_LIMIT} more")
    return lines
