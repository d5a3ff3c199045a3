"""Benchmark file -> one pytest item per case x model, as pytest's own YAML example does.

Items are ``pytest.Function`` objects (a bare ``pytest.Item`` gets no fixtures), so a case can use
session fixtures such as ``mcp_server`` (a user's override of the file's server) and syrupy's.

Once the items are selected (``-k``, ``-m``), :func:`check_judge` (or, on the xdist controller, which
collects nothing, :func:`check_judge_ids`) makes flows whose claims need a judge, in a run without one,
a usage error naming the files.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_mcpeval.benchmark.loader import (
    Benchmark,
    BenchmarkError,
    Problem,
    load,
    unknown_tools,
    unknown_when_arguments,
)
from pytest_mcpeval.keys import CASE_KEY, SETTINGS_KEY
from pytest_mcpeval.models.config import ModelSpec
from pytest_mcpeval.models.local import PREFIX as LOCAL_PREFIX
from pytest_mcpeval.run.case import CaseError, CaseIdentity, CaseRef, item_name, missing_tools, needs_judge
from pytest_mcpeval.run.item import CaseMissed, run_case

RETRIEVER_FLOW_REASON = (
    "a flow needs a model that calls tools turn after turn; local/... is a retriever that only ranks the tools"
)
SNAPSHOT_UPDATE_REASON = (
    "--snapshot-update records snapshots and calls no model: run without it to evaluate the cases"
)
NO_MODEL_REASON = (
    "no model configured: pass --mcp-models=NAME[,NAME...] (a litellm model string or an alias, e.g. "
    "--mcp-models=openai/gpt-4o-mini), or set mcp_models in [tool.pytest.ini_options]"
)


class CaseItem(pytest.Function):
    """One case for one model."""

    def setup(self) -> None:
        """The item's fixtures, then the ``mcpeval_runtime`` fixture for the first case of the process; the others
        read it from the stash (run/item.py): a fixture an item names is resolved again at each item's setup, its
        ``request`` and ``tmp_path_factory`` too (about 40 ms of a 1,000-case replay).  After ``mcp_server``, as the
        check items name them: the runtime closes first, while the fixture's server is still up."""
        from pytest_mcpeval.run.runtime import RUNTIME_KEY  # the run's modules: at the first case, not at collection

        super().setup()
        if RUNTIME_KEY not in self.config.stash:  # its failure is the case's setup's, as any fixture's
            self.funcargs["request"].getfixturevalue("mcpeval_runtime")  # type: ignore[attr-defined]

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> Any:  # type: ignore[override]
        if isinstance(excinfo.value, CaseMissed | CaseError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        ref = self.stash[CASE_KEY]
        return self.path, ref.line - 1 if ref.line else None, f"mcpeval case {self.name}"


class BenchmarkFileNode(pytest.File):
    def collect(self) -> list[pytest.Item]:
        try:
            bench = load(self.path)
        except BenchmarkError as exc:
            exc.path = self._shown_path
            raise self.CollectError(str(exc)) from None
        settings = self.config.stash[SETTINGS_KEY]
        from pytest_mcpeval.servers import server_secrets

        # before anything names the server: its errors, labels and log are masked from here on, in this process
        # (each xdist worker collects for itself and hands what it learnt to the controller: plugin.py)
        settings.redactor.add(server_secrets(bench.spec.server))
        from pytest_mcpeval.checks.items import CheckItem, check_items

        if settings.list_tools:  # --mcp-tools: what the server publishes, and nothing else
            from pytest_mcpeval.checks.listing import list_tools

            listing = CheckItem.from_parent(self, name="tools", callobj=list_tools)
            listing.stash[CASE_KEY] = CaseRef(bench, bench.spec.cases[0], None)
            return [listing, *check_items(self, listing.stash[CASE_KEY], False, False)]  # keeps snapshots
        self._check_static_tools(bench)
        models: list[ModelSpec | None] = list(settings.model_specs(bench.spec.models)) or [None]
        items: list[pytest.Item] = []
        for case in bench.spec.cases:
            register_tags(self.config, (*bench.spec.tags, *case.tags))
            for model in models:
                name = item_name(case.id, model)
                item = CaseItem.from_parent(self, name=name, callobj=run_case)
                item.stash[CASE_KEY] = CaseRef(bench, case, model)
                for tag in (*bench.spec.tags, *case.tags):
                    item.add_marker(tag)
                if case.skip:
                    reason = case.skip if isinstance(case.skip, str) else "skip: true in the benchmark file"
                    item.add_marker(pytest.mark.skip(reason=reason))
                elif settings.snapshot_update:  # a run that records snapshots must not pay for model calls
                    item.add_marker(pytest.mark.skip(reason=SNAPSHOT_UPDATE_REASON))
                elif model is None:
                    item.add_marker(pytest.mark.skip(reason=NO_MODEL_REASON))
                elif case.is_flow and model.target.startswith(LOCAL_PREFIX):
                    item.add_marker(pytest.mark.skip(reason=RETRIEVER_FLOW_REASON))
                items.append(item)
        # always: a committed catalog snapshot needs its (skipped) item, or syrupy calls it unused
        items += check_items(self, CaseRef(bench, bench.spec.cases[0], None), settings.lint, settings.snapshots)
        return items

    @property
    def _shown_path(self) -> str:
        """The file as the user would type it: relative to where pytest was started."""
        return os.path.relpath(self.path, self.config.invocation_params.dir)

    def _check_static_tools(self, bench: Benchmark) -> None:
        """With a static tool list, the tools a case expects, mocks or forbids are checked at collection time,
        all of the file's at once (a ``from_result`` names an earlier expected call's tool: checked with it)."""
        from pytest_mcpeval.servers import ServerError, load_tools_file

        spec = bench.spec.server
        if spec is None or spec.tools_file is None:
            return
        path = self.path.parent / spec.tools_file
        try:  # a broken tool list names its own lines, with the file as the user would type it
            catalog = load_tools_file(path, os.path.relpath(path, self.config.invocation_params.dir))
        except ServerError as exc:
            raise self.CollectError(
                f"{self._shown_path}:{bench.line_of(('server', 'tools_file'))}: server.tools_file: {exc}"
            ) from None
        problems: list[Problem] = []
        names = catalog.names  # a list made by each call: once for the file
        for i, case in enumerate(bench.spec.cases):
            ref = CaseRef(bench, case, None)
            where = f"cases[{i}] (`{case.id}`)"
            for j, message in missing_tools(ref.expectations(), catalog):
                problems.append(Problem(bench.line_of(("cases", i, "expect", j, "tool")) or ref.line, where, message))
            for loc, message in (*unknown_tools(case, names), *unknown_when_arguments(case, catalog)):
                problems.append(Problem(bench.line_of(("cases", i, *loc)) or ref.line, where, message))
        if problems:
            raise self.CollectError(str(BenchmarkError.of(self._shown_path, problems)))


def check_judge(config: pytest.Config, items: Iterable[pytest.Item]) -> None:
    """After selection: selected flows (that will run: a model, not skipped) with claims for the judge and no
    ``--mcp-judge-model`` are a usage error.  Call it where the items are (not on an xdist worker: the
    controller calls :func:`check_judge_ids`)."""
    if config.stash[SETTINGS_KEY].judge_model is not None:
        return
    found: dict[Path, list[str]] = {}
    for item in items:
        ref = item.stash.get(CASE_KEY, None)
        if ref is not None and ref.model is not None and not ref.case.skip and needs_judge(ref.case):
            ids = found.setdefault(ref.bench.path, [])
            if ref.case.id not in ids:
                ids.append(ref.case.id)
    _judge_usage_error(config, found)


_JUDGE_CHECKED = pytest.StashKey[bool]()
_MARKERS_KEY = pytest.StashKey[set[str]]()  # the markers registered in the ini file and by register_tags


def register_tags(config: pytest.Config, tags: Iterable[str]) -> None:
    """Each benchmark tag becomes a registered marker (so ``--strict-markers`` accepts it and ``-m`` selects
    by it), once per distinct tag: the ini file's markers are read at the first call, and a tag is added only
    the first time any file of the session names it.  (They cannot be registered in ``pytest_configure``:
    the tags are known only as the files are read.)"""
    known = config.stash.get(_MARKERS_KEY, None)
    if known is None:
        known = config.stash[_MARKERS_KEY] = {line.split(":")[0].strip() for line in config.getini("markers")}
    for tag in tags:
        if tag not in known:
            known.add(tag)
            config.addinivalue_line("markers", f"{tag}: benchmark tag (pytest-mcpeval)")


def check_judge_ids(config: pytest.Config, identities: Sequence[CaseIdentity]) -> None:
    """:func:`check_judge` on the xdist controller, from the selected cases of the first worker to finish
    collecting (every worker collects the same items: run/identities.py); the files are read again."""
    if config.stash[SETTINGS_KEY].judge_model is not None or config.stash.get(_JUDGE_CHECKED, False):
        return
    config.stash[_JUDGE_CHECKED] = True
    wanted: dict[str, set[str]] = {}
    for identity in identities:
        wanted.setdefault(identity["file"], set()).add(identity["id"])
    found: dict[Path, list[str]] = {}
    for file, ids in wanted.items():
        path = config.rootpath / file
        try:
            bench = load(path)
        except BenchmarkError:  # the worker reported it as a collection error
            continue
        judged = [c.id for c in bench.spec.cases if c.id in ids and not c.skip and needs_judge(c)]
        if judged:
            found[path] = judged
    _judge_usage_error(config, found)


def _judge_usage_error(config: pytest.Config, found: dict[Path, list[str]]) -> None:
    if not found:
        return
    start = config.invocation_params.dir
    files = "\n".join(f"  {os.path.relpath(path, start)}: {', '.join(ids)}" for path, ids in sorted(found.items()))
    raise pytest.UsageError(
        "claims without a `check` are judged by a judge model, and none is configured; pass "
        "--mcp-judge-model=NAME (a litellm model string or an alias; ini key mcp_judge_model), or give these "
        f"cases' claims a `check` (contains, regex or any_of) to decide them without a judge:\n{files}"
    )
