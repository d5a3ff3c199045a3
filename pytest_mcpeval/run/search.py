"""The search strategy: a single-call case under client-side tool search (docs/tool-search.md).

The model is shown the search tool (:func:`pytest_mcpeval.tool_search.search_tool`) and the tools the file keeps
loaded, not the catalog.  Each call of the search tool is answered, as a tool message, with the top K tools of the
case's catalog for its query (bm25 and regex in :mod:`pytest_mcpeval.tool_search`, embedding by the local
retriever), and those tools' full definitions join the tools of the next request.  A query the method cannot run
(a bad regex) is answered with an error result the model sees.  After ``max_searches`` searches the search tool is
no longer shown; a search call beyond the bound in the same reply is answered with an error.  The first reply that
calls another tool, or none, is the case's answer: its calls (search calls left out) are scored as a single call
is, against the case's whole catalog, and the diagnosis says whether the search or the choice missed
(:mod:`pytest_mcpeval.scoring.search`).  Each request is a :class:`~pytest_mcpeval.run.dispatch.Unit` whose key
hashes the whole conversation and the tools shown, so a search case replays from the cache like a flow; it runs as
a task of the process's event loop, as a flow does.  Usage and latency sum every request of the case.
"""

from __future__ import annotations

import asyncio
import copy
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.models import ModelCallError
from pytest_mcpeval.models.config import SEARCH_SUFFIX
from pytest_mcpeval.models.local import is_local
from pytest_mcpeval.models.reply import ModelReply, RawCall
from pytest_mcpeval.results import CalledTool, CaseResult, CaseSearch
from pytest_mcpeval.run.case import CaseError, CaseRef, build_messages, error_result
from pytest_mcpeval.run.dispatch import Unit
from pytest_mcpeval.run.flow import call_id, summed_usage
from pytest_mcpeval.run.single import CONTENT_CAP, utf8_safe
from pytest_mcpeval.scoring import search as scored
from pytest_mcpeval.scoring import stops
from pytest_mcpeval.scoring.case import parse_call, score_case
from pytest_mcpeval.text import did_you_mean
from pytest_mcpeval.tool_result import tool_message
from pytest_mcpeval.tool_search import (
    DEFAULT_MAX_SEARCHES,
    DEFAULT_TOP_K,
    SEARCH_TOOL,
    SearchError,
    answer_text,
    rank,
    search_tool,
)

if TYPE_CHECKING:
    from pytest_mcpeval.benchmark.schema import ToolSearch
    from pytest_mcpeval.models.config import ModelSpec
    from pytest_mcpeval.run.engine import Engine

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


class _Search:
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

    def shown(self) -> Catalog:
        """The tools of the next request: the search tool while searches are left, then the loaded tools."""
        tools = [search_tool(self.config.method)] if self.open else []
        keep = set(self.loaded)
        return Catalog(tools + [t for t in self.catalog.tools if t["name"] in keep and t["name"] != SEARCH_TOOL])

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
        view: CaseSearch = {"method": self.config.method, "top_k": self.config.top_k, "queries": self.queries,
                            "surfaced": scored.surfaced(self.answers),
                            "found": scored.found_ranks(expected, self.answers, self.config.always_loaded)}
        if self.config.always_loaded:
            view["always_loaded"] = list(self.config.always_loaded)
        if self.errors:
            view["errors"] = self.errors
        return view


