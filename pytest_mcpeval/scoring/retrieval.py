"""Retrieval metrics: where each expected tool ranks when a retriever orders the whole catalog.

Per case, the rank (1 = best) of every expected tool.  Per model, over cases that expect at least one
tool: recall@k = mean over cases of the share of expected tools ranked within the top k; MRR = mean
over cases of 1 / (rank of the best-ranked expected tool).  Per tool: how often it fell outside the
top ``REPORT_K`` and which tools outranked it.  Definitions in docs/metrics.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from pytest_mcpeval.results import CaseResult, CaseRetrieval, RankInfo, RetrievalMetrics, RetrievalTool
from pytest_mcpeval.results.registry import KS

REPORT_K = 5  # the cut-off of the per-tool fields (their names say 5: results.RetrievalTool)
MAX_OUTRANKED = 5


def retrieval_ranks(expects: Sequence[Any], ranking: list[tuple[str, float]], top_k: int) -> CaseRetrieval:
    """What a case keeps of a ranking: the top ``top_k`` and the rank of each expected tool."""
    position = {name: i for i, (name, _) in enumerate(ranking)}
    expected: dict[str, RankInfo] = {}
    for expect in expects:
        i = position.get(expect.tool)
        expected[expect.tool] = {
            "rank": None if i is None else i + 1,
            "score": None if i is None else ranking[i][1],
            "outranked_by": [] if i is None else [name for name, _ in ranking[: min(i, MAX_OUTRANKED)]],
        }
    return {"tools": len(ranking), "top": [(n, s) for n, s in ranking[:top_k]], "expected": expected}


def retrieval_metrics(cases: Sequence[CaseResult]) -> RetrievalMetrics | None:
    """Aggregate over a model's cases; ``None`` when the model produced no rankings (not a retriever)."""
    ranked = [(c, r) for c in cases if not c.get("error") and (r := c.get("retrieval"))]
    if not ranked:
        return None
    scored = [(c, r) for c, r in ranked if r["expected"]]
    recall: dict[str, float | None] = {}
    for k in KS:
        shares = []
        for _, r in scored:
            ranks = [e["rank"] for e in r["expected"].values()]
            shares.append(sum(1 for rank in ranks if rank is not None and rank <= k) / len(ranks))
        recall[str(k)] = sum(shares) / len(shares) if shares else None
    reciprocal = []
    for _, r in scored:
        known_ranks = [e["rank"] for e in r["expected"].values() if e["rank"] is not None]
        reciprocal.append(1.0 / min(known_ranks) if known_ranks else 0.0)
    ranks_of: dict[str, list[int | None]] = {}
    missed: dict[str, list[str]] = {}
    above: dict[str, Counter[str]] = {}
    for c, r in scored:
        for tool, info in r["expected"].items():
            ranks_of.setdefault(tool, []).append(info["rank"])
            missed.setdefault(tool, [])
            above.setdefault(tool, Counter())
            if info["rank"] is None or info["rank"] > REPORT_K:
                missed[tool].append(f"{c['file']}::{c['id']}")
                above[tool].update(info["outranked_by"])
    per_tool: dict[str, RetrievalTool] = {}
    for tool in sorted(ranks_of):
        known = [rank for rank in ranks_of[tool] if rank is not None]
        per_tool[tool] = {
            "cases": len(ranks_of[tool]),
            "mean_rank": sum(known) / len(known) if known else None,
            "recall_at_5": sum(1 for rank in known if rank <= REPORT_K) / len(ranks_of[tool]),
            "outside_top_5": missed[tool],
            "outranked_by": dict(above[tool].most_common()),
        }
    return {
        "cases": len(scored),
        "recall_at": recall,
        "mrr": sum(reciprocal) / len(reciprocal) if reciprocal else None,
        "k": REPORT_K,
        "tools": per_tool,
    }
