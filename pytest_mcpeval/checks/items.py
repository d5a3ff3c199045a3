"""Checks that need no model: the lint of a benchmark file and the snapshot of its tool catalog.

Both are ordinary items of the benchmark file (``file::lint``, ``file::tool-catalog``), added with
``--mcp-lint`` and ``--mcp-snapshots``, so they run, select (``-k lint``) and fail like any test, on
every xdist worker layout. Without ``--mcp-snapshots`` a file whose catalog snapshot exists still gets a
skipped ``tool-catalog`` item, which is what keeps syrupy from calling that snapshot unused.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_mcpeval.keys import CASE_KEY, LINT_KEY, SNAPSHOT_KEY
from pytest_mcpeval.run.case import CaseError

if TYPE_CHECKING:
    from pytest_mcpeval.catalog import Catalog
    from pytest_mcpeval.results import SnapshotOutcome
    from pytest_mcpeval.run.case import CaseRef
    from pytest_mcpeval.run.engine import Engine


class CheckFailed(Exception):
    """A failed check; the message is what the user reads (no traceback)."""


class CheckItem(pytest.Function):
    """A check of a whole benchmark file (no case); reported at the file's first line."""

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, 0, f"mcpeval {self.name}"  # a line, not None: pytest needs one to report a skip mark

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> Any:  # type: ignore[override]
        if isinstance(excinfo.value, CheckFailed | CaseError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


def _catalog(request: pytest.FixtureRequest, runtime: Engine, override: object) -> Catalog:
    from pytest_mcpeval.servers import ServerError

    try:
        return runtime.server_catalog(request.node.stash[CASE_KEY], override)
    except (ServerError, CaseError) as exc:
        raise CaseError(str(exc)) from None


def lint(request: pytest.FixtureRequest, mcp_server: object, mcpeval_runtime: Engine) -> None:
    """Every expected call against the server's schemas, and the tools that read alike."""
    from pytest_mcpeval.catalog_report import catalog_info
    from pytest_mcpeval.checks.lint import UncheckedSchemaWarning, check_expectations
    from pytest_mcpeval.scoring.confusable import confusable_pairs

    ref = request.node.stash[CASE_KEY]
    catalog = _catalog(request, mcpeval_runtime, mcp_server)
    shown = mcpeval_runtime.shown_path(ref.bench.path)
    problems = check_expectations(ref.bench, catalog, shown)
    pairs = confusable_pairs(catalog)
    drafts = [case.id for case in ref.bench.spec.cases if case.draft]
    request.node.stash[LINT_KEY] = {
        **({"drafts": drafts} if drafts else {}),  # reported apart: proposed cases, not the gate's yet
        "file": shown,
        "catalog": catalog.digest,
        "problems": [{"line": p.line, "case": p.case, "field": p.field, "kind": p.kind, "message": str(p)}
                     for p in problems],
        "confusable": [[a, b, sim] for a, b, sim in pairs],
    }
    if catalog.digest not in mcpeval_runtime.facts.catalogs:  # a lint-only run still knows its catalogs
        mcpeval_runtime.facts.note_catalog(catalog.digest, catalog_info(
            catalog, mcpeval_runtime.server_label(ref, mcp_server),
            mcpeval_runtime.pool.startup_s(mcpeval_runtime.server_catalog(ref, mcp_server))))
    failing: list[Any] = []
    for p in problems:  # `unchecked`: the server's schema is at fault, not the file: a warning, not a failure
        if p.fails:
            failing.append(p)
            continue
        message = f"case `{p.case}`: {p.field}: {p.message}"
        try:
            warnings.warn_explicit(message, UncheckedSchemaWarning, shown, p.line or 0)
        except UncheckedSchemaWarning:  # made an error (-W error, filterwarnings = error): then it fails the item
            failing.append(p)
    failure = lint_failure([str(p) for p in failing])
    if failure is not None:
        raise CheckFailed(failure)


def lint_failure(failing: list[str]) -> str | None:
    """What a failed ``lint`` item says: its failing problems, one a line; ``None`` when it passes.  (Also what
    the merge of shards replays: merge/replay.py.)"""
    if not failing:
        return None
    return f"{len(failing)} problem{'s' if len(failing) > 1 else ''} in the expected calls:\n" + "\n".join(failing)


def normalised_catalog(catalog: Catalog) -> list[dict[str, Any]]:
    """Tools sorted by name; keys sorted; lists of plain values sorted (their order means nothing)."""

    def norm(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: norm(value[k]) for k in sorted(value)}
        if isinstance(value, list):
            items = [norm(v) for v in value]
            if all(isinstance(v, str | int | float | bool) for v in items):
                return sorted(items, key=lambda v: (type(v).__name__, v))
            return items
        return value

    keys = ("name", "description", "inputSchema", "annotations")
    return [norm({k: tool[k] for k in keys if k in tool}) for tool in sorted(catalog.tools, key=lambda t: t["name"])]


SNAPSHOT_DIFF_LINES = 400  # lines of a changed catalog's diff the report keeps


def tool_catalog(request: pytest.FixtureRequest, mcp_server: object, mcpeval_runtime: Engine,
                 snapshot: Any) -> None:
    """The server's tool catalog must equal its snapshot (syrupy; accept changes with --snapshot-update).

    How the comparison came out is stashed for the report (``snapshots``, docs/report.md), failed or not."""
    from syrupy.extensions.json import JSONSnapshotExtension

    ref = request.node.stash[CASE_KEY]
    shown_file = mcpeval_runtime.shown_path(ref.bench.path)
    server = mcpeval_runtime.server_label(ref, mcp_server)  # the fixture's server when it overrides the file's

    def outcome(kind: SnapshotOutcome, message: str = "", diff: list[str] | None = None,
                snapshot_path: str = "", catalog: str | None = None) -> None:
        lines = diff or []
        if len(lines) > SNAPSHOT_DIFF_LINES:  # the terminal has it all; the report is bounded
            lines = [*lines[:SNAPSHOT_DIFF_LINES], f"… {len(lines) - SNAPSHOT_DIFF_LINES} more lines"]
        request.node.stash[SNAPSHOT_KEY] = {"file": shown_file, "server": server, "catalog": catalog,
                                            "snapshot": snapshot_path, "outcome": kind, "message": message,
                                            "diff": lines}

    try:
        catalog = _catalog(request, mcpeval_runtime, mcp_server)
    except CaseError as exc:
        outcome("error", str(exc))
        raise
    assertion = snapshot.use_extension(JSONSnapshotExtension)
    matched = assertion == normalised_catalog(catalog)
    result = assertion.executions[assertion.num_executions - 1]  # syrupy's record of the comparison just made
    location = mcpeval_runtime.shown_path(Path(result.snapshot_location))
    if matched:
        outcome("recorded" if result.created else "updated" if result.updated else "matched",
                snapshot_path=location, catalog=catalog.digest)
        return
    if result.exception is not None:
        outcome("error", f"{type(result.exception).__name__}: {result.exception}", snapshot_path=location,
                catalog=catalog.digest)
        raise result.exception
    if result.recalled_data is None:  # syrupy found no stored snapshot
        message = (f"no snapshot of the tool catalog of {server} yet: run `pytest --mcp-snapshots --snapshot-update` "
                   f"to record it (in {location}), then commit it")
        outcome("missing", message, snapshot_path=location, catalog=catalog.digest)
        raise CheckFailed(message)
    from pytest_mcpeval.checks.snapshot_diff import stored_tools, tool_diff

    before = stored_tools(result.recalled_data)
    if before is not None:  # each changed tool named, with a diff of its own
        summary, lines = tool_diff(before, normalised_catalog(catalog))
        diff = [summary, *lines]
    else:  # a snapshot that is not a list of tools: syrupy's diff of the whole document
        diff = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in assertion.get_assert_diff()]
    message = (f"the tool catalog of {server} changed; if that is intended, accept it with "
               "`pytest --mcp-snapshots --snapshot-update`:")
    outcome("changed", message, diff, snapshot_path=location, catalog=catalog.digest)
    raise CheckFailed(message + "\n" + "\n".join(diff))


