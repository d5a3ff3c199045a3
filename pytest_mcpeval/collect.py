"""Benchmark file -> one pytest item per case x model, as pytest's own YAML example does.

Items are ``pytest.Function`` objects (a bare ``pytest.Item`` gets no fixtures), so a case can use
session fixtures such as ``mcp_server`` (a user's override of the file's server) and syrupy's.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from pytest_mcpeval.benchmark.loader import Benchmark, BenchmarkError, load
from pytest_mcpeval.keys import CASE_KEY, SETTINGS_KEY
from pytest_mcpeval.models.config import ModelSpec
from pytest_mcpeval.run.case import CaseError, CaseRef, missing_tools
from pytest_mcpeval.run.item import CaseMissed, run_case

NO_MODEL_REASON = (
    "no model configured: pass --mcp-models=NAME[,NAME...] (a litellm model string or an alias, e.g. "
    "--mcp-models=openai/gpt-4o-mini), or set mcp_models in [tool.pytest.ini_options]"
)


class CaseItem(pytest.Function):
    """One case for one model."""

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
            for model in models:
                name = f"{case.id}[{model.name}]" if model else case.id
                item = CaseItem.from_parent(self, name=name, callobj=run_case)
                item.stash[CASE_KEY] = CaseRef(bench, case, model)
                for tag in (*bench.spec.tags, *case.tags):
                    if not any(line.split(":")[0].strip() == tag for line in self.config.getini("markers")):
                        self.config.addinivalue_line("markers", f"{tag}: benchmark tag (pytest-mcpeval)")
                    item.add_marker(tag)
                if case.skip:
                    reason = case.skip if isinstance(case.skip, str) else "skip: true in the benchmark file"
                    item.add_marker(pytest.mark.skip(reason=reason))
                elif model is None:
                    item.add_marker(pytest.mark.skip(reason=NO_MODEL_REASON))
                items.append(item)
        # always: a committed catalog snapshot needs its (skipped) item, or syrupy calls it unused
        items += check_items(self, CaseRef(bench, bench.spec.cases[0], None), settings.lint, settings.snapshots)
        return items

    @property
    def _shown_path(self) -> str:
        """The file as the user would type it: relative to where pytest was started."""
        return os.path.relpath(self.path, self.config.invocation_params.dir)

    def _check_static_tools(self, bench: Benchmark) -> None:
        """With a static tool list, a missing expected tool is found at collection time."""
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
        for i, case in enumerate(bench.spec.cases):
            ref = CaseRef(bench, case, None)
            for j, problem in missing_tools(ref.expectations(), catalog):
                line = bench.line_of(("cases", i, "expect", j, "tool")) or ref.line
                raise self.CollectError(f"{self._shown_path}:{line}: cases[{i}] (`{case.id}`): {problem}")
