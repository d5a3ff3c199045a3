"""``pytest --mcp-tools``: what each benchmark file's server publishes, before any case is written.

Like ``--fixtures`` and ``--markers``, it answers "what can I use here?".  With the option, a
benchmark file collects one ``tools`` item instead of its cases: it connects to the file's server (or
the ``mcp_server`` fixture's) through the same code path as an evaluation, and lists every tool with
its parameters and the first line of its description.  No model is called.  The listing rides on the
test report as plain data (so ``-n 2`` works) and the controller prints it in the terminal summary.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pytest

from pytest_mcpeval.keys import CASE_KEY, TOOLS_KEY

if TYPE_CHECKING:
    from pytest_mcpeval.run.engine import Engine

MAX_LINE = 110


def _type_of(schema: Any) -> str:
    """A short rendering of a JSON Schema's type: ``string``, ``integer[]``, ``"a"|"b"``, ``string|null``."""
    if not isinstance(schema, Mapping):
        return "any"
    if "enum" in schema and isinstance(schema["enum"], list):
        shown = [repr(v) if not isinstance(v, str) else f'"{v}"' for v in schema["enum"][:6]]
        return "|".join(shown) + ("|…" if len(schema["enum"]) > 6 else "")
    if "const" in schema:
        return f"const {schema['const']!r}"
    kind = schema.get("type")
    if isinstance(kind, list):
        return "|".join(str(k) for k in kind)
    if kind == "array":
        inner = _type_of(schema.get("items"))
        return f"({inner})[]" if _union(inner) else f"{inner}[]"
    if isinstance(kind, str):
        return kind
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            return "|".join(_type_of(o) for o in options)
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    return "any"


def _union(rendered: str) -> bool:
    """Whether a rendered type is a union at its top level (``a|b``, not ``(a|b)[]``): an array of it needs
    parentheses, or ``string|null[]`` reads as a string or an array of nulls."""
    depth = 0
    for char in rendered:
        depth += (char == "(") - (char == ")")
        if char == "|" and depth == 0:
            return True
    return False


def first_line(text: str | None, limit: int = MAX_LINE) -> str:
    """The description's first line; a longer one is cut after its last sentence that fits, else after a word
    (never inside one), with ``…``."""
    line = next((part.strip() for part in (text or "").splitlines() if part.strip()), "")
    if len(line) <= limit:
        return line
    head = line[: limit - 1]
    sentence = max(head.rfind(". "), head.rfind("? "), head.rfind("! "), head.rfind("; "))
    if sentence >= limit // 3:
        return head[: sentence + 1] + " …"
    word = head.rfind(" ")
    return (head[:word] if word >= limit // 3 else head).rstrip(",;:- ") + "…"


def whole(text: str | None) -> str:
    """The whole description, its lines joined (``-v``)."""
    return " ".join(part.strip() for part in (text or "").splitlines() if part.strip())


def describe_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """Plain data for one tool: name, parameters (name, type, required) and the description's first line."""
    schema = tool.get("inputSchema")
    schema = schema if isinstance(schema, Mapping) else {}
    props = schema.get("properties")
    props = props if isinstance(props, Mapping) else {}
    required = schema.get("required")
    required = {str(r) for r in required} if isinstance(required, list) else set()
    params = [
        {"name": str(name), "type": _type_of(spec), "required": str(name) in required}
        for name, spec in props.items()
    ]
    params.sort(key=lambda p: (not p["required"], p["name"]))  # required first, then by name
    description = str(tool.get("description") or tool.get("title") or "")
    shown = {"name": str(tool.get("name")), "params": params, "description": first_line(description)}
    if whole(description) != shown["description"]:
        shown["full_description"] = whole(description)  # for -v
    return shown


def list_tools(request: pytest.FixtureRequest, mcp_server: object, mcpeval_runtime: Engine) -> None:
    """The body of a file's ``tools`` item: connect, list, keep the listing for the controller."""
    from pytest_mcpeval.checks.items import CheckFailed
    from pytest_mcpeval.run.case import CaseError
    from pytest_mcpeval.servers import ServerError

    ref = request.node.stash[CASE_KEY]
    try:
        catalog = mcpeval_runtime.server_catalog(ref, mcp_server)
    except (ServerError, CaseError) as exc:
        raise CheckFailed(str(exc)) from None
    request.node.stash[TOOLS_KEY] = {
        "file": mcpeval_runtime.shown_path(ref.bench.path),
        "server": mcpeval_runtime.server_label(ref, mcp_server),
        "tools": [describe_tool(t) for t in catalog.tools],
    }


def listing_lines(listings: list[dict[str, Any]], verbose: int = 0) -> Iterator[str]:
    """The terminal rendering: per file its server, then per tool a signature line and a description line (its
    first line, cut at a sentence or a word; the whole description with ``-v``)."""
    for entry in sorted(listings, key=lambda e: e["file"]):
        tools = entry["tools"]
        yield f"{entry['file']}: {entry['server']}, {len(tools)} tool{'s' if len(tools) != 1 else ''}"
        for tool in tools:
            params = ", ".join(f"{p['name']}{'*' if p['required'] else ''}: {p['type']}" for p in tool["params"])
            yield f"  {tool['name']}({params})"
            text = tool.get("full_description", tool["description"]) if verbose else tool["description"]
            if text:
                yield f"      {text}"
        yield ""
    if listings:
        cut = any("full_description" in tool for entry in listings for tool in entry["tools"])
        yield "(* = required parameter" + ("; -v shows whole descriptions)" if cut and not verbose else ")")
