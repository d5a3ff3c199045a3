"""The HTML report's part for one model: headline cards with intervals and the comparison's verdicts, the
confusion heatmap, per-tool bars with the baseline marked, argument errors, the recall@k curve, pass@k and
pass^k, and the flow transcripts (:mod:`.html_cases`).  Pure rendering of the report: the intervals are the
model's ``intervals``, the comparison's rows its ``comparison`` section; :mod:`.html_data` only arranges them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_mcpeval.numbers import DASH, confidence, interval
from pytest_mcpeval.numbers import metric_value as fmt
from pytest_mcpeval.report import findability
from pytest_mcpeval.report.html_cases import flow_transcripts
from pytest_mcpeval.report.html_data import argument_problems, recall_curve
from pytest_mcpeval.report.html_escape import num, p_value, pct, sort_value, text
from pytest_mcpeval.report.html_heatmap import heatmap
from pytest_mcpeval.report.tool_rows import detects, power_lines
from pytest_mcpeval.report.usage import cost_text, tokens_text
from pytest_mcpeval.results import CaseResult, Interval, MetricChange, ModelMetrics
from pytest_mcpeval.results.registry import METRICS, title
from pytest_mcpeval.text import plural

__all__ = ["LIST", "cards", "delta", "fmt", "model_section", "model_title"]

LIST = 200  # items of a long list shown (flipped cases, keys only in one run)


def verdict(change: Mapping[str, Any]) -> tuple[str, str]:
    """(css class, words) of a comparison's verdict on one metric."""
    if change.get("diff") is None:
        return "ns", "not comparable"
    if change.get("drop"):
        return "drop", "significant drop"
    if change.get("improvement"):
        return "up", "significant improvement"
    if change.get("significant"):
        return "ns", "significant, within the margin"
    return "ns", "not significant"


def delta(change: Mapping[str, Any] | None) -> str:
    """``+0.050 [-0.020, +0.110] p = 0.0312 significant drop`` for a comparison entry."""
    if change is None:
        return ""
    css, words = verdict(change)
    if change.get("diff") is None:
        return f'<span class="{css}">{words}</span>'
    shown = interval(change.get("ci_low"), change.get("ci_high"))
    ci = "" if shown is None else f' <span class="ci">{shown}</span>'
    adjusted = change.get("p_adjusted")  # --mcp-drop-correction=holm: the verdict reads this one
    holm = "" if adjusted is None else f" (Holm-adjusted {p_value(adjusted)})"
    return (f'<span class="{css}">{change["diff"]:+.3f}</span>{ci} '
            f'<span class="ci">{p_value(change["p_value"])}{holm}, '
            f'{int(change.get("discordant", 0))} of {int(change.get("n", 0))} changed</span> '
            f'<span class="verdict {css}">{words}</span>')


def cards(metrics: ModelMetrics, estimates: Mapping[str, Interval],
          changes: Mapping[tuple[str, str], MetricChange], model: str, level: float) -> str:
    """The headline numbers with their intervals (the report's) and, when compared, the change against the
    baseline."""
    out = []
    for key, est in estimates.items():
        low, high = est["low"], est["high"]
        ci = ("" if low is None or high is None
              else f'<div class="ci">{confidence(level)} CI [{fmt(key, low)}, {fmt(key, high)}]</div>')
        change = changes.get((model, key))
        versus = f'<div class="ci">vs baseline {fmt(key, change["before"])}: {delta(change)}</div>' if change else ""
        entry = METRICS.get(key)
        unit = "flows" if entry is not None and entry.family in ("flows", "claims") else "cases"
        out.append(f'<div class="card"><div class="k">{title(key)} <span class="ci">({est["n"]} {unit})</span>'
                   f'</div><div class="v">{fmt(key, est["value"])}</div>{ci}{versus}</div>')
    retrieval = metrics.get("retrieval")
    if retrieval:
        out.append(f'<div class="card"><div class="k">recall@5 · MRR</div><div class="v">'
                     f'{pct(retrieval["recall_at"].get("5"))} · {num(retrieval["mrr"])}</div></div>')
    args = metrics.get("arguments") or {}
    if args.get("applicable", True) and args.get("evaluated"):
        out.append(f'<div class="card"><div class="k">exact arguments <span class="ci">({args["evaluated"]} '
                     f'calls)</span></div><div class="v">{pct(args["exact_match_rate"])}</div></div>')
    out.append(f'<div class="card"><div class="k">scored · errors</div><div class="v">{metrics["scored"]} · '
                 f'<span class="{"bad" if metrics["errors"] else ""}">{metrics["errors"]}</span></div></div>')
    return f'<div class="cards">{"".join(out)}</div>'