async def evaluate(runtime: Engine, ref: CaseRef, catalog: Catalog, repeat: int, result: dict[str, Any],
                   config: SearchConfig) -> CaseResult:
    """Complete ``result`` (identity and catalog already set) with the searches, the answer and its score."""
    assert ref.model is not None
    expects = ref.expectations()
    search = _Search(config, catalog)
    replies: list[ModelReply] = []
    try:
        _check_loaded(ref, config, catalog, result)
        last, shown = await _converse(runtime, ref, repeat, search, replies)
    except ModelCallError as exc:
        return error_result(result, expects, utf8_safe(str(exc).removeprefix(f"{runtime.label(ref)}: ")))
    except _Misplaced as exc:
        return error_result(result, expects, str(exc))
    except CaseError as exc:
        return error_result(result, expects, f"{result['file']}:{result['line']}: case `{ref.case.id}`: {exc}")
    searching = SEARCH_TOOL in shown.by_name  # a call of it past the bound is a call of a tool it was not shown
    calls = [_parsed(c, shown, catalog) for c in last.calls if not searching or shown.mcp_name(c.name) != SEARCH_TOOL]
    result.update(score_case(expects, calls, catalog))
    for name in ("finish_reason", "provider_finish_reason"):
        if getattr(last, name) is not None:
            result[name] = getattr(last, name)
    view = search.view([e.tool for e in expects])
    result["search"] = view
    result["search_recall"] = scored.case_recall(view)
    result["turns"] = len(replies)
    own = stops.refine(result["diagnosis"], last.finish_reason, last.provider_finish_reason, bool(calls), False)
    result["diagnosis"] = scored.diagnosis(view, [e.tool for e in expects], calls, bool(result["passed"]), own)
    invented = sorted({c["tool"] for c in calls if c["tool"] not in catalog.by_name})
    if invented:
        result["hallucinated_tools"] = invented
    content = last.content
    if content is not None and len(content) > CONTENT_CAP:
        result["content_truncated"] = len(content)
        content = content[:CONTENT_CAP]
    result["content"] = content
    result["usage"], result["latency_s"] = summed_usage(replies, {})
    return cast(CaseResult, utf8_safe(result))


def _check_loaded(ref: CaseRef, config: SearchConfig, catalog: Catalog, result: dict[str, Any]) -> None:
    """A tool ``always_loaded`` names that the server does not publish is an error at its line (file or case)."""
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
    raise _Misplaced(f"{result['file']}:{line}: case `{ref.case.id}`: tool_search.always_loaded names `{name}`, "
                     f"which the server does not publish{did_you_mean(name, catalog.names)}")


class _Misplaced(CaseError):
    """A case error whose message names its own file and line."""


def _parsed(raw: RawCall, shown: Catalog, catalog: Catalog) -> CalledTool:
    """A call of the answer by its MCP name: as the tools it was shown name it, else as the catalog does (a tool
    the model called before any search loaded it)."""
    called = parse_call(raw.name, raw.arguments, shown)
    if called["tool"] not in catalog.by_name:
        called["tool"] = catalog.mcp_name(raw.name)
    return called


async def _converse(runtime: Engine, ref: CaseRef, repeat: int, search: _Search,
                    replies: list[ModelReply]) -> tuple[ModelReply, Catalog]:
    """Search turns until the model calls another tool or none: its last reply and the tools that reply saw."""
    assert ref.model is not None
    conversation = build_messages(ref.bench.spec.system, ref.case)
    used: set[str] = set()  # tool-call ids of the conversation
    for turn in range(search.config.max_searches + 1):
        shown = search.shown()
        label = runtime.label(ref) if turn == 0 else f"{runtime.label(ref)} (turn {turn + 1})"
        if is_local(ref.model):  # a retriever: said before its model is loaded for nothing
            raise CaseError(f"model {ref.model.name} ranks tools and cannot search: tool search needs a model that "
                            "calls tools with arguments")
        reply = await runtime.dispatcher.fetch(Unit.make(ref.model, copy.deepcopy(conversation), shown, repeat, label))
        replies.append(reply)
        reason = stops.blocked(reply.finish_reason, reply.provider_finish_reason)
        if reason is not None:
            raise ModelCallError(stops.blocked_message(f"{ref.model.name} ({ref.model.target})", reason, turn))
        searches = [c for c in reply.calls if shown.mcp_name(c.name) == SEARCH_TOOL]
        if not searches or len(searches) < len(reply.calls) or not search.open:
            return reply, shown
        ids = []
        for index, call in enumerate(searches):  # an answer must name one call: a missing or repeated id is replaced
            ids.append(call.id if call.id and call.id not in used else call_id(turn, index))
            used.add(ids[-1])
        conversation.append({"role": "assistant", "content": reply.content, "tool_calls": [
            {"id": id_, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for id_, c in zip(ids, searches, strict=True)]})
        for id_, call in zip(ids, searches, strict=True):
            text, is_error = await search.answer(call)
            conversation.append(tool_message(id_, text, is_error, ref.model.target))
    return replies[-1], search.shown()
