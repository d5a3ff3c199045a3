"""Read a benchmark file: YAML with line numbers -> validated :class:`BenchmarkFile`.

Every user mistake becomes one :class:`BenchmarkError` that names the file, the line, the field and
what was expected, with a did-you-mean where a name is close.  No traceback ever reaches the user.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from pytest_mcpeval.schema import BenchmarkFile, field_names
from pytest_mcpeval.scoring.matchers import Matcher, MatcherError, compile_args

Loc = tuple[str | int, ...]


class BenchmarkError(Exception):
    """A problem in a benchmark file, rendered as ``file:line: field: message``."""

    def __init__(self, path: Path | str, message: str, line: int | None = None, where: str = "") -> None:
        self.path = str(path)
        self.line = line
        self.where = where
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        place = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{place}: {self.where}: {self.message}" if self.where else f"{place}: {self.message}"


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


def _walk(node: yaml.Node, loc: Loc, out: dict[Loc, int], path: Path) -> None:
    out[loc] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise BenchmarkError(
                    path, f"duplicate key `{key}` (first at line {seen[key]})", line, render_loc(loc)
                )
            seen[key] = line
            out[(*loc, key)] = line
            _walk(value_node, (*loc, key), out, path)
            out[(*loc, key)] = line
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, (*loc, i), out, path)


# libyaml's loader when PyYAML was built with it (4x faster on large files); both give line marks
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _parse_yaml(path: Path, text: str) -> tuple[Any, dict[Loc, int]]:
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise BenchmarkError(path, "the file is empty; expected a mapping with `server` and `cases`", 1)
        locations: dict[Loc, int] = {}
        _walk(node, (), locations, path)
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


def _clean_loc(loc: Sequence[Any]) -> Loc:
    """Drop pydantic's union-branch tags (``str``, ``list[Message]``, ``function-after[...]``)."""
    return tuple(p for p in loc if isinstance(p, int) or ("[" not in p and p not in ("str", "list", "dict")))


def _message(error: Any) -> str:
    kind = error["type"]
    loc = error["loc"]
    if kind == "extra_forbidden":
        name = str(loc[-1])
        close = difflib.get_close_matches(name, sorted(field_names()), n=1, cutoff=0.6)
        hint = f"; did you mean `{close[0]}`?" if close else ""
        return f"unknown field `{name}`{hint}"
    if kind == "missing":
        return "this field is required"
    msg = str(error["msg"])
    return msg.removeprefix("Value error, ")


def _nearest_line(locations: dict[Loc, int], loc: Loc) -> int | None:
    for end in range(len(loc), -1, -1):
        if loc[:end] in locations:
            return locations[loc[:end]]
    return None


def load(path: Path) -> Benchmark:
    """Load and validate one benchmark file, or raise :class:`BenchmarkError`."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BenchmarkError(path, f"cannot read the file: {exc}") from None
    data, locations = _parse_yaml(path, text)
    if not isinstance(data, dict):
        raise BenchmarkError(path, "expected a mapping with `server` and `cases` at the top level", 1)
    cases = data.get("cases")
    if isinstance(cases, list):  # duplicate ids get the line of the second occurrence
        first: dict[str, int] = {}
        for i, case in enumerate(cases):
            if isinstance(case, dict) and isinstance(case.get("id"), str):
                line = locations.get(("cases", i, "id"))
                if case["id"] in first:
                    raise BenchmarkError(
                        path,
                        f"duplicate case id `{case['id']}` (first at line {first[case['id']]})",
                        line,
                        f"cases[{i}].id",
                    )
                first[case["id"]] = line or 0
    try:
        spec = BenchmarkFile.model_validate(data)
    except ValidationError as exc:
        raise _validation_error(path, exc, locations) from None
    bench = Benchmark(path=path, spec=spec, locations=locations)
    for i, case in enumerate(spec.cases):
        bench.case_lines[case.id] = locations.get(("cases", i), 0)
        for j, call in enumerate(case.expect):
            if call.args is None:
                bench.matchers[(case.id, j)] = None
                continue
            try:
                bench.matchers[(case.id, j)] = compile_args(call.args)
            except MatcherError as exc:
                loc: Loc = ("cases", i, "expect", j, "args", *exc.path)
                raise BenchmarkError(
                    path, exc.message, _nearest_line(locations, loc), render_loc(loc)
                ) from None
    return bench


def _validation_error(path: Path, exc: ValidationError, locations: dict[Loc, int]) -> BenchmarkError:
    seen: dict[Loc, str] = {}
    for error in exc.errors():
        loc = _clean_loc(error["loc"])
        seen.setdefault(loc, _message(error))
    loc, message = next(iter(seen.items()))
    more = len(seen) - 1
    if more:
        message += f" (and {more} more problem{'s' if more > 1 else ''} in this file)"
    return BenchmarkError(path, message, _nearest_line(locations, loc), render_loc(loc))
