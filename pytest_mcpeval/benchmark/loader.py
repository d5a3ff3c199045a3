"""Read a benchmark file: YAML with line numbers -> validated :class:`BenchmarkFile`.

Every user mistake becomes a :class:`BenchmarkError` that names the file, the line, the field and
what was expected, with a did-you-mean where a name is close.  All the problems of a file are found in
one run (duplicate keys, duplicate case ids, schema violations, malformed matchers), each on its own
line; only a file that cannot be read or parsed stops at its first problem.  No traceback ever
reaches the user.

Flows (docs/format.md#flows) add checks that need the whole case: a ``from_result`` must name an earlier
expected call's tool and sit in a flow, a mock's ``when`` is compiled like ``args`` (and kept in
:attr:`Benchmark.mock_matchers`), a mock after a ``when``-less one of the same tool is never used,
a forbidden tool must not be expected, and ``execute: live`` needs a server to execute on.  Checks
against a tool list are :func:`unknown_tools` (at collection for ``tools_file``, by the engine for
live servers).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from pytest_mcpeval.benchmark.matchers import Matcher, MatcherError, Reference, compile_args, references
from pytest_mcpeval.benchmark.problems import MAX_SHOWN, BenchmarkError, Loc, Problem, render_loc
from pytest_mcpeval.benchmark.schema import FLOW_KEYS, BenchmarkFile, Case
from pytest_mcpeval.benchmark.schema_errors import (
    duplicate_ids,
    nearest_line,
    problem_at,
    validation_problems,
    with_case_ids,
)
from pytest_mcpeval.benchmark.yaml_source import check_yaml_bounds, decode_yaml, parse_yaml
from pytest_mcpeval.defaults import DEFAULT_MAX_TURNS, MAX_FILE_BYTES
from pytest_mcpeval.text import did_you_mean

if TYPE_CHECKING:
    from pytest_mcpeval.catalog import Catalog

__all__ = ["MAX_SHOWN", "Benchmark", "BenchmarkError", "Loc", "Problem", "check_yaml_bounds", "load", "render_loc",
           "unknown_mock_tools", "unknown_tools", "unknown_when_arguments"]

Compiled = dict[Loc, dict[str, Matcher] | None]
"""Compiled ``args`` by ``(case index, expect index)`` and ``when`` by ``(case index, tool, mock index)``."""


@dataclass
class Benchmark:
    """A loaded benchmark file with what collection and scoring need from its source."""

    path: Path
    spec: BenchmarkFile
    case_lines: dict[str, int] = field(default_factory=dict)
    matchers: dict[tuple[str, int], dict[str, Matcher] | None] = field(default_factory=dict)
    locations: dict[Loc, int] = field(default_factory=dict)
    mock_matchers: dict[tuple[str, str, int], dict[str, Matcher] | None] = field(default_factory=dict)
    """``(case id, tool, index in mocks[tool])`` -> the mock's compiled ``when`` (``None``: no ``when``)."""

    def line_of(self, loc: Loc) -> int | None:
        return self.locations.get(loc)

    def max_turns(self, case: Case) -> int:
        """Model calls the flow ``case`` may make: the case's ``max_turns``, else the file's, else 8."""
        for value in (case.max_turns, self.spec.max_turns):
            if value is not None:
                return value
        return DEFAULT_MAX_TURNS

    def claims_threshold(self, case: Case, default: float) -> float:
        """Coverage ``case`` needs to pass: the case's ``claims_threshold``, else the file's, else ``default``
        (the run's: --mcp-claims-threshold, else 0.75)."""
        for value in (case.claims_threshold, self.spec.claims_threshold):
            if value is not None:
                return value
        return default


def _compile(raw: Any, loc: Loc, locations: dict[Loc, int], problems: list[Problem]) -> dict[str, Matcher] | None:
    """Compiled matchers of a raw ``args`` / ``when`` mapping; ``None`` when absent or malformed (a problem)."""
    if not isinstance(raw, dict):
        return None  # absent; a wrong type is the schema's to report
    try:
        return compile_args(raw)
    except MatcherError as exc:
        problems.append(problem_at(locations, (*loc, *exc.path), exc.message))
        return None


def _is_flow(case: dict[str, Any]) -> bool:
    """:attr:`Case.is_flow` of a case not validated yet."""
    return case.get("execute") == "live" or any(key in case for key in FLOW_KEYS)


