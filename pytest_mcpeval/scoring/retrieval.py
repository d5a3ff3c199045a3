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

KS = (1, 3, 5, 10)
REPORT_K = 5
MAX_OUTRANKED = 5


def retrieval_ranks(expects: Sequence[Any], ranking: list[tuple[str, float]], top_k: int) -> dict[str, Any]:
    """What a case keeps of a ranking: the top ``top_k`` and the rank of each expected tool."""
    position = {name: i for i, (name, _) in enumerate(ranking)}
    expected: dict[str, Any] = {}
    for expect in expects:
        i = position.get(expect.tool)
        expected[expect.tool] = {
            "rank": None if i is None else i + 1,
            "score": None if i is None else ranking[i][1],
            "outranked_by": [] if i is None else [name for name, _ in ranking[: min(i, MAX_OUTRANKED)]],
        }
    return {"tools": len(ranking), "top": [[n, s] for n, s in ranking[:top_k]], "expected": expected}


def retrieval_metrics(cases: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Aggregate over a model's cases; ``None`` when the model produced no rankings (not a retriever)."""
    ranked = [c for c in cases if not c.get("error") and c.get("retrieval")]
    if not ranked:
        return None
    scored = [c for c in ranked if c["retrieval"]["expected"]]
    recall: dict[str, float | None] = {}
    for k in KS:
        shares = []
        for c in scored:
            ranks = [e["rank"] for e in c["retrieval"]["expected"].values()]
            shares.append(sum(1 for r in ranks if r is not None and r <= k) / len(ranks))
        recall[str(k)] = sum(shares) / len(shares) if shares else None
    reciprocal = []
    for c in scored:
        ranks = [e["rank"] for e in c["retrieval"]["expected"].values() if e["rank"] is not None]
        reciprocal.append(1.0 / min(ranks) if ranks else 0.0)
    tools: dict[str, dict[str, Any]] = {}
    for c in scored:
        for tool, info in c["retrieval"]["expected"].items():
            entry = tools.setdefault(tool, {"cases": 0, "ranks": [], "missed": [], "outranked_by": Counter()})
            entry["cases"] += 1
            entry["ranks"].append(info["rank"])
            if info["rank"] is None or info["rank"] > REPORT_K:
                entry["missed"].append(f"{c['file']}::{c['id']}")
                entry["outranked_by"].update(info["outranked_by"])
    per_tool = {}
    for tool in sorted(tools):
        entry = tools[tool]
        known = [r for r in entry["ranks"] if r is not None]
        per_tool[tool] = {
            "cases": entry["cases"],
            "mean_rank": sum(known) / len(known) if known else None,
            f"recall_at_{REPORT_K}": sum(1 for r in known if r <= REPORT_K) / entry["cases"],
            f"outside_top_{REPORT_K}": entry["missed"],
            "outranked_by": dict(entry["outranked_by"].most_common()),
        }
    return {
        "cases": len(scored),
        "recall_at": recall,
        "mrr": sum(reciprocal) / len(reciprocal) if reciprocal else None,
        "k": REPORT_K,
        "tools": per_tool,
    }
