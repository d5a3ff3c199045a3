"""The benchmark file format: pydantic models, the contract with users.

A benchmark file (``*.mcpeval.yaml``) names one MCP server and a list of cases.  Every model is
``extra="forbid"`` so a misspelt key is an error, never silently ignored.  The JSON Schema exported
from :class:`BenchmarkFile` lives in ``docs/benchmark.schema.json`` (``make schema`` rewrites it and
a test checks it is current).

Argument values in ``expect[].args`` are either literal JSON values or *matchers*
(``{any_of: [...]}``, ``{regex: ...}``, ...).  Their grammar is checked by
:mod:`pytest_mcpeval.benchmark.matchers` when the file is loaded, so that an error can name the exact
argument path.
"""

from __future__ import annotations

import re
import types
import typing
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from pytest_mcpeval.defaults import DEFAULT_CLAIMS_THRESHOLD, DEFAULT_MAX_TURNS  # noqa: F401 (re-exported)
from pytest_mcpeval.tool_search import DEFAULT_MAX_SEARCHES, DEFAULT_TOP_K
from pytest_mcpeval.transports import SOURCE_KEYS

FORMAT_VERSION: Literal[1] = 1
CASE_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$"
PYTHON_TARGET_PATTERN = r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerSpec(_Strict):
    """Where the tools come from.  Exactly one of ``tools_file``, ``command``, ``url``, ``python``."""

    # (the docstring is the published schema's description; the keys are pytest_mcpeval.transports.SOURCE_KEYS)

    tools_file: str | None = Field(
        default=None,
        description="JSON file with a list of MCP Tool objects (or {\"tools\": [...]}), relative to the "
        "benchmark file. No server is started.",
    )
    command: Annotated[list[str], Field(min_length=1)] | None = Field(
        default=None, description="Start this command and talk MCP over its stdin/stdout."
    )
    env: dict[str, str] | None = Field(default=None, description="Extra environment for `command`.")
    cwd: str | None = Field(
        default=None, description="Working directory for `command`, relative to the benchmark file."
    )
    url: str | None = Field(default=None, description="Streamable HTTP endpoint, e.g. http://127.0.0.1:8000/mcp")
    headers: dict[str, str] | None = Field(
        default=None, description="HTTP headers for `url`; `${VAR}` is replaced from the environment."
    )
    python: str | None = Field(
        default=None,
        pattern=PYTHON_TARGET_PATTERN,
        description="In-process server object as `module:attribute` (an MCPServer or low-level Server).",
    )

    @model_validator(mode="after")
    def _exactly_one_source(self) -> ServerSpec:
        given = [k for k in SOURCE_KEYS if getattr(self, k) is not None]
        if len(given) != 1:
            found = ", ".join(given) if given else "none"
            raise ValueError(f"give exactly one of {', '.join(SOURCE_KEYS)} (found: {found})")
        if (self.env is not None or self.cwd is not None) and self.command is None:
            raise ValueError("`env` and `cwd` only apply to `command`")
        if self.headers is not None and self.url is None:
            raise ValueError("`headers` only applies to `url`")
        return self

    @property
    def kind(self) -> str:
        """The one key of :data:`~pytest_mcpeval.transports.SOURCE_KEYS` that is given."""
        return next(k for k in SOURCE_KEYS if getattr(self, k) is not None)

    def describe(self) -> str:
        """One line naming the server, for messages."""
        if self.command is not None:
            return "command: " + " ".join(self.command)
        value = getattr(self, self.kind)
        return f"{self.kind}: {value}"


class Message(_Strict):
    """One chat message of a multi-message input."""

    role: Literal["system", "user", "assistant"]
    content: str


