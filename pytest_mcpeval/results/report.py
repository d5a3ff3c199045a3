"""The report of a run and the baseline file: catalogs, run info, gate, lint, snapshots, comparison."""

from __future__ import annotations

from typing import (
    Literal,
    NotRequired,  # pydantic needs these on Python < 3.12
)

from typing_extensions import TypedDict

from pytest_mcpeval.results.case import JSON, CaseResult
from pytest_mcpeval.results.metrics import ModelMetrics

REPORT_VERSION: Literal[2] = 2  # 2: the confusion matrix stored sparse (docs/report.md#versioning)


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


class OverlayInfo(TypedDict):
    """``--mcp-overlay``: the file whose descriptions replaced the catalog's (docs/tuning.md)."""

    path: str
    digest: str  # of the overlay's content
    tools: list[str]  # the tools it names
    catalogs: dict[str, list[str]]  # digest of each catalog it changed (as overlaid) -> the tools it set there


class ShardSelection(TypedDict):
    """What the shards of one run share (``--mcp-shard``): the merge refuses shards whose selections differ."""

    digest: str  # sha256 of the fields below, as canonical JSON
    files: dict[str, str]  # benchmark file (relative to the rootdir) -> sha256 of its content
    items: int  # case items selected (after -k/-m), across every shard
    items_digest: str  # sha256 of their node ids, sorted
    models: list[str]  # --mcp-models / ini mcp_models, in the order given (the report's order of models)
    params: dict[str, JSON]  # model -> its target and parameters (secrets masked)
    options: dict[str, JSON]  # the options that change verdicts, and how the cases were partitioned
    plugin_version: str


class ShardInfo(TypedDict):
    """``--mcp-shard=K/N``: this run is shard ``index`` of ``count`` (docs/scale.md)."""

    index: int
    count: int
    items: int  # this shard's case items
    selection: ShardSelection


class MergeInfo(TypedDict):
    """A report merged from shards (``python -m pytest_mcpeval merge``): which were merged, which are missing."""

    count: int
    shards: list[int]
    missing: list[int]  # not empty: the report is incomplete (run.interrupted) and the gate failed
    selection: ShardSelection


class RunInfo(TypedDict, total=False):
    models: dict[str, ModelRun]
    interrupted: bool  # the run ended before every selected case ran (Ctrl-C, -x, --maxfail): the gate failed
    stopped: str  # why, when interrupted
    collect_errors: list[str]  # benchmark files that could not be collected (their cases are not in the report)
    overlay: OverlayInfo  # only with --mcp-overlay
    shard: ShardInfo  # only with --mcp-shard
    merged: MergeInfo  # only in a report merged from shards


class Gate(TypedDict):
    passed: bool
    failures: list[str]
    usage_errors: NotRequired[list[str]]
    thresholds: list[str]
    # what else gated the run, as sentences: the drop gate (--mcp-fail-on-drop against --mcp-compare), the catalog
    # size (--mcp-max-catalog-tokens), the budget (--mcp-max-cost); every rendering states the gate from these
    checks: NotRequired[list[str]]


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
    drafts: NotRequired[list[str]]  # ids of the file's draft cases (docs/drafting.md), in file order


class ConfusablePair(TypedDict):
    tools: tuple[str, str]
    similarity: float
    confused: int


class LintSection(TypedDict):
    catalog: str
    problems: list[LintProblemView]
    confusable: list[ConfusablePair]
    drafts: NotRequired[list[str]]  # ids of the file's draft cases: proposed, left out of the gate until reviewed


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


class MetricChange(TypedDict):
    """One metric of one model, before (baseline) and after (current), on the paired cases (gate.compare).

    ``before``/``after``/``diff`` are ``None`` only for an ``f1[TOOL]`` that is undefined on one side (the tool
    was neither expected nor called there); such a change is never significant.  ``discordant`` counts the
    paired cases whose outcome for this metric differs between the runs; only they carry evidence.  ``n``
    counts the paired cases the metric is over: single calls, flows, or flows with claims.
    """

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


class ToolChange(TypedDict):
    """A tool whose definition hash differs between the baseline's catalogs and this run's (added in this
    version): its description before and after (equal when only its schema or annotations changed)."""

    before: str
    after: str


class Flipped(TypedDict):
    """A paired case whose outcome changed (``correct`` of a single call, ``passed`` of a flow), or, in ``moved``,
    whose called tool changed; one entry per case, whatever its repeats (gate.clusters)."""

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
    # A case with more than one repeat on either side (the key is then the case's, file::id[model]): the share of
    # its repeats with the outcome and how many repeats each side has; before/after say whether half or more had it
    share_before: NotRequired[float]
    share_after: NotRequired[float]
    repeats_before: NotRequired[int]
    repeats_after: NotRequired[int]


class ComparisonSection(TypedDict):
    baseline: str
    margin: float
    level: float
    correction: NotRequired[str]  # "none" or "holm" (--mcp-drop-correction)
    changes: list[MetricChange]
    drops: list[str]
    improvements: list[str]
    flipped: list[Flipped]
    only_in_baseline: list[str]
    only_in_current: list[str]
    # added in this version, so that every rendering reads the comparison from the report alone:
    paired: NotRequired[dict[str, int]]  # model -> its paired cases (single calls and flows)
    excluded: NotRequired[list[str]]  # cases in both runs left out for an error on either side
    kind_changed: NotRequired[list[str]]  # a flow in one run, a single call in the other: compared in neither
    changed_tools: NotRequired[dict[str, ToolChange]]  # tool definitions changed since the baseline
    baseline_tools: NotRequired[dict[str, dict[str, float | None]]]  # model -> the baseline's F1 per tool
    # every paired single call whose called tool changed, passed or missed on either side (a rewrite that pulls
    # requests to its tool shows here even where both runs missed them); the renderings group it by tool
    moved: NotRequired[list[Flipped]]


# -------------------------------------------------------------------------------------------- the report


class IntervalMethod(TypedDict):
    """How ModelMetrics.intervals were computed (added in this version): a seeded percentile bootstrap over
    cases at confidence ``1 - level``."""

    level: float
    resamples: int
    seed: int


class SkippedCase(TypedDict):
    """A selected case item that pytest skipped: not run, not scored, listed so that no case goes missing."""

    file: str
    line: int
    id: str
    model: str | None  # None: no model was configured
    reason: str


class DraftOutcome(TypedDict):
    """How one draft case (``draft: true``, docs/drafting.md) came out: reported apart, never in a metric."""

    file: str
    line: int
    id: str
    repeat: int
    outcome: Literal["passed", "missed", "error"]
    expected_label: str | None
    called_label: str | None


class Report(TypedDict):
    version: Literal[2]
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
    intervals: NotRequired[IntervalMethod]  # added in this version: the method of every model's intervals
    drafts: NotRequired[dict[str, list[DraftOutcome]]]  # per model, its draft cases: out of every metric and gate


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
    # under tool search only (docs/tool-search.md): the case's `search_recall` and its `search.found`
    search_recall: NotRequired[float | None]
    found: NotRequired[dict[str, int | None]]


class Baseline(TypedDict):
    version: Literal[1]
    kind: Literal["pytest-mcpeval-baseline"]
    plugin_version: str | None
    models: dict[str, BaselineModel]
    cases: list[BaselineCase]
    catalogs: dict[str, CatalogInfo]
