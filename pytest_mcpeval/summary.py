"""The controller's terminal summary (``pytest_terminal_summary``): the tool listing, the run's summary lines
(:mod:`pytest_mcpeval.report.terminal`), what the cache could not use or store, the files written, the
comparison and the gate's verdict.  Printed after the gate was decided (``session``); every line has its
control characters escaped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import pytest

from pytest_mcpeval.keys import CORRUPTED_KEY, SETTINGS_KEY, UNWRITABLE_KEY
from pytest_mcpeval.outputs import OUTPUTS
from pytest_mcpeval.text import plural

if TYPE_CHECKING:
    from pytest_mcpeval.results import Report, SkippedCase


class EvalSession(Protocol):
    """What the summary reads of the controller's session (``pytest_mcpeval.session.EvalSession``)."""

    config: pytest.Config
    listings: list[dict[str, Any]]
    skipped_cases: dict[str, SkippedCase]
    report: Report | None
    write_errors: list[str]
    notes: list[str]
    baseline_written: bool


def print_summary(session: EvalSession, terminalreporter: Any) -> None:
    tr = _Printable(terminalreporter)
    if session.listings:
        from pytest_mcpeval.checks.listing import listing_lines

        tr.write_sep("=", "mcpeval tools")
        for line in listing_lines(session.listings, session.config.get_verbosity()):
            tr.write_line(session.config.stash[SETTINGS_KEY].redactor.text(line))
    reasons = [str(s.get("reason", "")) for s in session.skipped_cases.values()]
    unconfigured = sum(1 for r in reasons if r.startswith("no model "))
    recording = sum(1 for r in reasons if r.startswith("--snapshot-update "))
    announced = bool(unconfigured or recording)
    if announced:  # the reason pytest shows only with -rs: a run that measured nothing says so
        tr.write_sep("=", "mcpeval summary")
    if unconfigured:
        tr.write_line(
            f"no model configured: {plural(unconfigured, 'case')} skipped; pass --mcp-models=NAME[,NAME...] "
            "(a litellm model string or an alias), or set mcp_models in the ini file", yellow=True)
    if recording:
        tr.write_line(f"--snapshot-update: {plural(recording, 'case')} skipped, no model called "
                      "(snapshots only; run without it to evaluate)", yellow=True)
    if session.report is None:
        return
    gate = session.report["gate"]
    if not (session.report["cases"] or gate["failures"] or gate["usage_errors"] or session.report.get("lint")):
        return
    if not announced:
        tr.write_sep("=", "mcpeval summary")
    _report_lines(session, session.report, tr)


def _report_lines(session: EvalSession, report: Report, tr: _Printable) -> None:
    """The summary of the report, then the cache, the files, the notes, the comparison and the gate."""
    from pytest_mcpeval.report.terminal import lint_lines, summary_lines

    for line in summary_lines(report, verbose=session.config.option.verbose > 0):
        tr.write_line(line)
    for line in lint_lines(report):
        tr.write_line(line)
    from pytest_mcpeval.report.drafts import draft_lines

    for line in draft_lines(report):
        tr.write_line(line, yellow=True)
    gate = report["gate"]
    settings = session.config.stash[SETTINGS_KEY]
    bad = session.config.stash.get(CORRUPTED_KEY, [])
    if bad:
        from pytest_mcpeval.run.cache import bad_entry_lines

        for line in bad_entry_lines(bad):
            tr.write_line(line, yellow=not line.startswith("  "))
    unwritable = session.config.stash.get(UNWRITABLE_KEY, [])
    if unwritable:
        tr.write_line("the response cache could not be written (the replies were used, not stored; the next run "
                      "calls them again):", yellow=True)
        for note in unwritable:
            tr.write_line(f"  {settings.redactor.text(note)}")
    for output in reversed(OUTPUTS):  # the JSON report first, then the page, as the summary always said them
        path = output.path(settings)
        if output.written and path is not None and not any(f"{output.option}=" in e for e in session.write_errors):
            tr.write_line(output.written.format(path=path))
    if session.baseline_written and not any("--mcp-save-baseline=" in e for e in session.write_errors):
        tr.write_line(f"baseline written to {settings.save_baseline}")
    for note in session.notes:
        tr.write_line(note, yellow=True)
    comparison = report.get("comparison")
    if comparison is not None:
        tr.write_line(f"compared with {comparison['baseline']}: "
                      f"{plural(len(comparison['flipped']), 'case')} flipped, "
                      f"{len(comparison['only_in_baseline'])} only in the baseline, "
                      f"{len(comparison['only_in_current'])} only in this run")
        moved = comparison.get("moved") or []
        if moved:
            from pytest_mcpeval.report.moved import by_tool

            shifts = ", ".join(f"{tool} +{len(gained)} -{len(lost)}" for tool, gained, lost in by_tool(moved)[:8])
            tr.write_line(f"calls that moved ({plural(len(moved), 'case')}, passed or missed): {shifts}")
        for sentence in comparison["drops"]:
            tr.write_line(f"  drop: {sentence}", yellow=True)
        for sentence in comparison["improvements"]:
            tr.write_line(f"  improvement: {sentence}", green=True)
    for message in gate["usage_errors"]:
        tr.write_line(f"ERROR {message}", red=True, bold=True)
    for message in gate["failures"]:
        tr.write_line(f"GATE FAILED {message}", red=True, bold=True)
    stated = [*gate["thresholds"], *gate.get("checks", [])]
    if stated and gate["passed"]:
        tr.write_line(f"gate passed: {', '.join(stated)}", green=True)


class _Printable:
    """The terminal reporter, writing every line with its control characters escaped (text.printable): the
    summary quotes tool names, descriptions, model output and servers' stderr."""

    def __init__(self, terminalreporter: Any) -> None:
        self._tr = terminalreporter

    def write_line(self, line: str, **markup: bool) -> None:
        from pytest_mcpeval.text import printable

        self._tr.write_line(printable(line), **markup)

    def write_sep(self, sep: str, title: str, **markup: bool) -> None:
        self._tr.write_sep(sep, title, **markup)
