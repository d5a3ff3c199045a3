"""What every way of running a case uses: :class:`Engine`, the per-process state a strategy reads.

An engine owns the server connections (one per server per process), the dispatcher of model calls, the
judge of claims and the memo of each case's call and tools.  The strategies (:mod:`~pytest_mcpeval.run.single`,
:mod:`~pytest_mcpeval.run.flow`) and the model-free items (:mod:`pytest_mcpeval.checks`) take an engine;
:class:`~pytest_mcpeval.run.runtime.Runtime` is the engine that also chooses the strategy of a case and runs
cases ahead, so the strategies never import the module that imports them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.defaults import DEFAULT_CLAIMS_THRESHOLD, DEFAULT_CONNECT_TIMEOUT
from pytest_mcpeval.models import tokens
from pytest_mcpeval.run.case import CaseError, CaseRef, build_messages, relative_to_root
from pytest_mcpeval.run.dispatch import Dispatcher, Unit
from pytest_mcpeval.run.exposure import Exposure, expose
from pytest_mcpeval.run.facts import ProcessFacts
from pytest_mcpeval.servers import ServerPool

if TYPE_CHECKING:
    from pytest_mcpeval.models.config import ModelSpec
    from pytest_mcpeval.settings import Settings


class Engine:
    def __init__(self, root_dir: Path, log_dir: Path, dispatcher: Dispatcher, repeats: int = 1,
                 connect_timeout: float = DEFAULT_CONNECT_TIMEOUT, settings: Settings | None = None) -> None:
        self.root_dir = root_dir
        # what flows take from the run's settings: the judge of claims without a check, the default threshold
        self.judge: ModelSpec | None = None
        self.claims_threshold = DEFAULT_CLAIMS_THRESHOLD
        self.overlay = settings.overlay if settings is not None else None  # --mcp-overlay (overlay.py)
        self.tool_search = settings.tool_search if settings is not None else None  # --mcp-tool-search (run.search)
        if settings is not None:
            self.claims_threshold = settings.claims_threshold
            if settings.judge_model:
                self.judge = settings.registry.resolve(settings.judge_model)
        self.dispatcher = dispatcher
        self.core = dispatcher.core  # the process's event loop: model calls, server sessions, flows
        self.pool = ServerPool(log_dir, connect_timeout, self.core)
        tokens.use_store(dispatcher.cache)  # token counts kept with the responses: a replay loads no tokenizer
        self.repeats = repeats
        self.facts = ProcessFacts()  # said once for the run, not with a case (run/facts.py): the run's own, in a run
        self._shown_paths: dict[Path, str] = {}
        self._units: dict[tuple[int, str, int], Unit] = {}
        self._exposures: dict[tuple[int, str], Exposure] = {}
        # each file's server catalog, by the file's object (kept beside it: an id is unique while its object lives)
        self._file_catalogs: dict[int, tuple[object, Catalog]] = {}

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
        found = self._file_catalogs.get(id(ref.bench))
        if found is not None and found[0] is ref.bench:  # asked twice per case: one lookup, not a key made of paths
            return found[1]
        spec = ref.bench.spec.server
        if spec is None:
            raise CaseError(
                f"{ref.bench.path}: no `server` in the file and no `mcp_server` fixture returned one"
            )
        catalog = self.pool.catalog_for_spec(spec, ref.bench.path.parent, self.root_dir)
        self._file_catalogs[id(ref.bench)] = (ref.bench, catalog)
        return catalog

    def close(self) -> None:
        tokens.use_store(None)
        self.pool.close()  # the servers first: their sessions end on the loop
        self.dispatcher.close()
