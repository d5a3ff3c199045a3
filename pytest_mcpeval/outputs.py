"""The files a run writes from its finished report: one :class:`Output` per format, in :data:`OUTPUTS`.

Each format is a pure rendering of the report (:mod:`pytest_mcpeval.report`) and one entry here: the option
that asks for it (registered from this table, with its help; an ini default where it has one), the rendering
and what the summary says once it is written.  :class:`~pytest_mcpeval.settings.Settings` keeps each path
asked for in ``outputs``, checked writable at configure time.  A new format is its rendering module and one
entry.  Files are written atomically by :mod:`pytest_mcpeval.storage`; a file that cannot be rendered or
written is one line in the gate's failures (the gate fails), never a traceback, and an older file at that
path is removed, so that it cannot pass for this run's.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pytest

    from pytest_mcpeval.redact import Redactor
    from pytest_mcpeval.results import Report


class Settings(Protocol):
    """What writing needs of :class:`pytest_mcpeval.settings.Settings` (which reads its paths from this table, so
    this module cannot import it)."""

    outputs: dict[str, Path]
    save_baseline: Path | None
    redactor: Redactor
    models: list[str]

log = logging.getLogger(__name__)


def _markdown(report: Report) -> str:
    """The comparison with the baseline when there is one, else the run's own summary."""
    from pytest_mcpeval.report.markdown import comparison_markdown, summary

    return comparison_markdown(report) if report.get("comparison") else summary(report)


def _html(report: Report) -> str:
    from pytest_mcpeval.report.html import render

    return render(report)


def _json(report: Report) -> Report:
    return report


@dataclass(frozen=True)
class Output:
    option: str  # the command-line option that asks for it (its PATH is kept in Settings.outputs under this name)
    help: str  # the option's help
    render: Callable[[Report], str | Mapping[str, Any]]  # text (masked once more) or JSON data
    written: str = ""  # what the summary says once it is written ("{path}" is its path); "" says nothing
    what: str = "file"  # what could not be rendered, in the failure's words
    before_hook: bool = False  # written before the users' pytest_mcpeval_report hook runs
    step_summary: bool = False  # also appended to $GITHUB_STEP_SUMMARY (then written there without a path too,
    #                             when the report has a comparison)

    ini: bool = False  # an ini key of the option's name (mcp_html) gives a default, relative to the rootdir

    @property
    def dest(self) -> str:
        """The option's attribute on ``config.option`` (``--mcp-html`` -> ``mcp_html``), also its ini key."""
        return self.option.lstrip("-").replace("-", "_")

    def path(self, settings: Settings) -> Path | None:
        return settings.outputs.get(self.option)


# in the order they are written: the Markdown before the users' hook (as it always was), the HTML page before
# the JSON, so that a failure to write the page is in the JSON's gate
OUTPUTS: tuple[Output, ...] = (
    Output("--mcp-markdown", "write the run's summary in Markdown to PATH (with --mcp-compare: the comparison with "
           "the baseline); it is also appended to $GITHUB_STEP_SUMMARY when that is set",
           _markdown, what="summary", before_hook=True, step_summary=True),
    Output("--mcp-html", "write the run as one self-contained HTML page to PATH (no network needed to view it): "
           "intervals, confusion heatmap, per-tool bars, description diffs against --mcp-compare, every case and "
           "flow transcript", _html, "HTML report written to {path}", what="page", ini=True),
    Output("--mcp-report", "write the versioned JSON report to PATH", _json, "report written to {path}"),
)


def is_read(settings: Settings, config: pytest.Config) -> bool:
    """Whether anything but the terminal (which shows no headline interval) reads the run's report: an output, the
    step summary, the baseline, or a users' ``pytest_mcpeval_report`` hook.  Only such a report has intervals."""
    return (settings.save_baseline is not None or any(o.path(settings) is not None for o in OUTPUTS)
            or bool(os.environ.get("GITHUB_STEP_SUMMARY"))
            or bool(config.hook.pytest_mcpeval_report.get_hookimpls()))


class Writer:
    """Writes the outputs of one report; every failure is appended to ``errors`` and to the report's gate."""

    def __init__(self, report: Report, settings: Settings, errors: list[str]) -> None:
        self.report = report
        self.settings = settings
        self.errors = errors

    def outputs(self, before_hook: bool) -> None:
        for output in OUTPUTS:
            if output.before_hook == before_hook:
                self.output(output)

    def output(self, output: Output) -> None:
        path = output.path(self.settings)
        summary = os.environ.get("GITHUB_STEP_SUMMARY") if output.step_summary else None
        if path is None and not (summary and self.report.get("comparison")):
            return
        try:
            content = output.render(self.report)
        except Exception as exc:  # a report a user's hook changed beyond use: one line, the gate fails
            log.debug("rendering %s failed", output.option, exc_info=True)
            where = f"{output.option}={path}" if path is not None else output.option
            self.failed(f"{where} (the {output.what} could not be rendered: {type(exc).__name__})", exc)
            if path is not None:
                _remove(path)
            return
        if isinstance(content, str):
            content = self.settings.redactor.text(content)
        if path is not None:
            self.file(path, output.option, lambda: _store(content, path))
        if summary:
            self.append(summary, str(content))

    def file(self, path: Path, option: str, store: Callable[[], None]) -> bool:
        """Run ``store`` (which writes ``path``); a failure is reported and fails the run, never a traceback."""
        try:
            store()
        except (OSError, TypeError, ValueError) as exc:  # unwritable, or a hook put something that is not JSON
            self.failed(f"{option}={path}", exc)
            _remove(path)
            return False
        return True

    def append(self, summary: str, text: str) -> None:
        """``text`` appended to ``$GITHUB_STEP_SUMMARY``."""
        try:
            with open(summary, "a", encoding="utf-8", errors="backslashreplace") as handle:
                handle.write(text + "\n")
        except OSError as exc:
            self.failed(f"$GITHUB_STEP_SUMMARY ({summary})", exc)

    def failed(self, what: str, exc: Exception) -> None:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        message = f"could not write {what}: {reason}"
        self.errors.append(message)
        self.report["gate"]["failures"].append(message)
        self.report["gate"]["passed"] = False


def _store(content: str | Mapping[str, Any], path: Path) -> None:
    from pytest_mcpeval.storage import write_json, write_text

    if isinstance(content, str):
        write_text(content, path)
    else:
        write_json(content, path)


def _remove(path: Path) -> None:
    """An older file at ``path`` would pass for this run's: removed (a failure to is logged, nothing more)."""
    try:
        if path.is_file():
            path.unlink()
    except OSError as exc:
        log.warning("could not remove the older %s: %s", path, exc)


def remove_stale(settings: Settings, junit: str | None) -> None:
    """At configure time: the outputs this run was asked for (and pytest's junit XML, for a run of this plugin's)
    are removed from an older run, so that a run that ends before writing them (killed, a usage error, a crash)
    leaves none that claims a gate it did not pass.  Baselines are references, never removed."""
    paths = [p for p in (output.path(settings) for output in OUTPUTS) if p is not None]
    if junit and (paths or settings.models):  # a run of this plugin's (pytest's own runs are not ours)
        paths.append(Path(os.path.expandvars(os.path.expanduser(str(junit)))).absolute())
    for path in paths:
        try:
            if path.is_file() or path.is_symlink():
                path.unlink()
        except OSError as exc:  # not ours to remove: the run goes on, and writes it at the end
            log.debug("could not remove the older %s: %s", path, exc)
