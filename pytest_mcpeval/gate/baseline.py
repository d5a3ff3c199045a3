"""The baseline file: a compact record of a run (per-case outcomes, headline metrics, catalogs).

Written with ``--mcp-save-baseline`` (usually on the main branch) and read with ``--mcp-compare`` on a pull
request.  This module is the only one that reads or writes it; docs/report.md describes the format.  A flow's
case carries ``flow: true`` and its claims ``coverage``; a case without ``flow`` is a single call, which is
what every case of a baseline written before flows existed is.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, cast

from pytest_mcpeval import bounds
from pytest_mcpeval.report.types import Baseline, BaselineCase, BaselineModel

BASELINE_VERSION: Literal[1] = 1
BASELINE_KIND: Literal["pytest-mcpeval-baseline"] = "pytest-mcpeval-baseline"
_CASE_FIELDS = ("file", "id", "model", "repeat", "correct", "passed", "expected_label", "called_label", "error")


class BaselineError(ValueError):
    """A baseline file that cannot be used; the message is one line."""


def make_baseline(report: Mapping[str, Any]) -> Baseline:
    """A compact, JSON-able baseline from a report (a :class:`Report`, or one read back from JSON):
    headline metrics, per-case outcomes, catalogs."""
    models: dict[str, BaselineModel] = {}
    for name, m in (report.get("models") or {}).items():
        models[name] = {
            "accuracy": m.get("accuracy"),
            "macro_f1": m.get("macro_f1"),
            "pass_rate": m.get("pass_rate"),
            "tools": {tool: t.get("f1") for tool, t in (m.get("tools") or {}).items()},
            "flow_pass_rate": (m.get("flows") or {}).get("pass_rate"),
            "coverage": (m.get("claims") or {}).get("mean_coverage"),
        }
    return {
        "version": BASELINE_VERSION,
        "kind": BASELINE_KIND,
        "plugin_version": report.get("plugin_version"),
        "models": models,
        "cases": [_case(c) for c in report.get("cases") or []],
        "catalogs": report.get("catalogs", {}),
    }


def _case(case: Mapping[str, Any]) -> BaselineCase:
    """What the comparison needs of a case: its outcome (``passed`` of a flow is the flow's) and, for a flow,
    ``flow: true`` and its claims ``coverage`` (``null`` without claims)."""
    out = {k: case.get(k) for k in _CASE_FIELDS}
    if case.get("flow"):
        out.update({"flow": True, "coverage": case.get("coverage")})
    return cast(BaselineCase, out)


def _bad_case(case: Mapping[str, Any]) -> str | None:
    """Why a case's flow fields are unusable (older baselines have none, which is fine)."""
    if "flow" in case and not isinstance(case["flow"], bool):
        return f"'flow' must be true or false, found {case['flow']!r}"
    coverage = case.get("coverage")
    if coverage is not None and (isinstance(coverage, bool) or not isinstance(coverage, int | float)
                                 or not 0 <= coverage <= 1):
        return f"'coverage' must be a number between 0 and 1 or null, found {coverage!r}"
    return None


def load_baseline(path: str | os.PathLike[str]) -> Baseline:
    """Read a baseline written from :func:`make_baseline`; :class:`BaselineError` when unusable."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BaselineError(f"baseline file not found: {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(f"cannot read baseline {p}: {exc}".replace("\n", " ")) from None
    try:
        data = bounds.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise BaselineError(f"baseline {p} is not valid JSON: {exc.msg} ({where})") from None
    except ValueError as exc:  # NaN, or nested past the bound
        raise BaselineError(f"baseline {p} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BaselineError(f"baseline {p}: expected a JSON object of kind {BASELINE_KIND!r}, "
                            f"found {type(data).__name__}")
    if data.get("kind") != BASELINE_KIND:
        raise BaselineError(f"baseline {p}: expected kind {BASELINE_KIND!r}, found {data.get('kind')!r} "
                            "(write one with --mcp-save-baseline)")
    if data.get("version") != BASELINE_VERSION:
        raise BaselineError(f"baseline {p}: expected version {BASELINE_VERSION}, found {data.get('version')!r}")
    if not isinstance(data.get("cases"), list) or not all(isinstance(c, dict) for c in data["cases"]):
        raise BaselineError(f"baseline {p}: expected 'cases' to be a list of objects")
    for i, case in enumerate(data["cases"]):
        problem = _bad_case(case)
        if problem:
            raise BaselineError(f"baseline {p}: cases[{i}]: {problem}")
    return cast(Baseline, data)
