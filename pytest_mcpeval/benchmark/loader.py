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

import contextlib
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import ValidationError

from pytest_mcpeval.benchmark.schema import FLOW_KEYS, BenchmarkFile, Case, keys_at
from pytest_mcpeval.defaults import DEFAULT_MAX_TURNS, MAX_ALIAS_NODES, MAX_DEPTH, MAX_FILE_BYTES
from pytest_mcpeval.scoring.matchers import Matcher, MatcherError, Reference, compile_args, references
from pytest_mcpeval.text import closest, did_you_mean

if TYPE_CHECKING:
    from pytest_mcpeval.catalog import Catalog

Loc = tuple[str | int, ...]

MAX_SHOWN = 10
"""Problems of one file listed in full; the rest are counted."""


@dataclass(frozen=True)
class Problem:
    """One mistake in a benchmark file: its line, the field (rendered path, may be empty), the message."""

    line: int | None
    where: str
    message: str

    def render(self, path: str) -> str:
        place = path if self.line is None else f"{path}:{self.line}"
        return f"{place}: {self.where}: {self.message}" if self.where else f"{place}: {self.message}"


class BenchmarkError(Exception):
    """The problems of a benchmark file, one ``file:line: field: message`` line each, ordered by line.

    ``line``, ``where`` and ``message`` describe the first problem; ``problems`` holds them all.
    ``path`` may be changed after the fact (collection shows it relative to the invocation directory):
    every rendered line uses its current value.
    """

    def __init__(self, path: Path | str, message: str, line: int | None = None, where: str = "") -> None:
        self.path = str(path)
        self.problems: list[Problem] = [Problem(line, where, message)]
        super().__init__(str(self))

    @classmethod
    def of(cls, path: Path | str, problems: Iterable[Problem]) -> BenchmarkError:
        """One error for several problems (at least one), sorted by line; same-line order is kept."""
        ordered = sorted(problems, key=lambda p: p.line or 0)
        error = cls(path, ordered[0].message, ordered[0].line, ordered[0].where)
        error.problems = ordered
        error.args = (str(error),)
        return error

    @property
    def line(self) -> int | None:
        return self.problems[0].line

    @property
    def where(self) -> str:
        return self.problems[0].where

    @property
    def message(self) -> str:
        return self.problems[0].message

    def __str__(self) -> str:
        lines = [problem.render(self.path) for problem in self.problems[:MAX_SHOWN]]
        more = len(self.problems) - MAX_SHOWN
        if more > 0:
            lines.append(f"... and {more} more problem{'s' if more > 1 else ''} in this file")
        return "\n".join(lines)


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


