"""The compact terminal summary: per model accuracy, macro F1, worst tools, confused pairs, misses."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from pytest_mcpeval.numbers import NA, metric_value, num, pct
from pytest_mcpeval.report import case_notes, findability
from pytest_mcpeval.report.tool_rows import detects, never_expected, power_lines, weak_tools
from pytest_mcpeval.report.usage import cost_text, tokens_text
from pytest_mcpeval.results import CaseResult, CatalogInfo, ModelMetrics, Report
from pytest_mcpeval.results.registry import HEADLINE, METRICS
from pytest_mcpeval.text import plural

MAX_MISSES = 20
SAME_ERROR_NAMED = 5  # cases named after the first of those failing with the same error
WORST_TOOLS = 5


def _pct(value: float | None) -> str:
    return pct(value, missing=NA)


def _num(value: float | None) -> str:
    return num(value, missing=NA)


def _short(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _checked(args: Mapping[str, Any]) -> dict[str, Any]:
    """Expected arguments without the ones marked ``{ignore: true}``: nothing is expected of those."""
    return {k: v for k, v in args.items() if not (isinstance(v, Mapping) and "ignore" in v)}


def flow_miss_lines(case: CaseResult) -> list[str]:
    """A failed flow: what was expected (and why no call met it), the transcript, the claims short of 1."""
    lines = [f"{case['file']}:{case.get('line', 0)}::{case['id']}[{case['model']}]  {case.get('diagnosis')} "
             f"(flow, order {case.get('order')}, {plural(case.get('turns', 0), 'turn')})"]
    matches = case.get("matches") or []
    for j, e in enumerate(case.get("expected") or []):
        args = f" {_short(_checked(e['args']))}" if "args" in e else ""
        problems = matches[j]["problems"] if j < len(matches) else []
        met = j < len(matches) and matches[j]["call"] is not None
        lines.append(f"  - expected {e['tool']}{args}" + ("" if met else "   <- not met"))
        lines.extend(f"      {p}" for p in problems[:3])
    for t, turn in enumerate(case.get("trajectory") or []):
        for call in turn["calls"]:
            shown = _short(call["args"]) if call["args"] is not None else repr(call.get("raw", ""))
            answer = call["answer"]
            flag = " ERROR" if answer["is_error"] else ""
            lines.append(f"  + turn {t}: {call['tool']} {shown}  -> {answer['source']}{flag}")
    for tool in case.get("forbidden_called") or []:
        lines.append(f"    forbidden tool called: {tool}")
    if case.get("final_answer") is not None:
        lines.append(f"  = answer: {_short(case['final_answer'], 200)}")
    lines.extend(f"    {note}" for note in case_notes.notes(case))
    for claim in case.get("claims") or []:
        if claim["score"] < 1:
            lines.append(f"    claim {claim['verdict']} ({claim['method']}): {claim['claim']}")
    if case.get("coverage") is not None:
        lines.append(f"    coverage {case['coverage']:.2f}")
    return lines


def miss_lines(case: CaseResult) -> list[str]:
    """A readable expected-vs-called diff for one case."""
    if case.get("flow"):
        return flow_miss_lines(case)
    lines = [f"{case['file']}:{case.get('line', 0)}::{case['id']}[{case['model']}]  {case.get('diagnosis')}"]
    for e in case.get("expected") or [{"tool": "(none)"}]:
        lines.append(f"  - expected {e['tool']}" + (f" {_short(_checked(e['args']))}" if "args" in e else ""))
    for c in case.get("called") or [{"tool": "(none)"}]:
        shown = _short(c["args"]) if c.get("args") is not None else (f"{c.get('raw', '')!r}" if "raw" in c else "")
        lines.append(f"  + called   {c['tool']} {shown}".rstrip())
    lines.extend(f"    {note}" for note in case_notes.notes(case))
    args = case.get("arguments")
    if args is None:
        return lines
    if args["malformed"]:
        lines.append(f"    malformed arguments: {args['malformed']}")
    for m in args["mismatched"]:
        lines.append(f"    {m['name']}: expected {_short(m['expected'], 80)}, got {_short(m['got'], 80)}")
    for names, label in ((args["missing_expected"], "missing expected"), (args["missing_required"], "missing required"),
                         (args["hallucinated"], "not in the tool's schema"), (args["unexpected"], "not expected")):
        if names:
            lines.append(f"    {label}: {', '.join(names)}")
    return lines


def lint_lines(report: Report, top: int = 10) -> Iterator[str]:
    """Per linted file: its problems count and the tools that read most alike (with observed confusions)."""
    for file, entry in (report.get("lint") or {}).items():
        pairs = entry["confusable"]
        unchecked = sum(1 for p in entry["problems"] if p["kind"] == "unchecked")  # reported, never failing
        problems = plural(len(entry["problems"]) - unchecked, "problem")
        also = f" ({unchecked} unchecked)" if unchecked else ""
        yield f"lint {file}: {problems}{also}, {plural(len(pairs), 'confusable pair')}"
        drafts = entry.get("drafts") or []
        if drafts:  # apart: proposed cases a person has not reviewed yet (docs/drafting.md)
            shown_ids = ", ".join(drafts[:top]) + (f", ... {len(drafts) - top} more" if len(drafts) > top else "")
            yield f"  {plural(len(drafts), 'draft case')} (left out of the gate until reviewed): {shown_ids}"
        confused = [p for p in pairs if p["confused"]]
        shown = pairs[:top] + [p for p in confused if p not in pairs[:top]]
        for pair in shown:
            seen = f", confused {pair['confused']}x in this run" if pair["confused"] else ""
            yield f"  {pair['tools'][0]} ~ {pair['tools'][1]}: similarity {pair['similarity']:.2f}{seen}"


def summary_lines(report: Report, verbose: int = 0) -> Iterator[str]:
    """The run's summary: the overlay it ran with, each catalog, each model, then the misses and the errors."""
    from pytest_mcpeval.report.overlay_line import overlay_line

    overlaid = overlay_line(report)
    if overlaid:
        yield overlaid
    yield from catalog_lines(report)
    for name, m in report["models"].items():
        yield from model_lines(name, m, verbose)
    yield from case_lines(report, verbose)


