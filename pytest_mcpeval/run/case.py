"""What an item runs: a case of a benchmark file for one model, and the checks every strategy shares.

:class:`CaseRef` ties a case to its file and model; :func:`missing_tools` is the one check that an
expected tool is published (used at collection for static tool lists, before a run for live servers,
and by the linter); :class:`CaseError` marks a case that could not be evaluated.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NotRequired, TypedDict, cast

from pytest_mcpeval.benchmark.loader import Benchmark
from pytest_mcpeval.benchmark.schema import Case
from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.models.config import ModelSpec
from pytest_mcpeval.results import CaseResult
from pytest_mcpeval.scoring.case import Expectation
from pytest_mcpeval.text import did_you_mean


class CaseIdentity(TypedDict):
    """What names a case's result in the report (with ``repeat``)."""

    file: str
    line: int
    id: str
    model: str
    tags: list[str]
    draft: NotRequired[bool]


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

    def identity(self, root: Path) -> CaseIdentity:
        assert self.model is not None
        identity: CaseIdentity = {"file": relative_to_root(self.bench.path, root), "line": self.line,
                                  "id": self.case.id, "model": self.model.name,
                                  "tags": sorted({*self.bench.spec.tags, *self.case.tags})}
        if self.case.draft:
            identity["draft"] = True
        return identity

    def expectations(self) -> list[Expectation]:
        """The case's expected calls with their matchers: made once (a case asks for them four times), read only."""
        made: list[Expectation] | None = self.__dict__.get("_expectations")
        if made is None:
            made = [Expectation(call.tool, self.bench.matchers.get((self.case.id, j)), call.extra_args)
                    for j, call in enumerate(self.case.expect)]
            object.__setattr__(self, "_expectations", made)  # frozen: not a field, so neither compared nor hashed
        return made


def item_name(case_id: str, model: ModelSpec | None) -> str:
    """The name of a case's item for one model (``id[model]``), or the case's id where no model is set: made
    here alone, for collection and for the xdist controller, which names the items it is sent (run/identities.py)."""
    return f"{case_id}[{model.name}]" if model else case_id


def needs_judge(case: Case) -> bool:
    """A claim without a ``check`` is decided by the judge model."""
    return any(claim.check is None for claim in case.claims)


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
    return [(index, missing_tool_message(e.tool, catalog)) for index, e in enumerate(expects)
            if e.tool not in catalog.by_name]


def missing_tool_message(tool: str, catalog: Catalog) -> str:
    """The one wording of "this expected tool does not exist", used at collection, before a run and by lint."""
    return f"expected tool `{tool}` is not published by the server{did_you_mean(tool, catalog.names)}"


def error_result(result: dict[str, Any], expects: list[Expectation], message: str) -> CaseResult:
    """A result that could not be scored: excluded from every metric, listed apart."""
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
    return cast(CaseResult, result)


def unscored_result(case: CaseIdentity, repeat: int, message: str) -> CaseResult:
    """The result of a case that produced none of its own (an internal error, a crashed worker, a run
    that stopped first): an error, so it is listed once and excluded from every metric."""
    result: dict[str, Any] = {**case, "repeat": repeat, "error": message}
    return error_result(result, [], message)


@functools.lru_cache(maxsize=1024)  # per case, and resolving is a system call per part: once per file
def relative_to_root(path: Path, root: Path) -> str:
    """How results name a benchmark file: relative to the rootdir, as pytest's node ids do."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()
