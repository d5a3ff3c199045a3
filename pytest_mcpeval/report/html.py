"""The HTML report (``--mcp-html``): one self-contained page per run, rendered from the report.

Self-contained: the style sheet and the script are inline, charts are inline SVG or plain HTML, and a
Content-Security-Policy forbids every fetch, so the page opens the same from a CI artifact, a file URL or a
mail attachment.  The script only adds filters and sorting; everything is readable without it.

What it shows (docs/report-html.md): the gate; with ``--mcp-compare``, the comparison with its significance
verdicts and, for every tool whose definition changed since the baseline, its description diff next to its
F1 change; the checks (each file's tool-catalog snapshot with its diff, its lint findings); per model, the
headline numbers with the report's bootstrap intervals (``ModelMetrics.intervals``), the
confusion matrix as a heatmap (:func:`~.html_data.label_order`), per-tool precision/recall/F1 bars with the
baseline's F1 marked, the argument errors, a retriever's recall@k curve, pass@k and pass^k with repeats and
each flow's transcript; the catalogs' token cost per tool; and a table of every case.

:func:`render` is a pure function of the report (the comparison, the changed tools and the baseline's F1 are
its ``comparison`` section); every untrusted string is escaped
(:mod:`.html_escape`).  This module renders the page, the gate, the comparison, the description changes and
the catalogs; :mod:`.html_model` one model's section (:mod:`.html_heatmap` its confusion heatmap, bounded at
any catalog size), :mod:`.html_cases` the cases and the flow transcripts, :mod:`.html_checks` the snapshots
and the lint,
:mod:`.html_assets` holds the style sheet and the script.
"""

from __future__ import annotations

from collections.abc import Mapping

from pytest_mcpeval.numbers import confidence
from pytest_mcpeval.report.html_assets import CSS, JS, script_hash
from pytest_mcpeval.report.html_cases import cases_table, flow_anchor
from pytest_mcpeval.report.html_checks import checks
from pytest_mcpeval.report.html_data import DiffLine, line_diff
from pytest_mcpeval.report.html_escape import LONG, attr, num, pct, script_json, text
from pytest_mcpeval.report.html_model import LIST, delta, fmt, model_section, model_title
from pytest_mcpeval.report.overlay_line import overlay_line
from pytest_mcpeval.results import Flipped, MetricChange, Report
from pytest_mcpeval.results.registry import title as metric_title
from pytest_mcpeval.text import plural

__all__ = ["render"]

_HEAVIEST = 15  # tools of a catalog shown before "all N tools"


def _section(anchor: str, title: str, body: str) -> str:
    return f'<section id="{anchor}"><h2>{title}</h2>{body}</section>'


# --------------------------------------------------------------------------------------------- page parts


def _gate(report: Report) -> str:
    gate = report.get("gate") or {}
    problems = [*gate.get("usage_errors", []), *gate.get("failures", [])]
    if problems:
        items = "".join(f"<li>{text(p, LONG)}</li>" for p in problems)
        return f'<div class="gate fail"><b>Gate failed</b> ({plural(len(problems), "failure")})<ul>{items}</ul></div>'
    shown = [*(f"<code>{text(t)}</code>" for t in gate.get("thresholds") or []),
             *(text(c, LONG) for c in gate.get("checks") or [])]
    if shown:
        return f'<div class="gate pass"><b>Gate passed</b>: {", ".join(shown)}</div>'
    return '<div class="gate pass"><b>Gate passed</b>: no thresholds were set, nothing gated this run.</div>'


def _moved(moved: list[Flipped]) -> str:
    """Every call that moved, by the tool that gained or lost it: a flip or not (report/moved.py)."""
    from pytest_mcpeval.report.moved import by_tool

    if not moved:
        return ""

    def cases(moves: list[Flipped], key: str) -> str:
        items = "".join(f"<li>{text(m['case'], 400)} <span class=muted>({'from' if key == 'called_before' else 'to'} "
                        f"{text(m.get(key) or '(none)')}, expected {text(m.get('expected_label') or '(none)')})"
                        "</span></li>" for m in moves[:LIST])
        more = f"<li>… and {len(moves) - LIST} more</li>" if len(moves) > LIST else ""
        return f"<details><summary>{len(moves)}</summary><ul>{items}{more}</ul></details>" if moves else "0"

    rows = "".join(f"<tr><td>{text(tool)}<td>{cases(gained, 'called_before')}<td>{cases(lost, 'called_after')}</tr>"
                   for tool, gained, lost in by_tool(moved))
    return (f"<h3>Calls that moved ({plural(len(moved), 'case')}, passed or missed)</h3><table><thead><tr><th>tool"
            f"<th>gained<th>lost</tr></thead><tbody>{rows}</tbody></table>")


