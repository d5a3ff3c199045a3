"""Which models to run and with what parameters: command line, ini file, benchmark file.

Nothing here imports litellm: this runs at configure time in every process.

ini keys (``[tool.pytest.ini_options]``)::

    mcp_models = ["claude", "openai/gpt-5"]
    mcp_model_aliases = ["claude = anthropic/claude-sonnet-4-5"]
    mcp_model_params = ['claude = {"temperature": 0, "max_tokens": 1024}']

A name in ``--mcp-models`` is an alias or a litellm model string; the report uses the name as given.

Every model is declared with :data:`DEFAULT_PARAMS` under the user's parameters.  A default is only a
wish: the litellm path sends it only to models that accept it (``temperature: 0`` is not sent to gpt-5
or the o-series, which only take 1), nor where :data:`DEFAULT_WITHHELD` says the vendor asks for another
value (:func:`withheld`: thinking is asked for, Gemini 3), while a parameter the user gave is sent as given.
``params`` keeps the declared set (defaults included): the response-cache key hashes it, and must not need litellm.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from pytest_mcpeval.models.llama import served_target
from pytest_mcpeval.redact import mask_params

DEFAULT_PARAMS: dict[str, Any] = {"temperature": 0}

# The user's parameters that ask the model to think before it answers (litellm's names; it maps them onto
# each provider: Anthropic's and Bedrock's `thinking`, Gemini's thinkingConfig, OpenAI's reasoning, Ollama's
# `think`), and the values of them that do not.
THINKING_PARAMS: dict[str, tuple[Any, ...]] = {
    "thinking": (None, False, {"type": "disabled"}),
    "reasoning_effort": (None, "none", "disable"),
    "reasoning": (None, False, {"effort": "none"}),
    "think": (None, False),
}


@dataclass(frozen=True)
class Withheld:
    """One rule of :data:`DEFAULT_WITHHELD`: a default not sent when ``model`` matches the litellm model
    string (``None``: any) and, if ``thinking``, the user's parameters ask for thinking."""

    default: str
    reason: str  # shown in docs and error lines
    source: str  # the vendor's words, where
    model: re.Pattern[str] | None = None
    thinking: bool = False


# Where the vendor asks for another value than the plugin's default: the default is not sent (the provider's
# own applies).  The user's own value is always sent as given.
DEFAULT_WITHHELD: tuple[Withheld, ...] = (
    Withheld("temperature", "thinking is enabled",
             "Anthropic, Extended thinking: thinking is not compatible with temperature changes (400 "
             "\"`temperature` may only be set to 1 when thinking is enabled\"); "
             "docs.claude.com/en/docs/build-with-claude/extended-thinking; OpenAI's reasoning models take only 1; "
             "Qwen3's model card: with thinking, do not use greedy decoding (endless repetitions)",
             thinking=True),
    Withheld("temperature", "Gemini 3 is tuned for its default temperature 1.0",
             "Google, Gemini 3 developer guide: \"we strongly recommend keeping the temperature parameter at its "
             "default value of 1.0 ... setting it to less than 1.0 may lead to unexpected behavior, looping, or "
             "degraded performance\"; ai.google.dev/gemini-api/docs/gemini-3",
             model=re.compile(r"(^|/)gemini-3")),
)


def asks_for_thinking(params: dict[str, Any]) -> bool:
    """Whether ``params`` (the user's) enable thinking / reasoning (:data:`THINKING_PARAMS`)."""
    return any(name in params and params[name] not in off for name, off in THINKING_PARAMS.items())


def withheld(target: str, name: str, user: dict[str, Any]) -> Withheld | None:
    """The rule that keeps the default ``name`` from being sent to ``target`` with ``user``'s parameters."""
    for rule in DEFAULT_WITHHELD:
        if rule.default != name or (rule.model is not None and not rule.model.search(target)):
            continue
        if not rule.thinking or asks_for_thinking(user):
            return rule
    return None
SECRET_PARAM = re.compile(
    r"(^|_)(api_?key|key|token|secret|password|auth\w*|headers?|credentials?)($|_)", re.IGNORECASE
)


def without_secrets(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` minus those that look like secrets (keys, tokens, headers, ``x-api-key`` as ``x_api_key``), and
    with every value under a secret-looking name masked at any depth (``extra_body.session_auth``): what reports
    and cache entries may show.  (:data:`SECRET_PARAM` itself also decides what the cache key leaves out: it
    stays as it is, or every recorded key would change.)"""
    return mask_params({k: v for k, v in params.items() if not SECRET_PARAM.search(re.sub(r"[^A-Za-z0-9]", "_", k))})


SEARCH_SUFFIX = "+search"  # MODEL+search: the model under tool search (docs/tool-search.md)


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
    # `MODEL+search` (docs/tool-search.md): the same model run under tool search, a column of its own beside MODEL
    search: bool = False

    @property
    def user_params(self) -> dict[str, Any]:
        """The parameters the user set (``mcp_model_params``): sent as given."""
        return {k: v for k, v in self.params.items() if k not in self.defaults}

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
        base = name.removesuffix(SEARCH_SUFFIX)
        if base != name and base and name not in self.aliases:  # MODEL+search: MODEL, under tool search
            spec = self.resolve(base)
            params = {**spec.params, **self.params.get(name, {})}
            defaults = frozenset(k for k in spec.defaults if k not in self.params.get(name, {}))
            return ModelSpec(name=name, target=spec.target, params=params, defaults=defaults,
                             prompt_cache=spec.prompt_cache, search=True)
        target = self.aliases.get(name, name)
        target = served_target(target)  # local/qwen2.5-coder-*: llama-server/... (models/llama)
        user = {**self.params.get(target, {}), **self.params.get(name, {})}
        params = {**DEFAULT_PARAMS, **user}
        defaults = frozenset(k for k in DEFAULT_PARAMS if k not in user)
        return ModelSpec(name=name, target=target, params=params, defaults=defaults, prompt_cache=self.prompt_cache)