def render_loc(loc: Loc, spec_cases: Sequence[Any] | None = None) -> str:
    """``("cases", 2, "expect", 0, "tool")`` -> ``cases[2].expect[0].tool``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _walk(node: yaml.Node, loc: Loc, out: dict[Loc, int], problems: list[Problem]) -> None:
    out[loc] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            line = key_node.start_mark.line + 1
            if key in seen:
                problems.append(Problem(line, render_loc(loc), f"duplicate key `{key}` (first at line {seen[key]})"))
            else:
                seen[key] = line
            out[(*loc, key)] = line
            _walk(value_node, (*loc, key), out, problems)
            out[(*loc, key)] = line
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, (*loc, i), out, problems)


# libyaml's loader when PyYAML was built with it (4x faster on large files); both give line marks
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _line(event: yaml.Event) -> int | None:
    return event.start_mark.line + 1 if event.start_mark is not None else None


def check_yaml_bounds(path: Path | str, text: str) -> None:
    """A :class:`BenchmarkError` for YAML that would cost far more to load than its size: nested deeper than
    :data:`MAX_DEPTH` levels, or aliases that expand to more than :data:`MAX_ALIAS_NODES` values in all (an
    "alias bomb": 500 bytes of aliases of aliases that expand to billions of values).

    One pass over the parser's events, before anything is composed: each anchor's expanded size and depth are
    counted once, when its value ends, and each alias adds its anchor's, so the pass costs the file's length,
    whatever its aliases would expand to, and holds one frame per open level."""
    sizes: dict[str, tuple[int, int]] = {}  # anchor -> (values, levels) of its value, aliases expanded
    stack: list[list[Any]] = []  # per open collection: [anchor, values, levels below]
    added = 0

    def close(anchor: str | None, values: int, levels: int) -> None:
        if anchor is not None:
            sizes[anchor] = (values, levels)
        if stack:
            stack[-1][1] += values
            stack[-1][2] = max(stack[-1][2], levels)

    parser = _Loader(text)
    try:
        while (event := parser.get_event()) is not None:
            if isinstance(event, yaml.CollectionStartEvent):
                if len(stack) >= MAX_DEPTH:
                    raise BenchmarkError(path, f"nested deeper than {MAX_DEPTH} levels", _line(event))
                stack.append([event.anchor, 1, 0])
            elif isinstance(event, yaml.CollectionEndEvent):
                anchor, values, below = stack.pop()
                close(anchor, values, below + 1)
            elif isinstance(event, yaml.ScalarEvent):
                close(event.anchor, 1, 0)
            elif isinstance(event, yaml.AliasEvent):
                values, levels = sizes.get(str(event.anchor), (1, 0))  # an unknown alias: the composer says so
                added += values
                line = _line(event)
                if added > MAX_ALIAS_NODES:
                    raise BenchmarkError(path, f"the alias `*{event.anchor}` makes the aliases of the file repeat "
                                               f"more than {MAX_ALIAS_NODES:,} values in all (an alias of a list "
                                               "repeats each of its values): refused, as expanding them could "
                                               "exhaust time and memory", line)
                if len(stack) + levels > MAX_DEPTH:
                    raise BenchmarkError(path, f"the alias `*{event.anchor}` nests the file deeper than "
                                               f"{MAX_DEPTH} levels", line)
                close(None, values, levels)
    finally:
        parser.dispose()


def _parse_yaml(path: Path, text: str, problems: list[Problem]) -> tuple[Any, dict[Loc, int]]:
    with contextlib.suppress(yaml.MarkedYAMLError):  # a syntax error: composing the file reports it, as usual
        check_yaml_bounds(path, text)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise BenchmarkError(path, "the file is empty; expected a mapping with `server` and `cases`", 1)
        locations: dict[Loc, int] = {}
        _walk(node, (), locations, problems)
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        raise BenchmarkError(path, f"invalid YAML: {problem}", line) from None
    except yaml.YAMLError as exc:
        raise BenchmarkError(path, f"invalid YAML: {exc}") from None
    finally:
        loader.dispose()
    return data, locations


_UNION_TAGS = frozenset({"str", "int", "float", "bool", "list", "dict", "none"})


def _is_tag(part: Any) -> bool:
    """A pydantic union-branch or key tag (``str``, ``list[Message]``, ``[key]``), not a place in the file."""
    return isinstance(part, str) and ("[" in part or part in _UNION_TAGS)


def _clean_loc(loc: Sequence[Any]) -> Loc:
    """Drop pydantic's tags; a mapping key that failed validation (``(..., 1, "[key]")``) stays a key."""
    out: list[str | int] = []
    for part in loc:
        if part == "[key]" and out:
            out[-1] = str(out[-1])
        elif not _is_tag(part):
            out.append(part)
    return tuple(out)


def _losing_branches(errors: Sequence[Any]) -> set[int]:
    """Errors of union branches that failed at once when another branch of the same union got further.

    ``input: [{rol: user, ...}]`` fails as ``str`` (not a string) and as ``list[Message]`` (unknown
    field `rol`): only the second says something useful.
    """
    deeper: set[tuple[Any, ...]] = set()
    for error in errors:
        loc = tuple(error["loc"])
        deeper.update(loc[:k] for k, part in enumerate(loc[:-1]) if _is_tag(part))
    return {n for n, error in enumerate(errors) if error["loc"] and _is_tag(error["loc"][-1])
            and tuple(error["loc"][:-1]) in deeper}


def _nearest_line(locations: dict[Loc, int], loc: Loc) -> int | None:
    for end in range(len(loc), -1, -1):
        if loc[:end] in locations:
            return locations[loc[:end]]
    return None