def _comparison(report: Report) -> str:
    comparison = report.get("comparison")
    if not comparison:
        return ""
    level = comparison.get("level", 0.05)
    rows = []
    for c in comparison.get("changes") or []:
        if c["metric"].startswith("f1[") and not (c["drop"] or c["improvement"]):
            continue  # in the model's tool table (and the description changes)
        rows.append(f"<tr><td>{text(c['model'])}<td>{text(metric_title(c['metric']))}"
                    f"<td class=n>{fmt(c['metric'], c['before'])}<td class=n>{fmt(c['metric'], c['after'])}"
                    f"<td>{delta(c)}</tr>")
    holm = comparison.get("correction") == "holm"
    p_rule = (f"its Holm-adjusted p &lt; {level:g} (exact paired tests, each model's changes one family)" if holm
              else f"p &lt; {level:g} (exact paired test)")
    out = [f"<p>Baseline <code>{text(comparison.get('baseline', ''), LONG)}</code>; a change is significant when "
           f"{p_rule} and a drop or an improvement when it is also larger than "
           f"{comparison.get('margin', 0):g}. Intervals: {confidence(level)} paired bootstrap. Tool F1 changes "
           "are in each model's tool table; only the drops and improvements among them are listed here.</p>"]
    if rows:
        out.append("<table><thead><tr><th>model<th>metric<th>before<th>after<th>change</tr></thead><tbody>"
                   + "".join(rows) + "</tbody></table>")
    flipped = comparison.get("flipped") or []
    if flipped:
        from pytest_mcpeval.report.moved import outcome_share

        mark = {True: '<span class="ok">✓</span>', False: '<span class="bad">✗</span>'}
        items = "".join(
            f"<tr><td>{text(f['case'], 400)}<td>{text(f.get('expected_label') or '')}"
            f"<td>{text(outcome_share(f, False) or '') or mark[bool(f['before'])]} {text(f.get('called_before') or '')}"
            f"<td>{text(outcome_share(f, True) or '') or mark[bool(f['after'])]} {text(f.get('called_after') or '')}"
            "</tr>" for f in flipped[:LIST])
        more = f"<p class=muted>… and {len(flipped) - LIST} more</p>" if len(flipped) > LIST else ""
        out.append(f"<h3>Flipped cases ({len(flipped)})</h3><table><thead><tr><th>case<th>expected<th>before"
                   f"<th>after</tr></thead><tbody>{items}</tbody></table>{more}")
    out.append(_moved(comparison.get("moved") or []))
    for title, keys in (("Only in the baseline", comparison["only_in_baseline"]),
                        ("Only in this run", comparison["only_in_current"])):
        if keys:
            shown = "".join(f"<li>{text(k, 400)}</li>" for k in keys[:LIST])
            more = f"<li>… and {len(keys) - LIST} more</li>" if len(keys) > LIST else ""
            out.append(f"<details><summary>{title} ({len(keys)})</summary><ul>{shown}{more}</ul></details>")
    return _section("comparison", "Comparison with the baseline", "".join(out))


_LINE = {"=": ('<span class="dl">', " "), "-": ('<span class="dl del">', "-"), "+": ('<span class="dl ins">', "+")}
_WORD = {"-": "del", "+": "ins"}


