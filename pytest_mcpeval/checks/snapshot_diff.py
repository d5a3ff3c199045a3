"""What changed between a catalog's snapshot and the server's tools, tool by tool.

syrupy's diff of the whole catalog is one JSON document's: it shows changed lines with a few around them, so the
tool a changed ``description`` belongs to is cut away (its ``name`` sorts after ``description``) and a pull request
with several changed tools reads as one blur.  Here each changed tool is named, in name order, with a diff of its
own, after a line that counts them: ``tools changed: 2 (list_issues, search_issues); added: 1 (close_issue)``.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from typing import Any

CONTEXT = 1  # lines around each change within a tool


def _by_name(tools: Any) -> dict[str, Mapping[str, Any]] | None:
    if not isinstance(tools, list) or not all(isinstance(t, Mapping) and isinstance(t.get("name"), str)
                                              for t in tools):
        return None
    return {str(t["name"]): t for t in tools}


def stored_tools(recalled: Any) -> dict[str, Mapping[str, Any]] | None:
    """The snapshot's tools by name (syrupy's JSON extension keeps the JSON text), ``None`` if it is not that."""
    if isinstance(recalled, str):
        try:
            recalled = json.loads(recalled)
        except ValueError:
            return None
    return _by_name(recalled)


def _lines(tool: Mapping[str, Any]) -> list[str]:
    return json.dumps(tool, indent=2, ensure_ascii=False, sort_keys=True).splitlines()


def tool_diff(before: Mapping[str, Mapping[str, Any]], after: Sequence[Mapping[str, Any]]) -> tuple[str, list[str]]:
    """``(summary, lines)``: the count of changed, added and removed tools, then each one's diff under its name."""
    now = _by_name(list(after)) or {}
    changed = sorted(name for name in now.keys() & before.keys() if now[name] != before[name])
    added = sorted(now.keys() - before.keys())
    removed = sorted(before.keys() - now.keys())
    parts = [f"{what}: {len(names)} ({', '.join(names)})"
             for names, what in ((changed, "tools changed"), (added, "added"), (removed, "removed")) if names]
    lines: list[str] = []
    for name in sorted([*changed, *added, *removed]):
        old = _lines(before[name]) if name in before else []
        new = _lines(now[name]) if name in now else []
        mark = " (added)" if not old else " (removed)" if not new else ""
        lines.append(f"{name}{mark}:")
        body = [line for line in difflib.unified_diff(old, new, lineterm="", n=CONTEXT)
                if not line.startswith(("---", "+++"))]
        lines += ["  ..." if line.startswith("@@") else f"  {line}" for line in body[1:]]  # no "..." before the first
    return "; ".join(parts), lines