def _compile_cases(data: dict[str, Any], locations: dict[Loc, int], problems: list[Problem]) -> tuple[Compiled,
                                                                                                     Compiled]:
    """Compile the ``args`` of every expected call and the ``when`` of every mock found in the raw data, and
    check what needs a whole case (references, mocks, forbid, execute); each mistake is a problem."""
    expects: Compiled = {}
    mocks: Compiled = {}
    server = data.get("server")
    static = isinstance(server, dict) and "tools_file" in server
    cases = data.get("cases")
    for i, case in enumerate(cases if isinstance(cases, list) else ()):
        if not isinstance(case, dict):
            continue
        expect = case.get("expect")
        calls = expect if isinstance(expect, list) else []
        tools = [call.get("tool") if isinstance(call, dict) else None for call in calls]
        for j, call in enumerate(calls):
            loc: Loc = ("cases", i, "expect", j, "args")
            compiled = _compile(call.get("args") if isinstance(call, dict) else None, loc, locations, problems)
            expects[(i, j)] = compiled
            for path, ref in references(compiled):
                message = _reference_problem(ref, [t for t in tools[:j] if isinstance(t, str)], tools[j:], case)
                if message:
                    problems.append(problem_at(locations, (*loc, *path, "from_result"), message))
        _compile_mocks(i, case.get("mocks"), locations, problems, mocks)
        forbid = case.get("forbid")
        for n, tool in enumerate(forbid if isinstance(forbid, list) else ()):
            if isinstance(tool, str) and tool in tools:
                problems.append(problem_at(locations, ("cases", i, "forbid", n),
                                         f"`{tool}` is both forbidden and expected (listed in `expect`)"))
        _check_exposure(i, case, tools, locations, problems)
        if static and case.get("execute") == "live":
            problems.append(problem_at(locations, ("cases", i, "execute"), LIVE_WITHOUT_SERVER))
        if "claims_threshold" in case and not case.get("claims"):
            problems.append(problem_at(locations, ("cases", i, "claims_threshold"),
                                     "`claims_threshold` applies to claims, and this case has none"))
        _no_booleans(case, ("cases", i), locations, problems)
    _no_booleans(data, (), locations, problems)
    return expects, mocks


def _check_exposure(i: int, case: dict[str, Any], expected: list[Any], locations: dict[Loc, int],
                    problems: list[Problem]) -> None:
    """A case's ``tools`` must show the model every tool the case expects, mocks or forbids, each once."""
    shown = case.get("tools")
    if not isinstance(shown, list):
        return
    names = [t for t in shown if isinstance(t, str)]
    seen: set[str] = set()
    for n, name in enumerate(names):
        if name in seen:
            problems.append(problem_at(locations, ("cases", i, "tools", n), f"`{name}` is listed twice in `tools`"))
        seen.add(name)
    mocks = case.get("mocks")
    forbid = case.get("forbid")
    needed: list[tuple[Loc, str, str]] = [
        *((("cases", i, "expect", j, "tool"), t, "expected") for j, t in enumerate(expected) if isinstance(t, str)),
        *((("cases", i, "mocks", t), t, "mocked") for t in (mocks if isinstance(mocks, dict) else {})
          if isinstance(t, str)),
        *((("cases", i, "forbid", n), t, "forbidden") for n, t in enumerate(forbid if isinstance(forbid, list) else ())
          if isinstance(t, str)),
    ]
    for loc, tool, what in needed:
        if tool not in seen:
            problems.append(problem_at(locations, loc, f"{what} tool `{tool}` is not among the case's `tools`, so the "
                                                     f"model is never shown it (add it to `tools`)"))


def _no_booleans(mapping: dict[str, Any], loc: Loc, locations: dict[Loc, int], problems: list[Problem]) -> None:
    """pydantic takes `true` for 1: `max_turns: true` is a mistake, said as one."""
    for key in ("max_turns", "claims_threshold"):
        if isinstance(mapping.get(key), bool):
            problems.append(problem_at(locations, (*loc, key), "expected a number, not true/false"))


LIVE_WITHOUT_SERVER = (
    "`execute: live` needs a server to call, and this file's server is a `tools_file` (a static tool list): "
    "answer the calls with `mocks`, or name a server with `command`, `url` or `python`"
)
NOT_A_FLOW = (
    "`from_result` needs a flow: a single-call case has no earlier results (a case is a flow when it has "
    "`order`, `mocks`, `forbid`, `claims`, `max_turns` or `execute: live`)"
)


def _reference_problem(ref: Reference, earlier: list[str], later: list[Any], case: dict[str, Any]) -> str | None:
    """What is wrong with a ``from_result`` of an expected call: it must be in a flow and name the tool of an
    expected call listed before this one (``offset`` counting those)."""
    if not _is_flow(case):
        return NOT_A_FLOW
    count = earlier.count(ref.tool)
    if count == 0:
        message = f"`from_result` refers to `{ref.tool}`, which no expected call before this one uses"
        if ref.tool in later:
            return message + " (a reference takes its value from an earlier call: list that call first)"
        if not earlier:
            return message + " (this is the first expected call: a reference needs an earlier one)"
        return message + did_you_mean(ref.tool, earlier) + " (a reference takes its value from an earlier call)"
    if ref.offset >= count:
        return (f"`offset: {ref.offset}` refers to result {ref.offset + 1} of `{ref.tool}`, but `expect` lists "
                f"{count} call{'s' if count > 1 else ''} of it before this one (offset 0 is the first)")
    return None


