"""What the terminal, Markdown and HTML say of how a missed case's reply ended, and under tool search what it
searched for and was shown: pure words over a case result.

The verdicts themselves (``truncated``, ``malformed_call``, ``tool_call_in_text``) are decided by
``scoring.stops``; this module only says them, so that the renderings import nothing of ``scoring``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_mcpeval.results.case import MALFORMED_FUNCTION_CALL, TRUNCATED, TRUNCATED_HINT
from pytest_mcpeval.text import canonical_json

SURFACED = 8  # tools a note names of those a case's searches surfaced


def notes(case: Mapping[str, Any]) -> list[str]:
    """What the terminal, Markdown and HTML say of how a missed case's reply ended (empty for the others)."""
    if case.get("passed") is not False:
        return []
    out: list[str] = []
    finish, native = case.get("finish_reason"), case.get("provider_finish_reason")
    reasons = ", ".join(str(r) for r in (finish, native) if r)
    if case.get("diagnosis") == TRUNCATED:
        out.append(f"the reply was cut off by the token limit (finish_reason {reasons}): {TRUNCATED_HINT}")
    elif case.get("diagnosis") == "malformed_call" and native == MALFORMED_FUNCTION_CALL:
        out.append(f"the provider could not parse the call the model wrote and dropped it ({native})")
    search = case.get("search")
    if isinstance(search, Mapping):  # under tool search: what the model searched for, and what it was shown
        queries = ", ".join(repr(q) for q in search.get("queries") or [])
        surfaced = search.get("surfaced") or []
        found = ", ".join(surfaced[:SURFACED]) + (f", ... {len(surfaced) - SURFACED} more" if len(surfaced) > SURFACED
                                                  else "") if surfaced else "no tool"
        top = f", top {search['top_k']}" if search.get("top_k") is not None else ""
        out.append(f"searched ({search.get('method')}{top}) for {queries}: surfaced {found}" if queries
                   else f"never called the search tool ({search.get('method')}{top})")
    written = case.get("text_calls") or []
    if written:
        shown = "; ".join(f"{c.get('tool')} {c.get('raw') if c.get('args') is None else canonical_json(c['args'])}"
                          for c in written)
        out.append(f"a tool call written as text, not as a call: {shown} (the model server parses no tool calls "
                   "for this model: fix its tool parser or chat template, not the descriptions)")
    return out
