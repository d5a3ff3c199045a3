"""The baseline file: a compact record of a run (per-case outcomes, headline metrics, catalogs).

Written with ``--mcp-save-baseline`` (usually on the main branch) and read with ``--mcp-compare`` on a pull
request.  This module is the only one that reads or writes it; docs/report.md describes the format.  A flow's
case carries ``flow: true`` and its claims ``coverage``; a case without ``flow`` is a single call, which is
what every case of a baseline written before flows existed is.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict
from typing_extensions import TypedDict

from pytest_mcpeval.json_file import JsonFileError, first_problem
from pytest_mcpeval.results import Baseline, BaselineCase, BaselineModel, CatalogInfo
from pytest_mcpeval.storage import read_json, write_json

BASELINE_VERSION: Literal[1] = 1
BASELINE_KIND: Literal["pytest-mcpeval-baseline"] = "pytest-mcpeval-baseline"
MAX_BASELINE_BYTES = 1 << 30  # a baseline of a million cases is about 250 MB
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
        "cases": [_case(c) for c in report.get("cases") or [] if not c.get("draft")],  # drafts: people decide
        "catalogs": report.get("catalogs", {}),
    }


def write_baseline(report: Mapping[str, Any], path: Path) -> None:
    """The baseline of ``report`` (:func:`make_baseline`) to ``path``, atomically (``--mcp-save-baseline``)."""
    write_json(make_baseline(report), path)


def _case(case: Mapping[str, Any]) -> BaselineCase:
    """What the comparison needs of a case: its outcome (``passed`` of a flow is the flow's), for a flow
    ``flow: true`` and its claims ``coverage`` (``null`` without claims), under tool search its ``search_recall``
    and the ranks it ``found``."""
    out = {k: case.get(k) for k in _CASE_FIELDS}
    if case.get("flow"):
        out.update({"flow": True, "coverage": case.get("coverage")})
    search = case.get("search")
    if isinstance(search, Mapping):  # under tool search: what the findability gate compares (gate.findability)
        out.update({"search_recall": case.get("search_recall"), "found": search.get("found") or {}})
    return cast(BaselineCase, out)


def _bad_case(case: Mapping[str, Any]) -> str | None:
    """What the types do not say of a case: ``repeat`` is not negative, ``coverage`` is in [0, 1]."""
    if case["repeat"] < 0:
        return f"repeat: expected an integer >= 0, found {case['repeat']}"
    coverage = case.get("coverage")
    if coverage is not None and not 0 <= coverage <= 1:
        return f"coverage: expected a number between 0 and 1 or null, found {coverage}"
    return None


class _ToolDefinition(TypedDict):
    """A tool of a catalog in the short form ``{tool: {hash, description}}`` that compare also reads."""

    hash: str
    description: str


class _BaselineFile(BaseModel):
    """The baseline as read: the types of :class:`Baseline`, strict (``"no"`` is not a boolean, ``1.5`` not an
    integer) and finite (``1e400`` reads as infinity).  Fields a baseline has always had but a hand-written one
    may leave out default to empty; unknown fields are ignored."""

    model_config = ConfigDict(strict=True, allow_inf_nan=False, extra="ignore")

    version: Literal[1]
    kind: Literal["pytest-mcpeval-baseline"]
    plugin_version: str | None = None
    models: dict[str, BaselineModel] = {}
    cases: list[BaselineCase]
    catalogs: dict[str, CatalogInfo | dict[str, _ToolDefinition]] = {}


def load_baseline(path: str | os.PathLike[str]) -> Baseline:
    """Read a baseline written from :func:`make_baseline`; :class:`BaselineError` (one line naming the file and
    the JSON path of the field) when anything in it is unusable, so that a run fails before its first call."""
    from pydantic import ValidationError

    p = Path(path)
    try:
        data = read_json(p, MAX_BASELINE_BYTES)
    except FileNotFoundError:
        raise BaselineError(f"baseline file not found: {p}") from None
    except JsonFileError as exc:
        raise BaselineError(f"baseline {p}: {exc}") from None
    if not isinstance(data, dict):
        raise BaselineError(f"baseline {p}: expected a JSON object of kind {BASELINE_KIND!r}, "
                            f"found {type(data).__name__}")
    if "kind" not in data and "gate" in data and isinstance(data.get("models"), dict):  # any report version
        raise BaselineError(f"baseline {p}: this is a JSON report (--mcp-report, version {data.get('version')!r}), "
                            "not a baseline: write one with --mcp-save-baseline")
    if data.get("kind") != BASELINE_KIND:
        raise BaselineError(f"baseline {p}: expected kind {BASELINE_KIND!r}, found {data.get('kind')!r} "
                            "(write one with --mcp-save-baseline)")
    if data.get("version") != BASELINE_VERSION:
        raise BaselineError(f"baseline {p}: expected version {BASELINE_VERSION}, found {data.get('version')!r}")
    if not isinstance(data.get("cases"), list):
        raise BaselineError(f"baseline {p}: expected 'cases' to be a list of objects")
    try:
        _BaselineFile.model_validate(data)
    except ValidationError as exc:
        raise BaselineError(f"baseline {p}: {first_problem(exc, data)}") from None
    for i, case in enumerate(data["cases"]):
        problem = _bad_case(case)
        if problem:
            raise BaselineError(f"baseline {p}: cases[{i}].{problem}")
    return cast(Baseline, data)
