"""The report: a versioned, builtin-only dict built from the case results (docs/report.md).

Reports are data first: the JSON file is this dict, the terminal summary is a rendering of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, cast

from pytest_mcpeval import __version__, bounds
from pytest_mcpeval.results import (
    REPORT_VERSION,
    CaseResult,
    CatalogInfo,
    ConfusablePair,
    Gate,
    LintResult,
    LintSection,
    ModelMetrics,
    Report,
    RunInfo,
)
from pytest_mcpeval.scoring.exposure import exposure_rows
from pytest_mcpeval.scoring.flows import claims_metrics, flow_metrics
from pytest_mcpeval.scoring.metrics import model_metrics
from pytest_mcpeval.scoring.repeats import judge_usage_metrics, repeat_metrics, usage_metrics
from pytest_mcpeval.scoring.retrieval import retrieval_metrics

_TRANSPORT = ("catalog_info", "model_info")  # once-per-process data riding on a result, not part of the case


def _case_order(case: CaseResult) -> tuple[Any, ...]:
    data: Mapping[str, Any] = case  # tolerant: results made by hand (tests, users' tools) may omit fields
    return (data.get("file", ""), data.get("line", 0), data.get("id", ""), data.get("model", ""),
            data.get("repeat", 0))


def build_report(
    results: Iterable[CaseResult],
    catalogs: Mapping[str, CatalogInfo],
    model_order: list[str],
    gate: Gate | None = None,
    run: RunInfo | None = None,
) -> Report:
    """The report of a run from its case results (users' hooks may have added keys to them)."""
    cases = sorted(  # copied only to drop what rode on them (the session took it off already)
        (cast(CaseResult, {k: v for k, v in r.items() if k not in _TRANSPORT})
         if "catalog_info" in r or "model_info" in r else r for r in results),
        key=_case_order,
    )
    by_model: dict[str, list[CaseResult]] = {}
    for case in cases:
        by_model.setdefault(case["model"], []).append(case)
    names = [m for m in model_order if m in by_model] + sorted(set(by_model) - set(model_order))
    models: dict[str, ModelMetrics] = {}
    for name in names:
        own = by_model[name]
        digests = {c.get("catalog") or "" for c in own}
        offered = {tool for d in digests if d in catalogs for tool in catalogs[d]["tools"]}
        tested = {e["tool"] for c in own if not c.get("error") for e in c.get("expected") or []}
        retrieval = retrieval_metrics(own)
        metrics: ModelMetrics = {
            **model_metrics(own),
            "by_tools_shown": exposure_rows(own),
            "flows": flow_metrics(own),  # multi-step flows; the rest of model_metrics is single-call
            "claims": claims_metrics(own),
            "untested_tools": sorted(offered - tested),  # published, but no scored case expects them
            "retrieval": retrieval,
            "repeats": repeat_metrics(own),
            "usage": usage_metrics(own),
            "judges": judge_usage_metrics(own),
        }
        metrics["arguments"]["applicable"] = retrieval is None  # a retriever fills no arguments
        models[name] = metrics
    return {
        "version": REPORT_VERSION,
        "plugin_version": __version__,
        "run": run or {},
        "models": models,
        "catalogs": dict(sorted(catalogs.items())),
        "gate": gate or {"passed": True, "failures": [], "thresholds": []},
        "cases": cases,
    }


def lint_section(lint: Iterable[LintResult], report: Report) -> dict[str, LintSection]:
    """Lint results per file; each confusable pair with how often the models of this run confused them."""
    from pytest_mcpeval.checks.confusable import confusion_counts

    observed = confusion_counts(report)
    out: dict[str, LintSection] = {}
    for entry in sorted(lint, key=lambda e: e["file"]):
        pairs: list[ConfusablePair] = [
            {"tools": (a, b), "similarity": sim, "confused": observed.get((a, b), 0)}
            for a, b, sim in entry["confusable"]
        ]
        out[entry["file"]] = {"catalog": entry["catalog"], "problems": entry["problems"], "confusable": pairs}
    return out


def write_json(report: Mapping[str, Any], path: Path) -> None:
    """Atomically: a reader never sees half a file, and a failed write leaves the previous file as it was.

    Text is written as UTF-8; a string that has no UTF-8 form (a lone surrogate from a model's reply, which
    is legal JSON) makes the whole file fall back to ``\\u`` escapes, which read back to the same string.  The
    JSON is strict: a float JSON cannot hold is written as a string (:func:`pytest_mcpeval.bounds.dumps`)."""
    text = bounds.dumps(report, indent=2, ensure_ascii=False, sort_keys=False) + "\n"
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = (bounds.dumps(report, indent=2, ensure_ascii=True, sort_keys=False) + "\n").encode("ascii")
    _replace(path, data)


def write_text(text: str, path: Path) -> None:
    """Atomically, as :func:`write_json`; text that cannot be encoded (a lone surrogate) is escaped."""
    _replace(path, text.encode("utf-8", errors="backslashreplace"))


def _replace(path: Path, data: bytes) -> None:
    """``data`` to a temporary file next to ``path``, then renamed over it; the temporary file never stays."""
    import os
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as open() would create it (mkstemp makes it 0600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
