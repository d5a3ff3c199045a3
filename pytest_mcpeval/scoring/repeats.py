"""Repeated runs (``--mcp-repeat=K``): per case success counts, pass@k, pass^k and flaky cases.

With ``n`` runs of a case of which ``c`` passed (τ-bench's definitions, averaged over cases):

* pass@k = 1 - C(n - c, k) / C(n, k): the chance that at least one of k runs passes;
* pass^k = C(c, k) / C(n, k): the chance that all k runs pass (reliability, not best-of).

A case is *flaky* when it both passed and missed.  Errored runs are left out (they say nothing about
the model); a case with fewer scored runs than k does not count for that k.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from math import comb

from pytest_mcpeval.results import CaseResult, JudgeUsage, RepeatMetrics, UsageMetrics


def pass_at_k(n: int, c: int, k: int) -> float:
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    return comb(c, k) / comb(n, k)


def repeat_metrics(cases: Sequence[CaseResult]) -> RepeatMetrics:
    if not any(case.get("repeat") for case in cases):  # one run per case: pass@1 = pass^1 = pass rate
        outcomes = [bool(c["passed"]) for c in cases if not c.get("error") and c.get("passed") is not None]
        rate = sum(outcomes) / len(outcomes) if outcomes else None
        runs = 1 if outcomes else 0
        at: dict[str, float | None] = {"1": rate} if outcomes else {}
        return {"runs": runs, "pass_at_k": at, "pass_hat_k": dict(at), "flaky": [], "successes": {}}
    counts: dict[tuple[str, str], list[int]] = {}
    for case in cases:
        if case.get("error") or case.get("passed") is None:
            continue
        entry = counts.setdefault((case["file"], case["id"]), [0, 0])
        entry[0] += 1
        entry[1] += int(bool(case["passed"]))
    k_max = max((n for n, _ in counts.values()), default=0)
    pass_at: dict[str, float | None] = {}
    pass_hat: dict[str, float | None] = {}
    tally = Counter(tuple(v) for v in counts.values())  # cases share few (n, c) pairs: compute each once
    for k in range(1, k_max + 1):
        eligible = [(n, c, times) for (n, c), times in tally.items() if n >= k]
        weight = sum(times for _, _, times in eligible)
        pass_at[str(k)] = sum(pass_at_k(n, c, k) * t for n, c, t in eligible) / weight if weight else None
        pass_hat[str(k)] = sum(pass_hat_k(n, c, k) * t for n, c, t in eligible) / weight if weight else None
    repeated = k_max > 1  # per-case counts only mean something with repeats
    return {
        "runs": k_max,
        "pass_at_k": pass_at,
        "pass_hat_k": pass_hat,
        "flaky": sorted(f"{f}::{i}" for (f, i), (n, c) in counts.items() if 0 < c < n),
        "successes": {f"{f}::{i}": (c, n) for (f, i), (n, c) in sorted(counts.items())} if repeated else {},
    }


def usage_metrics(cases: Sequence[CaseResult]) -> UsageMetrics:
    """Tokens, cost and latency of a model's calls; replayed (cached) calls cost nothing.

    ``cost_usd`` is the sum over the paid cases only when every one of them was priced; when some were not
    (a model missing from litellm's cost map), it is ``None`` ("cost unknown"), never a sum that passes for the
    whole bill: ``unpriced_calls`` says how many, and ``priced_cost_usd`` is the sum over the priced ones (a
    lower bound of the bill).  Cached input tokens (read from / written to the provider's prompt cache) are
    counted as the providers report them; ``prompt_tokens`` includes them."""
    calls = prompt_tokens = completion_tokens = retries = cache_read = cache_write = unpriced = 0
    costs: list[float] = []
    latencies: list[float] = []
    loads: list[float] = []
    for case in cases:  # one pass (100,000 results in a report)
        if "load_s" in case:  # the local model's load: apart from the latency, an error case's included
            loads.append(float(case["load_s"]))
        usage = case.get("usage")
        if usage is None or case.get("error"):
            continue
        calls += 1
        if not usage.get("cached"):
            latencies.append(case.get("latency_s", 0.0))
            prompt_tokens += int(usage.get("prompt_tokens", 0))
            completion_tokens += int(usage.get("completion_tokens", 0))
            cache_read += int(usage.get("cache_read_tokens", 0))
            cache_write += int(usage.get("cache_write_tokens", 0))
            retries += max(0, int(usage.get("attempts", 1)) - 1)
            if (cost := usage.get("cost_usd")) is not None:
                costs.append(cost)
            else:
                unpriced += 1
    latencies.sort()

    def quantile(q: float) -> float | None:
        if not latencies:
            return None
        return float(latencies[min(len(latencies) - 1, int(q * len(latencies)))])

    out: UsageMetrics = {
        "calls": calls,
        "cached": calls - len(latencies),
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "cache_read_tokens": cache_read,
        "cache_write_tokens": cache_write,
        "cost_usd": sum(costs) if costs and not unpriced else None,
        "priced_cost_usd": sum(costs) if costs else None,
        "priced_calls": len(costs),
        "unpriced_calls": unpriced,
        "retries": retries,
        "latency_s": {
            "mean": sum(latencies) / len(latencies) if latencies else None,
            "p50": quantile(0.5),
            "p95": quantile(0.95),
            "max": latencies[-1] if latencies else None,
        },
    }
    if loads:
        out["load_s"], out["loads"] = round(sum(loads), 4), len(loads)
    return out


def judge_usage_metrics(cases: Sequence[CaseResult]) -> dict[str, JudgeUsage]:
    """Per judge model: the cases it judged, how many were replayed, tokens, cost and attempts (counted apart
    from the model's own usage)."""
    out: dict[str, JudgeUsage] = {}
    for case in cases:
        for judge, usage in (case.get("judge_usage") or {}).items():
            entry = out.setdefault(judge, {"cases": 0, "cached": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                           "cost_usd": 0.0, "attempts": 0})
            entry["cases"] += 1
            entry["cached"] += bool(usage.get("cached"))
            entry["prompt_tokens"] += int(usage.get("prompt_tokens", 0))
            entry["completion_tokens"] += int(usage.get("completion_tokens", 0))
            entry["attempts"] += int(usage.get("attempts", 0))
            cost = usage.get("cost_usd")
            entry["cost_usd"] = None if cost is None or entry["cost_usd"] is None else entry["cost_usd"] + cost
    return dict(sorted(out.items()))
