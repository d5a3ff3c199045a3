"""How selection holds up as more tools are shown: accuracy and pass rate by the number of tools a case showed.

A case's ``tools_shown`` is the size of the catalog it showed the model: the whole server's, or what its
``tools`` and ``distractors`` chose (run.exposure).  Errors are left out, as everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_mcpeval.results import CaseResult, ExposureRow


def exposure_rows(cases: Sequence[CaseResult]) -> list[ExposureRow]:
    """One row per distinct ``tools_shown``, fewest tools first: single-call ``accuracy`` (correct / scored) and
    ``flow_pass_rate`` (passed / scored flows), ``None`` where the row has no case of that kind."""
    groups: dict[int, list[CaseResult]] = {}
    for case in cases:
        shown = case.get("tools_shown")
        if case.get("error") or shown is None or case.get("correct") is None:
            continue
        groups.setdefault(shown, []).append(case)
    rows: list[ExposureRow] = []
    for shown, group in sorted(groups.items()):
        single = [c for c in group if not c.get("flow")]
        flows = [c for c in group if c.get("flow")]
        rows.append({
            "tools_shown": shown,
            "cases": len(single),
            "accuracy": sum(bool(c["correct"]) for c in single) / len(single) if single else None,
            "flows": len(flows),
            "flow_pass_rate": sum(bool(c["passed"]) for c in flows) / len(flows) if flows else None,
        })
    return rows
