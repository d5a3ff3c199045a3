"""The controller's side of a run: gather case results, gate, write and print the report.

Registered only in the process that reports (not on xdist workers).  Case results arrive as plain
dicts on the test reports, so ``-n 2`` and ``-n 0`` produce the same report.  As syrupy does, the exit
status is set in a ``tryfirst`` ``pytest_sessionfinish`` and printing happens in
``pytest_terminal_summary``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import pytest

from pytest_mcpeval.keys import CORRUPTED_KEY, INTERRUPTS_KEY, SETTINGS_KEY, UNWRITABLE_KEY
from pytest_mcpeval.run import facts
from pytest_mcpeval.text import plural

if TYPE_CHECKING:  # the data model costs nothing to import, but the report side is only needed at the end
    from pytest_mcpeval.results import (
        CaseResult,
        CatalogInfo,
        LintResult,
        ModelRun,
        Report,
        RunInfo,
        SkippedCase,
        SnapshotResult,
    )
    from pytest_mcpeval.run.case import CaseIdentity
    from pytest_mcpeval.settings import Settings


def gate_checks(settings: Settings, compared: bool) -> list[str]:
    """What gates the run besides its thresholds, in words every rendering shows (the HTML said "no thresholds were
    set, nothing gated this run" while --mcp-fail-on-drop gated it)."""
    checks = []
    if compared and settings.fail_on_drop is not None:
        checks.append(f"no significant drop against the baseline (margin {settings.fail_on_drop:g}, level "
                      f"{settings.drop_level:g}{', Holm' if settings.drop_correction == 'holm' else ''})")
    if settings.min_detectable_drop is not None:
        checks.append(f"the drop gate can flag a fall of {settings.min_detectable_drop * 100:g}% in the recall of "
                      "every tool a case expects")
    if settings.max_catalog_tokens is not None:
        checks.append(f"catalogs of at most {settings.max_catalog_tokens:,} tokens a request")
    if settings.max_cost is not None:
        checks.append(f"model calls within ${settings.max_cost:g}")
    return checks


class EvalSession:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.results: list[CaseResult] = []
        self.catalogs: dict[str, CatalogInfo] = {}
        self.report: Report | None = None
        self.usage_errors: list[str] = []
        self.lint: list[LintResult] = []
        self.snapshots: list[SnapshotResult] = []
        self.listings: list[dict[str, Any]] = []
        self.params_sent: dict[str, dict[str, Any]] = {}
        # every case item selected for this run, so each ends in the report exactly once (docs/reliability.md)
        self.expected: dict[str, CaseIdentity] = {}
        self.reported: set[str] = set()  # node ids whose results arrived
        self.skipped: set[str] = set()
        self.skipped_cases: dict[str, SkippedCase] = {}  # node id -> what the report lists under `skipped`
        self.failures: dict[str, str] = {}  # node id -> failure text of an item that sent no results
        self.collect_errors: list[str] = []  # benchmark files that could not be collected: their cases are missing
        self.notes: list[str] = []  # said at the end of the summary
        self.write_errors: list[str] = []
        self.baseline_written = False  # --mcp-save-baseline was written (unless write_errors says it failed)
        # set by --mcp-shard (shard.py) and by the merge of shards (merge/replay.py): what the report's run says
        # of them, whether the gate sets the exit status, why the merged run is incomplete, the shards' models
        self.run_info: RunInfo = {}
        self.gate_applies = True
        self.incomplete: str | None = None
        self.models_run: dict[str, ModelRun] = {}

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        from pytest_mcpeval.settings import FILE_SUFFIXES

        path = report.nodeid.partition("::")[0]
        if report.failed and path.endswith(FILE_SUFFIXES) and path not in self.collect_errors:
            self.collect_errors.append(path)  # on the xdist controller too: workers send their collect reports

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        from pytest_mcpeval.keys import CASE_KEY

        for item in session.items:  # without xdist (the controller of an xdist run collects nothing)
            ref = item.stash.get(CASE_KEY, None)
            if ref is not None and ref.model is not None and not ref.case.skip:
                self.expected[item.nodeid] = ref.identity(self.config.rootpath)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """xdist only: the controller knows the selected items by their node ids (the same on every worker)."""
        if self.expected:
            return
        from pytest_mcpeval.run.identities import received

        self.expected.update(received(self.config, ids))  # named as collection names them: never parsed back

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        listing = getattr(report, "mcpeval_tools", None)
        if report.when == "call" and isinstance(listing, dict):
            self.listings.append(listing)
        lint = getattr(report, "mcpeval_lint", None)
        if report.when == "call" and isinstance(lint, dict):
            self.lint.append(cast("LintResult", lint))
        snapshot = getattr(report, "mcpeval_snapshot", None)
        if report.when == "call" and isinstance(snapshot, dict):
            self.snapshots.append(cast("SnapshotResult", snapshot))
        results = getattr(report, "mcpeval", None)
        skipped = getattr(report, "mcpeval_skipped", None)
        if isinstance(skipped, dict):  # a case item skipped at setup or while it ran (pytest.skip in a hook)
            self.skipped.add(report.nodeid)
            self.skipped_cases.setdefault(report.nodeid, cast("SkippedCase", skipped))
        elif report.skipped and report.when == "setup":
            self.skipped.add(report.nodeid)
        elif report.failed and not isinstance(results, list):  # e.g. the item of a crashed xdist worker
            self.failures.setdefault(report.nodeid, report.longreprtext.strip().splitlines()[-1:][0]
                                     if report.longreprtext.strip() else f"{report.when} failed")
        if isinstance(results, list) and report.nodeid not in self.reported:  # a failed setup carries them too
            self.reported.add(report.nodeid)
            self.results.extend(cast("list[CaseResult]", results))

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """xdist only: what a worker could not read from or write to the cache, and the secrets it learnt from its
        servers (the rest of the report is masked with them here)."""
        output = getattr(node, "workeroutput", {})
        secrets = output.get("mcpeval_secrets", [])
        if secrets:
            self.config.stash[SETTINGS_KEY].redactor.add(str(s) for s in secrets)
        known = self.config.stash.get(UNWRITABLE_KEY, [])
        self.config.stash[UNWRITABLE_KEY] = known + [c for c in output.get("mcpeval_unwritable", []) if c not in known]
        bad = self.config.stash.get(CORRUPTED_KEY, [])
        for outcome, note in output.get("mcpeval_corrupted", []):  # pairs (execnet may hand tuples back as lists)
            if (outcome, note) not in bad:
                bad = [*bad, (outcome, note)]
        self.config.stash[CORRUPTED_KEY] = bad
        facts.of(self.config).merge(output.get(facts.WORKEROUTPUT_KEY))  # noted once for the run (run/facts.py)

    def remove_stale_outputs(self) -> None:
        """At configure time (not for ``--collect-only``, which writes nothing): the outputs this run was asked
        for are removed from an older run (:func:`pytest_mcpeval.outputs.remove_stale`)."""
        from pytest_mcpeval.outputs import remove_stale

        if not self.config.option.collectonly:
            remove_stale(self.config.stash[SETTINGS_KEY], self.config.getoption("xmlpath", None))

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        with self.config.stash[INTERRUPTS_KEY].writing():  # a signal does not cut the writing short
            self.finish(session, exitstatus)

    def finish(self, session: pytest.Session, exitstatus: int) -> None:
        settings = self.config.stash[SETTINGS_KEY]
        signalled = self.config.stash[INTERRUPTS_KEY].signal_name
        if self.config.option.collectonly or exitstatus == pytest.ExitCode.USAGE_ERROR:
            return  # nothing was meant to run, or nothing could: no report, no gate
        if signalled is not None:  # whatever pytest was doing when it came (a second Ctrl-C: exit status 0)
            session.exitstatus = pytest.ExitCode.INTERRUPTED
        stopped = f"interrupted by {signalled}" if signalled is not None else self.stopped(session, exitstatus)
        missing = settings.redactor.data(self.missing_results(stopped, settings.repeat))  # the rest came masked
        if stopped is not None and stopped.startswith("interrupted"):  # a signal; not -x (it stops as it stops)
            self.report_not_run(missing)
        if (not self.results and not missing and not self.collect_errors and settings.report_path is None
                and settings.html_path is None and not settings.thresholds and not self.lint):
            return
        self.take_facts(settings)
        report = self.gated_report(self.results + missing, settings, stopped)
        self.write_outputs(report, settings, stopped)
        if signalled is not None:
            session.exitstatus = pytest.ExitCode.INTERRUPTED
        elif self.usage_errors:
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
        elif not report["gate"]["passed"] and session.exitstatus == pytest.ExitCode.OK and self.gate_applies:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def take_facts(self, settings: Settings) -> None:
        """The facts noted once for the run, by this process and the xdist workers (run/facts.py)."""
        noted = facts.of(self.config)
        for digest, info in noted.catalogs.items():
            self.catalogs.setdefault(digest, settings.redactor.data(info))
        for model, sent in noted.params_sent.items():
            self.params_sent.setdefault(model, settings.redactor.data(sent))

    def gated_report(self, results: list[CaseResult], settings: Settings, stopped: str | None) -> Report:
        """The report of the run with its checks, run info, comparison and gate (masked but for the cases, which
        were masked as their results were made: plugin.pytest_runtest_makereport)."""
        from pytest_mcpeval.defaults import DEFAULT_DROP_LEVEL
        from pytest_mcpeval.outputs import is_read
        from pytest_mcpeval.report.model import build_report, lint_section

        models_run = {r["model"] for r in results}
        compared = settings.baseline is not None and bool(self.results)
        report = build_report(results, self.catalogs, settings.models,
                              level=settings.drop_level if compared else DEFAULT_DROP_LEVEL,
                              drop_level=settings.drop_level, correction=settings.drop_correction,
                              drop_metrics=settings.drop_metrics, intervals=is_read(settings, self.config))
        if self.lint:
            report["lint"] = lint_section(self.lint, report)
        if self.snapshots:
            report["snapshots"] = {s["file"]: s for s in sorted(self.snapshots, key=lambda s: s["file"])}
        if self.skipped_cases:
            report["skipped"] = sorted(self.skipped_cases.values(),
                                       key=lambda s: (s["file"], s["line"], s["id"], s["model"] or ""))
        failures = self.gate_failures(report, results, settings, stopped)
        report["gate"] = {
            "passed": False,
            "failures": failures,
            "usage_errors": self.usage_errors,
            "thresholds": [str(t) for t in settings.thresholds],
            "checks": gate_checks(settings, compared),
        }
        report["run"] = {"models": {name: self.model_run(name, settings) for name in sorted(models_run)},
                         "interrupted": stopped is not None, **self.run_info}
        if self.collect_errors:
            report["run"]["collect_errors"] = list(self.collect_errors)
        if settings.overlay is not None:
            from pytest_mcpeval.overlay import overlay_info

            report["run"]["overlay"] = overlay_info(settings.overlay, self.catalogs)
        if stopped is not None:
            report["run"]["stopped"] = stopped
        if compared:
            failures += self.compare(report, settings)
        report["gate"]["passed"] = not failures and not self.usage_errors
        masked = settings.redactor.data({k: v for k, v in report.items() if k != "cases"})
        return cast("Report", {**masked, "cases": report["cases"]})

    def gate_failures(self, report: Report, results: list[CaseResult], settings: Settings,
                      stopped: str | None) -> list[str]:
        """Thresholds, catalog size, budget and completeness: what fails the gate before any comparison."""
        from pytest_mcpeval.gate.power import detectable_failures
        from pytest_mcpeval.gate.thresholds import budget_failures, catalog_failures, check_names, evaluate

        failures: list[str] = []
        if self.results:
            tools = {t for info in self.catalogs.values() for t in info["tools"]}
            self.usage_errors = check_names(settings.thresholds, tools, {r["model"] for r in results})
            if not self.usage_errors:
                failures = evaluate(settings.thresholds, report["models"])
        else:  # thresholds given on the command line must not pass on nothing
            failures = [f"{t} (from {t.source}) was not measured: no model ran (name one with --mcp-models)"
                        for t in settings.thresholds if t.source.startswith("--") and not results]
        failures += catalog_failures(self.catalogs, settings.max_catalog_tokens)
        failures += detectable_failures(report["models"], settings.min_detectable_drop)
        over_budget, unpriced = budget_failures(report["cases"], report["models"], settings.max_cost)
        failures += over_budget
        self.notes += unpriced
        failures += self.completeness_failures(report["cases"], stopped, self.collect_errors)
        return failures

    def write_outputs(self, report: Report, settings: Settings, stopped: str | None) -> None:
        """The baseline and the outputs (:data:`pytest_mcpeval.outputs.OUTPUTS`), around the users' report hook."""
        from pytest_mcpeval.outputs import Writer

        writer = Writer(report, settings, self.write_errors)
        if settings.save_baseline is not None and self.results:
            if stopped is None and not self.collect_errors:
                from pytest_mcpeval.gate.baseline import write_baseline

                path = settings.save_baseline
                writer.file(path, "--mcp-save-baseline", lambda: write_baseline(report, path))
                self.baseline_written = True
            else:
                why = "the run did not finish" if stopped else "a benchmark file could not be collected"
                self.notes.append(f"baseline not written to {settings.save_baseline}: {why}")
        writer.outputs(before_hook=True)
        self.report = report
        try:
            self.config.hook.pytest_mcpeval_report(config=self.config, report=report)
        except Exception as exc:  # a user's hook: the report is still written, the gate fails with one line
            message = f"a pytest_mcpeval_report hook raised {type(exc).__name__}: {exc}"
            report["gate"]["failures"].append(settings.redactor.text(message))
            report["gate"]["passed"] = False
        writer.outputs(before_hook=False)

    def stopped(self, session: pytest.Session, exitstatus: int) -> str | None:
        """Why the run ended before every selected case ran, or ``None`` when every one of them ran (a run stopped
        by -x after its last case still measured them all)."""
        if self.incomplete is not None:
            return self.incomplete
        ended = self.reported | self.skipped | set(self.failures)
        if self.expected and all(nodeid in ended for nodeid in self.expected):
            return None
        if self.collect_errors and exitstatus == pytest.ExitCode.INTERRUPTED and not self.reported:
            return "stopped by errors during collection"
        for reason in (session.shouldfail, session.shouldstop):
            if reason:
                return f"stopped early ({reason})" if isinstance(reason, str) else "stopped early"
        maxfail = self.config.getoption("maxfail", 0)
        if maxfail and session.testsfailed >= maxfail:  # xdist's controller stops with an interruption
            return f"stopped early (stopping after {plural(session.testsfailed, 'failure')}: -x / --maxfail)"
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            return "interrupted (Ctrl-C or a signal)"
        return None

    def report_not_run(self, missing: list[CaseResult]) -> None:
        """After an interruption: a failed setup report for each case the run never reached, so that what reads
        the test reports (junit XML, the terminal's counts) has every case, as the report does.  The terminal
        counts them as ``not run`` and lists none of them one by one (see :func:`not_run_status`)."""
        by_nodeid: dict[str, list[CaseResult]] = {}
        for nodeid, identity in self.expected.items():
            if nodeid in self.reported or nodeid in self.skipped or nodeid in self.failures:
                continue
            by_nodeid[nodeid] = [r for r in missing if r["file"] == identity["file"] and r["id"] == identity["id"]
                                 and r["model"] == identity["model"]]
        for nodeid, results in by_nodeid.items():
            if not results:
                continue
            identity = self.expected[nodeid]
            report = pytest.TestReport(nodeid, (identity["file"], identity["line"] - 1, nodeid.partition("::")[2]),
                                       {}, "failed", str(results[0]["error"]), "setup")
            report.mcpeval = results  # type: ignore[attr-defined]
            report.mcpeval_not_run = True  # type: ignore[attr-defined]
            self.config.hook.pytest_runtest_logreport(report=report)  # reaches pytest_runtest_logreport above too
        for results in by_nodeid.values():
            for result in results:
                missing.remove(result)

    def missing_results(self, stopped: str | None, repeats: int) -> list[CaseResult]:
        """An error result for every selected case that sent none: the item of a crashed xdist worker, and
        the items a stopped run never reached.  So every selected case is in the report exactly once."""
        from pytest_mcpeval.run.case import unscored_result

        out: list[CaseResult] = []
        for nodeid, identity in self.expected.items():
            if nodeid in self.reported or nodeid in self.skipped:
                continue
            if nodeid in self.failures:
                message = f"no result: {self.failures[nodeid]}"
            elif stopped is not None:
                message = f"not run: the session was {stopped} before this case"
            else:
                message = "no result: the item ended without one (see its test report)"
            out += [unscored_result(identity, repeat, message) for repeat in range(repeats)]
        return out

    @staticmethod
    def completeness_failures(cases: list[CaseResult], stopped: str | None, collect_errors: list[str]) -> list[str]:
        """The gate never passes on a run with cases that have no score (errors, crashed, not run) or benchmark
        files that could not be collected."""
        failures: list[str] = []
        if collect_errors:
            failures.append(f"{plural(len(collect_errors), 'benchmark file')} could not be collected "
                            f"({', '.join(collect_errors)}): their cases are not in this run; the gate passes only "
                            "when every file is evaluated")
        if stopped is not None:
            ran = sum(1 for c in cases if not str(c.get("error") or "").startswith("not run:"))
            failures.append(f"the run did not finish: it was {stopped}; {ran} of {plural(len(cases), 'case')} ran")
        unscored = [c for c in cases if c.get("error")]
        if unscored:
            failures.append(f"{len(unscored)} of {plural(len(cases), 'case')} have no score (errors: model or server "
                            "unavailable, crashed worker, not run); the gate passes only when every case is scored")
        return failures

    def model_run(self, name: str, settings: Settings) -> ModelRun:
        """What the report says of one model: as configured, and what was actually sent."""
        from pytest_mcpeval.redact import mask_params

        if name in self.models_run:  # a merge: as the shards ran it
            return self.models_run[name]
        spec = settings.registry.resolve(name)  # secret-named parameters masked at any depth, whatever their length
        run: ModelRun = {"name": spec.name, "target": spec.target, "params": mask_params(spec.to_builtin()["params"])}
        if name in self.params_sent:
            run["params_sent"] = mask_params(self.params_sent[name])
        return run

    def compare(self, report: Report, settings: Settings) -> list[str]:
        """Compare with the baseline, into ``report["comparison"]``: the drops that fail the gate (with
        --mcp-fail-on-drop)."""
        from pytest_mcpeval.defaults import DEFAULT_DROP_MARGIN
        from pytest_mcpeval.gate.compare import compare, comparison_section, nothing_compared

        assert settings.baseline is not None
        margin = settings.fail_on_drop if settings.fail_on_drop is not None else DEFAULT_DROP_MARGIN
        comparison = compare(settings.baseline, report, margin=margin, level=settings.drop_level,
                             metrics=settings.drop_metrics, correction=settings.drop_correction)
        report["comparison"] = comparison_section(comparison, settings.baseline, report, str(settings.compare_path),
                                                  settings.drop_correction)
        drops = comparison.failures() if settings.fail_on_drop is not None else []
        vacuous = nothing_compared(comparison, settings.baseline, report)
        if vacuous is not None:  # a drop gate that measured nothing does not pass
            if settings.fail_on_drop is not None:
                drops.append(f"--mcp-fail-on-drop: {vacuous}")
            else:
                self.notes.append(f"--mcp-compare={settings.compare_path}: {vacuous}")
        return drops

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from pytest_mcpeval.summary import print_summary

        print_summary(self, terminalreporter)