class ExpectedCall(_Strict):
    """A tool call the model should make."""

    tool: str = Field(min_length=1, description="Tool name as the server publishes it.")
    args: dict[str, Any] | None = Field(
        default=None,
        description="Expected arguments: literal JSON values or matchers ({any_of}, {regex}, {approx, tol}, "
        "{text}, {equals}, {ignore: true}, with optional: true); in a flow also references to an earlier result, "
        "{from_result: {tool, path, offset}}. Omit `args` to check only the tool name; "
        "`args: {}` expects a call without arguments.",
    )
    extra_args: Literal["forbid", "allow"] = Field(
        default="forbid",
        description="`forbid` (default, as BFCL): an argument the expectation does not name is a value "
        "mismatch. `allow`: extra arguments are accepted (they still count as hallucinated if the "
        "tool's schema does not define them).",
    )


OrderMode = Literal["strict", "in_order", "unordered", "subset", "superset"]
DEFAULT_ORDER: OrderMode = "in_order"
FLOW_KEYS = ("order", "mocks", "claims", "forbid", "max_turns")  # and `execute: live`


class MockResult(_Strict):
    """What a mocked tool answers.  Exactly one of ``text``, ``structured``, ``error``."""

    text: str | None = Field(default=None, description="A text result.")
    structured: Any = Field(
        default=None, description="Structured content: sent to the model as JSON text and kept as structured content."
    )
    error: str | None = Field(default=None, description="An error result (`is_error: true`) with this text.")

    @model_validator(mode="after")
    def _exactly_one(self) -> MockResult:
        given = [k for k in ("text", "structured", "error") if k in self.model_fields_set]
        if len(given) != 1:
            raise ValueError(f"give exactly one of text, structured, error (found: {', '.join(given) or 'none'})")
        return self


class Mock(_Strict):
    """One answer of a mocked tool: the first whose ``when`` matches the call's arguments is used."""

    when: dict[str, Any] | None = Field(
        default=None,
        description="Matchers, as in `args`, on the named arguments only (other arguments are not compared). "
        "Without `when`: the tool's default answer.",
    )
    result: MockResult


