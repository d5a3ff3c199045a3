"""The report: a versioned, builtin-only dict built from the case results (docs/report.md).

Reports are data first: the JSON file is this dict, the terminal summary is a rendering of it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_mcpeval import __version__
from pytest_mcpeval.scoring.metrics import model_metrics
from pytest_mcpeval.scoring.repeats import repeat_metrics, usage_metrics
from pytest_mcpeval.scoring.retrieval import retrieval_metrics

REPORT_VERSION = 1
_TRANSPORT = ("catalog_info", "model_info")  # once-per-process data riding on a result, not part of the case


def _case_order(case: Mapping[str, Any]) -> tuple[Any, ...]:
    return (case.get("file", ""), case.get("line", 0), case.get("id", ""), case.get("model", ""),
            case.get("repeat", 0))


def build_report(
    results: Iterable[Mapping[str, Any]],
    catalogs: Mapping[str, Mapping[str, Any]],
    model_order: list[str],
    gate: Mapping[str, Any] | None = None,
    run: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    cases = sorted(
        ({k: v for k, v in r.items() if k not in _TRANSPORT} for r in results),
        key=_case_order,
    )
    by_model: dict[str, list[dict[str, Any]]] = {}
    for case in cases:
        by_model.setdefault(case["model"], []).append(case)
    names = [m for m in model_order if m in by_model] + sorted(set(by_model) - set(model_order))
    models = {}
    for name in names:
        own = by_model[name]
        metrics = model_metrics(own)
        digests = {c.get("catalog") or "" for c in own}
        offered = {tool for digest in digests for tool in catalogs.get(digest, {}).get("tools", {})}
        tested = {e["tool"] for c in own if not c.get("error") for e in c.get("expected") or []}
        metrics["untested_tools"] = sorted(offered - tested)  # published, but no scored case expects them
        metrics["retrieval"] = retrieval_metrics(own)
        metrics["repeats"] = repeat_metrics(own)
        metrics["usage"] = usage_metrics(own)
        metrics["arguments"]["applicable"] = metrics["retrieval"] is None  # a retriever fills no arguments
        models[name] = metrics
    return {
        "version": REPORT_VERSION,
        "plugin_version": __version__,
        "run": dict(run or {}),
        "models": models,
        "catalogs": {digest: dict(info) for digest, info in sorted(catalogs.items())},
        "gate": dict(gate or {"passed": True, "failures": [], "thresholds": []}),
        "cases": cases,
    }


def lint_section(lint: Iterable[Mapping[str, Any]], report: Mapping[str, Any]) -> dict[str, Any]:
    """Lint results per file; each confusable pair with how often the models of this run confused them."""
    from pytest_mcpeval.lint import confusion_counts

    observed = confusion_counts(report)
    out: dict[str, Any] = {}
    for entry in sorted(lint, key=lambda e: e["file"]):
        pairs = [
            {"tools": [a, b], "similarity": sim, "confused": observed.get((a, b), 0)}
            for a, b, sim in entry["confusable"]
        ]
        out[entry["file"]] = {"catalog": entry["catalog"], "problems": entry["problems"], "confusable": pairs}
    return out


def write_json(report: Mapping[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2, ensure_ascii=False, sort_keys=False) + "\n", encoding="utf-8")
    tmp.replace(path)