def _diff_lines(lines: list[DiffLine]) -> str:
    """One ``<span class="dl">`` per line (a block: the page needs no newline), its sign first, the words that
    changed within it in ``<del>`` or ``<ins>``."""
    out = []
    for op, runs in lines:
        opening, sign = _LINE[op]
        body = "".join(f"<{_WORD[op]}>{text(chunk, LONG)}</{_WORD[op]}>" if changed and op in _WORD
                       else text(chunk, LONG) for changed, chunk in runs)
        out.append(f'{opening}<span class="sign">{sign}</span>{body}</span>')
    return "".join(out)


def _description_changes(report: Report, changes: Mapping[tuple[str, str], MetricChange]) -> str:
    """For every tool whose definition changed since the baseline: its F1 change per model next to the diff."""
    comparison = report.get("comparison")
    changed = (comparison.get("changed_tools") if comparison else None) or {}
    if not changed:
        return ""
    models = list(report.get("models") or {})
    blocks = []
    for tool, change in changed.items():
        old, new = change["before"], change["after"]
        rows = []
        for model in models:
            c = changes.get((model, f"f1[{tool}]"))
            if c is not None:
                rows.append(f"<tr><td>{text(model)}<td class=n>{num(c['before'])} → {num(c['after'])}"
                            f"<td>{delta(c)}</tr>")
        f1 = ("<table><thead><tr><th>model<th>F1<th>change</tr></thead><tbody>" + "".join(rows)
              + "</tbody></table>") if rows else ("<p class=muted>No F1 change measured: no paired single call "
                                                  "expected or called this tool.</p>")
        if old == new:
            diff = ("<p class=muted>The description is unchanged: its input schema or annotations changed.</p>"
                    f'<pre class="diff">{text(new, LONG)}</pre>')
        else:
            diff = f'<pre class="diff">{_diff_lines(line_diff(old, new))}</pre>'
        blocks.append(f'<div class="desc-change" data-tool="{attr(tool)}"><div class="delta"><h3><code>'
                      f'{text(tool)}</code></h3>{f1}</div><div><h3>description: baseline → this run</h3>'
                      f"{diff}</div></div>")
    intro = (f"<p>{plural(len(changed), 'tool')} changed since the baseline (the definition hashes of the "
             "catalogs differ). Removed lines are marked -, added lines +, and within a changed line the words that "
             "changed are struck through or highlighted.</p>")
    return _section("descriptions", "Description changes", intro + "".join(blocks))


def _catalogs(report: Report) -> str:
    catalogs = report.get("catalogs") or {}
    if not catalogs:
        return ""
    out = []
    for digest, info in catalogs.items():
        tools = sorted(info["tools"].items(), key=lambda kv: (-kv[1].get("tokens", 0), kv[0]))
        top = max((t.get("tokens", 0) for _, t in tools), default=0) or 1
        total = info.get("tokens") or 0
        rows = [f"<tr><td title=\"{attr(t.get('description', ''), 1000)}\">{text(name)}"
                f"<td class=s data-v=\"{t.get('tokens', 0)}\">"
                f'<span class="bar tok"><i style="width:{100 * t.get("tokens", 0) / top:.1f}%"></i></span>'
                f"{t.get('tokens', 0):,}<td class=n>{pct(t.get('tokens', 0) / total if total else None)}</tr>"
                for name, t in tools]
        head = "<table class=sortable><thead><tr><th>tool<th>tokens<th>share</tr></thead><tbody>"
        shown = f"{head}{''.join(rows[:_HEAVIEST])}</tbody></table>"
        if len(rows) > _HEAVIEST:
            shown += (f"<details><summary>all {len(rows)} tools</summary>{head}{''.join(rows[_HEAVIEST:])}"
                      "</tbody></table></details>")
        out.append(f"<h3>{text(info.get('server', ''), 400)} <span class=\"ci\">catalog {text(digest)}</span></h3>"
                   f"<p>{plural(len(tools), 'tool')}, {total:,} tokens per request"
                   f"{f'; the {_HEAVIEST} heaviest' if len(rows) > _HEAVIEST else ''}:</p>{shown}")
    return _section("catalogs", "Catalogs: token cost per tool", "".join(out))


# ---------------------------------------------------------------------------------------------- the page


