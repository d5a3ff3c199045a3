"""Bounds on data from outside the plugin, and the strict JSON the plugin reads and writes.

A model's tool-call arguments, an MCP server's answers and tool schemas, benchmark and tools files: any of them
can nest lists and objects deeper than Python's stack (``json`` itself raises ``RecursionError`` near 1,000
levels, and every recursive walk over the data near a few hundred).  So data is measured where it enters, by an
iterative walk, and refused beyond :data:`~pytest_mcpeval.defaults.MAX_DEPTH` levels: what passes is shallow
enough for every walk after it (redaction, scoring, rendering, ``json.dumps``).

JSON is read strictly (RFC 8259): ``NaN``, ``Infinity`` and ``-Infinity`` are not JSON, although Python's
``json.loads`` accepts them.  What the plugin writes (the report, the baseline, cache entries, the HTML page's
data) is strict JSON too: a float that JSON cannot hold (a number too large for a double, ``1e400``, read as
infinity; a YAML ``.nan`` in a benchmark file) is written as the string ``"Infinity"``, ``"-Infinity"`` or
``"NaN"`` (:func:`finite`).
"""

from __future__ import annotations

import json
import math
from typing import Any, NoReturn

from pytest_mcpeval.defaults import MAX_DEPTH


class TooDeep(ValueError):
    """Data nested deeper than the bound."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"nested deeper than {limit} levels")
        self.limit = limit


def depth_exceeds(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests lists, tuples or dicts more than ``limit`` deep (iterative; stops at the first
    place too deep)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list | tuple))
    return False


def check_depth(value: Any, limit: int = MAX_DEPTH) -> Any:
    """``value`` itself; :class:`TooDeep` if it nests deeper than ``limit``."""
    if depth_exceeds(value, limit):
        raise TooDeep(limit)
    return value


def _constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON value")


def loads(text: str | bytes, limit: int = MAX_DEPTH) -> Any:
    """``text`` parsed as strict JSON: ``ValueError`` (a ``json.JSONDecodeError`` for bad syntax) for what is
    not JSON, ``NaN`` and ``Infinity`` included, and :class:`TooDeep` beyond ``limit`` levels."""
    try:
        value = json.loads(text, parse_constant=_constant)
    except RecursionError:  # deeper than json's own recursion can go: far beyond any bound
        raise TooDeep(limit) from None
    return check_depth(value, limit)


def _non_finite(value: float) -> str:
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def finite(value: Any) -> Any:
    """A copy of ``value`` (dicts and lists; a tuple becomes a list, as JSON has it) with every float JSON cannot
    hold replaced by ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``.  Iterative, so any depth is fine."""
    if isinstance(value, float):
        return value if math.isfinite(value) else _non_finite(value)
    if not isinstance(value, dict | list | tuple):
        return value
    root: list[Any] = [None]
    # (a value still to copy, (the copy's container, the key it goes under there))
    stack: list[tuple[Any, Any]] = [(value, (root, 0))]
    while stack:
        source, (parent, key) = stack.pop()
        if isinstance(source, float):
            parent[key] = source if math.isfinite(source) else _non_finite(source)
        elif isinstance(source, dict):
            copy: dict[Any, Any] = {}
            parent[key] = copy
            for k, v in source.items():
                copy[k] = v
                if isinstance(v, dict | list | tuple | float):
                    stack.append((v, (copy, k)))
        elif isinstance(source, list | tuple):
            items = list(source)
            parent[key] = items
            for i, v in enumerate(items):
                if isinstance(v, dict | list | tuple | float):
                    stack.append((v, (items, i)))
        else:
            parent[key] = source
    return root[0]


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps(value, **kwargs)`` as strict JSON: floats JSON cannot hold are written as strings
    (:func:`finite`); the common case, with none, costs one ``json.dumps``."""
    try:
        return json.dumps(value, allow_nan=False, **kwargs)
    except ValueError as exc:
        if "Out of range float" not in str(exc):
            raise
    return json.dumps(finite(value), allow_nan=False, **kwargs)