class ClaimCheck(_Strict):
    """A deterministic check of the final answer (no judge).  Exactly one of ``contains``, ``regex``, ``any_of``."""

    contains: str | None = Field(default=None, min_length=1, description="The answer contains this text.")
    regex: str | None = Field(default=None, min_length=1, description="A Python regular expression found (search) in "
                              "the answer.")
    any_of: Annotated[list[ClaimCheck], Field(min_length=1)] | None = Field(
        default=None, description="Passes when any of these checks passes."
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> ClaimCheck:
        given = [k for k in ("contains", "regex", "any_of") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of contains, regex, any_of (found: {', '.join(given) or 'none'})")
        if self.regex is not None:
            try:
                re.compile(self.regex)
            except re.error as exc:
                raise ValueError(f"invalid regular expression: {exc}") from None
        return self


class Claim(_Strict):
    """An atomic fact the final answer must state: judged by the judge model, or by ``check``."""

    claim: str = Field(min_length=1, description="The claim, one fact.")
    check: ClaimCheck | None = Field(default=None, description="Decide it without a judge.")

    @field_validator("claim")
    @classmethod
    def _not_blank(cls, text: str) -> str:
        if not text.strip():
            raise ValueError("a claim needs a text")
        return text


class ToolSearch(_Strict):
    """Tool search (docs/tool-search.md): the model is shown a search tool, not the catalog."""

    method: Literal["bm25", "regex", "embedding", "native", "native-regex"] | None = Field(
        default=None,
        description="bm25 (keywords), regex (a Python pattern) or embedding (local/minilm ranks the tools), on the "
        "client side; native (BM25) or native-regex: Anthropic's own server-side search; "
        "default: the method of --mcp-tool-search, else no search.",
    )
    top_k: int | None = Field(default=None, ge=1, description=f"Tools a search answers with (default {DEFAULT_TOP_K}; "
                              "not with native search, where the provider decides).")
    max_searches: int | None = Field(
        default=None, ge=1, description=f"Searches a case may make (default {DEFAULT_MAX_SEARCHES}; not with native "
        "search, where the provider decides).")
    always_loaded: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, description="Tools shown with the search tool from the start (found without a search).")


def _off(value: Any) -> Any:
    """``tool_search: off`` reads as ``false`` in YAML 1.1 (the loader's): both mean off."""
    return "off" if value is False else value


def _claim(value: Any) -> Any:
    return {"claim": value} if isinstance(value, str) else value


class Case(_Strict):
    """One benchmark case: an input and the calls it should produce."""

    id: str = Field(pattern=CASE_ID_PATTERN, description="Unique within the file; becomes the test id.")
    input: str | Annotated[list[Message], Field(min_length=1)] = Field(
        description="The user request, or a list of chat messages ending with the user's turn."
    )
    expect: list[ExpectedCall] = Field(
        description="Expected tool calls; an empty list means the model must call no tool."
    )
    tags: list[str] = Field(default_factory=list, description="Become pytest markers (select with -m).")
    skip: bool | str = Field(default=False, description="true, or a reason string, to skip the case.")
    draft: bool = Field(
        default=False,
        description="A proposed case (python -m pytest_mcpeval draft): run and reported apart, left out of the "
        "metrics, the gate, the baseline and the comparison until a person removes the mark (docs/drafting.md).",
    )
    # -- tool exposure (docs/format.md#tool-exposure): which of the server's tools the model is shown
    tools: Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)] | None = Field(
        default=None,
        description="Show the model only these tools of the server (they must include every tool the case "
        "expects, mocks or forbids); default: all of them.",
    )
    distractors: int | None = Field(
        default=None, ge=0,
        description="Also show this many other tools of the server, drawn (seeded per case) from those most "
        "similar to the case's tools; the report records which.",
    )
    tool_search: Annotated[ToolSearch | Literal["off"] | None, BeforeValidator(_off)] = Field(
        default=None,
        description="Run the case under tool search (keys as the file's `tool_search`, over it), or `off` to run it "
        "with the whole catalog even under --mcp-tool-search (docs/tool-search.md).",
    )
    # -- multi-step flows (docs/flows.md): any of these keys, or `execute: live`, makes the case a flow
    order: OrderMode | None = Field(
        default=None,
        description="How the model's calls compare with `expect` (flows; default in_order): strict = the same "
        "calls in the same order, nothing else; in_order = in this order, other calls allowed between; "
        "unordered = the same calls in any order; superset = every expected call, extra calls allowed; "
        "subset = only expected calls, some may be missing.",
    )
    forbid: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, description="Tools the model must not call: a call fails the case in every order mode."
    )
    mocks: dict[str, Annotated[list[Mock], Field(min_length=1)]] = Field(
        default_factory=dict, description="Answers of tool calls by tool name; the first mock whose `when` matches."
    )
    execute: Literal["mock", "live"] = Field(
        default="mock",
        description="mock (default): calls no mock answers get an error result; live: they are made on the server.",
    )
    claims: list[Annotated[Claim, BeforeValidator(_claim)]] = Field(
        default_factory=list,
        description="Facts the final answer must state: a string (judged by --mcp-judge-model) or "
        "{claim, check: {contains | regex | any_of}} (decided without a judge).",
    )
    max_turns: int | None = Field(default=None, ge=1, description="Model calls a flow may make (default: the file's, "
                                  "else 8).")
    claims_threshold: float | None = Field(
        default=None, ge=0, le=1, description="Coverage a flow with claims needs to pass (default: the file's, else "
        "--mcp-claims-threshold, else 0.75).")

    @property
    def is_flow(self) -> bool:
        return self.execute == "live" or any(k in self.model_fields_set for k in FLOW_KEYS)

    @property
    def order_mode(self) -> OrderMode:
        return self.order or DEFAULT_ORDER

    @field_validator("tags")
    @classmethod
    def _tags_are_identifiers(cls, tags: list[str]) -> list[str]:
        for tag in tags:
            if not tag.isidentifier():
                raise ValueError(f"tag {tag!r} must be a Python identifier (it becomes a pytest marker)")
        return tags


