"""Description overlays (``--mcp-overlay=overlay.yaml``): try a tool description without touching the server.

An overlay replaces the description of named tools (and, optionally, of their parameters) in every catalog
that has them, before any model sees the catalog::

    version: 1
    tools:
      search_issues:
        description: "Full-text search over issue titles and comments ..."
        parameters: {query: "Words to look for; GitHub search syntax"}   # optional

It is applied where a case's catalog is made (:meth:`pytest_mcpeval.run.runtime.Runtime.server_catalog`), so
everything downstream sees the overlaid catalog as it would see a real edit: the request and its cache key, the
token counts, lint, snapshots, the report's ``catalogs`` and a comparison against a baseline without the overlay
(which then shows the description change beside the F1 change).  A tool no selected file's catalog has, or a
parameter its schema lacks, is a usage error before any model is called (:func:`check`).  The report records
the overlay under ``run.overlay``: its path, digest, and the catalogs it changed (:func:`overlay_info`).

This module imports only the catalog and the standard library at load; PyYAML when a file is read.
"""

from __future__ import annotations

import copy
import hashlib
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.text import canonical_json, did_you_mean

if TYPE_CHECKING:
    from pytest_mcpeval.results import CatalogInfo, OverlayInfo

VERSION = 1


class OverlayError(ValueError):
    """An overlay file that cannot be used: one line naming the file and what is wrong."""


