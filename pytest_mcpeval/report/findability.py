"""Findability under tool search, as each rendering shows it (docs/tool-search.md): a model's search summary and
its tools in the report's order, the unfindable first, each beside its selection recall.  Formatting only: the
figures and the order are the report's (:mod:`pytest_mcpeval.scoring.search`)."""

from __future__ import annotations

from collections.abc import Iterator

from pytest_mcpeval.numbers import DASH, num, pct
from pytest_mcpeval.report import html_escape
from pytest_mcpeval.report.escape import code
from pytest_mcpeval.results import ModelMetrics, SearchMetrics, SearchTool


def _search(m: ModelMetrics) -> SearchMetrics | None:
    return m.get("search")


def summary(s: SearchMetrics) -> str:
    return (f"tool search ({s['cases']} cases): findability {pct(s['recall'])}, "
            f"{s['searches_per_case'] or 0:.1f} searches and {s['tokens_per_case']:,.0f} tokens per case")


def _selection_recall(m: ModelMetrics, tool: str) -> float | None:
    row = (m.get("tools") or {}).get(tool)
    return row["recall"] if row is not None else None


def _rank(row: SearchTool) -> str:
    return num(row["mean_rank"]) if row["mean_rank"] is not None else DASH


def terminal_lines(m: ModelMetrics, limit: int | None) -> Iterator[str]:
    """The summary, then each tool some search missed (all of them under ``-v``): found in how many cases."""
    s = _search(m)
    if s is None:
        return
    yield f"  {summary(s)}"
    missed = [(t, r) for t, r in s["tools"].items() if r["found"] < r["cases"]]
    for tool, row in missed[:limit]:
        yield (f"  hard to find: {tool:<24} found {row['found']}/{row['cases']} ({pct(row['recall'])}), mean rank "
               f"{_rank(row)}, selection recall {num(_selection_recall(m, tool))}")


def markdown_lines(m: ModelMetrics, rows: int) -> list[str]:
    s = _search(m)
    if s is None:
        return []
    lines = ["", f"{summary(s)[0].upper()}{summary(s)[1:]}.", "",
             "| tool | cases | found | findability | mean rank | selection recall |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    lines += [f"| {code(t, table=True)} | {r['cases']} | {r['found']} | {pct(r['recall'])} | {_rank(r)} "
              f"| {num(_selection_recall(m, t))} |" for t, r in list(s["tools"].items())[:rows]]
    return lines


def html_section(m: ModelMetrics) -> str:
    s = _search(m)
    if s is None:
        return ""
    text = html_escape.text
    body = "".join(
        f"<tr><td>{text(t)}<td class=n>{r['cases']}<td class=n>{r['found']}<td class=n>{html_escape.pct(r['recall'])}"
        f"<td class=n>{html_escape.num(r['mean_rank'])}<td class=n>{html_escape.num(_selection_recall(m, t))}</tr>"
        for t, r in s["tools"].items())
    return (f"<h3>Tool search</h3><p>{text(summary(s))}. The unfindable tools first.</p><table class=sortable>"
            "<thead><tr><th>tool<th>cases<th>found<th>findability<th>mean rank<th>selection recall</tr></thead>"
            f"<tbody>{body}</tbody></table>")