class BenchmarkFile(_Strict):
    """A ``*.mcpeval.yaml`` file."""

    version: Literal[1] = Field(default=FORMAT_VERSION, description="Format version; currently 1.")
    server: ServerSpec | None = Field(
        default=None,
        description="The MCP server. May be omitted only when an `mcp_server` fixture provides one.",
    )
    models: list[str] = Field(
        default_factory=list,
        description="Models to run when neither --mcp-models nor the ini key mcp_models names any.",
    )
    tags: list[str] = Field(default_factory=list, description="Markers added to every case of the file.")
    system: str | None = Field(default=None, description="System prompt sent before every case's input.")
    max_turns: int | None = Field(default=None, ge=1, description="Default `max_turns` of the file's flows (else 8).")
    claims_threshold: float | None = Field(
        default=None, ge=0, le=1, description="Default `claims_threshold` of the file's flows.")
    tool_search: ToolSearch | None = Field(
        default=None,
        description="Tool search for every case of the file (over --mcp-tool-search; a case's key is over it): "
        "the model is shown a search tool and the `always_loaded` tools, not the catalog (docs/tool-search.md).",
    )
    cases: Annotated[list[Case], Field(min_length=1)]

    @field_validator("tags")
    @classmethod
    def _file_tags_are_identifiers(cls, tags: list[str]) -> list[str]:
        return Case._tags_are_identifiers(tags)

    @model_validator(mode="after")
    def _unique_ids(self) -> BenchmarkFile:
        seen: set[str] = set()
        for case in self.cases:
            if case.id in seen:
                raise ValueError(f"duplicate case id {case.id!r}")
            seen.add(case.id)
        return self


def field_names() -> set[str]:
    """Every key the format knows, for did-you-mean suggestions."""
    names: set[str] = set()
    for model in (BenchmarkFile, ServerSpec, Case, ExpectedCall, Message, Mock, MockResult, Claim, ClaimCheck,
                  ToolSearch):
        names.update(model.model_fields)
    return names


def keys_at(loc: tuple[str | int, ...]) -> tuple[str, ...]:
    """The keys valid in the mapping at ``loc``, in declaration order, for did-you-mean suggestions.

    ``()`` -> the file's top-level keys, ``("server",)`` -> a server's, ``("cases", 0)`` -> a case's,
    ``("cases", 0, "expect", 1)`` -> an expected call's, ``("cases", 0, "input", 0)`` -> a message's.
    Empty when ``loc`` is not a mapping of the format (e.g. inside ``args``, which takes any key).
    """
    found: list[Any] = [BenchmarkFile]
    for part in loc:
        found = [
            inner
            for annotation in found
            for option in _options(annotation)
            for inner in _step(option, part)
        ]
    models = {option for annotation in found for option in _options(annotation) if _is_model(option)}
    return tuple(models.pop().model_fields) if len(models) == 1 else ()


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _options(annotation: Any) -> list[Any]:
    """``A | Annotated[B, ...] | None`` -> ``[A, B, NoneType]``."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _options(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is types.UnionType:
        return [inner for arg in typing.get_args(annotation) for inner in _options(arg)]
    return [annotation]


def _step(annotation: Any, part: str | int) -> list[Any]:
    if isinstance(part, str) and _is_model(annotation) and part in annotation.model_fields:
        return [annotation.model_fields[part].annotation]
    if isinstance(part, int) and typing.get_origin(annotation) is list:
        return [typing.get_args(annotation)[0]]
    if isinstance(part, str) and typing.get_origin(annotation) is dict:  # mocks: {tool name: [...]}
        return [typing.get_args(annotation)[1]]
    return []


def json_schema() -> dict[str, Any]:
    schema = BenchmarkFile.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "pytest-mcpeval benchmark file (version 1)"
    return schema
