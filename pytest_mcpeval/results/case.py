"""One case's result: what was expected, what was called, how it scored (``CaseResult``)."""

from __future__ import annotations

from typing import (
    Any,
    Literal,
    NotRequired,  # pydantic needs these on Python < 3.12
)

from typing_extensions import TypedDict

NONE = "(none)"  # the label of "no tool": expected_label / called_label of a case that expects or calls none
# diagnoses and provider finish reasons the renderings say more of (scoring.stops decides them)
TRUNCATED = "truncated"
MALFORMED_FUNCTION_CALL = "MALFORMED_FUNCTION_CALL"
TRUNCATED_HINT = "raise max_tokens in mcp_model_params"

JSON = Any  # a JSON value (expected argument values, tool arguments): any of dict, list, str, number, bool, null


# ----------------------------------------------------------------------------------------------- cases


class ExpectedView(TypedDict):
    """An expected call as the report shows it: matchers rendered as objects."""

    tool: str
    args: NotRequired[dict[str, JSON]]


class CalledTool(TypedDict):
    """A call the model made. ``args`` is ``None`` (with ``raw`` and ``malformed``) when unusable; a
    retriever's call has ``tool`` alone."""

    tool: str
    args: NotRequired[dict[str, JSON] | None]
    raw: NotRequired[str]
    malformed: NotRequired[str]


class Mismatch(TypedDict):
    name: str
    expected: JSON
    got: JSON


class ArgumentCheck(TypedDict):
    """The argument check of one call against its expectation."""

    malformed: str | None
    hallucinated: list[str]
    missing_required: list[str]
    missing_expected: list[str]
    unexpected: list[str]
    mismatched: list[Mismatch]
    hallucination: bool
    all_required: bool
    all_expected: bool | None
    exact: bool | None


class CaseUsage(TypedDict, total=False):
    prompt_tokens: int  # every input token, the cached ones included
    completion_tokens: int
    cache_read_tokens: int  # of prompt_tokens, read from the provider's prompt cache (when it reported any)
    cache_write_tokens: int  # of prompt_tokens, written to it (Anthropic bills writes; when reported)
    cost_usd: float | None  # litellm's price, cache discounts included; None when the model has no price
    cached: bool
    attempts: int


class RankInfo(TypedDict):
    rank: int | None
    score: float | None
    outranked_by: list[str]


class CaseRetrieval(TypedDict):
    tools: int
    top: list[tuple[str, float]]
    expected: dict[str, RankInfo]


class CaseSearch(TypedDict):
    """A case run under tool search (docs/tool-search.md): the model's searches and what they surfaced."""

    method: str
    top_k: NotRequired[int]  # the tools a search answers with (not under native search: the provider decides)
    queries: list[str]  # each search's query (or pattern), in order
    surfaced: list[str]  # every tool a search answered with, best rank first (then first surfaced)
    found: dict[str, int | None]  # per expected tool not always loaded: its best rank in a search (1 = first), or None
    always_loaded: NotRequired[list[str]]
    errors: NotRequired[list[str]]  # searches answered with an error (a bad regex, the search bound)


class ToolAnswerView(TypedDict):
    """How a tool call of a flow was answered: by a ``mock`` of the file, the ``live`` server, or an error
    result: ``unmatched`` when no mock matches and the case does not execute live (a gap of the benchmark
    file), ``invalid`` when the call cannot be made (malformed arguments, a tool the server lacks: the
    model's mistake, which it may recover from)."""

    source: Literal["mock", "live", "unmatched", "invalid", "search"]  # search: the plugin's tool search answered
    is_error: bool
    text: str | None  # what the model was sent (structured content as JSON text)
    structured: NotRequired[JSON]


class TrajectoryCall(TypedDict):
    """A tool call of a flow turn (``tool``/``args``/``raw``/``malformed`` as in :class:`CalledTool`)."""

    id: str
    tool: str
    args: dict[str, JSON] | None
    raw: NotRequired[str]
    malformed: NotRequired[str]
    answer: ToolAnswerView


