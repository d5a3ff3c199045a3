"""Read a benchmark file: YAML with line numbers -> validated :class:`BenchmarkFile`.

Every user mistake becomes a :class:`BenchmarkError` that names the file, the line, the field and
what was expected, with a did-you-mean where a name is close.  All the problems of a file are found in
one run (duplicate keys, duplicate case ids, schema violations, malformed matchers), each on its own
line; only a file that cannot be read or parsed stops at its first problem.  No traceback ever
reaches the user.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from pytest_mcpeval.benchmark.schema import BenchmarkFile, keys_at
from pytest_mcpeval.scoring.matchers import Matcher, MatcherError, compile_args
from pytest_mcpeval.text import closest

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

    def line_of(self, loc: Loc) -> int | None:
        return self.locations.get(loc)


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


def _parse_yaml(path: Path, text: str, problems: list[Problem]) -> tuple[Any, dict[Loc, int]]:
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
        found.setdefault(loc, Problem(_nearest_line(locations, loc), render_loc(loc), message))
    return [problem for loc, problem in found.items() if loc not in folded]


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


def _compile_matchers(
    cases: Any, locations: dict[Loc, int], problems: list[Problem]
) -> dict[tuple[int, int], dict[str, Matcher] | None]:
    """Compile the ``args`` of every expected call found in the raw data; a malformed one is a problem."""
    compiled: dict[tuple[int, int], dict[str, Matcher] | None] = {}
    for i, case in enumerate(cases if isinstance(cases, list) else ()):
        expect = case.get("expect") if isinstance(case, dict) else None
        for j, call in enumerate(expect if isinstance(expect, list) else ()):
            args = call.get("args") if isinstance(call, dict) else None
            if args is None:
                compiled[(i, j)] = None
            elif isinstance(args, dict):
                try:
                    compiled[(i, j)] = compile_args(args)
                except MatcherError as exc:
                    loc: Loc = ("cases", i, "expect", j, "args", *exc.path)
                    problems.append(Problem(_nearest_line(locations, loc), render_loc(loc), exc.message))
    return compiled


def load(path: Path) -> Benchmark:
    """Load and validate one benchmark file, or raise :class:`BenchmarkError` with all its problems."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BenchmarkError(path, f"cannot read the file: {exc}") from None
    problems: list[Problem] = []
    data, locations = _parse_yaml(path, text, problems)
    if not isinstance(data, dict):
        raise BenchmarkError(path, "expected a mapping with `server` and `cases` at the top level", 1)
    duplicates = _duplicate_ids(data.get("cases"), locations)
    problems += duplicates
    compiled = _compile_matchers(data.get("cases"), locations, problems)
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
    return bench