def render(report: Report) -> str:
    """The page for ``report`` (with a ``comparison``, the comparison and the description diffs too)."""
    models = report.get("models") or {}
    cases = report.get("cases") or []
    comparison = report.get("comparison")
    method = report.get("intervals") or {"level": 0.05, "resamples": 0, "seed": 0}
    level = float(method["level"])
    changes = {(c["model"], c["metric"]): c for c in (comparison["changes"] if comparison else [])}
    changed = set((comparison.get("changed_tools") if comparison else None) or {})
    names = list(models)
    model_index = {name: i for i, name in enumerate(names)}
    anchors = {i: flow_anchor(i) for i, c in enumerate(cases) if c.get("flow")}
    run_models = (report.get("run") or {}).get("models") or {}
    baseline_tools = (comparison.get("baseline_tools") if comparison else None) or {}
    sections = [_section(f"model-{i}", f"Model {model_title(name, run_models)}",
                         model_section(name, models[name], cases, anchors, changes, changed,
                                       baseline_tools.get(name) or {}, level))
                for i, name in enumerate(names)]
    nav = [('<a href="#comparison">comparison</a>' if comparison else ""),
           ('<a href="#descriptions">description changes</a>' if changed else ""),
           ('<a href="#checks">checks</a>' if report.get("snapshots") or report.get("lint") else ""),
           *(f'<a href="#model-{i}">{text(name)}</a>' for i, name in enumerate(names)),
           ('<a href="#catalogs">catalogs</a>' if report.get("catalogs") else ""), '<a href="#all-cases">cases</a>']
    run = report.get("run") or {}
    notes = []
    overlaid = overlay_line(report)
    if overlaid:
        notes.append(f'<p class="overlay">{text(overlaid, LONG)}</p>')
    if run.get("interrupted"):
        notes.append(f'<p class="bad">The run did not finish: {text(run.get("stopped", "interrupted"), LONG)}</p>')
    for path in run.get("collect_errors") or []:
        notes.append(f'<p class="bad">Not collected: {text(path, 400)}</p>')
    skipped = report.get("skipped") or []
    if skipped:  # not run, not in any metric: listed, so that a skip never passes for a case that ran
        rows = "".join(f"<tr><td>{text(s['file'], 400)}:{s['line']}<td>{text(s['id'])}<td>{text(s['model'] or '')}"
                       f"<td>{text(s['reason'], LONG)}</tr>" for s in skipped)
        notes.append(f"<details><summary>{plural(len(skipped), 'case item')} skipped: not run, not in the "
                     "metrics</summary><table><thead><tr><th>file<th>case<th>model<th>reason</tr></thead>"
                     f"<tbody>{rows}</tbody></table></details>")
    said = (f"Intervals: {confidence(level)} percentile bootstrap over cases ({method['resamples']:,} resamples, "
            f"seed {method['seed']}; the repeats of a case are resampled together).")
    found = checks(report)
    checks_section = _section("checks", "Checks: catalog snapshots and lint", found) if found else ""
    data = {"models": names, "diagnoses": sorted({str(c["diagnosis"]) for c in cases if c.get("diagnosis")})}
    body = (f'<header><h1>pytest-mcpeval report</h1><p class="muted">plugin {text(report.get("plugin_version", ""))} '
            f'· {plural(len(cases), "case")} · {plural(len(names), "model")}</p><nav>{"".join(nav)}</nav></header>'
            f"<main>{_gate(report)}{''.join(notes)}<p class=muted>{said}</p>{_comparison(report)}"
            f"{_description_changes(report, changes)}{checks_section}{''.join(sections)}"
            f"{_catalogs(report)}"
            + _section("all-cases", f"All cases ({len(cases)})",
                       "<p class=muted>Each miss and error expands to what was expected and what the model did."
                       "</p>" + cases_table(cases, model_index, anchors)) + "</main>")
    csp = (f"default-src 'none'; style-src 'unsafe-inline'; script-src {script_hash(JS)}; img-src data:; "
           "base-uri 'none'; form-action 'none'")
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
            '<link rel="icon" href="data:,"><title>pytest-mcpeval report</title>'
            f"<style>{CSS}</style></head><body>{body}"
            f'<script type="application/json" id="mcpeval-data">{script_json(data)}</script>'
            f"<script>{JS}</script></body></html>\n")
