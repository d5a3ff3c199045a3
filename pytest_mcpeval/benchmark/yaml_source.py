"""YAML with line numbers: a benchmark file's text -> its data and the line of every place in it, refusing
duplicate keys, nesting deeper than :data:`~pytest_mcpeval.defaults.MAX_DEPTH` and alias bombs, each as a
:class:`~pytest_mcpeval.benchmark.problems.BenchmarkError` with its line.

Every way a YAML file can fail to be read (bytes that are not UTF-8, a character YAML refuses, a syntax error,
an unknown alias or tag) reaches the user through one path, :func:`decode_yaml` and :func:`yaml_error`: one line
``FILE:LINE: invalid YAML: ...``, whichever of the bound check, the composer or the constructor met it first (a
file without aliases is composed first, its depth checked as it is walked, and read again this way if that
fails: :func:`parse_yaml`)."""

from __future__ import annotations

import codecs
import functools
from pathlib import Path
from typing import Any

import yaml

from pytest_mcpeval.benchmark.problems import BenchmarkError, Loc, Problem, render_loc
from pytest_mcpeval.defaults import MAX_ALIAS_NODES, MAX_DEPTH


class _Unchecked(Exception):
    """A mapping key that is a collection, met without the bound check: :func:`parse_yaml` checks the file first."""


def _walk(path: Path, node: yaml.Node, loc: Loc, out: dict[Loc, int], problems: list[Problem], checked: bool) -> None:
    out[loc] = node.start_mark.line + 1
    if len(loc) >= MAX_DEPTH and isinstance(node, yaml.CollectionNode):  # as check_yaml_bounds says it
        raise BenchmarkError(path, f"nested deeper than {MAX_DEPTH} levels", out[loc])
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            if not checked and not isinstance(key_node, yaml.ScalarNode):  # its text is made recursively, unbounded
                raise _Unchecked
            key = str(key_node.value)
            line = key_node.start_mark.line + 1
            if key in seen:
                problems.append(Problem(line, render_loc(loc), f"duplicate key `{key}` (first at line {seen[key]})"))
            else:
                seen[key] = line
            out[(*loc, key)] = line
            _walk(path, value_node, (*loc, key), out, problems, checked)
            out[(*loc, key)] = line
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(path, item, (*loc, i), out, problems, checked)


# libyaml's loader when PyYAML was built with it (4x faster on large files); both give line marks
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"), (codecs.BOM_UTF16_LE, "UTF-16"),
         (codecs.BOM_UTF16_BE, "UTF-16"))


