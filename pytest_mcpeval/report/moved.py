"""The calls that moved between the baseline and this run, grouped by the tool that gained or lost them: a
rewritten description that fixes one case and pulls two other requests to its tool shows all three, even where
both runs missed those two (they are no flips, so "Flipped cases" never listed them)."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_mcpeval.results import Flipped

NONE = "(none)"


def by_tool(moved: Sequence[Flipped]) -> list[tuple[str, list[Flipped], list[Flipped]]]:
    """``(tool, gained, lost)`` per tool that gained or lost a call, the tools with most moves first (then by name);
    no call at all counts as the tool ``(none)``."""
    gained: dict[str, list[Flipped]] = {}
    lost: dict[str, list[Flipped]] = {}
    for move in moved:
        gained.setdefault(str(move.get("called_after") or NONE), []).append(move)
        lost.setdefault(str(move.get("called_before") or NONE), []).append(move)
    tools = sorted(gained.keys() | lost.keys(),
                   key=lambda t: (-(len(gained.get(t, [])) + len(lost.get(t, []))), t == NONE, t))
    return [(tool, gained.get(tool, []), lost.get(tool, [])) for tool in tools]


def outcome_share(flip: Flipped, after: bool) -> str | None:
    """``k/n`` for a case with several repeats (gate.clusters): ``k`` of its ``n`` repeats on that side had the
    outcome (correct, or passed for a flow); ``None`` for a case of one repeat, shown as ✓ or ✗."""
    share, repeats = ((flip.get("share_after"), flip.get("repeats_after")) if after
                      else (flip.get("share_before"), flip.get("repeats_before")))
    if share is None or repeats is None:
        return None
    return f"{round(share * repeats)}/{repeats}"
