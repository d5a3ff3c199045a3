"""The ``tools_file`` format: a JSON list of MCP ``Tool`` objects, or ``{"tools": [...]}`` as ``tools/list``
returns (docs/tools-format.md).

:class:`ToolDefinition` is the contract for one entry.  :func:`tool_list_problems` checks a parsed file (or a
list an ``mcp_server`` fixture returned): every entry against the model, and names that must be unique.  Each
problem names the entry (index and name), the field and what was expected; :func:`read_tools_file` adds the
line in the file, so a broken tool list is one clear collection error, never a traceback later.  Entries are
only validated: the catalog keeps the tools exactly as written, so digests and hashes do not depend on this
model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pytest_mcpeval import bounds
from pytest_mcpeval.benchmark.problems import BenchmarkError, Loc, Problem
from pytest_mcpeval.defaults import MAX_FILE_BYTES
from pytest_mcpeval.text import closest, json_kind


class ToolDefinition(BaseModel):
    """One MCP ``Tool`` as a tools file gives it.

    The fields the plugin reads are typed; the other fields of an MCP ``Tool`` (``outputSchema``, ``icons``,
    ``_meta``, ...) are accepted and ignored, so a saved ``tools/list`` answer is a valid file.
    """

    model_config = ConfigDict(extra="allow", strict=True)

    name: str = Field(min_length=1, description="The tool's name, unique in the list.")
    title: str | None = Field(default=None, description="Display name; the description when it is empty.")
    description: str | None = Field(default=None, description="What the model reads about the tool.")
    inputSchema: dict[str, Any] = Field(
        description="JSON Schema object of the tool's arguments, e.g. {\"type\": \"object\", \"properties\": {}}."
    )
    annotations: dict[str, Any] | None = Field(default=None, description="MCP tool annotations.")


FIELDS = tuple(ToolDefinition.model_fields)
_EXPECTED = {
    "name": "a non-empty string",
    "title": "a string",
    "description": "a string",
    "inputSchema": 'a JSON Schema object such as {"type": "object", "properties": {...}}',
    "annotations": "a JSON object",
}
SHAPE = 'expected a JSON list of tool objects, or {"tools": [...]} as tools/list returns'




def tool_entries(data: Any) -> tuple[Loc, list[Any]] | None:
    """Where the tools are (``()`` for a list, ``("tools",)`` for ``{"tools": [...]}``) and the entries."""
    if isinstance(data, list):
        return (), data
    if isinstance(data, Mapping) and isinstance(data.get("tools"), list):
        return ("tools",), data["tools"]
    return None


def _where(index: int, entry: Any, field: str | None = None) -> str:
    base = f"tools[{index}]"
    name = entry.get("name") if isinstance(entry, Mapping) else None
    if isinstance(name, str) and name:
        base += f" (`{name}`)"
    return f"{base}.{field}" if field else base


def tool_list_problems(data: Any, lines: Mapping[Loc, int] | None = None) -> list[Problem]:
    """Every problem of a tool list, in order; ``lines`` maps places in the file to line numbers."""
    lines = lines or {}

    def line(*loc: str | int) -> int | None:
        for end in range(len(loc), -1, -1):
            if loc[:end] in lines:
                return lines[loc[:end]]
        return None

    found = tool_entries(data)
    if found is None:
        got = "a JSON object without a `tools` list" if isinstance(data, Mapping) else json_kind(data)
        return [Problem(line(), "", f"{SHAPE}, got {got}")]
    prefix, entries = found
    problems: list[Problem] = []
    first: dict[str, int] = {}
    for i, entry in enumerate(entries):
        at: Loc = (*prefix, i)
        if not isinstance(entry, Mapping):
            problems.append(Problem(line(*at), _where(i, entry), f"expected a tool object, got {json_kind(entry)}"))
            continue
        try:
            ToolDefinition.model_validate(entry)
        except ValidationError as exc:
            for error in exc.errors():
                field = str(error["loc"][0]) if error["loc"] else ""
                if error["type"] == "missing":
                    guess = closest(field, [str(k) for k in entry if k not in FIELDS])
                    hint = f" (found `{guess}`: did you mean `{field}`?)" if guess else ""
                    message = f"this field is required: {_EXPECTED.get(field, 'a value')}{hint}"
                    problems.append(Problem(line(*at), _where(i, entry, field), message))
                else:
                    got = json_kind(entry.get(field))
                    message = f"expected {_EXPECTED.get(field, 'another value')}, got {got}"
                    problems.append(Problem(line(*at, field), _where(i, entry, field), message))
            continue
        name = entry["name"]
        if name in first:
            j = first[name]
            where_first = f"tools[{j}]" + (f", line {line(*prefix, j)}" if line(*prefix, j) else "")
            message = (f"`{name}` is also the name of {where_first}: tool names must be unique (a model "
                       "could not tell the two apart, and providers reject duplicate function names)")
            problems.append(Problem(line(*at, "name"), _where(i, entry, "name"), message))
        else:
            first[name] = i
    return problems


def _json_lines(text: str) -> dict[Loc, int]:
    """Line numbers of the places in a JSON text (parsed as YAML, a superset of JSON); ``{}`` if that fails."""
    import yaml

    loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        root = yaml.compose(text, Loader=loader)
    except yaml.YAMLError:
        return {}
    out: dict[Loc, int] = {}

    def walk(node: Any, loc: Loc) -> None:
        out.setdefault(loc, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                out.setdefault((*loc, str(key.value)), key.start_mark.line + 1)
                walk(value, (*loc, str(key.value)))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, (*loc, i))

    if root is not None:
        walk(root, ())
    return out


def read_tools_file(path: Path, shown: str | None = None, raw: bytes | None = None) -> list[dict[str, Any]]:
    """The tools of a tools file, validated; a :class:`BenchmarkError` naming ``shown`` (else ``path``) if not.
    ``raw``: the file's bytes, read already (then ``path`` only names it).

    ``FileNotFoundError`` and other ``OSError`` (and ``UnicodeDecodeError``) are left to the caller.
    """
    shown = shown or str(path)
    size = path.stat().st_size if raw is None else len(raw)
    if size > MAX_FILE_BYTES:
        raise BenchmarkError(shown, f"the file has {size:,} bytes, more than the {MAX_FILE_BYTES:,} a tools file may "
                                    "have")
    text = path.read_text(encoding="utf-8") if raw is None else raw.decode("utf-8")
    try:
        data = bounds.loads(text)  # strict JSON, at most MAX_DEPTH levels
    except ValueError as exc:
        line = exc.lineno if isinstance(exc, json.JSONDecodeError) else None
        message = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise BenchmarkError(shown, f"not valid JSON: {message}", line) from None
    problems = tool_list_problems(data)
    if problems:  # only now is the text parsed again, for line numbers
        raise BenchmarkError.of(shown, tool_list_problems(data, _json_lines(text)))
    found = tool_entries(data)
    assert found is not None
    return [dict(t) for t in found[1]]
