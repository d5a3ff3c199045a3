"""Reading a JSON file a person may have edited or broken: the baseline and the response cache's entries.

Both are read back by a later run, so anything can be at their path: a FIFO (opening it for reading waits for
a writer that never comes), a directory, a symlink to ``/dev/zero`` (endless), a file nested 200,000 levels
deep (``json.loads`` raises :class:`RecursionError`), ``1e400`` (read as ``inf``), ``"no"`` where a boolean
belongs.  :func:`read_regular` opens only a regular file and reads a bounded amount; :func:`parse` turns
every parse failure into a :class:`JsonFileError` and bounds the nesting; :func:`first_problem` says what a
pydantic validation found as one clause naming the JSON path (``cases[3].correct: expected true or false,
found "no"``).  The callers put the file's name in front.
"""

from __future__ import annotations

import json
import math
import os
import stat
from typing import Any

from pytest_mcpeval.bounds import depth_exceeds

MAX_DEPTH = 32  # levels of nesting a file of ours may have (a baseline has 5, a cache entry 6 or so)


class JsonFileError(ValueError):
    """A file that cannot be used; the message is one clause to follow the file's name and a colon."""


def read_regular(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes.  Raises :class:`FileNotFoundError` when there
    is nothing at ``path`` (or a parent is not a directory), :class:`JsonFileError` for anything else there
    (a FIFO, a device, a directory, a larger file) or that cannot be read.  Opened without blocking, so a FIFO
    costs no wait, and checked on the open descriptor, so what is read is what was checked."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(path) from None
    except OSError as exc:
        raise JsonFileError(f"cannot be opened: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise JsonFileError(f"not a regular file but {_file_kind(info.st_mode)}")
        if info.st_size > limit:
            raise JsonFileError(f"{info.st_size:,} bytes, more than the {limit:,} such a file may have")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:  # a file that grows while read is cut at the limit, then refused
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise JsonFileError(f"more than the {limit:,} bytes such a file may have")
        return b"".join(chunks)
    except OSError as exc:
        raise JsonFileError(f"cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _file_kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a file"


def _not_json(name: str) -> Any:
    raise JsonFileError(f"not valid JSON: {name} is not a JSON value")


def parse(data: bytes) -> Any:
    """The JSON value of ``data`` (UTF-8), nested at most :data:`MAX_DEPTH` levels; :class:`JsonFileError`
    says where it is not.

    pydantic-core's parser reads it first: three times as fast as :func:`json.loads` on a cache entry (a replay reads
    one per case), and where both read a text they give the same value (duplicate keys, big integers, ``1e400``,
    the nearest double).  What it refuses (``NaN``, a lone surrogate such as ``"\\ud83d"``, a byte order mark, a
    syntax error, past 200 levels) is read again by :func:`json.loads`, which accepts or says why as before."""
    from pydantic_core import from_json

    try:
        value = from_json(data, allow_inf_nan=False)
    except ValueError:
        value = _loads(data)
    # a text with no more brackets than the bound cannot nest deeper (two counts in C; a cache entry has about ten)
    deep = too_deep(value, MAX_DEPTH) if data.count(b"{") + data.count(b"[") > MAX_DEPTH else None
    if deep is not None:
        raise JsonFileError(f"nested too deep (more than {MAX_DEPTH} levels, at {deep or 'the top'})")
    return value


def _loads(data: bytes) -> Any:
    """:func:`json.loads`, each failure a :class:`JsonFileError`."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JsonFileError(f"not UTF-8 text (byte {exc.start})") from None
    try:
        return json.loads(text, parse_constant=_not_json)  # strict (RFC 8259): NaN and Infinity are not JSON
    except json.JSONDecodeError as exc:
        raise JsonFileError(f"not valid JSON: {exc.msg} (line {exc.lineno} column {exc.colno})") from None
    except RecursionError:  # the C scanner's own guard, at about a thousand levels
        raise JsonFileError(f"nested too deep (more than {MAX_DEPTH} levels)") from None


def too_deep(value: Any, limit: int) -> str | None:
    """The JSON path of a value nested deeper than ``limit`` levels, or ``None``; without recursion.  Measured by
    :func:`pytest_mcpeval.bounds.depth_exceeds` (every replayed cache entry pays this); the path is traced only
    for a file that is too deep."""
    return render_loc(_path_deeper_than(value, limit)) if depth_exceeds(value, limit) else None


def _path_deeper_than(value: Any, limit: int) -> tuple[str | int, ...]:
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        node, loc = stack.pop()
        if len(loc) >= limit:
            return loc
        items = node.items() if isinstance(node, dict) else enumerate(node)
        stack.extend((child, (*loc, key)) for key, child in items if isinstance(child, dict | list))
    return ()


def render_loc(loc: tuple[Any, ...]) -> str:
    """``("cases", 3, "correct")`` -> ``cases[3].correct``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


_EXPECTED = {
    "bool_type": "true or false", "bool_parsing": "true or false",
    "int_type": "an integer", "int_from_float": "an integer", "int_parsing": "an integer",
    "float_type": "a number", "float_parsing": "a number", "finite_number": "a finite number",
    "string_type": "a string", "dict_type": "an object", "model_type": "an object", "model_attributes_type":
    "an object", "typed_dict_type": "an object", "list_type": "a list", "tuple_type": "a list",
    "none_required": "null",
}


def found(value: Any) -> str:
    """A value as an error message shows it: JSON, cut at 40 characters; objects and lists by their kind."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"a number out of range ({value})"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else f"{text[:37]}..."


def first_problem(exc: Any, data: Any) -> str:
    """The first error of a pydantic ``ValidationError`` of ``data`` as ``PATH: expected X, found Y``.  The path
    is the JSON path in ``data``: the names pydantic gives the branches of a union are left out."""
    error = exc.errors()[0]
    kind = error["type"]
    loc = _data_loc(data, tuple(error["loc"]), missing=kind == "missing")
    where = render_loc(loc) or "the top level"
    if kind == "json_invalid":
        return str(error["msg"]).replace("Invalid JSON", "not valid JSON", 1)
    if kind == "missing":
        clause = "this field is required"
    elif kind in _EXPECTED:
        clause = f"expected {_EXPECTED[kind]}, found {found(error.get('input'))}"
    elif kind == "literal_error":
        clause = f"expected {error.get('ctx', {}).get('expected', 'another value')}, found {found(error.get('input'))}"
    else:
        clause = f"{str(error['msg']).removeprefix('Value error, ')}, found {found(error.get('input'))}"
    return f"{where}: {clause}"


def _data_loc(data: Any, loc: tuple[Any, ...], missing: bool) -> tuple[Any, ...]:
    """``loc`` with the parts that are not keys or indexes of ``data`` left out (a union's branch names); the
    last part of a missing field is kept."""
    out: list[Any] = []
    node = data
    for n, part in enumerate(loc):
        if (isinstance(node, dict) and part in node) or (
                isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)):
            node = node[part]
        elif not (missing and n == len(loc) - 1):
            continue
        out.append(part)
    return tuple(out)