def _usage(metrics: ModelMetrics) -> str:
    usage = metrics.get("usage")
    if not usage or not usage["calls"]:
        return ""
    latency = usage["latency_s"]
    p50 = "—" if latency["p50"] is None else f"{latency['p50']:.2f} s"
    p95 = "—" if latency["p95"] is None else f"{latency['p95']:.2f} s"
    load = ""
    if usage.get("load_s") is not None:  # the local model's load: once per process, apart from the latency
        load = (f"; model load {usage['load_s']:.2f} s ({plural(int(usage.get('loads') or 0), 'load')}, once per "
                "process and catalog, not in the latency)")
    return (f"<p class=muted>{usage['calls']} calls ({usage['cached']} replayed), {tokens_text(usage)}, "
            f"{cost_text(usage)}, latency p50 {p50}, p95 {p95}{load}</p>")


def bar(value: float | None, marker: float | None = None, css: str = "") -> str:
    width = "" if value is None else f'<i style="width:{100 * value:.1f}%"></i>'
    mark = "" if marker is None else f'<b style="left:{100 * marker:.1f}%" title="baseline {marker:.3f}"></b>'
    return f'<span class="bar{css}">{width}{mark}</span>'


def _tools(model: str, metrics: ModelMetrics, changes: Mapping[tuple[str, str], MetricChange],
           changed: set[str], baseline_f1: Mapping[str, float | None]) -> str:
    """Precision, recall and F1 bars per tool; the baseline's F1 marked on the F1 bar: the comparison's (paired
    cases) where it has one, else the baseline run's (which stores no precision or recall per tool)."""
    tools = metrics.get("tools") or {}
    if not tools:
        return ""
    rows: list[str] = []
    still: list[str] = []
    idle = sorted(t for t, m in tools.items() if not m["support"] and not m["predicted"])  # no case, no call: no row
    ordered = sorted(((t, m) for t, m in tools.items() if t not in idle),
                     key=lambda kv: (kv[1]["f1"] is None, kv[1]["f1"] or 0.0, kv[0]))
    for tool, m in ordered:
        change = changes.get((model, f"f1[{tool}]"))
        into = still if change is not None and change["diff"] == 0 and tool not in changed else rows
        before = change["before"] if change else baseline_f1.get(tool)
        edited = ' <span class="badge" title="definition changed since the baseline">edited</span>' \
            if tool in changed else ""
        seen = detects(m) if m["support"] else ""  # a tool no case expects has no recall to watch: no figure
        into.append(
            f"<tr{' class=blind' if seen == 'blind' else ''}><td>{text(tool)}{edited}"
            f'<td class=s data-v="{sort_value(m["precision"])}">{bar(m["precision"])}{num(m["precision"])}'
            f'<td class=s data-v="{sort_value(m["recall"])}">{bar(m["recall"])}{num(m["recall"])}'
            f'<td class=s data-v="{sort_value(m["f1"])}">{bar(m["f1"], before)}{num(m["f1"])}'
            f'<td class=n>{m["support"]}<td class=n>{m["predicted"]}'
            f'<td class=n data-v="{sort_value(m.get("detectable_drop"))}">{seen or DASH}'
            f'<td data-v="{sort_value(change["diff"] if change else None)}">{delta(change)}</tr>')
    note = (" The black mark on an F1 bar is the baseline's F1 (on the paired cases where compared)."
            if changes or baseline_f1 else "")
    if idle:
        note += f" {plural(len(idle), 'tool')} no case expects and the model never called: no row."
    power = "".join(f"<p class=muted>{text(line[0].upper() + line[1:])}.</p>"
                    for line in power_lines(metrics.get("power")))
    if any(detects(m) for m in tools.values()):
        note += (" <i>detects</i>: the smallest fall in the tool's recall the drop gate could flag; <i>blind</i> "
                 "(dimmed): too few single-call cases expect the tool for any drop to be significant.")
    head = ("<table class=sortable><thead><tr><th>tool<th>precision<th>recall<th>F1<th>support<th>predicted"
            "<th>detects<th>F1 change</tr></thead><tbody>")
    folded = (f"<details class=unchanged><summary>{plural(len(still), 'tool')} with F1 unchanged since the "
              f"baseline</summary>{head}{''.join(still)}</tbody></table></details>") if still else ""
    return ("<h3>Per tool (single calls)</h3><p class=muted>Weakest F1 first; click a column to sort." + note
            + f"</p>{power}{head}{''.join(rows)}</tbody></table>{folded}")


