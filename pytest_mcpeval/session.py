"""The controller's side of a run: gather case results, gate, write and print the report.

Registered only in the process that reports (not on xdist workers).  Case results arrive as plain
dicts on the test reports, so ``-n 2`` and ``-n 0`` produce the same report.  As syrupy does, the exit
status is set in a ``tryfirst`` ``pytest_sessionfinish`` and printing happens in
``pytest_terminal_summary``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import pytest

from pytest_mcpeval.keys import CORRUPTED_KEY, SETTINGS_KEY
from pytest_mcpeval.text import plural

if TYPE_CHECKING:  # the data model costs nothing to import, but the report side is only needed at the end
    from pytest_mcpeval.report.types import CaseResult, CatalogInfo, LintResult, MetricChangeView, ModelRun, Report
    from pytest_mcpeval.settings import Settings


class EvalSession:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.results: list[CaseResult] = []
        self.catalogs: dict[str, CatalogInfo] = {}
        self.report: Report | None = None
        self.usage_errors: list[str] = []
        self.lint: list[LintResult] = []
        self.listings: list[dict[str, Any]] = []
        self.params_sent: dict[str, dict[str, Any]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        listing = getattr(report, "mcpeval_tools", None)
        if report.when == "call" and isinstance(listing, dict):
            self.listings.append(listing)
        lint = getattr(report, "mcpeval_lint", None)
        if report.when == "call" and isinstance(lint, dict):
            info = lint.pop("catalog_info", None)
            if info is not None:  # a lint-only run still knows its catalogs (tokens, hashes)
                self.catalogs[lint["catalog"]] = info
            self.lint.append(cast("LintResult", lint))
        results = getattr(report, "mcpeval", None)
        if report.when == "call" and isinstance(results, list):
            for result in results:
                info = result.pop("catalog_info", None)
                if info is not None:
                    self.catalogs[result["catalog"]] = info
                model_info = result.pop("model_info", None)
                if model_info is not None:
                    self.params_sent[result["model"]] = model_info["params_sent"]
                self.results.append(cast("CaseResult", result))

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """xdist only: what a worker could not read from the cache."""
        corrupted = getattr(node, "workeroutput", {}).get("mcpeval_corrupted", [])
        known = self.config.stash.get(CORRUPTED_KEY, [])
        self.config.stash[CORRUPTED_KEY] = known + [c for c in corrupted if c not in known]

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        settings = self.config.stash[SETTINGS_KEY]
        if not self.results and settings.report_path is None and not settings.thresholds and not self.lint:
            return
        from pytest_mcpeval.gate.thresholds import catalog_failures, check_names, evaluate
        from pytest_mcpeval.report.model import build_report, lint_section, write_json

        models_run = {r["model"] for r in self.results}
        tools = {t for info in self.catalogs.values() for t in info["tools"]}
        report = build_report(self.results, self.catalogs, settings.models)
        if self.lint:
            report["lint"] = lint_section(self.lint, report)
        failures: list[str] = []
        if self.results:
            self.usage_errors = check_names(settings.thresholds, tools, models_run)
            if not self.usage_errors:
                failures = evaluate(settings.thresholds, report["models"])
        else:  # thresholds given on the command line must not pass on nothing
            failures = [f"{t} (from {t.source}) was not measured: no model ran (name one with --mcp-models)"
                        for t in settings.thresholds if t.source.startswith("--")]
        failures += catalog_failures(self.catalogs, settings.max_catalog_tokens)
        report["gate"] = {
            "passed": not failures and not self.usage_errors,
            "failures": failures,
            "usage_errors": self.usage_errors,
            "thresholds": [str(t) for t in settings.thresholds],
        }
        report["run"] = {"models": {name: self.model_run(name, settings) for name in sorted(models_run)}}
        if settings.baseline is not None and self.results:
            failures += self.compare(report, settings)
            report["gate"]["failures"] = failures
            report["gate"]["passed"] = not failures and not self.usage_errors
        if settings.save_baseline is not None and self.results:
            from pytest_mcpeval.gate.baseline import make_baseline

            write_json(make_baseline(report), settings.save_baseline)
        if settings.markdown_path is not None and "comparison" not in report:  # the run's own summary
            from pytest_mcpeval.report.markdown import summary

            self.write_markdown(summary(report), settings)
        self.report = report
        self.config.hook.pytest_mcpeval_report(config=self.config, report=report)
        if settings.report_path is not None:
            write_json(report, settings.report_path)
        if self.usage_errors:
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
        elif failures and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def model_run(self, name: str, settings: Settings) -> ModelRun:
        """What the report says of one model: as configured, and what was actually sent."""
        spec = settings.registry.resolve(name)
        run: ModelRun = {"name": spec.name, "target": spec.target, "params": spec.to_builtin()["params"]}
        if name in self.params_sent:
            run["params_sent"] = self.params_sent[name]
        return run

    def compare(self, report: Report, settings: Settings) -> list[str]:
        """Compare with the baseline; the drops that fail the gate (with --mcp-fail-on-drop)."""
        from pytest_mcpeval.defaults import DEFAULT_DROP_MARGIN
        from pytest_mcpeval.gate.compare import compare
        from pytest_mcpeval.report.markdown import comparison_markdown

        assert settings.baseline is not None
        margin = settings.fail_on_drop if settings.fail_on_drop is not None else DEFAULT_DROP_MARGIN
        comparison = compare(settings.baseline, report, margin=margin, level=settings.drop_level,
                             metrics=settings.drop_metrics)
        report["comparison"] = {
            "baseline": str(settings.compare_path),
            "margin": margin,
            "level": settings.drop_level,
            "changes": [cast("MetricChangeView", vars(c)) for c in comparison.changes],
            "drops": comparison.failures(),
            "improvements": [c.sentence() for c in comparison.improvements()],
            "flipped": comparison.flipped,
            "only_in_baseline": comparison.only_in_baseline,
            "only_in_current": comparison.only_in_current,
        }
        self.write_markdown(comparison_markdown(comparison, settings.baseline, report), settings)
        return comparison.failures() if settings.fail_on_drop is not None else []

    @staticmethod
    def write_markdown(text: str, settings: Settings) -> None:
        """To ``--mcp-markdown``, and appended to ``$GITHUB_STEP_SUMMARY`` when that is set."""
        import os

        if settings.markdown_path is not None:
            settings.markdown_path.parent.mkdir(parents=True, exist_ok=True)
            settings.markdown_path.write_text(text, encoding="utf-8")
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary:
            with open(summary, "a", encoding="utf-8") as handle:
                handle.write(text + "\n")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.listings:
            from pytest_mcpeval.checks.listing import listing_lines

            terminalreporter.write_sep("=", "mcpeval tools")
            for line in listing_lines(self.listings):
                terminalreporter.write_line(line)
        if self.report is None:
            return
        gate = self.report["gate"]
        if not (self.report["cases"] or gate["failures"] or gate["usage_errors"] or self.report.get("lint")):
            return
        from pytest_mcpeval.report.terminal import lint_lines, summary_lines

        tr = terminalreporter
        tr.write_sep("=", "mcpeval summary")
        for line in summary_lines(self.report, verbose=self.config.option.verbose > 0):
            tr.write_line(line)
        for line in lint_lines(self.report):
            tr.write_line(line)
        settings = self.config.stash[SETTINGS_KEY]
        corrupted = self.config.stash.get(CORRUPTED_KEY, [])
        if corrupted:
            verb = "was" if len(corrupted) == 1 else "were"
            tr.write_line(f"{plural(len(corrupted), 'cache entry', 'cache entries')} could not be read and {verb} "
                          "called again:", yellow=True)
            for note in corrupted:
                tr.write_line(f"  {note}")
        if settings.report_path is not None:
            tr.write_line(f"report written to {settings.report_path}")
        comparison = self.report.get("comparison")
        if comparison is not None:
            tr.write_line(f"compared with {comparison['baseline']}: "
                          f"{plural(len(comparison['flipped']), 'case')} flipped, "
                          f"{len(comparison['only_in_baseline'])} only in the baseline, "
                          f"{len(comparison['only_in_current'])} only in this run")
            for sentence in comparison["drops"]:
                tr.write_line(f"  drop: {sentence}", yellow=True)
            for sentence in comparison["improvements"]:
                tr.write_line(f"  improvement: {sentence}", green=True)
        for message in gate["usage_errors"]:
            tr.write_line(f"ERROR {message}", red=True, bold=True)
        for message in gate["failures"]:
            tr.write_line(f"GATE FAILED {message}", red=True, bold=True)
        if gate["thresholds"] and gate["passed"]:
            tr.write_line(f"gate passed: {', '.join(gate['thresholds'])}", green=True)