def catalog_lines(report: Report) -> Iterator[str]:
    """Per server: its tools, their tokens per request and the heaviest of them."""
    by_server: dict[str, list[CatalogInfo]] = {}  # cases with `tools`/`distractors` show parts of a server's catalog
    for info in report.get("catalogs", {}).values():
        by_server.setdefault(info["server"], []).append(info)
    for server, infos in by_server.items():
        info = max(infos, key=lambda i: (len(i["tools"]), i["tokens"]))
        heavy = sorted(info["tools"].items(), key=lambda kv: (-kv[1]["tokens"], kv[0]))[:3]
        names = ", ".join(f"{name} {tool['tokens']:,}" for name, tool in heavy)
        parts = ""
        if len(infos) > 1:
            sizes = sorted(len(i["tools"]) for i in infos)
            parts = f"; {len(infos)} tool sets shown, {sizes[0]}-{sizes[-1]} tools"
        started = [i["startup_s"] for i in infos if "startup_s" in i]  # a live server's start to its tool list
        if started:
            parts += f"; started in {max(started):.2f} s"
        yield (f"catalog {server}: {len(info['tools'])} tools, {info['tokens']:,} tokens per request "
               f"(heaviest: {names}){parts}")


def model_lines(name: str, m: ModelMetrics, verbose: int = 0) -> Iterator[str]:
    """One model: its headline numbers (the registry's HEADLINE), flows, claims, usage and judges, then
    what went wrong (:func:`_problem_lines`)."""
    flows, claims = m.get("flows"), m.get("claims")
    family = f" ({m['scored'] - flows['cases']} single calls, {plural(flows['cases'], 'flow')})" if flows else ""
    blocked = f" ({m.get('blocked')} blocked by the provider's safety filter)" if m.get("blocked") else ""
    yield (
        f"{name}: {m['scored']} scored{family}, {plural(m['errors'], 'error')}{blocked} | "
        + " | ".join(f"{METRICS[key].title} {metric_value(key, METRICS[key].read(m), NA)}" for key in HEADLINE)
    )
    if flows:
        yield (f"  flows ({flows['cases']} cases): passed {_pct(flows['pass_rate'])}, order held "
               f"{_pct(flows['order_match_rate'])}, exact tool set {_pct(flows['exact_set_rate'])} | "
               f"multi-label micro F1 {_num(flows['micro_f1'])}, macro F1 {_num(flows['macro_f1'])}")
    if claims:
        yield (f"  claims ({plural(claims['cases'], 'case')}): mean coverage {_num(claims['mean_coverage'])}, "
               f"passed {_pct(claims['pass_rate'])}")
    usage = m.get("usage")
    if usage and usage["calls"] > usage["cached"]:  # calls made by this run: what they cost
        yield (f"  usage: {plural(usage['calls'] - usage['cached'], 'call')} made ({usage['cached']} replayed), "
               f"{tokens_text(usage)}, {cost_text(usage)}")
    for judge, used in (m.get("judges") or {}).items():
        cost = "cost unknown" if used["cost_usd"] is None else f"${used['cost_usd']:.4f}"
        yield (f"  judge {judge}: {plural(used['cases'], 'case')} ({used['cached']} replayed), "
               f"{used['prompt_tokens']:,} + {used['completion_tokens']:,} tokens, {cost}")
    yield from _problem_lines(m, verbose)


