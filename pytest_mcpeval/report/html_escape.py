"""Escaping for the HTML report: one function per place a string can land (numbers: :mod:`.numbers`).

Every string the plugin did not write itself (tool names and descriptions, case ids, file and model names,
model output, tool results, claims, judge justifications, error text) reaches the page through one of these:

* :func:`text`: element content (``&``, ``<`` and ``>`` as entities);
* :func:`attr`: a double-quoted attribute value (quotes as entities too);
* :func:`script_json`: JSON inside a ``<script>`` element, where entities are not decoded: ``<``, ``>``,
  ``&`` and the line separators U+2028/U+2029 are written as ``\\u`` escapes, so no value can close the
  element (``</script>``), open a comment (``<!--``) or end a JavaScript line; ``JSON.parse`` reads the same
  values back.

Each writes every control character as its escape (``\\x1b``, ``\\u202e``) through
:func:`pytest_mcpeval.text.printable`, the one escaper of control characters of every rendering (the terminal and
the Markdown too): a browser shows some of them as nothing, and a bidirectional override makes a name read other
than it is.  Long values are cut with the visible marker of :func:`pytest_mcpeval.text.truncate`.
"""

from __future__ import annotations

import html
import json
from typing import Any

from pytest_mcpeval import bounds
from pytest_mcpeval.numbers import num, p_clause, pct
from pytest_mcpeval.text import printable, truncate

__all__ = ["LONG", "NAME", "TEXT", "attr", "compact", "num", "p_value", "pct", "script_json", "sort_value", "text"]

NAME = 200  # characters of a tool, model or case name shown
LONG = 4000  # characters of a final answer, an error, a description
TEXT = 1000  # characters of a model's text beside its calls, or of a tool's answer (the JSON report has them all)
_SCRIPT_UNSAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
                                "\u2029": "\\u2029"})


def text(value: object, limit: int = NAME) -> str:
    """``value`` as element content, cut at ``limit`` characters."""
    return html.escape(truncate(printable(str(value)), limit), quote=False)


def attr(value: object, limit: int = NAME) -> str:
    """``value`` for a double-quoted attribute, cut at ``limit`` characters."""
    return html.escape(truncate(printable(str(value)), limit), quote=True)


def script_json(value: Any) -> str:
    """``value`` as JSON that is safe inside ``<script type="application/json">`` (see the module doc), its strings
    (what the script shows: model names, diagnoses) with their control characters escaped."""
    return bounds.dumps(_printable(value), ensure_ascii=False, separators=(",", ":")).translate(_SCRIPT_UNSAFE)


def _printable(value: Any) -> Any:
    """``value`` with :func:`printable` applied to every string in it (the page's data: a few shallow lists)."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {_printable(k): _printable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_printable(v) for v in value]
    return value


def compact(value: Any) -> str:
    """A JSON value on one line (the arguments of a call, an expected argument's matcher)."""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


p_value = p_clause  # ``p = 0.0312`` (pct and num, the page's numbers, are report.numbers' too)


def sort_value(value: float | None) -> str:
    """A ``data-v`` attribute: the number the script sorts a column by (empty: no value, sorted last)."""
    return "" if value is None else f"{value:.6g}"
