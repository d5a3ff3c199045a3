"""What the two runs' catalogs say to the comparison: each tool's definitions, the tools whose definition
changed since the baseline, and the labels that are real tools (not names a model invented).  Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_mcpeval.results import ToolChange
from pytest_mcpeval.results.case import NONE


def _catalog_tools(entry: Any) -> Mapping[str, Any]:
    """The tools of one catalog entry: ``{tool: {hash, description}}``, or that under ``"tools"`` (the
    ``{server, tools, tokens}`` form)."""
    if not isinstance(entry, Mapping):
        return {}
    nested = entry.get("tools")
    if isinstance(nested, Mapping) and nested and all(isinstance(v, Mapping) for v in nested.values()):
        return nested
    return entry


def definitions(report: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """tool -> {hash: description} over every catalog of the report (catalogs in digest order)."""
    out: dict[str, dict[str, str]] = {}
    catalogs = report.get("catalogs") or {}
    for digest in sorted(catalogs):
        for tool, info in _catalog_tools(catalogs[digest]).items():
            if isinstance(info, Mapping):
                out.setdefault(tool, {}).setdefault(str(info.get("hash")), str(info.get("description") or ""))
    return out


def changed_tools(baseline: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, ToolChange]:
    """Tools in both runs' catalogs whose definition hashes differ: tool -> its description before and after."""
    before, after = definitions(baseline), definitions(current)
    out: dict[str, ToolChange] = {}
    for tool in sorted(before.keys() & after.keys()):
        b, a = before[tool], after[tool]
        if set(b) != set(a):
            old = [d for h, d in b.items() if h not in a] or list(b.values())
            new = [d for h, d in a.items() if h not in b] or list(a.values())
            out[tool] = {"before": old[0], "after": new[0]}
    return out



def known_labels(baseline: Mapping[str, Any], current: Mapping[str, Any]) -> set[str] | None:
    """The tools of both runs' catalogs and ``(none)``: the labels that are no invented tool name.  ``None``
    when neither run has a catalog (a report made by hand, an old file): nothing then tells an invented
    name from a real tool, and macro F1 averages over every label."""
    tools = set(definitions(baseline)) | set(definitions(current))
    return tools | {NONE} if tools else None
