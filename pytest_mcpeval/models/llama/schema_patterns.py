"""Tool schemas' ``pattern`` rewritten into what llama.cpp's grammar compiler accepts.

llama-server turns each tool's JSON Schema into a grammar, and its regex translation does not know the shorthand
classes: a ``pattern`` with ``\\d``, ``\\w`` or ``\\s`` fails the whole request (400 "Failed to initialize samplers:
failed to parse grammar", llama.cpp issue 27580).  So the route sends a copy of the tools in which each shorthand
is spelt as the class it means in JSON Schema's regex dialect (ECMA-262):

* ``\\d`` -> ``[0-9]``, ``\\D`` -> ``[^0-9]``, ``\\w`` -> ``[A-Za-z0-9_]``, ``\\W`` -> ``[^A-Za-z0-9_]``: exact;
* ``\\s`` -> ``[ \\t\\n\\r\\f\\v]``, ``\\S`` -> its negation: ASCII whitespace only (ECMA's ``\\s`` also matches
  Unicode spaces such as U+00A0), so the rewrite is recorded as ``narrowed``;
* inside a class (``[\\d-]``) the range is inlined (``[0-9-]``); a negated shorthand inside a class (``[\\S.]``)
  has no such spelling, and that ``pattern`` is dropped from the copy (recorded as ``dropped``).

Every change is returned (tool, where in its schema, before, after) for the report; the catalog, the tools the
user's server publishes and the scoring (which validates arguments against the original schema) are unchanged.
"""

from __future__ import annotations

import copy
from typing import Any

_INLINE = {"d": "0-9", "w": "A-Za-z0-9_", "s": " \\t\\n\\r\\f\\v"}
_NEGATED = {"D": "d", "W": "w", "S": "s"}


def rewrite_pattern(pattern: str) -> tuple[str | None, str]:
    """``(new pattern, how)``: ``how`` is ``"same"``, ``"exact"``, ``"narrowed"`` or ``"dropped"`` (new is None)."""
    out: list[str] = []
    in_class = False
    how = "same"
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            escaped = pattern[i + 1]
            i += 2
            if escaped in _INLINE or escaped in _NEGATED:
                base = _NEGATED.get(escaped, escaped)
                negated = escaped in _NEGATED
                if in_class and negated:
                    return None, "dropped"
                body = _INLINE[base]
                out.append(body if in_class else f"[{'^' if negated else ''}{body}]")
                if base == "s":
                    how = "narrowed"
                elif how == "same":
                    how = "exact"
            else:
                out.append(char + escaped)
            continue
        if char == "[" and not in_class:
            in_class = True
            out.append(char)
            if pattern[i + 1:i + 2] == "^":
                out.append("^")
                i += 1
            if pattern[i + 1:i + 2] == "]":  # a literal ] first in the class
                out.append("]")
                i += 1
        elif char == "]" and in_class:
            in_class = False
            out.append(char)
        else:
            out.append(char)
        i += 1
    return "".join(out), how


def _walk(schema: Any, path: str, changes: list[dict[str, str]]) -> Any:
    if isinstance(schema, list):
        return [_walk(item, f"{path}[{i}]", changes) for i, item in enumerate(schema)]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        where = f"{path}.{key}" if path else key
        if key == "pattern" and isinstance(value, str):
            new, how = rewrite_pattern(value)
            if how != "same":
                changes.append({"at": where, "from": value, "to": new if new is not None else "", "how": how})
            if new is not None:
                out[key] = new
            continue
        out[key] = _walk(value, where, changes)
    return out


def rewrite_tools(tools: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, str]]]]:
    """A deep copy of OpenAI-format ``tools`` with the patterns llama.cpp cannot compile rewritten, and the changes
    per tool name (tools without any are left out); ``tools`` itself is not modified."""
    changed: dict[str, list[dict[str, str]]] = {}
    out: list[dict[str, Any]] = []
    for tool in copy.deepcopy(tools):  # all of it a copy: litellm may edit what it is given, on another thread
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and "parameters" in function:
            changes: list[dict[str, str]] = []
            function["parameters"] = _walk(function["parameters"], "", changes)
            if changes:
                changed[str(function.get("name"))] = changes
        out.append(tool)
    return out, changed