def _problem_lines(m: ModelMetrics, verbose: int) -> Iterator[str]:
    """Accuracy by tools shown, top failures, invented tools, arguments, retrieval, weak tools, confusions."""
    shown = m.get("by_tools_shown") or []
    if len(shown) > 1:
        yield "  by tools shown: " + ", ".join(
            f"{row['tools_shown']} tools {_pct(row['accuracy'])} of {row['cases']}" if row["cases"]
            else f"{row['tools_shown']} tools: flows passed {_pct(row['flow_pass_rate'])} of {row['flows']}"
            for row in shown)
    top = sorted(m["diagnoses"].items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    if top:
        yield "  top failures: " + ", ".join(f"{mode} {count}" for mode, count in top)
    invented = sorted(m.get("hallucinated_tools", {}).items(), key=lambda kv: (-kv[1], kv[0]))
    if invented:
        yield ("  invented tools (not in the catalog; each a miss, left out of macro F1): "
               + ", ".join(f"{tool} ({plural(count, 'case')})" for tool, count in invented))
    a = m["arguments"]
    if a.get("applicable", True):
        yield (
            f"  arguments ({plural(a['evaluated'], 'call')}): hallucination {_pct(a['hallucination_rate'])}, "
            f"all expected {_pct(a['all_expected_rate'])}, all required {_pct(a['all_required_rate'])}, "
            f"exact {_pct(a['exact_match_rate'])}"
        )
    else:
        yield "  arguments: not applicable (a retriever picks a tool and fills no arguments)"
    r = m.get("retrieval")
    if r is not None:
        recall = r["recall_at"]
        yield (
            f"  retrieval ({r['cases']} cases): recall@1 {_pct(recall['1'])}, @3 {_pct(recall['3'])}, "
            f"@5 {_pct(recall['5'])}, @10 {_pct(recall['10'])} | MRR {_num(r['mrr'])}"
        )
        hard = sorted(((t, v) for t, v in r["tools"].items() if v["outside_top_5"]),
                      key=lambda tv: (-len(tv[1]["outside_top_5"]), tv[0]))
        for tool, v in hard[: WORST_TOOLS if not verbose else None]:
            above = ", ".join(list(v["outranked_by"])[:3])
            yield (f"  hard to retrieve: {tool} outside the top {r['k']} in "
                   f"{len(v['outside_top_5'])}/{v['cases']} cases (outranked by {above})")
    yield from findability.terminal_lines(m, WORST_TOOLS if not verbose else None)
    for tool, tm in weak_tools(m["tools"])[: WORST_TOOLS if not verbose else None]:
        yield (
            f"  {tool:<28} P {_num(tm['precision'])}  R {_num(tm['recall'])}  F1 {_num(tm['f1'])}  "
            f"support {tm['support']}" + (f"  detects {detects(tm)}" if detects(tm) else "")
        )
    stray = never_expected(m["tools"])
    if stray:
        listed = stray[: WORST_TOOLS if not verbose else None]
        more = f", ... {len(stray) - len(listed)} more" if len(stray) > len(listed) else ""
        calls = plural(sum(n for _, n in stray), "call")
        yield (f"  called, never expected: {plural(len(stray), 'tool')}, {calls} ("
               + ", ".join(f"{tool} {n}x" for tool, n in listed) + f"{more})")
    for pair in m["confused_pairs"][:5]:
        yield f"  confused: expected {pair['expected']} -> called {pair['called']} ({pair['count']}x)"
    yield from (f"  {line}" for line in power_lines(m.get("power")))


def case_lines(report: Report, verbose: int = 0) -> Iterator[str]:
    """The misses (each as :func:`miss_lines`) and the errors, excluded from the metrics."""
    misses = [c for c in report["cases"] if c.get("passed") is False]
    if misses:
        yield f"misses ({len(misses)}):"
        limit = None if verbose else MAX_MISSES
        for case in misses[:limit]:
            yield from miss_lines(case)
        if limit is not None and len(misses) > limit:
            yield f"  ... {len(misses) - limit} more (-v shows all; --mcp-report writes every case)"
    errors = [c for c in report["cases"] if c.get("error")]
    if errors:
        yield f"errors, excluded from the metrics ({len(errors)}):"
        same: dict[str, list[Any]] = {}  # one line per message: a model that cannot start fails every case alike
        for case in errors:
            same.setdefault(str(case["error"]), []).append(case)
        for message, cases in list(same.items())[: None if verbose else MAX_MISSES]:
            first = cases[0]
            more = ""
            if len(cases) > 1:
                shown = [f"{c['id']}[{c['model']}]" for c in cases[1:SAME_ERROR_NAMED + 1]]
                rest = len(cases) - 1 - len(shown)
                more = f" and {len(cases) - 1} more ({', '.join(shown)}{f', ... {rest} more' if rest else ''})"
            yield f"  {first['file']}::{first['id']}[{first['model']}]{more}: {message}"