def catalog_snapshot(item: pytest.Item) -> Path:
    """Where syrupy keeps the snapshot of a ``tool-catalog`` item: its JSON extension's location for the item."""
    from syrupy.extensions.json import JSONSnapshotExtension
    from syrupy.location import PyTestLocation

    return Path(JSONSnapshotExtension.get_location(test_location=PyTestLocation(item), index=0))


SNAPSHOT_NOT_CHECKED = "tool catalog not compared with its snapshot: that needs --mcp-snapshots"


def _check_item(parent: pytest.File, name: str, func: Any, first_case: CaseRef) -> CheckItem:
    """One check item of the file, knowing the file's first case (for its benchmark and server)."""
    item: CheckItem = CheckItem.from_parent(parent, name=name, callobj=func)
    item.stash[CASE_KEY] = first_case
    return item


def check_items(parent: pytest.File, first_case: Any, lint_on: bool, snapshots_on: bool) -> list[pytest.Item]:
    """The check items of one benchmark file; called on every run.

    ``lint`` with --mcp-lint. ``tool-catalog`` with --mcp-snapshots; without it, a *skipped* ``tool-catalog``
    when the file's catalog snapshot exists: syrupy neither reports the snapshot of a skipped test as unused
    nor deletes it under --snapshot-update, so a run that does not check snapshots leaves them alone.
    Without a snapshot nothing is added, so such runs count no extra item.
    """
    items: list[pytest.Item] = []
    if lint_on:
        items.append(_check_item(parent, "lint", lint, first_case))
    catalog = _check_item(parent, "tool-catalog", tool_catalog, first_case)
    if snapshots_on:
        items.append(catalog)
    elif parent.config.pluginmanager.has_plugin("syrupy") and catalog_snapshot(catalog).is_file():
        # skipped on purpose, not a test we fail to run: it keeps syrupy from calling the snapshot unused
        catalog.add_marker(pytest.mark.skip(reason=SNAPSHOT_NOT_CHECKED))
        items.append(catalog)
    return items
