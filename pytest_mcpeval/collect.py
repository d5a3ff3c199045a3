"""Benchmark file -> one pytest item per case x model, as pytest's own YAML example does.

Items are ``pytest.Function`` objects (a bare ``pytest.Item`` gets no fixtures), so a case can use
session fixtures such as ``mcp_server`` (a user's override of the file's server) and syrupy's.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from pytest_mcpeval.benchmark.loader import Benchmark, BenchmarkError, load
from pytest_mcpeval.keys import CASE_KEY, RESULT_KEY, SETTINGS_KEY
from pytest_mcpeval.models.config import ModelSpec
from pytest_mcpeval.run.case import CaseError, CaseRef, missing_tools

NO_MODEL_REASON = (
    "no model configured: pass --mcp-models=NAME[,NAME...] (a litellm model string or an alias, e.g. "
    "--mcp-models=openai/gpt-4o-mini), or set mcp_models in [tool.pytest.ini_options]"
)


class CaseMissed(Exception):
    """Raised under --mcp-strict so a miss fails its test; the message is the diff."""


class CaseItem(pytest.Function):
    """One case for one model."""

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> Any:  # type: ignore[override]
        if isinstance(excinfo.value, CaseMissed | CaseError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        ref = self.stash[CASE_KEY]
        return self.path, ref.line - 1 if ref.line else None, f"mcpeval case {self.name}"


def run_case(request: pytest.FixtureRequest, mcpeval_runtime: Any, mcp_server: Any) -> None:
    """The body of every case item: run, score, and keep the result for the report."""
    from pytest_mcpeval.report.terminal import miss_lines
    from pytest_mcpeval.run.dispatch import prefetch_group

    item = request.node
    group, items = prefetch_group(item)  # the items whose calls this process makes, all at once
    if mcpeval_runtime.needs_prefetch(group):
        refs = (other.stash.get(CASE_KEY, None) for other in items)
        mcpeval_runtime.prefetch(group, [r for r in refs if r and r.model and not r.case.skip], mcp_server)
    ref = item.stash[CASE_KEY]
    results = [mcpeval_runtime.run(ref, mcp_server, repeat) for repeat in range(mcpeval_runtime.repeats)]
    for result in results:
        item.config.hook.pytest_mcpeval_case_result(item=item, result=result)
    item.stash[RESULT_KEY] = results
    errors = [r["error"] for r in results if r["error"]]
    if errors:
        raise CaseError(errors[0])
    missed = [r for r in results if not r["passed"]]
    if missed and item.config.stash[SETTINGS_KEY].strict:
        raise CaseMissed("\n".join(miss_lines(missed[0])))


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
        try:
            catalog = load_tools_file(self.path.parent / spec.tools_file)
        except ServerError as exc:
            raise self.CollectError(
                f"{self._shown_path}:{bench.line_of(('server', 'tools_file'))}: server.tools_file: {exc}"
            ) from None
        for i, case in enumerate(bench.spec.cases):
            ref = CaseRef(bench, case, None)
            for j, problem in missing_tools(ref.expectations(), catalog):
                line = bench.line_of(("cases", i, "expect", j, "tool")) or ref.line
                raise self.CollectError(f"{self._shown_path}:{line}: cases[{i}] (`{case.id}`): {problem}")
