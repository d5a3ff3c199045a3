"""What tool search keeps for a conversation (docs/tool-search.md): the search a case runs under, the searches it
made, the tools they loaded, and the answer of each search call.

:func:`config_for` decides a case's search (``--mcp-tool-search``, the file's and the case's ``tool_search``, a
``MODEL+search`` variant); :class:`Searches` answers the search calls of one conversation and shows the next request's
tools.  The strategies use it: :mod:`~pytest_mcpeval.run.search` (a single call after its searches) and
:mod:`~pytest_mcpeval.run.flow` (searches as turns of the flow).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.models.config import SEARCH_SUFFIX
from pytest_mcpeval.models.reply import ModelReply, RawCall
from pytest_mcpeval.results import CaseSearch, TrajectoryCall
from pytest_mcpeval.run.case import CaseError, CaseRef
from pytest_mcpeval.scoring import search as scored
from pytest_mcpeval.text import did_you_mean
from pytest_mcpeval.tool_search import (
    DEFAULT_MAX_SEARCHES,
    DEFAULT_TOP_K,
    NATIVE,
    SEARCH_TOOL,
    SearchError,
    answer_text,
    native_problem,
    native_tool,
    rank,
    search_tool,
)

if TYPE_CHECKING:
    from pytest_mcpeval.benchmark.schema import ToolSearch
    from pytest_mcpeval.models.config import ModelSpec

EMBEDDER = "minilm"  # the local retriever that ranks for `embedding` (models/local.py)


@dataclass(frozen=True)
class SearchConfig:
    """How a case searches: the method, the tools a search answers with, the bound, the tools loaded from the start."""

    method: str
    top_k: int = DEFAULT_TOP_K
    max_searches: int = DEFAULT_MAX_SEARCHES
    always_loaded: tuple[str, ...] = ()


def resolve(option: tuple[str, int | None] | None, file_key: ToolSearch | None,
            case_key: ToolSearch | str | None) -> SearchConfig | None:
    """The search a case runs under: ``--mcp-tool-search``, then the file's key, then the case's, each over the one
    before for the fields it sets; ``None`` without a method, or for ``tool_search: off``."""
    if case_key == "off":
        return None
    fields: dict[str, Any] = {}
    if option is not None:
        fields["method"] = option[0]
        if option[1] is not None:
            fields["top_k"] = option[1]
    for key in (file_key, case_key):
        if key is not None and not isinstance(key, str):
            fields.update({name: getattr(key, name) for name in key.model_fields_set})
    if fields.get("method") is None:
        return None
    fields["always_loaded"] = tuple(dict.fromkeys(fields.get("always_loaded", ())))
    return SearchConfig(**{k: v for k, v in fields.items() if v is not None})


def config_for(model: ModelSpec, option: tuple[str, int | None] | None, file_key: ToolSearch | None,
               case_key: ToolSearch | str | None, run_models: set[str]) -> SearchConfig | None:
    """The search ``model`` runs a case under.  ``MODEL+search`` searches (by bm25 unless the option or a key names
    the method) unless the case says ``off``; ``MODEL`` searches as the option and keys say, except beside its own
    ``MODEL+search`` in the run, where it is the baseline column with the whole catalog."""
    config = resolve(option, file_key, case_key)
    if model.search:
        if case_key == "off" or config is not None:
            return config
        return resolve(("bm25", option[1] if option else None), file_key, case_key)
    return None if model.name + SEARCH_SUFFIX in run_models else config


class Searches:
    """The searches of one case: what was asked, what each answered, the tools loaded so far."""

    def __init__(self, config: SearchConfig, catalog: Catalog) -> None:
        self.config = config
        self.catalog = catalog
        self.queries: list[str] = []
        self.answers: list[list[str]] = []
        self.errors: list[str] = []
        self.loaded: list[str] = list(config.always_loaded)

    @property
    def open(self) -> bool:
        return len(self.queries) < self.config.max_searches

    @property
    def native(self) -> bool:
        """Whether the provider searches (its reply says what: :meth:`read`), not the plugin."""
        return self.config.method in NATIVE

    def shown(self) -> Catalog:
        """The tools of the next request: the search tool while searches are left, then the loaded tools; under
        native search the provider's search tool and the whole catalog, deferred but the tools always loaded."""
        if self.native:
            return self.catalog.deferred(native_tool(self.config.method), self.config.always_loaded)
        tools = [search_tool(self.config.method)] if self.open else []
        keep = set(self.loaded)
        return Catalog(tools + [t for t in self.catalog.tools if t["name"] in keep and t["name"] != SEARCH_TOOL])

    def read(self, reply: ModelReply) -> None:
        """Keep the searches the provider ran for ``reply`` (native search), the tools by their MCP names."""
        for found in reply.searches or []:
            self.queries.append(str(found.get("query") or ""))
            self.answers.append([self.catalog.mcp_name(str(name)) for name in found.get("tools") or []])
            if found.get("error"):
                self.errors.append(str(found["error"]))

    async def answer(self, raw: RawCall) -> tuple[str, bool]:
        """The tool message's text for one search call, and whether it is an error."""
        if not self.open:
            self.errors.append("search bound")
            return f"search limit reached ({self.config.max_searches} searches): call a tool or answer", True
        try:
            args = json.loads(raw.arguments or "{}")
        except ValueError:
            args = None
        query = args.get("query") if isinstance(args, dict) else None
        if not isinstance(query, str):
            self.queries.append("")
            self.answers.append([])
            self.errors.append("no query")
            return "invalid arguments: `query` (a string) is required", True
        self.queries.append(query)
        try:
            names = await self._rank(query)
        except SearchError as exc:
            self.answers.append([])
            self.errors.append(str(exc))
            return f"search failed: {exc}", True
        top = names[: self.config.top_k]
        self.answers.append(top)
        self.loaded.extend(n for n in top if n not in self.loaded)
        return answer_text(query, top, self.catalog.by_name), False

    async def _rank(self, query: str) -> list[str]:
        if self.config.method != "embedding":
            return rank(self.config.method, query, self.catalog.tools)
        from pytest_mcpeval.models.local import LocalModelError, Retriever

        try:
            retriever, _ = await asyncio.to_thread(Retriever.get, EMBEDDER)
        except LocalModelError as exc:
            raise CaseError(f"tool search by embedding: {exc}") from None
        ranked = await asyncio.to_thread(retriever.rank, query, self.catalog)
        return [name for name, _ in ranked]

    def view(self, expected: list[str]) -> CaseSearch:
        view: CaseSearch = {"method": self.config.method, "queries": self.queries,
                            "surfaced": scored.surfaced(self.answers),
                            "found": scored.found_ranks(expected, self.answers, self.config.always_loaded)}
        if not self.native:  # the provider decides how many tools a search of its own surfaces
            view["top_k"] = self.config.top_k
        if self.config.always_loaded:
            view["always_loaded"] = list(self.config.always_loaded)
        if self.errors:
            view["errors"] = self.errors
        return view


