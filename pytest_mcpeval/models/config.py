"""Which models to run and with what parameters: command line, ini file, benchmark file.

Nothing here imports litellm: this runs at configure time in every process.

ini keys (``[tool.pytest.ini_options]``)::

    mcp_models = ["claude", "openai/gpt-5"]
    mcp_model_aliases = ["claude = anthropic/claude-sonnet-4-5"]
    mcp_model_params = ['claude = {"temperature": 0, "max_tokens": 1024}']

A name in ``--mcp-models`` is an alias or a litellm model string; the report uses the name as given.

Every model is declared with :data:`DEFAULT_PARAMS` under the user's parameters.  A default is only a
wish: the litellm path sends it only to models that accept it (``temperature: 0`` is not sent to gpt-5
or the o-series, which only take 1), while a parameter the user gave is sent as given.  ``params`` keeps
the declared set (defaults included): the response-cache key hashes it, and must not need litellm.
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


def without_secrets(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` minus those that look like secrets (keys, tokens, headers): what reports may show."""
    return {k: v for k, v in params.items() if not SECRET_PARAM.search(k)}


class ModelConfigError(ValueError):
    """A model option or ini line that cannot be understood."""


@dataclass(frozen=True)
class ModelSpec:
    """One model as the plugin runs it."""

    name: str  # as the user wrote it; the label in reports and test ids
    target: str  # the litellm model string
    params: dict[str, Any] = field(default_factory=dict)  # declared: defaults, then the user's (they win)
    defaults: frozenset[str] = frozenset()  # names in ``params`` that are plugin defaults, not user-given
    # --mcp-prompt-cache: mark the prompt-cache breakpoints providers such as Anthropic need (models.cost); how
    # the request is sent, not what it asks, so not part of the cache key
    prompt_cache: bool = True

    @property
    def user_params(self) -> dict[str, Any]:
        """The parameters the user set (``mcp_model_params``): sent as given."""
        return {k: v for k, v in self.params.items() if k not in self.defaults}

    @property
    def default_params(self) -> dict[str, Any]:
        """The plugin's defaults the user did not override: sent only where the model accepts them."""
        return {k: v for k, v in self.params.items() if k in self.defaults}

    def to_builtin(self) -> dict[str, Any]:
        """For reports: secrets (keys, tokens, headers) are left out, never written."""
        return {"name": self.name, "target": self.target, "params": without_secrets(self.params)}


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
    prompt_cache: bool = True  # --mcp-prompt-cache, given to every model resolved

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
        user = {**self.params.get(target, {}), **self.params.get(name, {})}
        params = {**DEFAULT_PARAMS, **user}
        defaults = frozenset(k for k in DEFAULT_PARAMS if k not in user)
        return ModelSpec(name=name, target=target, params=params, defaults=defaults, prompt_cache=self.prompt_cache)
