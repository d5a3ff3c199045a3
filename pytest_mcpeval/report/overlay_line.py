"""How every rendering says that a run used ``--mcp-overlay``: the descriptions it shows are the overlay's, not the
server's (a pull request's "description changes since the baseline" would otherwise read as edits to the server)."""

from __future__ import annotations

from pytest_mcpeval.results import Report

SHOWN_TOOLS = 8  # tools named before "and N more"


def overlay_line(report: Report) -> str | None:
    """``overlay tune/overlay.yaml (2 tools: list_issues, search_issues): their descriptions are the overlay's, not
    the server's``; ``None`` for a run without an overlay."""
    overlay = (report.get("run") or {}).get("overlay")
    if not overlay:
        return None
    tools = sorted({t for changed in (overlay.get("catalogs") or {}).values() for t in changed}) or list(
        overlay.get("tools") or [])
    more = len(tools) - SHOWN_TOOLS
    named = ", ".join(tools[:SHOWN_TOOLS]) + (f" and {more} more" if more > 0 else "")
    count = f"{len(tools)} tool{'s' if len(tools) != 1 else ''}"
    return (f"overlay {overlay.get('path')} ({count}{': ' + named if named else ''}): their descriptions are the "
            "overlay's, not the server's")
