"""Tool search, scored (docs/tool-search.md): what a case's searches found, why a case under search missed, and
each tool's findability over a model's cases.

A search surfaces a tool at a rank (1 = the first it answered with); a case *finds* an expected tool when any
of its searches surfaced it (its best rank is kept).  Tools the file keeps loaded are shown without a search:
they are in no ``found``.  A missed case under search gets the diagnosis that says where it went wrong, the first
rule that applies (docs/metrics.md#diagnoses):

* ``no_search``: a tool was expected and the model neither searched nor called one;
* ``not_found``: an expected tool was not called and no search surfaced it (its description was not found by the
  words the model searched with);
* ``found_not_chosen``: an expected tool a search surfaced was not called (another tool or none was);
* otherwise the diagnosis of the call itself (wrong arguments, ...).

Findability (:func:`search_metrics`) counts distinct cases (file and id): a case found a tool when a search of
any of its repeats surfaced it, at the best rank any of them gave it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pytest_mcpeval.results import CalledTool, CaseResult, CaseSearch, SearchMetrics, SearchTool

SEARCH_DIAGNOSES = ("no_search", "not_found", "found_not_chosen")


def found_ranks(expected: Iterable[str], answers: Sequence[Sequence[str]],
                loaded: Iterable[str]) -> dict[str, int | None]:
    """Per expected tool not loaded: its best rank (1-based) over the searches' ``answers``, or ``None``."""
    skip = set(loaded)
    found: dict[str, int | None] = {}
    for tool in dict.fromkeys(expected):
        if tool in skip:
            continue
        ranks = [answer.index(tool) + 1 for answer in answers if tool in answer]
        found[tool] = min(ranks) if ranks else None
    return found


def surfaced(answers: Sequence[Sequence[str]]) -> list[str]:
    """Every tool the searches answered with, best rank first, then the order surfaced."""
    best: dict[str, tuple[int, int]] = {}
    order = 0
    for answer in answers:
        for rank, tool in enumerate(answer):
            if tool not in best:
                best[tool] = (rank, order)
                order += 1
            else:
                best[tool] = (min(best[tool][0], rank), best[tool][1])
    return sorted(best, key=lambda t: best[t])


def case_recall(search: CaseSearch) -> float | None:
    """The share of the case's tools to find that its searches surfaced (``None`` when it has none to find)."""
    found = search["found"]
    return round(sum(rank is not None for rank in found.values()) / len(found), 4) if found else None


def diagnosis(search: CaseSearch, expected: Sequence[str], calls: Sequence[CalledTool], passed: bool,
              own: str | None) -> str | None:
    """The diagnosis of a case under search (the rules above); ``own`` is the call's diagnosis."""
    if passed or not expected:
        return own
    called = {c["tool"] for c in calls}
    if not search["queries"] and not calls:
        return "no_search"
    missed = [t for t in expected if t not in called and t in search["found"]]
    if any(search["found"][t] is None for t in missed):
        return "not_found"
    if missed:
        return "found_not_chosen"
    return own


def search_metrics(cases: Sequence[CaseResult]) -> SearchMetrics | None:
    """A model's findability over its scored cases run under search (single calls and flows); ``None`` without."""
    runs = [c for c in cases if not c.get("error") and c.get("search") is not None]
    if not runs:
        return None
    by_case: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for case in runs:
        by_case.setdefault((case["file"], case["id"]), []).append(case["search"])
    tools: dict[str, dict[str, Any]] = {}
    pairs = found_pairs = 0
    for searches in by_case.values():
        for tool in dict.fromkeys(t for s in searches for t in s["found"]):
            ranks = [s["found"][tool] for s in searches if s["found"].get(tool) is not None]
            row = tools.setdefault(tool, {"cases": 0, "found": 0, "ranks": []})
            row["cases"] += 1
            pairs += 1
            if ranks:
                row["found"] += 1
                row["ranks"].append(min(ranks))
                found_pairs += 1
    out: dict[str, SearchTool] = {
        tool: {"cases": row["cases"], "found": row["found"], "recall": round(row["found"] / row["cases"], 4),
               "mean_rank": round(sum(row["ranks"]) / len(row["ranks"]), 4) if row["ranks"] else None}
        for tool, row in tools.items()
    }
    return {
        "cases": len(by_case),
        "recall": round(found_pairs / pairs, 4) if pairs else None,
        "searches_per_case": round(sum(len(c["search"]["queries"]) for c in runs) / len(runs), 4),
        "tokens_per_case": round(sum(_tokens(c) for c in runs) / len(runs), 1),
        "tools": dict(least_findable(out)),
    }


def _tokens(case: CaseResult) -> int:
    usage: Mapping[str, Any] = case.get("usage") or {}
    return int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))


def least_findable(tools: Mapping[str, SearchTool]) -> list[tuple[str, SearchTool]]:
    """The tools by findability, the unfindable first (lowest recall, then most cases, then name): the order the
    report keeps them in, and every rendering shows."""
    return sorted(tools.items(), key=lambda r: (r[1]["recall"] if r[1]["recall"] is not None else 2.0,
                                                 -r[1]["cases"], r[0]))
