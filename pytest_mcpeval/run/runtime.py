"""The per-process engine behind the ``mcpeval_runtime`` fixture: which strategy runs a case, and cases run ahead.

:class:`Runtime` is the :class:`~pytest_mcpeval.run.engine.Engine` (servers, dispatcher, catalogs) that runs
cases.  :meth:`Runtime.run` does what every way of running a case shares (the result's identity, the catalog,
the missing-tool check) and hands the case to its strategy: :mod:`~pytest_mcpeval.run.single` (one model
call) or, for a flow, :mod:`~pytest_mcpeval.run.flow` (a conversation with answered tool calls, claims judged
by :attr:`Runtime.judge`, a task of the process's event loop).  :func:`open_runtime` builds the fixture's runtime
from the run's settings.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.catalog_report import catalog_info
from pytest_mcpeval.defaults import DEFAULT_CONNECT_TIMEOUT
from pytest_mcpeval.keys import BUDGET_DIR_KEY, CASE_KEY, CORRUPTED_KEY, INTERRUPTS_KEY, SETTINGS_KEY, UNWRITABLE_KEY
from pytest_mcpeval.models.local import PREFIX as LOCAL_PREFIX
from pytest_mcpeval.results import CaseResult
from pytest_mcpeval.run import facts, flow, search, searching, single
from pytest_mcpeval.run.cache import ResponseCache
from pytest_mcpeval.run.case import CaseError, CaseRef, error_result, missing_tools
from pytest_mcpeval.run.dispatch import Dispatcher, DispatchSettings
from pytest_mcpeval.run.engine import Engine
from pytest_mcpeval.run.prefetch import makes_calls_at_once
from pytest_mcpeval.servers import ServerError

if TYPE_CHECKING:
    from pytest_mcpeval.settings import Settings


# the process's runtime while the ``mcpeval_runtime`` fixture is set up: what case items read (run/item.py)
RUNTIME_KEY = pytest.StashKey["Runtime"]()


class Runtime(Engine):
    def __init__(self, root_dir: Path, log_dir: Path, dispatcher: Dispatcher, repeats: int = 1,
                 connect_timeout: float = DEFAULT_CONNECT_TIMEOUT, settings: Settings | None = None) -> None:
        super().__init__(root_dir, log_dir, dispatcher, repeats, connect_timeout, settings)
        self._prefetched: set[str] = set()
        self._flows: dict[tuple[int, int], concurrent.futures.Future[CaseResult]] = {}  # by (id(ref), repeat)
        self.model_names = set(settings.models) if settings is not None else set()  # MODEL beside MODEL+search

    def needs_prefetch(self, group: str) -> bool:
        return group not in self._prefetched

    def prefetch(self, group: str, refs: list[CaseRef], override: Any) -> None:
        """Start the model calls of ``refs`` (every repeat) on the loop, once per prefetch group
        (run.prefetch.prefetch_group): a single call's request, or a whole flow answered by mocks.  Flows with
        ``execute: live`` share the server's state: they run when their item does, one at a time (their first turn
        is started ahead like a single call)."""
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
            # a flow answered by mocks, or a case's searches (answered here): a conversation started ahead
            conversation = (ref.case.is_flow and ref.case.execute != "live") or (
                not ref.case.is_flow and self.search_config(ref) is not None)
            for repeat in range(self.repeats):
                if conversation and not ref.model.target.startswith(LOCAL_PREFIX):
                    self._flows[(id(ref), repeat)] = self._start_flow(ref, override, repeat)
                else:
                    self.dispatcher.submit(self.unit(ref, catalog, repeat))

    def run(self, ref: CaseRef, override: Any, repeat: int = 0) -> CaseResult:
        """The result of one repeat of a case; infrastructure problems are returned with ``error`` set."""
        started = self._flows.pop((id(ref), repeat), None)
        if started is None and (ref.case.is_flow or self.search_config(ref) is not None):
            started = self._start_flow(ref, override, repeat)
        if started is not None:
            try:
                return self.core.wait(started)
            except concurrent.futures.CancelledError:
                result = self._identity(ref, repeat)
                return error_result(result, ref.expectations(), "not completed: the run was interrupted")
        prepared = self._prepare(ref, override, repeat)
        if not isinstance(prepared, tuple):
            return prepared
        result, catalog = prepared
        return single.evaluate(self, ref, catalog, repeat, result)

    def search_config(self, ref: CaseRef) -> searching.SearchConfig | None:
        """The tool search a case runs under (``None``: the whole catalog)."""
        if ref.model is None:
            return None
        return searching.config_for(ref.model, self.tool_search, ref.bench.spec.tool_search, ref.case.tool_search,
                                 self.model_names | set(ref.bench.spec.models))

    def _start_flow(self, ref: CaseRef, override: Any, repeat: int) -> concurrent.futures.Future[CaseResult]:
        """The flow, or the searches of a case under tool search, as a task of the loop (its tools and checks
        prepared here, on the main thread)."""
        prepared = self._prepare(ref, override, repeat)
        if not isinstance(prepared, tuple):
            done: concurrent.futures.Future[CaseResult] = concurrent.futures.Future()
            done.set_result(prepared)
            return done
        result, catalog = prepared
        config = self.search_config(ref)
        if config is not None and not ref.case.is_flow:
            return self.core.start(search.evaluate, self, ref, catalog, repeat, result, config)
        return self.core.start(flow.evaluate, self, ref, catalog, repeat, result, config)

    def _identity(self, ref: CaseRef, repeat: int) -> dict[str, Any]:
        assert ref.model is not None
        result: dict[str, Any] = {  # completed by the strategy into a CaseResult
            "file": self.shown_path(ref.bench.path),
            "line": ref.line,
            "id": ref.case.id,
            "model": ref.model.name,
            "repeat": repeat,
            "tags": sorted({*ref.bench.spec.tags, *ref.case.tags}),
            "error": None,
        }
        if ref.case.draft:
            result["draft"] = True
        return result

    def _prepare(self, ref: CaseRef, override: Any, repeat: int) -> tuple[dict[str, Any], Catalog] | CaseResult:
        """What every strategy shares: the result's identity, the catalog shown and the missing-tool check; an
        error result when the case cannot be evaluated."""
        result = self._identity(ref, repeat)
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
        if catalog.digest not in self.facts.catalogs:  # once per process, for the run (run/facts.py)
            startup = self.pool.startup_s(self.server_catalog(ref, override))
            self.facts.note_catalog(catalog.digest, catalog_info(catalog, self.server_label(ref, override), startup))
        problems = missing_tools(expects, catalog)
        if problems:
            index = ref.bench.spec.cases.index(ref.case)
            line = ref.bench.line_of(("cases", index, "expect", problems[0][0], "tool")) or ref.line
            where = f"{result['file']}:{line}: case `{ref.case.id}`"
            return error_result(result, expects, f"{where}: " + "; ".join(m for _, m in problems))
        return result, catalog


def open_runtime(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    """The ``mcpeval_runtime`` fixture's body: session-wide server connections and the model call path (one per
    xdist worker); at its end, the cache's notes for the report (handed to the controller under xdist)."""
    import uuid

    config = request.config
    settings = config.stash[SETTINGS_KEY]
    workerinput = getattr(config, "workerinput", None)
    run_id = workerinput["testrunuid"] if workerinput else uuid.uuid4().hex
    cache = ResponseCache(settings.cache_dir, settings.record, run_id) if settings.record != "off" else None
    files = {item.path for item in request.session.items if _runs_a_model(item)}
    dispatch = DispatchSettings(settings.concurrency, settings.per_model_concurrency, settings.retries,
                                settings.timeout, workers=makes_calls_at_once(config, len(files)))
    budget = None
    if settings.max_cost is not None:
        from pytest_mcpeval.run.budget import Budget

        budget = Budget(settings.max_cost, config.stash[BUDGET_DIR_KEY])
    dispatcher = Dispatcher(dispatch, cache, budget=budget, stopping=config.stash[INTERRUPTS_KEY].stopping)
    runtime = Runtime(config.rootpath, tmp_path_factory.mktemp("mcpeval-servers"), dispatcher,
                      settings.repeat, connect_timeout=settings.connect_timeout, settings=settings)
    runtime.facts = facts.of(config)
    config.stash[RUNTIME_KEY] = runtime
    try:
        yield runtime
    finally:
        del config.stash[RUNTIME_KEY]
    runtime.close()
    if cache is not None:
        if workerinput is not None:  # handed to the controller by xdist (see EvalSession)
            for name, notes in (("corrupted", cache.corrupted), ("unwritable", cache.unwritable)):
                if notes:
                    config.workeroutput[f"mcpeval_{name}"] = list(notes)  # type: ignore[attr-defined]
        else:
            config.stash[CORRUPTED_KEY] = list(cache.corrupted)
            config.stash[UNWRITABLE_KEY] = list(cache.unwritable)


def _runs_a_model(item: pytest.Item) -> bool:
    ref = item.stash.get(CASE_KEY, None)
    return ref is not None and ref.model is not None and not ref.case.skip