def check_search(ref: CaseRef, config: SearchConfig, catalog: Catalog, result: dict[str, Any]) -> None:
    """What makes a case under search an error before any call: native search with a model whose provider does not
    run it, or in a flow; a tool ``always_loaded`` names that the server does not publish (at its line)."""
    if config.method in NATIVE:
        assert ref.model is not None
        problem = native_problem(ref.model.name, ref.model.target)
        if problem is None and ref.case.is_flow:
            problem = (f"{config.method} tool search runs single-call cases: the provider's search is not carried "
                       "from one turn of a flow to the next; a flow searches with bm25, regex or embedding")
        if problem is not None:
            raise CaseError(problem)
    unknown = [name for name in config.always_loaded if name not in catalog.by_name]
    if not unknown:
        return
    name = unknown[0]
    case_key, file_key = ref.case.tool_search, ref.bench.spec.tool_search
    loc: tuple[str | int, ...] = ()
    if case_key is not None and not isinstance(case_key, str) and name in case_key.always_loaded:
        index = ref.bench.spec.cases.index(ref.case)
        loc = ("cases", index, "tool_search", "always_loaded", case_key.always_loaded.index(name))
    elif file_key is not None and name in file_key.always_loaded:
        loc = ("tool_search", "always_loaded", file_key.always_loaded.index(name))
    line = (ref.bench.line_of(loc) if loc else None) or ref.line
    raise Misplaced(f"{result['file']}:{line}: case `{ref.case.id}`: tool_search.always_loaded names `{name}`, "
                     f"which the server does not publish{did_you_mean(name, catalog.names)}")


class Misplaced(CaseError):
    """A case error whose message names its own file and line."""


async def searched(searches: Searches, raw: RawCall, id_: str) -> TrajectoryCall:
    """A flow's call of the search tool, answered by the search (its ``answer.source`` is ``search``)."""
    text, is_error = await searches.answer(raw)
    try:
        args = json.loads(raw.arguments or "{}")
    except ValueError:
        args = None
    return {"id": id_, "tool": SEARCH_TOOL, "args": args if isinstance(args, dict) else None,
            "answer": {"source": "search", "is_error": is_error, "text": text}}


def searched_diagnosis(result: dict[str, Any], view: CaseSearch, expected: list[str]) -> None:
    """Record a flow's searches and, for a flow that missed an expected tool, whether the search or the choice
    missed it (not over a forbidden call, nor over a reply cut off by the token limit)."""
    result["search"] = view
    result["search_recall"] = scored.case_recall(view)
    if result.get("diagnosis") in ("forbidden_tool", "truncated"):
        return
    result["diagnosis"] = scored.diagnosis(view, expected, result.get("called") or [], bool(result.get("passed")),
                                           result.get("diagnosis"))