def _arguments(metrics: ModelMetrics, cases: Sequence[CaseResult]) -> str:
    args = metrics.get("arguments") or {}
    if not args.get("applicable", True) or not args.get("evaluated"):
        return ""
    overall = (f"<p>{args['evaluated']} calls of the right tool: hallucinated argument "
               f"{pct(args['hallucination_rate'])}, all expected present {pct(args['all_expected_rate'])}, "
               "all required present "
               f"{pct(args['all_required_rate'])}, exact {pct(args['exact_match_rate'])}.</p>")
    per_tool = []
    for tool, m in sorted((metrics.get("tools") or {}).items()):
        a = m["arguments"]
        if a["evaluated"]:
            per_tool.append(f"<tr><td>{text(tool)}<td class=n>{a['evaluated']}"
                            f"<td class=n>{pct(a['hallucination_rate'])}<td class=n>{pct(a['all_expected_rate'])}"
                            f"<td class=n>{pct(a['all_required_rate'])}"
                            f"<td class=n>{pct(a['exact_match_rate'])}</tr>")
    table = ("<table class=sortable><thead><tr><th>tool<th>calls<th>hallucinated<th>all expected<th>all required"
             f"<th>exact</tr></thead><tbody>{''.join(per_tool)}</tbody></table>") if per_tool else ""
    problems = argument_problems(cases)
    kinds = {"malformed": "malformed arguments", "hallucinated": "not in the schema", "missing_required":
             "required, missing", "missing_expected": "expected, missing", "unexpected": "not expected",
             "mismatched": "wrong value"}
    rows = "".join(f"<tr><td>{text(tool)}<td>{kinds[kind]}<td>{f'<code>{text(name)}</code>' if name else ''}"
                   f"<td class=n>{count}</tr>" for tool, kind, name, count in problems[:LIST])
    breakdown = ("<table class=sortable><thead><tr><th>tool<th>problem<th>argument<th>calls</tr></thead>"
                 f"<tbody>{rows}</tbody></table>") if rows else "<p class=ok>No argument problem.</p>"
    return f"<h3>Argument errors</h3>{overall}{table}{breakdown}"


def recall_svg(curve: Sequence[tuple[int, float]], marked: Mapping[str, float | None]) -> str:
    """recall@k against k (log scale) as an inline SVG line; the report's recall@1/3/5/10 are marked."""
    if not curve:
        return ""
    width, height, left, right, top, bottom = 420, 200, 40, 12, 10, 28
    size = curve[-1][0]
    span = math.log(size) if size > 1 else 1.0

    def x(k: float) -> float:
        return left + (width - left - right) * (math.log(k) / span if size > 1 else 0.5)

    def y(v: float) -> float:
        return top + (height - top - bottom) * (1 - v)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             'aria-label="recall at k">']
    for v in (0, 0.25, 0.5, 0.75, 1):
        parts.append(f'<line class="grid" x1="{left}" x2="{width - right}" y1="{y(v):.1f}" y2="{y(v):.1f}"/>'
                     f'<text x="{left - 4}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.0%}</text>')
    ticks = sorted({k for k in (1, 3, 5, 10, 20, 50, 100) if k < size and x(size) - x(k) > 24} | {size})
    for k in ticks:
        parts.append(f'<text x="{x(k):.1f}" y="{height - bottom + 14}" text-anchor="middle">{k}</text>')
    parts.append(f'<text x="{(left + width) / 2:.0f}" y="{height - 2}" text-anchor="middle">k (tools retrieved)'
                 "</text>")
    points = " ".join(f"{x(k):.1f},{y(v):.1f}" for k, v in curve)
    parts.append(f'<polyline class="curve" points="{points}"/>')
    for key, value in marked.items():
        if value is not None and int(key) <= size:
            parts.append(f'<circle class="pt" cx="{x(int(key)):.1f}" cy="{y(value):.1f}" r="3.5">'
                         f"<title>recall@{key} = {value:.1%}</title></circle>")
    return "".join(parts) + "</svg>"


