"""The drop gate on each tool's findability under tool search (docs/tool-search.md): ``findability[TOOL]``.

Over the paired single-call cases that ran under search on both sides and expect the tool (it is in both sides'
``search.found``), the case's outcome is whether its searches surfaced the tool (the mean over its repeats), and
the change is tested as every 0/1 mean is (:func:`~pytest_mcpeval.gate.paired.mean_change`: the exact McNemar
test, the sign-flip test when some case has repeats)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_mcpeval.gate.paired import mean_change
from pytest_mcpeval.results import MetricChange

Pair = tuple[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]]]


def _found_of(case: Mapping[str, Any]) -> Mapping[str, Any]:
    """A case's ``search.found`` (a baseline keeps it as ``found``); ``{}`` for a case not run under search."""
    found = case.get("found", (case.get("search") or {}).get("found"))
    return found if isinstance(found, Mapping) else {}


def _found(repeats: Sequence[Mapping[str, Any]], tool: str) -> float | None:
    """The share of the repeats whose searches surfaced ``tool``; ``None`` when one did not look for it."""
    found = [_found_of(c) for c in repeats]
    if not found or any(tool not in f for f in found):
        return None
    return sum(f[tool] is not None for f in found) / len(found)


def findability_changes(model: str, pairs: Sequence[Pair], margin: float, level: float, resamples: int,
                        seed: int) -> list[MetricChange]:
    """One change per tool some paired case under search expects, by name."""
    tools = sorted({t for before, after in pairs for side in (before, after) for c in side for t in _found_of(c)})
    changes = []
    for tool in tools:
        values = [[b, a] for before, after in pairs
                  if (b := _found(before, tool)) is not None and (a := _found(after, tool)) is not None]
        if values:
            clustered = any(len(before) > 1 or len(after) > 1 for before, after in pairs)
            changes.append(mean_change(model, f"findability[{tool}]", "mcnemar", values, margin, level, resamples,
                                       seed, clustered))
    return changes
