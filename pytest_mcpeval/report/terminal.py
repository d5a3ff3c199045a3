"""The compact terminal summary: per model accuracy, macro F1, worst tools, confused pairs, misses."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from pytest_mcpeval.text import plural

MAX_MISSES = 20
WORST_TOOLS = 5


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _short(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _checked(args: Mapping[str, Any]) -> dict[str, Any]:
    """Expected arguments without the ones marked ``{ignore: true}``: nothing is expected of those."""
    return {k: v for k, v in args.items() if not (isinstance(v, Mapping) and "ignore" in v)}


def miss_lines(case: Mapping[str, Any]) -> list[str]:
    """A readable expected-vs-called diff for one case."""
    lines = [f"{case['file']}:{case.get('line', 0)}::{case['id']}[{case['model']}]  {case.get('diagnosis')}"]
    for e in case.get("expected") or [{"tool": "(none)"}]:
        lines.append(f"  - expected {e['tool']}" + (f" {_short(_checked(e['args']))}" if "args" in e else ""))
    for c in case.get("called") or [{"tool": "(none)"}]:
        shown = _short(c["args"]) if c.get("args") is not None else (f"{c.get('raw', '')!r}" if "raw" in c else "")
        lines.append(f"  + called   {c['tool']} {shown}".rstrip())
    args = case.get("arguments") or {}
    if args.get("malformed"):
        lines.append(f"    malformed arguments: {args['malformed']}")
    for m in args.get("mismatched", []):
        lines.append(f"    {m['name']}: expected {_short(m['expected'], 80)}, got {_short(m['got'], 80)}")
    for key, label in (("missing_expected", "missing expected"), ("missing_required", "missing required"),
                       ("hallucinated", "not in the tool's schema"), ("unexpected", "not expected")):
        if args.get(key):
            lines.append(f"    {label}: {', '.join(args[key])}")
    return lines


def lint_lines(report: Mapping[str, Any], top: int = 10) -> Iterator[str]:
    """Per linted file: its problems count and the tools that read most alike (with observed confusions)."""
    for file, entry in (report.get("lint") or {}).items():
        pairs = entry["confusable"]
        yield f"lint {file}: {plural(len(entry['problems']), 'problem')}, {plural(len(pairs), 'confusable pair')}"
        confused = [p for p in pairs if p["confused"]]
        shown = pairs[:top] + [p for p in confused if p not in pairs[:top]]
        for pair in shown:
            seen = f", confused {pair['confused']}x in this run" if pair["confused"] else ""
            yield f"  {pair['tools'][0]} ~ {pair['tools'][1]}: similarity {pair['similarity']:.2f}{seen}"


def summary_lines(report: Mapping[str, Any], verbose: int = 0) -> Iterator[str]:
    for info in report.get("catalogs", {}).values():
        heavy = sorted(info["tools"].items(), key=lambda kv: (-kv[1]["tokens"], kv[0]))[:3]
        names = ", ".join(f"{name} {tool['tokens']:,}" for name, tool in heavy)
        yield (f"catalog {info['server']}: {len(info['tools'])} tools, {info['tokens']:,} tokens per request "
               f"(heaviest: {names})")
    for name, m in report["models"].items():
        yield (
            f"{name}: {m['scored']} scored, {plural(m['errors'], 'error')} | accuracy {_pct(m['accuracy'])} | "
            f"macro F1 {_num(m['macro_f1'])} | passed {_pct(m['pass_rate'])}"
        )
        a = m["arguments"]
        if a.get("applicable", True):
            yield (
                f"  arguments ({a['evaluated']} calls): hallucination {_pct(a['hallucination_rate'])}, "
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
            outside = f"outside_top_{r['k']}"
            hard = sorted(((t, v) for t, v in r["tools"].items() if v[outside]),
                          key=lambda tv: (-len(tv[1][outside]), tv[0]))
            for tool, v in hard[: WORST_TOOLS if not verbose else None]:
                above = ", ".join(list(v["outranked_by"])[:3])
                yield (f"  hard to retrieve: {tool} outside the top {r['k']} in "
                       f"{len(v[outside])}/{v['cases']} cases (outranked by {above})")
        ranked = sorted(
            ((t, v) for t, v in m["tools"].items() if v["f1"] is not None and v["f1"] < 1.0),
            key=lambda tv: (tv[1]["f1"], tv[0]),
        )
        for tool, v in ranked[: WORST_TOOLS if not verbose else None]:
            yield (
                f"  {tool:<28} P {_num(v['precision'])}  R {_num(v['recall'])}  F1 {_num(v['f1'])}  "
                f"support {v['support']}"
            )
        for pair in m["confused_pairs"][:5]:
            yield f"  confused: expected {pair['expected']} -> called {pair['called']} ({pair['count']}x)"
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
        for case in errors[: None if verbose else MAX_MISSES]:
            yield f"  {case['file']}::{case['id']}[{case['model']}]: {case['error']}"