def _compile_mocks(i: int, mocks: Any, locations: dict[Loc, int], problems: list[Problem], out: Compiled) -> None:
    """Compile every mock's ``when``; a mock after a ``when``-less one of the same tool is never used."""
    for tool, entries in (mocks.items() if isinstance(mocks, dict) else ()):
        default_line: int | None = None
        for k, mock in enumerate(entries if isinstance(entries, list) else ()):
            if not isinstance(mock, dict):
                continue
            loc: Loc = ("cases", i, "mocks", str(tool), k)
            if default_line is not None:
                problems.append(problem_at(locations, loc, f"this mock is never used: the mock at line {default_line} "
                                         f"has no `when` and answers every call of `{tool}` first (put it last)"))
            when = _compile(mock.get("when"), (*loc, "when"), locations, problems)
            out[(i, str(tool), k)] = when
            for path, _ref in references(when):
                problems.append(problem_at(locations, (*loc, "when", *path, "from_result"),
                                         "`from_result` does not go in `when`: a mock's answers are fixed, so write "
                                         "the value itself"))
            if default_line is None and not mock.get("when"):
                default_line = nearest_line(locations, loc)


def load(path: Path) -> Benchmark:
    """Load and validate one benchmark file, or raise :class:`BenchmarkError` with all its problems."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise BenchmarkError(path, f"the file has {size:,} bytes, more than the {MAX_FILE_BYTES:,} a benchmark "
                                       "file may have: split it into several files")
        data = path.read_bytes()
    except OSError as exc:
        raise BenchmarkError(path, f"cannot read the file: {exc}") from None
    text = decode_yaml(path, data)
    problems: list[Problem] = []
    data, locations = parse_yaml(path, text, problems)
    if not isinstance(data, dict):
        raise BenchmarkError(path, "expected a mapping with `server` and `cases` at the top level", 1)
    duplicates = duplicate_ids(data.get("cases"), locations)
    problems += duplicates
    compiled, mock_matchers = _compile_cases(data, locations, problems)
    spec: BenchmarkFile | None = None
    try:
        spec = BenchmarkFile.model_validate(data)
    except ValidationError as exc:
        problems += validation_problems(exc, locations, skip_duplicate_ids=bool(duplicates))
    if problems or spec is None:
        raise BenchmarkError.of(path, with_case_ids(problems, data.get("cases")))
    bench = Benchmark(path=path, spec=spec, locations=locations)
    for i, case in enumerate(spec.cases):
        bench.case_lines[case.id] = locations.get(("cases", i), 0)
        for j in range(len(case.expect)):
            bench.matchers[(case.id, j)] = compiled.get((i, j))
        for tool, mocks in case.mocks.items():
            for k in range(len(mocks)):
                bench.mock_matchers[(case.id, tool, k)] = mock_matchers.get((i, tool, k))
    return bench


def unknown_tools(case: Case, names: Collection[str]) -> list[tuple[Loc, str]]:
    """The tools ``case`` mocks or forbids that are not among ``names`` (the catalog's), each as ``(place in the
    case, message with a did-you-mean)``: ``(("mocks", "issue_reed"), "mocked tool `issue_reed` is not ...")``.

    Checked at collection for a ``tools_file``; for a live server the engine calls :func:`unknown_mock_tools`.
    (Expected tools, and so the tools ``from_result`` names, are checked by ``run.case.missing_tools``.)"""
    found: list[tuple[Loc, str]] = []
    for n, tool in enumerate(case.tools or ()):
        if tool not in names:
            found.append((("tools", n), f"tool `{tool}` in `tools` is not published by the server"
                                        f"{did_you_mean(tool, names)}"))
    for tool in case.mocks:
        if tool not in names:
            found.append((("mocks", tool), f"mocked tool `{tool}` is not published by the server"
                                           f"{did_you_mean(tool, names)}"))
    for n, tool in enumerate(case.forbid):
        if tool not in names:
            found.append((("forbid", n), f"forbidden tool `{tool}` is not published by the server"
                                         f"{did_you_mean(tool, names)}"))
    return found


def unknown_when_arguments(case: Case, catalog: Catalog) -> list[tuple[Loc, str]]:
    """The arguments a mock's ``when`` names that its tool's schema does not define (such a mock can never
    match: every call would go unanswered), each as ``(place in the case, message with a did-you-mean)``.
    Tools whose schema defines no properties are not checked."""
    found: list[tuple[Loc, str]] = []
    for tool, mocks in case.mocks.items():
        props = catalog.properties(tool) if tool in catalog.by_name else set()
        for k, mock in enumerate(mocks):
            for name in (mock.when or {}) if props else ():
                if name not in props:
                    found.append((("mocks", tool, k, "when", name),
                                  f"`when` of a mock of `{tool}` names the argument `{name}`, which `{tool}` does not "
                                  f"take{did_you_mean(name, props)}"))
    return found


def unknown_mock_tools(case: Case, catalog: Catalog) -> list[str]:
    """For a live server, whose tools are known only at run time: one message per tool ``case`` mocks or forbids
    that ``catalog`` does not publish and per ``when`` argument its tool does not take (with a did-you-mean),
    e.g. ``mocked tool `issue_reed` is not published by the server; did you mean `issue_read`?``; ``[]`` when
    there is none."""
    return [message for _, message in (*unknown_tools(case, catalog.names), *unknown_when_arguments(case, catalog))]
