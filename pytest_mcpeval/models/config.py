"""Which models to run and with what parameters: command line, ini file, benchmark file.

Nothing here imports litellm: this runs at configure time in every process.

ini keys (``[tool.pytest.ini_options]``)::

    mcp_models = ["claude", "openai/gpt-5"]
    mcp_model_aliases = ["claude = anthropic/claude-sonnet-4-5"]
    mcp_model_params = ['claude = {"temperature": 0, "max_tokens": 1024}']

A name in ``--mcp-models`` is an alias or a litellm model string; the report uses the name as given.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

DEFAULT_PARAMS: dict[str, Any] = {"temperature": 0}
SECRET_PARAM = re.compile(
    r"(^|_)(api_?key|key|token|secret|password|auth\w*|headers?|credentials?)($|_)", re.IGNORECASE
)


class ModelConfigError(ValueError):
    """A model option or ini line that cannot be understood."""


@dataclass(frozen=True)
class ModelSpec:
    """One model as the plugin runs it."""

    name: str  # as the user wrote it; the label in reports and test ids
    target: str  # the litellm model string
    params: dict[str, Any] = field(default_factory=dict)

    def to_builtin(self) -> dict[str, Any]:
        """For reports: secrets (keys, tokens, headers) are left out, never written."""
        params = {k: v for k, v in self.params.items() if not SECRET_PARAM.search(k)}
        return {"name": self.name, "target": self.target, "params": params}


def split_names(values: list[str] | str | None) -> list[str]:
    """``["a,b", "c"]`` -> ``["a", "b", "c"]``; order kept, duplicates dropped."""
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    out: list[str] = []
    for value in values:
        if value.strip().startswith("#"):
            continue
        for name in value.replace("\n", ",").split(","):
            name = name.strip()
            if name and name not in out:
                out.append(name)
    return out


def _pairs(lines: list[str], key: str) -> list[tuple[str, str]]:
    out = []
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise ModelConfigError(f"ini key {key}: expected `NAME = VALUE`, got {line!r}")
        out.append((name.strip(), value.strip()))
    return out


@dataclass
class ModelRegistry:
    aliases: dict[str, str] = field(default_factory=dict)
    params: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_ini(cls, alias_lines: list[str], param_lines: list[str]) -> ModelRegistry:
        registry = cls()
        for name, target in _pairs(alias_lines, "mcp_model_aliases"):
            registry.aliases[name] = target
        for name, raw in _pairs(param_lines, "mcp_model_params"):
            try:
                value = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise ModelConfigError(
                    f"ini key mcp_model_params: the value for {name!r} is not JSON ({exc.msg}): {raw!r}"
                ) from None
            if not isinstance(value, dict):
                raise ModelConfigError(f"ini key mcp_model_params: the value for {name!r} must be a JSON object")
            registry.params[name] = value
        return registry

    def resolve(self, name: str) -> ModelSpec:
        target = self.aliases.get(name, name)
        params = dict(DEFAULT_PARAMS)
        params.update(self.params.get(target, {}))
        params.update(self.params.get(name, {}))
        return ModelSpec(name=name, target=target, params=params)
