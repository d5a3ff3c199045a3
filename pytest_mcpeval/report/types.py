"""The typed data model of everything the plugin records: a case result, a model's metrics, the report,
the baseline, lint findings.  docs/report.md explains each field; ``docs/report.schema.json`` is generated
from :class:`Report` (``make schema``) and every report the test suite writes is validated against it.

Why TypedDicts rather than pydantic models: the data *is* plain builtin dicts at every step — it crosses
the xdist channel on test reports, is handed to users' ``pytest_mcpeval_*`` hooks and is written with
``json.dump`` — so a TypedDict types it at no cost and no conversion, while mypy checks every key that
is read or written.  pydantic still does what it is good at: :func:`report_schema` builds the JSON Schema
from these same classes, and :func:`validate_report` checks a report against them.

Report format version 1: fields are only ever added.
"""

from __future__ import annotations

from typing import (
    Any,
    Literal,
    NotRequired,  # pydantic needs these on Python < 3.12
)

from typing_extensions import TypedDict

REPORT_VERSION: Literal[1] = 1

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


class ToolAnswerView(TypedDict):
    """How a tool call of a flow was answered: by a ``mock`` of the file, the ``live`` server, or an error
    result: ``unmatched`` when no mock matches and the case does not execute live (a gap of the benchmark
    file), ``invalid`` when the call cannot be made (malformed arguments, a tool the server lacks: the
    model's mistake, which it may recover from)."""

    source: Literal["mock", "live", "unmatched", "invalid"]
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
    usage: NotRequired[CaseUsage]
    latency_s: NotRequired[float]
    load_s: NotRequired[float]  # one-off setup this case paid, not in latency_s (the local model's load)
    retrieval: NotRequired[CaseRetrieval]
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


# ---------------------------------------------------------------------------------------------- models


class ArgumentRates(TypedDict):
    evaluated: int
    hallucination_rate: float | None
    all_expected_rate: float | None
    all_required_rate: float | None
    exact_match_rate: float | None
    applicable: NotRequired[bool]


class ToolMetrics(TypedDict):
    precision: float | None
    recall: float | None
    f1: float | None
    support: int
    predicted: int
    arguments: ArgumentRates


class Confusion(TypedDict):
    labels: list[str]
    matrix: list[list[int]]


class ConfusedPair(TypedDict):
    expected: str
    called: str
    count: int


class RetrievalTool(TypedDict):
    cases: int
    mean_rank: float | None
    recall_at_5: float
    outside_top_5: list[str]
    outranked_by: dict[str, int]


class RetrievalMetrics(TypedDict):
    cases: int
    recall_at: dict[str, float | None]
    mrr: float | None
    k: int
    tools: dict[str, RetrievalTool]


class RepeatMetrics(TypedDict):
    runs: int
    pass_at_k: dict[str, float | None]
    pass_hat_k: dict[str, float | None]
    flaky: list[str]
    successes: dict[str, tuple[int, int]]


class Latency(TypedDict):
    mean: float | None
    p50: float | None
    p95: float | None
    max: float | None


class UsageMetrics(TypedDict):
    calls: int
    cached: int
    prompt_tokens: int  # every input token of the calls made, the cached ones included
    completion_tokens: int
    cache_read_tokens: int  # of prompt_tokens, read from the providers' prompt caches
    cache_write_tokens: int  # of prompt_tokens, written to them
    cost_usd: float | None  # None ("cost unknown") when a paid call had no price: see unpriced_calls
    priced_cost_usd: float | None  # the sum over the priced calls: a lower bound when unpriced_calls > 0
    priced_calls: int
    unpriced_calls: int  # calls made (not replayed) whose model litellm has no price for
    retries: int
    latency_s: Latency
    # the local model: seconds spent loading it and embedding catalogs (once per process and catalog), summed
    # over the cases that paid them (`loads`); kept out of latency_s.  Absent when no case loaded anything
    load_s: NotRequired[float]
    loads: NotRequired[int]