class TrajectoryTurn(TypedDict):
    """One model call of a flow: the calls it made (all answered before the next turn) and its text."""

    calls: list[TrajectoryCall]
    content: str | None
    finish_reason: NotRequired[str]  # as in CaseResult, for this turn's reply
    provider_finish_reason: NotRequired[str]


class ExpectationMatch(TypedDict):
    """Which call (index into the flow's ``called``) met an expected call, or why none did."""

    call: int | None
    problems: list[str]


class ClaimView(TypedDict):
    """One claim on the final answer: 1.0 fulfilled, 0.5 partially, 0.0 not."""

    claim: str
    method: Literal["check", "judge"]
    score: float
    verdict: Literal["fulfilled", "partially_fulfilled", "not_fulfilled"]
    justification: str


class Score(TypedDict):
    """What scoring adds to a case (``None`` everywhere for an error)."""

    expected: list[ExpectedView]
    expected_label: str | None
    called: list[CalledTool]
    called_label: str | None
    correct: bool | None
    passed: bool | None
    arguments: ArgumentCheck | None
    diagnosis: str | None


class CaseResult(Score):
    """One case x model x repeat.  Crosses xdist as it is; users' hooks may add keys."""

    file: str
    line: int
    id: str
    model: str
    repeat: int
    tags: list[str]
    error: str | None
    draft: NotRequired[bool]  # `draft: true` in the file: reported apart, in no metric or gate (docs/drafting.md)
    catalog: NotRequired[str]
    tools_shown: NotRequired[int]  # tools the model was shown (the catalog's, or its `tools`/`distractors`)
    distractors: NotRequired[list[str]]  # with `distractors: N`: the tools drawn (docs/format.md#tool-exposure)
    distractor_seed: NotRequired[int]
    content: NotRequired[str | None]
    content_truncated: NotRequired[int]
    hallucinated_tools: NotRequired[list[str]]
    # how the (last) reply ended: litellm's normalised reason (stop, length, tool_calls, content_filter) and the
    # provider's own where litellm keeps it (e.g. Gemini's MALFORMED_FUNCTION_CALL); docs/metrics.md#stop-reasons
    finish_reason: NotRequired[str]
    provider_finish_reason: NotRequired[str]
    blocked: NotRequired[str]  # an error: the provider's safety filter withheld the reply (the reason)
    text_calls: NotRequired[list[CalledTool]]  # calls of shown tools the reply wrote in its text, not as calls
    calls_parsed_from_text: NotRequired[str]  # the serving layer parsed `called` from the text (models/llama): shapes
    usage: NotRequired[CaseUsage]
    latency_s: NotRequired[float]
    load_s: NotRequired[float]  # one-off setup this case paid, not in latency_s (the local model's load)
    retrieval: NotRequired[CaseRetrieval]
    search: NotRequired[CaseSearch]  # under tool search (docs/tool-search.md)
    search_recall: NotRequired[float | None]  # of `search.found`, the share found (None: no tool to find)
    # flows only (a case with order, mocks, execute: live, claims, forbid or max_turns; docs/flows.md)
    flow: NotRequired[bool]
    order: NotRequired[Literal["strict", "in_order", "unordered", "subset", "superset"]]
    trajectory: NotRequired[list[TrajectoryTurn]]
    turns: NotRequired[int]  # model calls made
    final_answer: NotRequired[str | None]
    order_ok: NotRequired[bool]
    matches: NotRequired[list[ExpectationMatch]]  # one per expected call
    forbidden_called: NotRequired[list[str]]
    unmatched: NotRequired[list[CalledTool]]  # calls no mock answered: gaps of the benchmark file
    claims: NotRequired[list[ClaimView]]
    coverage: NotRequired[float | None]  # mean claim score; None without claims
    judge_usage: NotRequired[dict[str, CaseUsage]]  # per judge model
