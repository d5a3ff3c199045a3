"""YAML with line numbers: a benchmark file's text -> its data and the line of every place in it, refusing
duplicate keys, nesting deeper than :data:`~pytest_mcpeval.defaults.MAX_DEPTH` and alias bombs, each as a
:class:`~pytest_mcpeval.benchmark.problems.BenchmarkError` with its line."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import yaml

from pytest_mcpeval.benchmark.problems import BenchmarkError, Loc, Problem, render_loc
from pytest_mcpeval.defaults import MAX_ALIAS_NODES, MAX_DEPTH


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


def load_bounded_yaml(path: Path | str, text: str) -> Any:
    """``yaml.safe_load`` of a small YAML file (an overlay, a candidates file) within the benchmark files'
    bounds; a :class:`BenchmarkError` with the line for a file out of bounds or not valid YAML."""
    try:
        check_yaml_bounds(path, text)
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        # the line where the broken construct starts (a text with `: ` in it), else where the parser stopped
        mark = getattr(exc, "context_mark", None) or getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        context = getattr(exc, "context", None)
        hint = ("; a text holding `: ` must be quoted" if problem in ("could not find expected ':'",
                                                                      "mapping values are not allowed here") else "")
        message = f"not valid YAML ({context + ': ' if context else ''}{problem}{hint})"
        raise BenchmarkError(path, message, mark.line + 1 if mark is not None else None) from None


def parse_yaml(path: Path, text: str, problems: list[Problem]) -> tuple[Any, dict[Loc, int]]:
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