class SelectionMetrics(TypedDict):
    """Single-call tool selection as classification (scoring.metrics)."""

    cases: int
    scored: int
    errors: int
    blocked: NotRequired[int]  # of the errors, replies the provider's safety filter withheld (docs/metrics.md)
    accuracy: float | None
    pass_rate: float | None
    macro_f1: float | None
    weighted_f1: float | None
    tools: dict[str, ToolMetrics]
    confusion: Confusion
    confused_pairs: list[ConfusedPair]
    arguments: ArgumentRates
    diagnoses: dict[str, int]
    hallucinated_tools: dict[str, int]


class FlowToolMetrics(TypedDict):
    precision: float | None
    recall: float | None
    f1: float | None
    support: int  # flow cases that expect the tool


class FlowMetrics(TypedDict):
    """Multi-step flows: pass and order rates, and multi-label per-tool metrics over the sets of tools
    expected and called per flow case (a tool counts once per case however often it is called)."""

    cases: int
    pass_rate: float | None
    order_match_rate: float | None
    exact_set_rate: float | None
    tools: dict[str, FlowToolMetrics]
    micro_f1: float | None
    macro_f1: float | None


class ClaimsMetrics(TypedDict):
    """Claim-bearing cases only: mean coverage and the share that passed (calls and coverage)."""

    cases: int
    mean_coverage: float | None
    pass_rate: float | None


class JudgeUsage(TypedDict):
    """What one judge model cost judging this model's claims (apart from the model's own usage)."""

    cases: int  # cases it judged
    cached: int  # of them, judged from the cache only
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None  # None when a paid call has no price in litellm's cost map
    attempts: int


class ExposureRow(TypedDict):
    """Cases that showed the model ``tools_shown`` tools (docs/metrics.md#tools-shown)."""

    tools_shown: int
    cases: int  # scored single-call cases
    accuracy: float | None
    flows: int  # scored flows
    flow_pass_rate: float | None


class ModelMetrics(SelectionMetrics):
    by_tools_shown: list[ExposureRow]
    flows: FlowMetrics | None
    claims: ClaimsMetrics | None
    judges: dict[str, JudgeUsage]
    untested_tools: list[str]
    retrieval: RetrievalMetrics | None
    repeats: RepeatMetrics
    usage: UsageMetrics


# ------------------------------------------------------------------------------------ catalogs and run


class ToolInfo(TypedDict):
    hash: str
    description: str
    tokens: int


class CatalogInfo(TypedDict):
    server: str
    tools: dict[str, ToolInfo]
    tokens: int
    startup_s: NotRequired[float]  # the server's start-up: start, MCP handshake and tools/list (not for a tools_file)


class ModelRun(TypedDict):
    name: str
    target: str
    params: dict[str, JSON]
    params_sent: NotRequired[dict[str, JSON]]


class RunInfo(TypedDict, total=False):
    models: dict[str, ModelRun]
    interrupted: bool  # the run ended before every selected case ran (Ctrl-C, -x, --maxfail): the gate failed
    stopped: str  # why, when interrupted
    collect_errors: list[str]  # benchmark files that could not be collected (their cases are not in the report)


class Gate(TypedDict):
    passed: bool
    failures: list[str]
    usage_errors: NotRequired[list[str]]
    thresholds: list[str]


# ------------------------------------------------------------------------------------------------ lint


class LintProblemView(TypedDict):
    line: int | None
    case: str
    field: str
    kind: str
    message: str


class LintResult(TypedDict):
    """What one file's ``lint`` item found (crosses xdist on the test report)."""

    file: str
    catalog: str
    problems: list[LintProblemView]
    confusable: list[tuple[str, str, float]]


class ConfusablePair(TypedDict):
    tools: tuple[str, str]
    similarity: float
    confused: int


class LintSection(TypedDict):
    catalog: str
    problems: list[LintProblemView]
    confusable: list[ConfusablePair]


# ------------------------------------------------------------------------------------------- snapshots

