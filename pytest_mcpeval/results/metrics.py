"""A model's metrics over its cases: selection, arguments, retrieval, repeats, flows, claims, usage."""

from __future__ import annotations

from typing import (
    NotRequired,  # pydantic needs these on Python < 3.12
)

from typing_extensions import TypedDict

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
    # added in this version (gate.power): the distinct cases expecting the tool (``support`` counts repeats too),
    # the fewest of them whose change the drop gate can call significant, and the smallest fall in the tool's
    # recall it could flag (``min_changed / cases``; ``None``: blind, fewer cases than ``min_changed``)
    cases: NotRequired[int]
    min_changed: NotRequired[int]
    detectable_drop: NotRequired[float | None]


class Confusion(TypedDict):
    """The confusion matrix (rows expected, columns called) stored sparse (report version 2; version 1 held the
    dense ``matrix``): one diagonal count per label, and ``[row, column, count]`` for each off-diagonal cell that
    is not empty, in row-major order."""

    labels: list[str]
    diagonal: list[int]
    off_diagonal: list[tuple[int, int, int]]


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


class SearchTool(TypedDict):
    """A tool's findability under tool search: of the distinct cases expecting it, those whose searches surfaced it."""

    cases: int
    found: int
    recall: float | None
    mean_rank: float | None  # over the cases that found it


class SearchMetrics(TypedDict):
    """Tool search over a model's cases run under it, single calls and flows (scoring.search, docs/tool-search.md)."""

    cases: int
    recall: float | None  # share of (case, expected tool) pairs a search surfaced
    searches_per_case: float | None
    tokens_per_case: float  # prompt and completion tokens of every request of a case, searches included
    tools: dict[str, SearchTool]  # the unfindable first (scoring.search.least_findable)


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


class Interval(TypedDict):
    """A headline number with its percentile bootstrap interval over cases (the repeats of a case resampled
    together); ``low``/``high`` are ``None`` when the value is undefined.  Added in this version."""

    value: float | None
    low: float | None
    high: float | None
    n: int  # rows (case x repeat) the value is over
    clusters: int  # distinct cases among them (the unit resampled)


class PowerFigure(TypedDict):
    """What the drop gate can see of one model-level metric: ``n`` distinct cases it is over, the fewest of them
    that must change for a significant drop, and ``min_changed / n`` (``None`` when ``n < min_changed``)."""

    n: int
    min_changed: int
    detectable_drop: float | None


class ModelPower(TypedDict):
    """What the drop gate can see of a model on this benchmark (gate.power, docs/metrics.md#what-the-gate-can-see),
    at the run's ``--mcp-drop-level`` and ``--mcp-drop-correction``.  Added in this version.

    ``min_changed`` is what every figure is computed with: ``min_changed(level, tests)``, ``tests`` the metrics
    Holm's correction would count when all of them move at once (1 without correction); ``min_changed_alone`` is
    what a drop confined to one metric needs.  Counts are over distinct cases: the repeats of a case are one."""

    level: float
    correction: str
    tests: int
    min_changed: int
    min_changed_alone: int
    blind: list[str]  # tools some case expects, with fewer single-call cases expecting them than min_changed
    untested: list[str]  # published tools no case expects (untested_tools)
    no_single_call: list[str]  # of the blind, those no single-call case expects at all
    detectable: dict[str, float]  # the other expected tools -> their detectable drop in recall
    headline: dict[str, PowerFigure]  # accuracy, macro_f1, ...: the drop metrics of the families it has cases of
    repeats: int  # runs per case (--mcp-repeat): they do not add to any count here


class ModelMetrics(SelectionMetrics):
    by_tools_shown: list[ExposureRow]
    flows: FlowMetrics | None
    claims: ClaimsMetrics | None
    judges: dict[str, JudgeUsage]
    untested_tools: list[str]
    retrieval: RetrievalMetrics | None
    # added in this version: the cases run under tool search (docs/tool-search.md); None when none was
    search: NotRequired[SearchMetrics | None]
    repeats: RepeatMetrics
    usage: UsageMetrics
    # added in this version: registry.INTERVALS that the model has cases for -> value and interval (the method
    # in Report.intervals)
    intervals: NotRequired[dict[str, Interval]]
    power: NotRequired[ModelPower]  # added in this version: what the drop gate can see (gate.power)