def _validation_problems(exc: ValidationError, locations: dict[Loc, int], skip_duplicate_ids: bool) -> list[Problem]:
    """One problem per place.  An unknown key that is a close match of a missing required key of the same
    mapping is reported once, as the unknown key with its did-you-mean."""
    errors = exc.errors()
    losing = _losing_branches(errors)
    kept = [error for n, error in enumerate(errors) if n not in losing]
    missing: dict[Loc, set[str]] = {}
    for error in kept:
        loc = _clean_loc(error["loc"])
        if error["type"] == "missing" and loc and isinstance(loc[-1], str):
            missing.setdefault(loc[:-1], set()).add(loc[-1])
    folded: set[Loc] = set()
    found: dict[Loc, Problem] = {}
    for error in kept:
        kind = error["type"]
        if kind == "extra_forbidden":
            name = str(error["loc"][-1])  # the key itself, even if it reads like a tag (`str`)
            parent = _clean_loc(error["loc"][:-1])
            guess = closest(name, missing.get(parent, ())) or closest(name, keys_at(parent))
            if guess is not None and guess in missing.get(parent, ()):
                folded.add((*parent, guess))
            hint = f"; did you mean `{guess}`?" if guess else ""
            line = _nearest_line(locations, (*parent, name))
            found.setdefault((*parent, name), Problem(line, render_loc(parent), f"unknown field `{name}`{hint}"))
            continue
        loc = _clean_loc(error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        if kind == "missing":
            message = "this field is required"
        elif error["loc"] and error["loc"][-1] == "[key]":
            message = f"the key `{loc[-1]}` must be a string (quote it)"
        elif skip_duplicate_ids and not loc and message.startswith("duplicate case id"):
            continue  # already reported, with lines, by _duplicate_ids
        else:
            message = _reworded(kind, loc, error.get("input"), error.get("ctx") or {}, message)
        found.setdefault(loc, Problem(_nearest_line(locations, loc), render_loc(loc), message))
    return [problem for loc, problem in found.items() if loc not in folded]


_QUOTED = re.compile(r"'([^']*)'")
CLAIM_TEXT = "a claim needs a text: one fact the final answer must state"


def _yaml_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "a mapping" if isinstance(value, dict) else type(value).__name__


def _reworded(kind: str, loc: Loc, value: Any, ctx: dict[str, Any], message: str) -> str:
    """pydantic's message in the file's terms: a did-you-mean for a misspelt choice, YAML's type names."""
    choices = _QUOTED.findall(str(ctx.get("expected", ""))) if kind == "literal_error" else []
    if choices and isinstance(value, str):
        noun = "order mode" if loc[-1:] == ("order",) else "value"
        return f"unknown {noun} `{value}`{did_you_mean(value, choices)} (one of {', '.join(choices)})"
    if loc[-1:] == ("claim",) and kind in ("string_too_short", "value_error"):
        return CLAIM_TEXT
    if len(loc) >= 2 and loc[-2] == "claims" and kind == "model_type":
        return f"a claim is a string, or a mapping {{claim, check}}; not {_yaml_type(value)}"
    if len(loc) >= 2 and loc[-2] == "mocks" and kind == "list_type":
        return f"expected a list of mocks (each {{when, result}}), not {_yaml_type(value)}"
    if loc[-1:] == ("mocks",) and kind == "dict_type":
        return f"expected a mapping of tool names to lists of mocks, not {_yaml_type(value)}"
    if kind in ("model_type", "dict_type", "list_type"):
        keys = ", ".join(keys_at(loc)) if kind == "model_type" else ""
        expected = "a list" if kind == "list_type" else f"a mapping (keys: {keys})" if keys else "a mapping"
        return f"expected {expected}, not {_yaml_type(value)}"
    return message


def _duplicate_ids(cases: Any, locations: dict[Loc, int]) -> list[Problem]:
    """Duplicate case ids, each at the line of the repeated id."""
    problems: list[Problem] = []
    if not isinstance(cases, list):
        return problems
    first: dict[str, int] = {}
    for i, case in enumerate(cases):
        if isinstance(case, dict) and isinstance(case.get("id"), str):
            line = locations.get(("cases", i, "id"))
            if case["id"] in first:
                message = f"duplicate case id `{case['id']}` (first at line {first[case['id']]})"
                problems.append(Problem(line, f"cases[{i}].id", message))
            else:
                first[case["id"]] = line or 0
    return problems


Compiled = dict[Loc, dict[str, Matcher] | None]
"""Compiled ``args`` by ``(case index, expect index)`` and ``when`` by ``(case index, tool, mock index)``."""


def _problem(locations: dict[Loc, int], loc: Loc, message: str) -> Problem:
    return Problem(_nearest_line(locations, loc), render_loc(loc), message)


def _compile(raw: Any, loc: Loc, locations: dict[Loc, int], problems: list[Problem]) -> dict[str, Matcher] | None:
    """Compiled matchers of a raw ``args`` / ``when`` mapping; ``None`` when absent or malformed (a problem)."""
    if not isinstance(raw, dict):
        return None  # absent; a wrong type is the schema's to report
    try:
        return compile_args(raw)
    except MatcherError as exc:
        problems.append(_problem(locations, (*loc, *exc.path), exc.message))
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
                    problems.append(_problem(locations, (*loc, *path, "from_result"), message))
        _compile_mocks(i, case.get("mocks"), locations, problems, mocks)
        forbid = case.get("forbid")
        for n, tool in enumerate(forbid if isinstance(forbid, list) else ()):
            if isinstance(tool, str) and tool in tools:
                problems.append(_problem(locations, ("cases", i, "forbid", n),
                                         f"`{tool}` is both forbidden and expected (listed in `expect`)"))
        _check_exposure(i, case, tools, locations, problems)
        if static and case.get("execute") == "live":
            problems.append(_problem(locations, ("cases", i, "execute"), LIVE_WITHOUT_SERVER))
        if "claims_threshold" in case and not case.get("claims"):
            problems.append(_problem(locations, ("cases", i, "claims_threshold"),
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
            problems.append(_problem(locations, ("cases", i, "tools", n), f"`{name}` is listed twice in `tools`"))
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
            problems.append(_problem(locations, loc, f"{what} tool `{tool}` is not among the case's `tools`, so the "
                                                     f"model is never shown it (add it to `tools`)"))


def _no_booleans(mapping: dict[str, Any], loc: Loc, locations: dict[Loc, int], problems: list[Problem]) -> None:
    """pydantic takes `true` for 1: `max_turns: true` is a mistake, said as one."""
    for key in ("max_turns", "claims_threshold"):
        if isinstance(mapping.get(key), bool):
            problems.append(_problem(locations, (*loc, key), "expected a number, not true/false"))


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
                problems.append(_problem(locations, loc, f"this mock is never used: the mock at line {default_line} "
                                         f"has no `when` and answers every call of `{tool}` first (put it last)"))
            when = _compile(mock.get("when"), (*loc, "when"), locations, problems)
            out[(i, str(tool), k)] = when
            for path, _ref in references(when):
                problems.append(_problem(locations, (*loc, "when", *path, "from_result"),
                                         "`from_result` does not go in `when`: a mock's answers are fixed, so write "
                                         "the value itself"))
            if default_line is None and not mock.get("when"):
                default_line = _nearest_line(locations, loc)


def load(path: Path) -> Benchmark:
    """Load and validate one benchmark file, or raise :class:`BenchmarkError` with all its problems."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise BenchmarkError(path, f"the file has {size:,} bytes, more than the {MAX_FILE_BYTES:,} a benchmark "
                                       "file may have: split it into several files")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BenchmarkError(path, f"cannot read the file: {exc}") from None
    problems: list[Problem] = []
    data, locations = _parse_yaml(path, text, problems)
    if not isinstance(data, dict):
        raise BenchmarkError(path, "expected a mapping with `server` and `cases` at the top level", 1)
    duplicates = _duplicate_ids(data.get("cases"), locations)
    problems += duplicates
    compiled, mock_matchers = _compile_cases(data, locations, problems)
    spec: BenchmarkFile | None = None
    try:
        spec = BenchmarkFile.model_validate(data)
    except ValidationError as exc:
        problems += _validation_problems(exc, locations, skip_duplicate_ids=bool(duplicates))
    if problems or spec is None:
        raise BenchmarkError.of(path, problems)
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