SnapshotOutcome = Literal["matched", "recorded", "updated", "missing", "changed", "error"]


class SnapshotResult(TypedDict):
    """How one file's ``tool-catalog`` item (--mcp-snapshots) came out (crosses xdist on the test report)."""

    file: str
    server: str
    catalog: str | None  # the digest of the catalog compared; None when the server gave none (an error)
    snapshot: str  # where syrupy keeps it, relative to the rootdir; "" when the server gave no catalog
    outcome: SnapshotOutcome
    message: str  # what the failed item said (its first line); "" when it passed
    diff: list[str]  # `changed`: the plain-text diff, snapshot (-) against the server's catalog (+)


# ------------------------------------------------------------------------------------------ comparison


class MetricChangeView(TypedDict):
    model: str
    metric: str
    before: float | None
    after: float | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float
    n: int
    significant: bool
    drop: bool
    improvement: bool
    level: float
    discordant: int
    p_adjusted: float | None  # with --mcp-drop-correction=holm: the Holm-adjusted p-value the verdict reads


class Flipped(TypedDict):
    """A paired case whose outcome changed: ``correct`` of a single call, ``passed`` of a flow."""

    case: str
    model: str
    expected_label: str | None
    before: bool
    after: bool
    called_before: str | None
    called_after: str | None
    passed_before: bool | None
    passed_after: bool | None
    flow: NotRequired[bool]  # true for a flow (then before/after are its passed); absent for a single call


class ComparisonSection(TypedDict):
    baseline: str
    margin: float
    level: float
    correction: NotRequired[str]  # "none" or "holm" (--mcp-drop-correction)
    changes: list[MetricChangeView]
    drops: list[str]
    improvements: list[str]
    flipped: list[Flipped]
    only_in_baseline: list[str]
    only_in_current: list[str]


# -------------------------------------------------------------------------------------------- the report


class SkippedCase(TypedDict):
    """A selected case item that pytest skipped: not run, not scored, listed so that no case goes missing."""

    file: str
    line: int
    id: str
    model: str | None  # None: no model was configured
    reason: str


class Report(TypedDict):
    version: Literal[1]
    plugin_version: str
    run: RunInfo
    models: dict[str, ModelMetrics]
    catalogs: dict[str, CatalogInfo]
    gate: Gate
    cases: list[CaseResult]
    lint: NotRequired[dict[str, LintSection]]
    snapshots: NotRequired[dict[str, SnapshotResult]]  # only with --mcp-snapshots: per file
    comparison: NotRequired[ComparisonSection]
    skipped: NotRequired[list[SkippedCase]]  # only when a selected case item was skipped


class BaselineModel(TypedDict):
    accuracy: float | None
    macro_f1: float | None
    pass_rate: float | None
    tools: dict[str, float | None]
    flow_pass_rate: NotRequired[float | None]  # flows.pass_rate (absent in baselines older than flows)
    coverage: NotRequired[float | None]  # claims.mean_coverage


class BaselineCase(TypedDict):
    file: str
    id: str
    model: str
    repeat: int
    correct: bool | None
    passed: bool | None
    expected_label: str | None
    called_label: str | None
    error: str | None
    flow: NotRequired[bool]  # flows only (absent: a single call, as in baselines older than flows)
    coverage: NotRequired[float | None]  # flows only: mean claim score; None without claims


class Baseline(TypedDict):
    version: Literal[1]
    kind: Literal["pytest-mcpeval-baseline"]
    plugin_version: str | None
    models: dict[str, BaselineModel]
    cases: list[BaselineCase]
    catalogs: dict[str, CatalogInfo]


def report_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of report version 1, generated from :class:`Report`."""
    from pydantic import TypeAdapter

    schema: dict[str, Any] = TypeAdapter(Report).json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "pytest-mcpeval report (version 1)"
    return schema


def validate_report(data: Any) -> None:
    """Raise ``jsonschema.ValidationError`` when ``data`` is not a version-1 report."""
    import jsonschema

    jsonschema.validate(data, report_schema())