@dataclass(frozen=True)
class ToolOverlay:
    description: str | None = None
    parameters: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Overlay:
    path: str  # as the user gave it
    tools: dict[str, ToolOverlay]
    digest: str = ""
    _applied: dict[int, tuple[Catalog, Catalog]] = field(default_factory=dict, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.digest:
            self.digest = hashlib.sha256(canonical_json(self.as_data()).encode()).hexdigest()[:16]

    def as_data(self) -> dict[str, Any]:
        tools: dict[str, Any] = {}
        for name, change in self.tools.items():
            entry: dict[str, Any] = {}
            if change.description is not None:
                entry["description"] = change.description
            if change.parameters:
                entry["parameters"] = dict(change.parameters)
            tools[name] = entry
        return {"version": VERSION, "tools": tools}

    def apply(self, catalog: Catalog) -> Catalog:
        """``catalog`` with the overlay's descriptions (the same object when it names none of its tools).  Made
        once per catalog: the result keeps its identity, as the catalogs of a server do."""
        with self._lock:  # flows started ahead ask from threads of their own
            memo = self._applied.get(id(catalog))
            if memo is not None and memo[0] is catalog:
                return memo[1]
            if not any(name in catalog.by_name for name in self.tools):
                result = catalog
            else:
                result = Catalog([self._tool(tool) for tool in catalog.tools])
            self._applied[id(catalog)] = (catalog, result)  # the original is kept: its id is not reused
            return result

    def _tool(self, tool: dict[str, Any]) -> dict[str, Any]:
        change = self.tools.get(tool["name"])
        if change is None:
            return tool
        tool = copy.deepcopy(tool)
        if change.description is not None:
            tool["description"] = change.description
        properties = (tool.get("inputSchema") or {}).get("properties")
        for param, text in change.parameters.items():
            if isinstance(properties, dict) and isinstance(properties.get(param), dict):
                properties[param]["description"] = text
        return tool

    def problems(self, catalogs: Iterable[Catalog]) -> list[str]:
        """What the overlay names that ``catalogs`` lack: a tool none of them has, a parameter not in its schema."""
        catalogs = list(catalogs)
        names = {name for catalog in catalogs for name in catalog.names}
        out = []
        for tool, change in self.tools.items():
            if tool not in names:
                out.append(f"--mcp-overlay={self.path}: tool `{tool}` is not in the catalog{did_you_mean(tool, names)}")
                continue
            params = {p for catalog in catalogs if tool in catalog.by_name for p in catalog.properties(tool)}
            for param in change.parameters:
                if param not in params:
                    out.append(f"--mcp-overlay={self.path}: tool `{tool}` has no parameter `{param}`"
                               f"{did_you_mean(param, params)}")
        return out


def parse_overlay(data: Any, where: str) -> Overlay:
    """An overlay from its parsed YAML; :class:`OverlayError` on the first problem."""
    if not isinstance(data, dict):
        raise OverlayError(f"{where}: expected a mapping with `version: 1` and `tools`")
    unknown = sorted(set(data) - {"version", "tools"})
    if unknown:
        raise OverlayError(f"{where}: unknown key `{unknown[0]}`{did_you_mean(str(unknown[0]), ['version', 'tools'])}")
    if data.get("version") != VERSION:
        raise OverlayError(f"{where}: `version` must be 1 (got {data.get('version')!r})")
    tools = data.get("tools")
    if tools is None:
        tools = {}
    if not isinstance(tools, dict):
        raise OverlayError(f"{where}: `tools` must map tool names to {{description: ...}}")
    out: dict[str, ToolOverlay] = {}
    for name, entry in tools.items():
        here = f"{where}: tools.{name}"
        if isinstance(entry, str):  # shorthand: the description alone
            entry = {"description": entry}
        if not isinstance(entry, dict) or not entry:
            raise OverlayError(f"{here}: expected {{description: TEXT}} (and optionally parameters: {{NAME: TEXT}})")
        bad = sorted(set(entry) - {"description", "parameters"})
        if bad:
            hint = did_you_mean(str(bad[0]), ["description", "parameters"])
            raise OverlayError(f"{here}: unknown key `{bad[0]}`{hint}")
        description = entry.get("description")
        if description is not None and not isinstance(description, str):
            raise OverlayError(f"{here}.description: expected a string")
        params = entry.get("parameters") or {}
        if not isinstance(params, dict) or not all(isinstance(v, str) for v in params.values()):
            raise OverlayError(f"{here}.parameters: expected a mapping of parameter names to descriptions")
        out[str(name)] = ToolOverlay(description, {str(k): v for k, v in params.items()})
    return Overlay(where, out)


def load_overlay(path: Path, shown: str | None = None) -> Overlay:
    """Read an overlay file (:class:`OverlayError` names the file and the problem)."""
    where = shown or str(path)
    try:
        data = path.read_bytes()  # decoded by load_bounded_yaml: YAML's one error path, with the line
    except FileNotFoundError:
        raise OverlayError(f"{where}: no such file") from None
    except OSError as exc:
        raise OverlayError(f"{where}: cannot be read: {exc}") from None
    from pytest_mcpeval.benchmark.problems import BenchmarkError
    from pytest_mcpeval.benchmark.yaml_source import load_bounded_yaml

    try:
        loaded = load_bounded_yaml(where, data)  # the benchmark files' bounds: no alias bomb, no absurd nesting
    except BenchmarkError as exc:
        raise OverlayError(str(exc).splitlines()[0]) from None
    return parse_overlay(loaded, where)


def dump_overlay(descriptions: Mapping[str, str]) -> str:
    """The YAML of an overlay replacing the descriptions of ``descriptions`` (``tools: {}`` when empty)."""
    import yaml

    body = {"version": VERSION, "tools": {name: {"description": text} for name, text in descriptions.items()}}
    return str(yaml.safe_dump(body, sort_keys=False, allow_unicode=True, width=100))


def overlay_info(overlay: Overlay, catalogs: Mapping[str, CatalogInfo]) -> OverlayInfo:
    """What the report keeps of an overlay: path, digest, the tools it names, and per catalog it changed (by
    digest) the tools whose descriptions it set."""
    changed = {digest: sorted(t for t in overlay.tools if t in info["tools"]) for digest, info in catalogs.items()}
    return {"path": overlay.path, "digest": overlay.digest, "tools": sorted(overlay.tools),
            "catalogs": {digest: tools for digest, tools in sorted(changed.items()) if tools}}


def from_option(given: str, path: Path | None) -> Overlay:
    """``--mcp-overlay=PATH`` read: a bad file is one usage error naming it."""
    try:
        return load_overlay(path or Path(), given)
    except OverlayError as exc:
        raise pytest.UsageError(f"--mcp-overlay={exc}") from None
