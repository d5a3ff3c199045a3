"""Run one case against one model: build the request, make the one model call, score the answer.

:class:`Runtime` is the session-wide object behind the ``mcpeval_runtime`` fixture: it owns the
server connections (one per server per process) and knows which catalogs this process has already
reported to the controller.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.loader import Benchmark
from pytest_mcpeval.models import ModelCallError
from pytest_mcpeval.models.config import ModelSpec
from pytest_mcpeval.run.dispatch import Dispatcher, Unit
from pytest_mcpeval.schema import Case
from pytest_mcpeval.scoring.case import Expectation, parse_call, score_case
from pytest_mcpeval.scoring.retrieval import retrieval_ranks
from pytest_mcpeval.servers import ServerError, ServerPool
from pytest_mcpeval.text import did_you_mean


class CaseError(Exception):
    """The case could not be evaluated (server, model API, or a benchmark that names a missing tool).

    Such a case is an error: listed apart and excluded from every metric, never counted as a miss.
    """


@dataclass(frozen=True)
class CaseRef:
    """What an item needs to run: its file, case and model."""

    bench: Benchmark
    case: Case
    model: ModelSpec | None

    @property
    def line(self) -> int:
        return self.bench.case_lines.get(self.case.id, 0)

    def expectations(self) -> list[Expectation]:
        return [
            Expectation(call.tool, self.bench.matchers.get((self.case.id, j)), call.extra_args)
            for j, call in enumerate(self.case.expect)
        ]


def build_messages(system: str | None, case: Case) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": system})
    if isinstance(case.input, str):
        messages.append({"role": "user", "content": case.input})
    else:
        messages.extend({"role": m.role, "content": m.content} for m in case.input)
    return messages


def missing_tools(expects: list[Expectation], catalog: Catalog) -> list[tuple[int, str]]:
    """``(index in expect, message)`` for each expected tool the catalog lacks, with a did-you-mean."""
    out = []
    for index, expect in enumerate(expects):
        if expect.tool not in catalog.by_name:
            hint = did_you_mean(expect.tool, catalog.names)
            out.append((index, f"expected tool `{expect.tool}` is not published by the server{hint}"))
    return out


class Runtime:
    def __init__(self, root_dir: Path, log_dir: Path, dispatcher: Dispatcher, repeats: int = 1) -> None:
        self.root_dir = root_dir
        self.pool = ServerPool(log_dir)
        self.dispatcher = dispatcher
        self.repeats = repeats
        self._reported_catalogs: set[str] = set()
        self._reported_models: set[str] = set()
        self._prefetched: set[str] = set()
        self._shown_paths: dict[Path, str] = {}
        self._units: dict[tuple[int, str, int], Unit] = {}

    def shown_path(self, path: Path) -> str:
        if path not in self._shown_paths:
            self._shown_paths[path] = _relative(path, self.root_dir)
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
        """Submit the model calls of ``refs`` (every repeat) once per group (a directory)."""
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
                self.dispatcher.submit(self.unit(ref, catalog, repeat))

    def catalog(self, ref: CaseRef, override: Any) -> Catalog:
        if override is not None:
            return self.pool.catalog_for_object(override)
        spec = ref.bench.spec.server
        if spec is None:
            raise CaseError(
                f"{ref.bench.path}: no `server` in the file and no `mcp_server` fixture returned one"
            )
        return self.pool.catalog_for_spec(spec, ref.bench.path.parent, self.root_dir)

    def run(self, ref: CaseRef, override: Any, repeat: int = 0) -> dict[str, Any]:
        """The result dict of one repeat of a case; infrastructure problems are returned with ``error`` set."""
        assert ref.model is not None
        result: dict[str, Any] = {
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
            catalog = self.catalog(ref, override)
        except (ServerError, CaseError) as exc:
            return self._error(result, expects, str(exc))
        result["catalog"] = catalog.digest
        if catalog.digest not in self._reported_catalogs:  # once per process: the controller merges them
            self._reported_catalogs.add(catalog.digest)
            result["catalog_info"] = catalog_info(catalog, self.server_label(ref, override))
        problems = missing_tools(expects, catalog)
        if problems:
            index = ref.bench.spec.cases.index(ref.case)
            line = ref.bench.line_of(("cases", index, "expect", problems[0][0], "tool")) or ref.line
            where = f"{result['file']}:{line}: case `{ref.case.id}`"
            return self._error(result, expects, f"{where}: " + "; ".join(m for _, m in problems))
        try:
            reply = self.dispatcher.get(self.unit(ref, catalog, repeat))
        except ModelCallError as exc:
            return self._error(result, expects, str(exc))
        calls = [parse_call(c.name, c.arguments, catalog) for c in reply.calls]
        if not reply.fills_arguments:  # a retriever names a tool and nothing more
            calls = [{"tool": c["tool"]} for c in calls]
        result.update(score_case(expects, calls, catalog, fills_arguments=reply.fills_arguments))
        if reply.ranking is not None:
            result["retrieval"] = retrieval_ranks(expects, reply.ranking, reply.top_k)
        if ref.model.name not in self._reported_models:  # once per process, like catalog_info
            from pytest_mcpeval.models import params_sent

            self._reported_models.add(ref.model.name)
            result["model_info"] = {"params_sent": params_sent(ref.model)}
        result["content"] = reply.content
        result["usage"] = {
            **reply.usage,
            "cost_usd": 0.0 if reply.cached else reply.cost_usd,
            "cached": reply.cached,
            "attempts": reply.attempts,
        }
        result["latency_s"] = 0.0 if reply.cached else round(reply.latency_s, 4)
        return result

    @staticmethod
    def _error(result: dict[str, Any], expects: list[Expectation], message: str) -> dict[str, Any]:
        result.update(
            {
                "error": message,
                "expected": [e.describe() for e in expects],
                "expected_label": None,
                "called": [],
                "called_label": None,
                "correct": None,
                "passed": None,
                "arguments": None,
                "diagnosis": None,
            }
        )
        return result

    def close(self) -> None:
        self.dispatcher.close()
        self.pool.close()


def catalog_info(catalog: Catalog, server: str) -> dict[str, Any]:
    """What the report keeps of a catalog: per tool its hash, description and token cost."""
    from pytest_mcpeval.models.tokens import tool_tokens

    tokens = tool_tokens(catalog)
    tools = {
        name: {"hash": digest, "description": catalog.by_name[name].get("description") or "", "tokens": tokens[name]}
        for name, digest in catalog.hashes().items()
    }
    return {"server": server, "tools": tools, "tokens": sum(tokens.values())}


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()
