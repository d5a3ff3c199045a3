"""The terminal's lines of the report's ``drafts`` section: draft cases ran, but no metric and no gate saw them
(docs/drafting.md).  A pure function of the report, like every rendering."""

from __future__ import annotations

from collections import Counter

from pytest_mcpeval.results import Report
from pytest_mcpeval.text import plural

MAX_SHOWN = 10  # draft misses named per model; the rest are counted


def draft_lines(report: Report) -> list[str]:
    """``5 draft cases ran, left out of the gate (docs/drafting.md)``, then per model its outcomes and the misses."""
    drafts = report.get("drafts") or {}
    if not drafts:
        return []
    runs = sum(len(outcomes) for outcomes in drafts.values())
    cases = len({(d["file"], d["id"]) for outcomes in drafts.values() for d in outcomes})
    lines = [f"{plural(cases, 'draft case')} ran ({plural(runs, 'run')}), left out of the metrics, the gate and the "
             "baseline until their `draft: true` mark is removed (docs/drafting.md)"]
    for model, outcomes in sorted(drafts.items()):
        counts = Counter(d["outcome"] for d in outcomes)
        said = ", ".join(f"{counts[k]} {k}" for k in ("passed", "missed", "error") if counts[k])
        lines.append(f"  {model}: {said}")
        missed = [d for d in outcomes if d["outcome"] == "missed"]
        for d in missed[:MAX_SHOWN]:
            lines.append(f"    missed {d['file']}:{d['line']} {d['id']}: expected {d['expected_label']}, "
                         f"called {d['called_label']}")
        if len(missed) > MAX_SHOWN:
            lines.append(f"    ... {len(missed) - MAX_SHOWN} more")
    return lines
