"""The merge as a pytest session: the shards' case results replayed as the test reports their items made.

The plugin's own controller (:class:`pytest_mcpeval.session.EvalSession`) gathers them as it gathers a run's,
then builds the report, gates it and writes every output with the code a run uses: the merged report is a
single run's.  Nothing is collected and no case runs: each case item of a shard becomes its setup, call and
teardown reports (its results on the call's, as ``mcpeval``; its JUnit XML properties), and so does each
``lint`` and ``tool-catalog`` item, from the findings in the report, so pytest's junit XML, the terminal's counts
and the exit status follow as in a run.  What a run learns besides its cases comes from
the shards: the catalogs, the lint and snapshot items' findings, the models as run, the files that could not be
collected; the model order from the shards' selection.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import pytest

from pytest_mcpeval.keys import SETTINGS_KEY

if TYPE_CHECKING:
    from pytest_mcpeval.merge.shards import Shard
    from pytest_mcpeval.results import CaseResult, LintResult, SkippedCase
    from pytest_mcpeval.session import EvalSession


def _order(case: CaseResult) -> tuple[Any, ...]:
    return (case["file"], case.get("line", 0), case["id"], case["model"], case.get("repeat", 0))


class MergePlugin:
    """Registered by the merge command in the pytest session it starts."""

    def __init__(self, shards: Sequence[Shard], missing: list[int], incomplete: str | None) -> None:
        self.shards = sorted(shards, key=lambda s: s.index)
        self.missing = missing
        self.incomplete = incomplete

    def evaluation(self, config: pytest.Config) -> EvalSession:
        session = config.pluginmanager.get_plugin("mcpeval-session")
        assert session is not None  # the controller's, registered in the plugin's pytest_configure
        return cast("EvalSession", session)

    @pytest.hookimpl(trylast=True)  # after the plugin's own, which made the settings and the session
    def pytest_configure(self, config: pytest.Config) -> None:
        selection = self.shards[0].info["selection"]
        config.stash[SETTINGS_KEY].models = list(selection["models"])  # the report's order of models, as run
        session = self.evaluation(config)
        session.incomplete = self.incomplete
        session.run_info["merged"] = {"count": self.shards[0].count, "shards": [s.index for s in self.shards],
                                      "missing": self.missing, "selection": selection}
        lint: dict[str, LintResult] = {}
        for shard in self.shards:  # every shard collected every file: their catalogs and checks are alike
            report = shard.report
            session.catalogs.update(report["catalogs"])
            for name, run in report["run"].get("models", {}).items():
                if name not in session.models_run or "params_sent" in run:
                    session.models_run[name] = run
            for file in report["run"].get("collect_errors", []):
                if file not in session.collect_errors:
                    session.collect_errors.append(file)
            for file, section in report.get("lint", {}).items():
                entry: LintResult = {"file": file, "catalog": section["catalog"], "problems": section["problems"],
                                     "confusable": [(*p["tools"], p["similarity"]) for p in section["confusable"]]}
                if section.get("drafts"):
                    entry["drafts"] = section["drafts"]
                lint.setdefault(file, entry)
            known = {s["file"] for s in session.snapshots}
            session.snapshots += [s for f, s in report.get("snapshots", {}).items() if f not in known]
            overlay = report["run"].get("overlay")
            if overlay is not None:
                merged = session.run_info.setdefault("overlay", {**overlay, "catalogs": {}})
                merged["catalogs"].update(overlay["catalogs"])
        session.lint = list(lint.values())

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> bool:
        session.items = []  # the shards ran the cases: nothing to collect
        return True

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        strict = bool(self.shards[0].info["selection"]["options"].get("strict"))
        items: dict[str, list[CaseResult]] = {}
        for case in sorted((c for s in self.shards for c in s.report["cases"]), key=_order):
            items.setdefault(f"{case['file']}::{case['id']}[{case['model']}]", []).append(case)
        skipped = [s for shard in self.shards for s in shard.report.get("skipped", [])]
        session.testscollected = len(items) + len(skipped) + len(self.checks())
        hook = session.config.hook
        for nodeid, results in items.items():
            first = results[0]
            location = (first["file"], first.get("line", 1) - 1, nodeid.partition("::")[2])
            outcome, longrepr = _outcome(results, strict)
            properties = _properties(results)  # on each report, as an item's (junit reads the teardown's)
            hook.pytest_runtest_logstart(nodeid=nodeid, location=location)
            call = _report(nodeid, location, outcome, longrepr, "call", properties,
                           sum(float(r.get("latency_s", 0.0)) for r in results))
            call.mcpeval = results  # type: ignore[attr-defined]
            for report in (_report(nodeid, location, "passed", None, "setup", properties), call,
                           _report(nodeid, location, "passed", None, "teardown", properties)):
                hook.pytest_runtest_logreport(report=report)
            hook.pytest_runtest_logfinish(nodeid=nodeid, location=location)
        for entry in skipped:
            self.skip(hook, entry)
        for nodeid, failure in self.checks():
            location = (nodeid.partition("::")[0], 0, nodeid.partition("::")[2])
            hook.pytest_runtest_logstart(nodeid=nodeid, location=location)
            for when in ("setup", "call", "teardown"):
                failed = when == "call" and failure is not None
                hook.pytest_runtest_logreport(report=_report(nodeid, location, "failed" if failed else "passed",
                                                             failure if failed else None, when))
            hook.pytest_runtest_logfinish(nodeid=nodeid, location=location)
        return True

    def checks(self) -> list[tuple[str, str | None]]:
        """The ``lint`` and ``tool-catalog`` items (every shard ran them: the first shard's), each with what it
        failed with (``None``: it passed), as in checks/items.py."""
        from pytest_mcpeval.checks.items import lint_failure
        from pytest_mcpeval.checks.lint import NOT_FAILING

        report = self.shards[0].report
        out: list[tuple[str, str | None]] = []
        for file, section in report.get("lint", {}).items():
            failing = [p["message"] for p in section["problems"] if p["kind"] not in NOT_FAILING]
            out.append((f"{file}::lint", lint_failure(failing)))
        for file, snapshot in report.get("snapshots", {}).items():
            failed = snapshot["outcome"] in ("missing", "changed", "error")
            text = "\n".join([snapshot["message"], *snapshot["diff"]])
            out.append((f"{file}::tool-catalog", text if failed else None))
        return sorted(out)

    @staticmethod
    def skip(hook: Any, entry: SkippedCase) -> None:
        name = f"{entry['id']}[{entry['model']}]" if entry["model"] is not None else entry["id"]
        nodeid = f"{entry['file']}::{name}"
        location = (entry["file"], entry["line"] - 1, name)
        hook.pytest_runtest_logstart(nodeid=nodeid, location=location)
        setup = _report(nodeid, location, "skipped", (entry["file"], entry["line"], f"Skipped: {entry['reason']}"),
                        "setup")
        setup.mcpeval_skipped = dict(entry)  # type: ignore[attr-defined]
        hook.pytest_runtest_logreport(report=setup)
        hook.pytest_runtest_logreport(report=_report(nodeid, location, "passed", None, "teardown"))
        hook.pytest_runtest_logfinish(nodeid=nodeid, location=location)


def _outcome(results: list[CaseResult], strict: bool) -> tuple[str, str | None]:
    """How the item came out in its shard (run/item.py): an error fails it, and a miss under --mcp-strict."""
    errors = [r["error"] for r in results if r.get("error")]
    if errors:
        return "failed", str(errors[0])
    missed = [r for r in results if not r.get("passed")]
    if missed and strict and not results[0].get("draft"):
        from pytest_mcpeval.report.terminal import miss_lines

        return "failed", "\n".join(miss_lines(missed[0]))
    return "passed", None


def _properties(results: list[CaseResult]) -> list[tuple[str, object]]:
    from pytest_mcpeval.run.item import case_properties
    from pytest_mcpeval.text import printable

    expected = results[0].get("expected") or []
    tool = results[0].get("expected_label") or (expected[0]["tool"] if expected else "(none)")
    return [(name, printable(str(value))) for name, value in case_properties(results, tool)]


def _report(nodeid: str, location: tuple[str, int, str], outcome: str, longrepr: Any, when: str,
            properties: list[tuple[str, object]] | None = None, duration: float = 0.0) -> pytest.TestReport:
    return pytest.TestReport(nodeid, location, {}, cast(Any, outcome), longrepr, cast(Any, when),
                             duration=duration, user_properties=properties)
