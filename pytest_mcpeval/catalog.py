"""A server's tool catalog and its stable conversion to the OpenAI ``tools`` format.

The conversion (documented in docs/tools-format.md) is done here, not by a provider SDK, so that every
model sees byte-for-byte the same tool list and the same change in a description reaches every model:

* ``name``: the MCP name when it matches ``^[A-Za-z0-9_-]{1,64}$`` (what OpenAI-style APIs accept);
  otherwise every other character becomes ``_`` and the name is cut to 64 characters, with a numeric
  suffix if two tools would collide.  Calls are mapped back to the MCP name.
* ``description``: the tool's description, else its ``title``, else ``annotations.title``, else ``""``.
* ``parameters``: the ``inputSchema`` unchanged, except that ``type: object`` and ``properties: {}`` are
  added when missing (some providers reject a schema without them).
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_mcpeval.bounds import depth_exceeds
from pytest_mcpeval.defaults import MAX_DEPTH
from pytest_mcpeval.text import canonical_json

TOOL_KEYS = ("name", "title", "description", "inputSchema", "annotations")
_VALID_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")




def tool_hash(tool: Mapping[str, Any]) -> str:
    """Short stable hash of one tool definition (name, description, schema, annotations)."""
    return hashlib.sha256(canonical_json(tool).encode()).hexdigest()[:16]


def _description(tool: Mapping[str, Any]) -> str:
    for value in (tool.get("description"), tool.get("title"), (tool.get("annotations") or {}).get("title")):
        if isinstance(value, str) and value:
            return value
    return ""


def _copied(value: Any) -> Any:
    """A deep copy of JSON data (its dicts and lists new; anything else, a string or a number, shared): what a
    schema is.  Several times as fast as :func:`copy.deepcopy`, which every catalog paid for every tool (a catalog of
    the 117 GitHub tools: 8.7 -> 5.8 ms); anything else in a schema (a tuple, say) is copied as deepcopy copies it."""
    if isinstance(value, dict):
        return {key: _copied(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copied(item) for item in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return copy.deepcopy(value)


@dataclass
class Catalog:
    """The tools one server publishes, as plain JSON dicts (MCP ``Tool`` objects)."""

    tools: list[dict[str, Any]]
    by_name: dict[str, dict[str, Any]] = field(init=False)
    openai_tools: list[dict[str, Any]] = field(init=False)
    from_openai_name: dict[str, str] = field(init=False)
    digest: str = field(init=False)

    def __post_init__(self) -> None:
        self.by_name = {}
        seen: dict[str, list[int]] = {}
        for index, tool in enumerate(self.tools):
            name = tool.get("name")
            if not isinstance(name, str) or not name:
                raise ValueError(f"a tool has no name: {canonical_json(tool)[:120]}")
            if depth_exceeds(tool):  # every walk over the schemas after this one may recurse
                raise ValueError(f"tool `{name}` is nested deeper than {MAX_DEPTH} levels")
            seen.setdefault(name, []).append(index)
            self.by_name.setdefault(name, tool)
        duplicates = {name: where for name, where in seen.items() if len(where) > 1}
        if duplicates:
            shown = ", ".join(f"`{name}` (tools {', '.join(f'[{i}]' for i in where)})"
                              for name, where in duplicates.items())
            raise ValueError(f"duplicate tool names: {shown}; tool names must be unique (a model could not tell "
                             "the tools apart, and providers reject duplicate function names)")
        self.from_openai_name = {}
        self.openai_tools = []
        for tool in self.tools:
            api_name = self._api_name(tool["name"])
            self.from_openai_name[api_name] = tool["name"]
            self.openai_tools.append(
                {
                    "type": "function",
                    "function": {
                        "name": api_name,
                        "description": _description(tool),
                        "parameters": self._parameters(tool),
                    },
                }
            )
        self.digest = hashlib.sha256(canonical_json(self.tools).encode()).hexdigest()[:16]

    def _api_name(self, name: str) -> str:
        if _VALID_NAME.match(name) and name not in self.from_openai_name:
            return name
        base = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "tool"
        candidate, n = base, 1
        while candidate in self.from_openai_name or (candidate in self.by_name and candidate != name):
            n += 1
            suffix = f"_{n}"
            candidate = base[: 64 - len(suffix)] + suffix
        return candidate

    @staticmethod
    def _parameters(tool: Mapping[str, Any]) -> dict[str, Any]:
        schema = tool.get("inputSchema")
        params: dict[str, Any] = _copied(dict(schema)) if isinstance(schema, Mapping) else {}
        params.setdefault("type", "object")
        params.setdefault("properties", {})
        return params

    @property
    def names(self) -> list[str]:
        return [t["name"] for t in self.tools]

    def mcp_name(self, api_name: str) -> str:
        """The MCP name for a name a model called (unknown names are returned unchanged)."""
        return self.from_openai_name.get(api_name, api_name)

    def _schema(self, tool: str) -> Mapping[str, Any]:
        schema = self.by_name.get(tool, {}).get("inputSchema")
        return schema if isinstance(schema, Mapping) else {}

    def properties(self, tool: str) -> set[str]:
        """The argument names the tool's schema defines (none when its schema says nothing usable)."""
        props = self._schema(tool).get("properties")
        return {str(p) for p in props} if isinstance(props, Mapping) else set()

    def required(self, tool: str) -> list[str]:
        req = self._schema(tool).get("required")
        return [str(r) for r in req] if isinstance(req, list) else []

    def open_schema(self, tool: str) -> bool:
        """Whether the tool's schema says it takes names it does not list (an explicit ``additionalProperties:
        true``, as an imported schema inferred from recorded calls does): such names are not hallucinated."""
        return self._schema(tool).get("additionalProperties") is True

    def subset(self, names: Iterable[str]) -> Catalog:
        """The catalog of the tools named ``names`` (in this catalog's order): what a case with ``tools`` or
        ``distractors`` shows the model (run.exposure)."""
        keep = set(names)
        return Catalog([tool for tool in self.tools if tool["name"] in keep])

    def deferred(self, search_tool: Mapping[str, Any], loaded: Iterable[str]) -> Catalog:
        """This catalog as a provider's own tool search is sent it (docs/tool-search.md, native search): ``search_tool``
        first, then every tool with ``defer_loading: true`` but the ``loaded`` ones (calls map back as before)."""
        keep = set(loaded)
        sent = copy.copy(self)
        sent.openai_tools = [dict(search_tool), *(
            tool if self.from_openai_name[tool["function"]["name"]] in keep else {**tool, "defer_loading": True}
            for tool in self.openai_tools)]
        return sent

    def hashes(self) -> dict[str, str]:
        return {t["name"]: tool_hash(t) for t in self.tools}


def catalog_from_json(data: Any) -> Catalog:
    """A catalog from a JSON tool list: a list of tools, or ``{"tools": [...]}`` as tools/list returns.

    Checked against the tools-file model (:mod:`pytest_mcpeval.benchmark.tools_file`); a ``ValueError`` names
    every problem.
    """
    from pytest_mcpeval.benchmark.tools_file import tool_entries, tool_list_problems

    problems = tool_list_problems(data)
    if problems:
        raise ValueError("; ".join(f"{p.where}: {p.message}" if p.where else p.message for p in problems))
    found = tool_entries(data)
    assert found is not None
    return Catalog([dict(t) for t in found[1]])


def catalog_from_mcp(tools: Iterable[Any]) -> Catalog:
    """A catalog from the SDK's ``Tool`` models (as returned by ``Client.list_tools``)."""
    out = []
    for tool in tools:
        dumped = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
        out.append({k: dumped[k] for k in TOOL_KEYS if k in dumped})
    return Catalog(out)
