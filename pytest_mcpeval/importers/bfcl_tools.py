"""BFCL import, tools: each question's functions -> MCP tools as BFCL presents them to a function-calling model
(its type mapping and description hints), identical definitions once, different ones under one name kept apart
(:class:`ToolSet`; see :mod:`pytest_mcpeval.importers.bfcl`)."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: bfcl_eval/constants/type_mappings.py GORILLA_TO_OPENAPI: the JSON Schema type a function-calling model is shown
TO_JSON_SCHEMA = {
    "integer": "integer", "number": "number", "float": "number", "string": "string", "boolean": "boolean",
    "bool": "boolean", "array": "array", "list": "array", "dict": "object", "object": "object", "tuple": "array",
    "any": "string", "byte": "integer", "short": "integer", "long": "integer", "double": "number",
    "char": "string", "ArrayList": "array", "Array": "array", "HashMap": "object", "Hashtable": "object",
    "Queue": "array", "Stack": "array", "Any": "string", "String": "string", "Bigint": "integer",
}
PYTHON_HINT = " Note that the provided function is in Python 3 syntax."  # bfcl_eval/utils.py, Python categories
FLOAT_HINT = " This is a float type value."  # model_handler/utils.py _cast_to_openai_type
#: the k-th different definition of a name (k >= 2) replaces the name's `.` and `_` by VARIANT_MARKS[k - 2]
VARIANT_MARKS = ":/+~!@=%|"
_INVALID = re.compile(r"[^A-Za-z0-9_-]")  # what catalog.py turns into `_` in a name shown to a provider


# -- tools -------------------------------------------------------------------------------------------------


def json_schema(function: Mapping[str, Any]) -> dict[str, Any]:
    """The ``inputSchema`` BFCL shows a function-calling model for ``function`` (its ``convert_to_tool``)."""
    params = copy.deepcopy(dict(function["parameters"]))
    params["type"] = "object"
    params["properties"] = _cast_properties(params.get("properties", {}))
    return params


def _cast_properties(properties: dict[str, Any]) -> dict[str, Any]:
    """BFCL's ``_cast_to_openai_type``: each property's type mapped (a float gets ``format: float`` and a hint in
    its description), then nested properties and items (deeper levels the same way, where BFCL stops)."""
    for value in properties.values():
        declared = value.get("type")
        if declared is None:
            value["type"] = "string"
        else:
            if declared == "float":
                value["format"] = "float"
                value["description"] = str(value.get("description", "")) + FLOAT_HINT
            value["type"] = TO_JSON_SCHEMA.get(str(declared), "string")
        _cast_nested(value)
    return properties


def _cast_nested(value: dict[str, Any]) -> None:
    if value["type"] not in ("array", "object"):
        return
    if isinstance(value.get("properties"), dict):
        value["properties"] = _cast_properties(value["properties"])
    elif isinstance(value.get("items"), dict):
        items = value["items"]
        items["type"] = TO_JSON_SCHEMA.get(str(items.get("type")), "string")
        _cast_nested(items)


def shown_name(name: str) -> str:
    """The name an OpenAI-style model is shown (catalog.py's rule; BFCL's is ``.`` -> ``_``)."""
    return _INVALID.sub("_", name)[:64]


@dataclass
class ToolSet:
    """The union of the questions' functions as MCP tools, each distinct definition once."""

    tools: list[dict[str, Any]] = field(default_factory=list)
    by_definition: dict[str, str] = field(default_factory=dict)  # canonical JSON of a BFCL function -> MCP name
    definitions: dict[str, int] = field(default_factory=dict)  # BFCL name -> distinct definitions seen
    renamed: dict[str, str] = field(default_factory=dict)  # MCP name of a variant -> BFCL name
    merged: int = 0  # functions that repeated a definition already in the set

    def add(self, function: Mapping[str, Any]) -> str:
        """The MCP name of ``function``, adding it when its definition is new."""
        key = json.dumps(function, sort_keys=True, ensure_ascii=False)
        if key in self.by_definition:
            self.merged += 1
            return self.by_definition[key]
        name: str = function["name"]
        k = self.definitions.get(name, 0) + 1
        self.definitions[name] = k
        mcp_name = name if k == 1 else self._variant(name, k)
        if mcp_name != name:
            self.renamed[mcp_name] = name
        self.by_definition[key] = mcp_name
        self.tools.append({"name": mcp_name, "description": str(function.get("description") or "") + PYTHON_HINT,
                           "inputSchema": json_schema(function)})
        return mcp_name

    def _variant(self, name: str, k: int) -> str:
        taken = {t["name"] for t in self.tools} | set(self.definitions)
        if re.search(r"[._]", name):
            for mark in VARIANT_MARKS[k - 2:]:
                candidate = re.sub(r"[._]", mark, name)
                if candidate not in taken:
                    return candidate
        n = k
        while f"{name}~{n}" in taken:  # no separator to stand in for: the model sees `name_k`
            n += 1
        return f"{name}~{n}"

    @property
    def visible_renames(self) -> list[str]:
        """Variants whose name a model is shown differs from BFCL's."""
        return [v for v, name in self.renamed.items() if shown_name(v) != shown_name(name)]
