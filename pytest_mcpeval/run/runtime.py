"""The per-process engine behind the ``mcpeval_runtime`` fixture.

:class:`Runtime` owns the server connections (one per server per process), the dispatcher of model calls
and the catalogs this process has reported to the controller.  :meth:`Runtime.run` does what every way
of running a case shares (the result's identity, the catalog, the missing-tool check) and hands the case
to its strategy: :mod:`~pytest_mcpeval.run.single` (one model call) or, for a flow, :mod:`~pytest_mcpeval.run.flow`
(a conversation with answered tool calls, claims judged by :attr:`Runtime.judge`).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_mcpeval.catalog import Catalog, catalog_info
from pytest_mcpeval.defaults import DEFAULT_CLAIMS_THRESHOLD, DEFAULT_CONNECT_TIMEOUT
from pytest_mcpeval.models import tokens
from pytest_mcpeval.models.local import PREFIX as LOCAL_PREFIX
from pytest_mcpeval.results import CaseResult
from pytest_mcpeval.run import flow, single
from pytest_mcpeval.run.case import (
    CaseError,
    CaseRef,
    build_messages,
    error_result,
    missing_tools,
    relative_to_root,
)
from pytest_mcpeval.run.dispatch import Dispatcher, Unit
from pytest_mcpeval.run.exposure import Exposure, expose
from pytest_mcpeval.run.pool import DaemonPool
from pytest_mcpeval.servers import ServerError, ServerPool

if TYPE_CHECKING:
    from pytest_mcpeval.models.config import ModelSpec
    from pytest_mcpeval.settings import Settings


class Runtime:
    def __init__(self, root_dir: Path, log_dir: Path, dispatcher: Dispatcher, repeats: int = 1,
                 connect_timeout: float = DEFAULT_CONNECT_TIMEOUT, settings: Settings | None = None) -> None:
        self.root_dir = root_dir
        # what flows take from the run's settings: the judge of claims without a check, the default threshold
        self.judge: ModelSpec | None = None
        self.claims_threshold = DEFAULT_CLAIMS_THRESHOLD
        self.overlay = settings.overlay if settings is not None else None
        if settings is not None:
            self.claims_threshold = settings.claims_threshold
            if settings.judge_model:
                self.judge = settings.registry.resolve(settings.judge_model)
        self.pool = ServerPool(log_dir, connect_timeout)
        self.dispatcher = dispatcher
        tokens.use_store(dispatcher.cache)  # token counts kept with the responses: a replay loads no tokenizer
        self.repeats = repeats
        self._reported_catalogs: set[str] = set()
        self._reported_models: set[str] = set()
        self._prefetched: set[str] = set()
        self._shown_paths: dict[Path, str] = {}
        self._units: dict[tuple[int, str, int], Unit] = {}
        self._exposures: dict[tuple[int, str], Exposure] = {}
        self._flows: dict[tuple[int, int], Future[CaseResult]] = {}  # flows started ahead, by (id(ref), repeat)
        self._flow_pools: dict[str, DaemonPool] = {}
        self._in_flow = threading.local()

    def shown_path(self, path: Path) -> str:
        if path not in self._shown_paths:
            self._shown_paths[path] = relative_to_root(path, self.root_dir)
        return self._shown_paths[path]

    def label(self, ref: CaseRef) -> str:
        assert ref.model is not None
        return f"{self.shown_path(ref.bench.path)}::{ref.case.id}[{ref.model.name}]"

    def unit(self, ref: CaseRef, catalog: Catalog, repeat: int) -> Unit:
        """The call of one repeat of a case (built once: its key hashes the whole request)."""
        assert ref.model is not None
        memo = (id(ref), catalog.digest, repeat)
        if memo not in self._units:
            messages = build_messages(ref.bench.spec.system, ref.case)
            self._units[memo] = Unit.make(ref.model, messages, catalog, repeat, self.label(ref))
        return self._units[memo]

    def server_label(self, ref: CaseRef, override: Any) -> str:
        """The server a case is evaluated against, as messages and the report name it."""
        if override is not None:
            return f"mcp_server fixture ({type(override).__name__})"
        return ref.bench.spec.server.describe() if ref.bench.spec.server else "no server"

    def needs_prefetch(self, group: str) -> bool:
        return group not in self._prefetched

    def prefetch(self, group: str, refs: list[CaseRef], override: Any) -> None:
        """Submit the model calls of ``refs`` (every repeat) once per prefetch group (run.dispatch.prefetch_group)."""
        if group in self._prefetched:
            return
        self._prefetched.add(group)
        for ref in refs:
            try:
                catalog = self.catalog(ref, override)
            except (ServerError, CaseError):
                continue  # the item itself reports the error
            if ref.model is None or missing_tools(ref.expectations(), catalog):
                continue
            for repeat in range(self.repeats):
                if ref.case.is_flow and ref.case.execute != "live" and not ref.model.target.startswith(LOCAL_PREFIX):
                    self._flows[(id(ref), repeat)] = self._flow_pool(ref.model).submit(
                        self._run_flow, ref, override, repeat)
                else:
                    self.dispatcher.submit(self.unit(ref, catalog, repeat))

    def _flow_pool(self, model: ModelSpec) -> DaemonPool:
        """Flows answered by mocks run on threads of their own: a flow waiting for its next turn or the judge
        holds a thread of this pool, never one of the model's (so the turns of different flows interleave).  Four
        flows per model call in flight keep the model's calls going while others wait for the judge.  Flows with
        ``execute: live`` share the server's state and run in their items, one at a time, as before (their first
        turns are made ahead like single calls)."""
        if model.name not in self._flow_pools:
            calls = self.dispatcher.pool_size(model)
            self._flow_pools[model.name] = DaemonPool(4 * calls, f"mcpeval-flows-{model.name}")
        return self._flow_pools[model.name]

    def _run_flow(self, ref: CaseRef, override: Any, repeat: int) -> CaseResult:
        self._in_flow.active = True
        return self.run(ref, override, repeat)

    def catalog(self, ref: CaseRef, override: Any) -> Catalog:
        """The tools the case shows the model: the server's catalog, or the part of it its ``tools`` and
        ``distractors`` choose (run.exposure)."""
        return self.exposure(ref, override).catalog

    def exposure(self, ref: CaseRef, override: Any) -> Exposure:
        full = self.server_catalog(ref, override)
        memo = (id(ref.case), full.digest)
        if memo not in self._exposures:
            try:
                self._exposures[memo] = expose(ref.case, full)
            except ValueError as exc:  # `tools` names a tool a live server does not publish
                raise CaseError(f"{self.shown_path(ref.bench.path)}:{ref.line}: case `{ref.case.id}`: {exc}") from None
        return self._exposures[memo]

    def server_catalog(self, ref: CaseRef, override: Any) -> Catalog:
        """The server's catalog, with the descriptions of ``--mcp-overlay`` when one is given (overlay.py)."""
        catalog = self._server_catalog(ref, override)
        if self.overlay is None:
            return catalog
        overlaid = self.overlay.apply(catalog)
        if overlaid is not catalog:
            self.pool.same_server(overlaid, catalog)  # live calls and start-up time go by the catalog
        return overlaid

    def _server_catalog(self, ref: CaseRef, override: Any) -> Catalog:
        if override is not None:
            return self.pool.catalog_for_object(override)
        spec = ref.bench.spec.server
        if spec is None:
            raise CaseError(
                f"{ref.bench.path}: no `server` in the file and no `mcp_server` fixture returned one"
            )
        return self.pool.catalog_for_spec(spec, ref.bench.path.parent, self.root_dir)

    def run(self, ref: CaseRef, override: Any, repeat: int = 0) -> CaseResult:
        """The result of one repeat of a case; infrastructure problems are returned with ``error`` set."""
        assert ref.model is not None
        ahead = None if getattr(self._in_flow, "active", False) else self._flows.pop((id(ref), repeat), None)
        if ahead is not None:  # a flow started by prefetch, on a thread of its own
            return ahead.result()
        result: dict[str, Any] = {  # completed by the strategy into a CaseResult
            "file": self.shown_path(ref.bench.path),
            "line": ref.line,
            "id": ref.case.id,
            "model": ref.model.name,
            "repeat": repeat,
            "tags": sorted({*ref.bench.spec.tags, *ref.case.tags}),
            "error": None,
        }
        expects = ref.expectations()
        try:
            exposure = self.exposure(ref, override)
        except (ServerError, CaseError) as exc:
            return error_result(result, expects, str(exc))
        catalog = exposure.catalog
        result["catalog"] = catalog.digest
        result["tools_shown"] = len(catalog.tools)
        if exposure.seed is not None:
            result["distractors"] = list(exposure.distractors)
            result["distractor_seed"] = exposure.seed
        if catalog.digest not in self._reported_catalogs:  # once per process: the controller merges them
            self._reported_catalogs.add(catalog.digest)
            startup = self.pool.startup_s(self.server_catalog(ref, override))
            result["catalog_info"] = catalog_info(catalog, self.server_label(ref, override), startup)
        problems = missing_tools(expects, catalog)
        if problems:
            index = ref.bench.spec.cases.index(ref.case)
            line = ref.bench.line_of(("cases", index, "expect", problems[0][0], "tool")) or ref.line
            where = f"{result['file']}:{line}: case `{ref.case.id}`"
            return error_result(result, expects, f"{where}: " + "; ".join(m for _, m in problems))
        if ref.case.is_flow:
            return flow.evaluate(self, ref, catalog, repeat, result)
        return single.evaluate(self, ref, catalog, repeat, result)

    def close(self) -> None:
        tokens.use_store(None)
        for pool in self._flow_pools.values():
            pool.shutdown(cancel_futures=True)
        self.dispatcher.close()
        self.pool.close()