def decode_yaml(path: Path | str, data: bytes) -> str:
    """The text of a YAML file's bytes, which must be UTF-8 (a UTF-8 byte order mark is allowed); a
    :class:`BenchmarkError` with the line for UTF-16 or UTF-32 (told as YAML tells them: by their byte order mark,
    or a NUL among the first two bytes) and for bytes that are not UTF-8."""
    for bom, name in _BOMS:  # UTF-32 first: its little-endian mark starts with UTF-16's
        if data.startswith(bom):
            raise BenchmarkError(path, f"invalid YAML: the file is {name} (it starts with a {name} byte order mark); "
                                       "save it as UTF-8", 1)
    if b"\0" in data[:2]:
        raise BenchmarkError(path, "invalid YAML: the file looks like UTF-16 or UTF-32 without a byte order mark "
                                   "(a NUL among its first two bytes); save it as UTF-8", 1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        start = data.rfind(b"\n", 0, exc.start) + 1
        column = len(data[start:exc.start].decode("utf-8", "replace")) + 1
        line = data.count(b"\n", 0, exc.start) + 1
        raise BenchmarkError(path, f"invalid YAML: not UTF-8 (byte 0x{data[exc.start]:02x} at column {column}: "
                                   f"{exc.reason}); save the file as UTF-8", line) from None


_QUOTE_HINT = ("could not find expected ':'", "mapping values are not allowed here",
               "mapping values are not allowed in this context")


SHOWN_LINE = 80  # characters of the offending line quoted in a syntax error
_INDENT_PROBLEMS = ("did not find expected '-' indicator", "did not find expected key", "expected <block end>",
                    "could not find expected ':'")


def _hint(problem: str, shown: str, lines: list[str], at: int) -> str:
    """The likely mistake behind a syntax error: a tab, a text holding ``: `` unquoted, or uneven indentation."""
    near = lines[max(0, at - 1): at + 2]
    if any("\t" in line[: len(line) - len(line.lstrip())] for line in near):
        return "; YAML is indented with spaces, and this line (or the one before) starts with a tab"
    if problem in _QUOTE_HINT:
        return "; a text holding `: ` must be quoted"
    if problem.startswith(_INDENT_PROBLEMS):
        return ("; check the indentation: the keys of one mapping start in the same column, and so do the `-` of "
                "one list")
    return ""


def yaml_error(path: Path | str, text: str, exc: yaml.YAMLError) -> BenchmarkError:
    """The one line for any error PyYAML raised reading ``text``: ``invalid YAML: ...`` at the line of the problem.

    A character YAML refuses (a C0 or C1 control character, DEL, U+FFFE, U+FFFF: PyYAML's ``ReaderError``, which
    has no line of its own) is named with its line, column and the escape that writes it in a double-quoted text;
    a syntax error says where its construct started when that is another line, and that a text holding ``: ``
    must be quoted when that is the likely mistake."""
    if isinstance(exc, yaml.reader.ReaderError) and isinstance(exc.character, int):
        code = exc.character
        index = text.find(chr(code))  # the reader stops at the first character it refuses: this one
        index = index if index >= 0 else min(max(exc.position, 0), len(text))
        column = index - (text.rfind("\n", 0, index) + 1) + 1
        kind = "a non-character" if code in (0xFFFE, 0xFFFF) else "a control character"
        escape = f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
        return BenchmarkError(path, f"invalid YAML: U+{code:04X} ({kind}) at column {column} is not allowed in a YAML "
                                    f"file; in a double-quoted text write it as \"{escape}\"",
                              text.count("\n", 0, index) + 1)
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        context = exc.context_mark
        if mark is not None and context is not None and mark.column == 0 and context.line < mark.line \
                and not "".join(text.splitlines()[mark.line:mark.line + 1]).strip():
            mark = context  # the scanner stopped at the start of a later line: the construct it could not end is where
            # the mistake is (one line too far, as reported before)
        line = mark.line + 1 if mark is not None else None
        problem = exc.problem or str(exc).splitlines()[0]
        if exc.context:
            start = exc.context_mark.line + 1 if exc.context_mark is not None else line
            problem = f"{exc.context}{f' (line {start})' if start != line else ''}: {problem}"
        where, hint = "", ""
        if mark is not None:
            lines = text.splitlines()
            shown = lines[mark.line] if mark.line < len(lines) else ""
            where = f" at column {mark.column + 1}"
            if shown.strip() and mark.column < SHOWN_LINE:  # the line as far as it is quoted holds the problem
                quoted = shown.rstrip().replace("\t", "\\t")
                problem += f"; the line reads `{quoted[:SHOWN_LINE]}{'…' if len(quoted) > SHOWN_LINE else ''}`"
            hint = _hint(exc.problem or "", shown, lines, mark.line)
        return BenchmarkError(path, f"invalid YAML{where}: {problem}{hint}", line)
    return BenchmarkError(path, f"invalid YAML: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")


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
    except yaml.YAMLError as exc:
        raise yaml_error(path, text, exc) from None
    finally:
        parser.dispose()


def load_bounded_yaml(path: Path | str, source: str | bytes) -> Any:
    """``yaml.safe_load`` of a small YAML file (an overlay, a candidates file; its text or its bytes) within the
    benchmark files' bounds; a :class:`BenchmarkError` with the line for a file out of bounds or not valid YAML."""
    text = decode_yaml(path, source) if isinstance(source, bytes) else source
    check_yaml_bounds(path, text)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise yaml_error(path, text, exc) from None


def parse_yaml(path: Path, text: str, problems: list[Problem]) -> tuple[Any, dict[Loc, int]]:
    """The file's data and the line of each of its places.

    Without an alias (no ``*`` in the text) nothing can expand, so where libyaml refuses more than its own 1,000
    levels as it composes (:func:`_composer_bounds_nesting`), the file is composed at once and :func:`_walk` refuses
    more than :data:`MAX_DEPTH` levels as it goes: the pass of :func:`check_yaml_bounds` over every event (30 ms of a
    1,000-case file) is saved.  A file that fails that way (a syntax error, a key that is itself a list or a mapping)
    is read again the full way, the bound check first, so that it gets the same error as it always did."""
    if "*" not in text and _composer_bounds_nesting():
        found: list[Problem] = []
        try:
            data, locations = _compose(path, text, found, checked=False)
        except (yaml.YAMLError, RecursionError, _Unchecked):
            pass
        else:
            problems.extend(found)
            return data, locations
    check_yaml_bounds(path, text)
    try:
        return _compose(path, text, problems, checked=True)
    except yaml.YAMLError as exc:
        raise yaml_error(path, text, exc) from None


def _compose(path: Path, text: str, problems: list[Problem], checked: bool) -> tuple[Any, dict[Loc, int]]:
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise BenchmarkError(path, "the file is empty; expected a mapping with `server` and `cases`", 1)
        locations: dict[Loc, int] = {}
        _walk(path, node, (), locations, problems, checked)
        return loader.construct_document(node), locations
    finally:
        loader.dispose()


@functools.cache
def _composer_bounds_nesting() -> bool:
    """Whether the composer refuses nesting past a bound of its own: libyaml's does past 1,000 levels (0.2.6 on;
    an older one, or PyYAML's own composer, recurses as deep as the file goes).  Told by composing 1,001 levels
    once per process (2 KB)."""
    if _Loader is yaml.SafeLoader:
        return False
    loader = _Loader("[" * 1001 + "]" * 1001)
    try:
        loader.get_single_node()
    except yaml.YAMLError:
        return True
    finally:
        loader.dispose()
    return False