def _retrieval(metrics: ModelMetrics, cases: Sequence[CaseResult]) -> str:
    retrieval = metrics.get("retrieval")
    if not retrieval:
        return ""
    at = retrieval["recall_at"]
    summary = ", ".join(f"@{k} {pct(v)}" for k, v in at.items())
    hard = sorted(((t, r) for t, r in retrieval["tools"].items() if r["recall_at_5"] < 1.0),
                  key=lambda tr: (tr[1]["recall_at_5"], tr[0]))
    rows = "".join(
        f"<tr><td>{text(t)}<td class=n>{r['cases']}<td class=n>{num(r['mean_rank'])}<td class=n>{pct(r['recall_at_5'])}"
        f"<td>{', '.join(f'{text(o)} ({n})' for o, n in list(r['outranked_by'].items())[:5])}</tr>" for t, r in hard)
    table = ("<table class=sortable><thead><tr><th>tool<th>cases<th>mean rank<th>recall@5<th>outranked by</tr>"
             f"</thead><tbody>{rows}</tbody></table>") if rows else ""
    return (f"<h3>Retrieval ranks</h3><p>{retrieval['cases']} cases: recall {summary}, MRR {num(retrieval['mrr'])}"
            f"</p>{recall_svg(recall_curve(cases), at)}{table}")


def _repeats(metrics: ModelMetrics) -> str:
    repeats = metrics.get("repeats")
    if not repeats or repeats["runs"] < 2:
        return ""
    rows = "".join(f"<tr><td class=n>{k}<td class=n>{pct(v)}<td class=n>{pct(repeats['pass_hat_k'].get(k))}</tr>"
                   for k, v in repeats["pass_at_k"].items())
    flaky = repeats.get("flaky") or []
    listed = "".join(f"<li>{text(f, 400)} ({'/'.join(map(str, repeats['successes'].get(f, ())))})</li>"
                     for f in flaky[:LIST])
    return (f"<h3>Repeats ({repeats['runs']} runs per case)</h3><p class=muted>pass@k: at least one of k runs passes; "
            "pass^k: all k pass.</p><table><thead><tr><th>k<th>pass@k<th>pass^k</tr></thead><tbody>"
            f"{rows}</tbody></table>" + (f"<p>{plural(len(flaky), 'flaky case')} (passed / runs):</p><ul>{listed}</ul>"
                                         if flaky else ""))


def _flow_metrics(metrics: ModelMetrics) -> str:
    flows, claims = metrics.get("flows"), metrics.get("claims")
    if not flows:
        return ""
    line = (f"<p>{flows['cases']} flows: passed {pct(flows['pass_rate'])}, order held {pct(flows['order_match_rate'])}"
            f", exact tool set {pct(flows['exact_set_rate'])}, multi-label micro F1 {num(flows['micro_f1'])}, macro F1 "
            f"{num(flows['macro_f1'])}")
    if claims:
        line += f"; claims: mean coverage {num(claims['mean_coverage'])} over {claims['cases']} flows"
    return line + ".</p>"


def model_title(name: str, run_models: Mapping[str, Any]) -> str:
    target = run_models[name]["target"] if name in run_models else None
    return text(name) + (f' <span class="ci">{text(target)}</span>' if target and target != name else "")


def model_section(name: str, metrics: ModelMetrics, cases: Sequence[CaseResult], anchors: Mapping[int, str],
                  changes: Mapping[tuple[str, str], MetricChange], changed: set[str],
                  baseline_f1: Mapping[str, float | None], level: float) -> str:
    """Everything the page shows of one model (``anchors``: the transcript ids of the flows in ``cases``;
    ``baseline_f1``: the baseline's F1 per tool for this model, ``{}`` without a baseline)."""
    own = [c for c in cases if c.get("model") == name]
    estimates = metrics.get("intervals") or {}
    parts = [cards(metrics, estimates, changes, name, level), _usage(metrics), _flow_metrics(metrics)]
    if metrics["confusion"]["labels"]:
        parts.append("<h3>Confusion matrix (single calls)</h3><p class=muted>Rows: the expected tool; columns: the "
                     "tool called first. Tools confused with each other sit together; hover a cell for its "
                     f"count.</p>{heatmap(metrics['confusion'])}")
    parts += [_tools(name, metrics, changes, changed, baseline_f1), _arguments(metrics, own), _retrieval(metrics, own),
              findability.html_section(metrics), _repeats(metrics)]
    flows = {j: anchors[j] for j, c in enumerate(cases) if j in anchors and c.get("model") == name}
    if flows:
        parts.append(f"<h3>Flow transcripts ({len(flows)})</h3><p class=muted>Flows that did not pass are open."
                     f"</p>{flow_transcripts(cases, flows)}")
    return "".join(parts)
