"""The report: a versioned, builtin-only dict built from the case results (docs/report.md).

Reports are data first: the JSON file is this dict, and every rendering (terminal, Markdown, HTML) is a pure
function of it.  Everything they show is computed here, once, from the scoring code: each model's metrics and
its headline intervals (:mod:`pytest_mcpeval.scoring.intervals`); the comparison with a baseline is added by
:func:`pytest_mcpeval.gate.compare.comparison_section`.  Files are written by :mod:`pytest_mcpeval.storage`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pytest_mcpeval import __version__
from pytest_mcpeval.defaults import DEFAULT_DROP_LEVEL, DROP_CORRECTIONS
from pytest_mcpeval.gate.power import model_power
from pytest_mcpeval.results import (
    REPORT_VERSION,
    CaseResult,
    CatalogInfo,
    ConfusablePair,
    DraftOutcome,
    Gate,
    LintResult,
    LintSection,
    ModelMetrics,
    Report,
    RunInfo,
)
from pytest_mcpeval.results.registry import DEFAULT_DROP_METRICS
from pytest_mcpeval.scoring.exposure import exposure_rows
from pytest_mcpeval.scoring.flows import claims_metrics, flow_metrics
from pytest_mcpeval.scoring.intervals import RESAMPLES, SEED, headline
from pytest_mcpeval.scoring.metrics import model_metrics
from pytest_mcpeval.scoring.repeats import judge_usage_metrics, repeat_metrics, usage_metrics
from pytest_mcpeval.scoring.retrieval import retrieval_metrics
from pytest_mcpeval.scoring.search import search_metrics


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
    level: float = DEFAULT_DROP_LEVEL,
    drop_level: float = DEFAULT_DROP_LEVEL,
    correction: str = DROP_CORRECTIONS[0],
    drop_metrics: Sequence[str] = DEFAULT_DROP_METRICS,
    intervals: bool = True,
) -> Report:
    """The report of a run from its case results (users' hooks may have added keys to them); ``level`` is the
    significance of the headline intervals (``1 - level`` confidence: the comparison's, when there is one);
    ``drop_level``, ``correction`` and ``drop_metrics`` are the drop gate's, whose power each model states
    (:func:`pytest_mcpeval.gate.power.model_power`), with a baseline or without.  ``intervals=False`` leaves the
    headline intervals out (``ModelMetrics.intervals`` and ``Report.intervals``): the session computes them only for
    a report that something reads beyond the terminal, which shows none (numpy's import and 2,000 resamples:
    about 0.15 s at 1,000 cases)."""
    cases = sorted(results, key=_case_order)
    by_model: dict[str, list[CaseResult]] = {}
    drafts: dict[str, list[DraftOutcome]] = {}
    draft_cases: dict[str, list[CaseResult]] = {}  # their calls were made and paid for: in the model's usage
    for case in cases:
        by_model.setdefault(case["model"], [])
        if case.get("draft"):  # a proposed case: reported apart, in no metric (so in no gate): docs/drafting.md
            drafts.setdefault(case["model"], []).append(_draft_outcome(case))
            draft_cases.setdefault(case["model"], []).append(case)
        else:
            by_model[case["model"]].append(case)
    names = [m for m in model_order if m in by_model] + sorted(set(by_model) - set(model_order))
    models: dict[str, ModelMetrics] = {}
    for name in names:
        own = by_model[name]
        digests = {c.get("catalog") or "" for c in own}
        offered = {tool for d in digests if d in catalogs for tool in catalogs[d]["tools"]}
        tested = {e["tool"] for c in own if not c.get("error") for e in c.get("expected") or []}
        retrieval = retrieval_metrics(own)
        selection = model_metrics(own)
        untested = sorted(offered - tested)  # published, but no scored case expects them
        metrics: ModelMetrics = {
            **selection,
            "by_tools_shown": exposure_rows(own),
            "flows": flow_metrics(own),  # multi-step flows; the rest of model_metrics is single-call
            "claims": claims_metrics(own),
            "untested_tools": untested,
            "retrieval": retrieval,
            "search": search_metrics(own),  # cases run under tool search (docs/tool-search.md)
            "repeats": repeat_metrics(own),
            "usage": usage_metrics(own + draft_cases.get(name, [])),
            "judges": judge_usage_metrics(own),
            **({"intervals": headline(own, level, RESAMPLES, SEED)} if intervals else {}),  # type: ignore[typeddict-item]
            "power": model_power(own, selection["tools"], tested, untested, drop_level, correction, drop_metrics),
        }
        metrics["arguments"]["applicable"] = retrieval is None  # a retriever fills no arguments
        models[name] = metrics
    report: Report = {
        "version": REPORT_VERSION,
        "plugin_version": __version__,
        "run": run or {},
        "models": models,
        "catalogs": dict(sorted(catalogs.items())),
        "gate": gate or {"passed": True, "failures": [], "thresholds": []},
        "cases": cases,
    }
    if intervals:
        report["intervals"] = {"level": level, "resamples": RESAMPLES, "seed": SEED}
    if drafts:
        report["drafts"] = drafts
    return report


def _draft_outcome(case: CaseResult) -> DraftOutcome:
    data: Mapping[str, Any] = case
    outcome = "error" if data.get("error") else "passed" if data.get("passed") else "missed"
    return {"file": data.get("file", ""), "line": data.get("line", 0), "id": data.get("id", ""),
            "repeat": data.get("repeat", 0), "outcome": outcome,  # type: ignore[typeddict-item]
            "expected_label": data.get("expected_label"), "called_label": data.get("called_label")}


def lint_section(lint: Iterable[LintResult], report: Report) -> dict[str, LintSection]:
    """Lint results per file; each confusable pair with how often the models of this run confused them."""
    from pytest_mcpeval.scoring.confusable import confusion_counts

    observed = confusion_counts(report)
    out: dict[str, LintSection] = {}
    for entry in sorted(lint, key=lambda e: e["file"]):
        pairs: list[ConfusablePair] = [
            {"tools": (a, b), "similarity": sim, "confused": observed.get((a, b), 0)}
            for a, b, sim in entry["confusable"]
        ]
        out[entry["file"]] = {"catalog": entry["catalog"], "problems": entry["problems"], "confusable": pairs}
        if entry.get("drafts"):
            out[entry["file"]]["drafts"] = list(entry["drafts"])
    return out
