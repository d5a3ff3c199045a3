"""The plugin's command-line options and ini keys, in one ``mcpeval`` group (``pytest --help``).

Each option has ``dest``, ``metavar``, a help line and a ``type=`` parser from :mod:`pytest_mcpeval.settings`
that names what was expected; :meth:`~pytest_mcpeval.settings.Settings.from_config` reads them once, at
configure time.  Registering them imports nothing heavy (pytest does it in every process, xdist workers too).
"""

from __future__ import annotations

import pytest

from pytest_mcpeval.defaults import (
    DEFAULT_CONCURRENCY,
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_DROP_LEVEL,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    DROP_CORRECTIONS,
    PROMPT_CACHE_MODES,
)
from pytest_mcpeval.outputs import OUTPUTS
from pytest_mcpeval.results.registry import DEFAULT_DROP_METRICS, DROP_METRICS
from pytest_mcpeval.settings import (
    drop_metrics,
    drop_size,
    level,
    model_list,
    non_negative_int,
    positive_int,
    processes,
    prompt_cache_mode,
    recall_at,
    record_mode,
    seconds,
    unit_interval,
    usd,
)
from pytest_mcpeval.tool_search import option as tool_search_option


def misspelt(parser: pytest.Parser, args: list[str]) -> str | None:
    """The one-line error for the first ``--mcp-*`` argument that is no option of the plugin, with the nearest one
    (argparse would say only ``unrecognized arguments``); ``None`` when every one is known."""
    from pytest_mcpeval.text import closest

    known = sorted({name for option in parser.getgroup("mcpeval").options for name in option.names()
                    if name.startswith("--")})
    for arg in args:
        if arg == "--":
            return None
        name = arg.split("=", 1)[0]
        if not name.startswith("--mcp-") or name in known:  # --mcpeval-*: the tune command's own plugin
            continue
        near = closest(name, known, 0.6)
        hint = f"; did you mean {near}?" if near else f" (pytest --help lists the {len(known)} --mcp-* options)"
        return f"unknown option {name}{hint}"
    return None


def add_options(parser: pytest.Parser) -> None:
    """Every option and ini key of the plugin, in the order ``--help`` lists them."""
    group = parser.getgroup("mcpeval", "MCP tool-use evaluation (pytest-mcpeval)")
    _what_runs(group)
    _gate(group)
    _calls(group)
    _checks_and_outputs(group)
    _shards(group)
    _ini_keys(parser)


def _what_runs(group: pytest.OptionGroup) -> None:
    """The models evaluated, what runs before them, and the JSON report."""
    group.addoption(
        "--mcp-models", action="append", type=model_list, dest="mcp_models", metavar="NAMES", default=None,
        help="comma-separated models to evaluate: litellm model strings (openai/gpt-5, anthropic/...), aliases "
        "from mcp_model_aliases, or the embedded offline retriever local/minilm (local/<dir> for another "
        "sentence-transformers model); repeatable; overrides the ini key mcp_models and the files' `models`",
    )
    group.addoption(
        "--mcp-no-preflight", dest="mcp_no_preflight", action="store_true", default=False,
        help="do not try each model (provider, API key) and server (starts, lists its tools) before the first "
        "call; by default a failure there is one line each and exit 4, with no model called",
    )
    group.addoption(
        "--mcp-tools", dest="mcp_tools", action="store_true", default=False,
        help="list the tools of every benchmark file's server (parameters, types, required, first line of the "
        "description) and run nothing else: no model is called",
    )


def _gate(group: pytest.OptionGroup) -> None:
    """The thresholds that fail the session, and the judge of flows' claims."""
    group.addoption(
        "--mcp-min-accuracy", dest="mcp_min_accuracy", metavar="X", type=unit_interval, default=None,
        help="fail the session when a model's tool-selection accuracy is below X (0..1)",
    )
    group.addoption(
        "--mcp-min-f1", dest="mcp_min_f1", metavar="X", type=unit_interval, default=None,
        help="fail the session when a model's macro F1 is below X (0..1)",
    )
    group.addoption(
        "--mcp-min-recall-at", dest="mcp_min_recall_at", metavar="K:X", type=recall_at, action="append",
        default=None,
        help="fail the session when a retriever's (local/...) recall@K is below X, e.g. 5:0.9 (repeatable)",
    )
    group.addoption(
        "--mcp-min-coverage", dest="mcp_min_coverage", metavar="X", type=unit_interval, default=None,
        help="fail the session when a model's mean claims coverage (flows with claims) is below X (0..1)",
    )
    group.addoption(
        "--mcp-min-pass-rate", dest="mcp_min_pass_rate", metavar="X", type=unit_interval, default=None,
        help="fail the session when a model's flow pass rate is below X (0..1)",
    )
    group.addoption(
        "--mcp-judge-model", dest="mcp_judge_model", metavar="NAME", default=None,
        help="the model that judges claims on flows' final answers: a litellm model string or an alias (ini "
        "mcp_judge_model); claims with a `check` need no judge",
    )
    group.addoption(
        "--mcp-claims-threshold", dest="mcp_claims_threshold", metavar="X", type=unit_interval, default=None,
        help="coverage a flow with claims needs to pass (default 0.75; a file's `claims_threshold` wins)",
    )
    group.addoption(
        "--mcp-strict", dest="mcp_strict", action="store_true", default=False,
        help="every missed case fails its test (by default misses are reported and the thresholds decide)",
    )


def _calls(group: pytest.OptionGroup) -> None:
    """How the model calls are made: concurrency, deadlines, retries, repeats, cache, cost."""
    group.addoption(
        "--mcp-concurrency", dest="mcp_concurrency", metavar="N", type=positive_int, default=DEFAULT_CONCURRENCY,
        help="model calls in flight per model, across all xdist workers (default 16; per model: ini "
        "mcp_concurrency)",
    )
    group.addoption(
        "--mcp-processes", dest="mcp_processes", metavar="N", type=processes, default=None,
        help="no longer used (accepted so that existing command lines still run; a notice says so): every model "
        "call of a process runs on its event loop, and -n N (pytest-xdist) uses more cores",
    )
    group.addoption(
        "--mcp-timeout", dest="mcp_timeout", metavar="SECONDS", type=seconds, default=DEFAULT_TIMEOUT,
        help="deadline of each attempt of a model call: connecting, the headers and the whole body (default 120)",
    )
    group.addoption(
        "--mcp-connect-timeout", dest="mcp_connect_timeout", metavar="SECONDS", type=seconds,
        default=DEFAULT_CONNECT_TIMEOUT,
        help="time an MCP server gets to start, initialize and list its tools, and each live tool call (default 60); "
        "past it, its cases are errors",
    )
    group.addoption(
        "--mcp-retries", dest="mcp_retries", metavar="N", type=non_negative_int, default=DEFAULT_RETRIES,
        help="retries of a call after a rate limit or transient error, with exponential backoff (default 3)",
    )
    group.addoption(
        "--mcp-repeat", dest="mcp_repeat", metavar="K", type=positive_int, default=1,
        help="run every case K times (pass@k, pass^k and flaky cases in the report)",
    )
    group.addoption(
        "--mcp-record", dest="mcp_record", metavar="MODE", type=record_mode, default=None,
        help="response cache: new (replay hits, record misses; default), none (replay only: a miss is an "
        "error), all (call and overwrite everything), off",
    )
    group.addoption(
        "--mcp-cache-dir", dest="mcp_cache_dir", metavar="DIR", default=None,
        help="where recorded responses live, meant to be committed (default .mcpeval/cache under the rootdir)",
    )
    group.addoption(
        "--mcp-max-catalog-tokens", dest="mcp_max_catalog_tokens", metavar="N", type=positive_int, default=None,
        help="fail the session when a server's tool catalog costs more than N tokens per request",
    )
    group.addoption(
        "--mcp-max-cost", dest="mcp_max_cost", metavar="USD", type=usd, default=None,
        help="stop making model calls once the run has spent USD dollars (litellm's prices, across xdist "
        "workers); the cases not run are errors and the gate fails; replays cost nothing",
    )
    group.addoption(
        "--mcp-overlay", dest="mcp_overlay", metavar="PATH", default=None,
        help="replace the descriptions of the tools an overlay file names (`version: 1`, `tools: {NAME: "
        "{description: ...}}`) before any model sees the catalog; a tool the catalog lacks is a usage error "
        "(docs/tuning.md)",
    )
    group.addoption(
        "--mcp-tool-search", dest="mcp_tool_search", metavar="METHOD[:K]", type=tool_search_option, default=None,
        help="run cases under tool search: the model is shown a search tool (bm25, regex or embedding), "
        "each search answers with the top K tools (default 5) and loads them; native or native-regex: Anthropic's "
        "own server-side search; a file or case key `tool_search` is over it, `tool_search: off` opts a case out "
        "(docs/tool-search.md)",
    )
    group.addoption(
        "--mcp-prompt-cache", dest="mcp_prompt_cache", metavar="MODE", type=prompt_cache_mode, default=None,
        help=f"{' or '.join(PROMPT_CACHE_MODES)}: mark the tool catalog and system prompt as a cacheable prefix for "
        "providers that cache only where asked (Anthropic cache_control; default auto; ini mcp_prompt_cache)",
    )


def _checks_and_outputs(group: pytest.OptionGroup) -> None:
    """Model-free items, the baseline comparison, and the Markdown and HTML outputs."""
    group.addoption(
        "--mcp-lint", dest="mcp_lint", action="store_true", default=False,
        help="add a `lint` item per benchmark file: expected calls against the server's schemas, and the tools "
        "whose names and descriptions read alike (no model needed)",
    )
    group.addoption(
        "--mcp-snapshots", dest="mcp_snapshots", action="store_true", default=False,
        help="add a `tool-catalog` item per benchmark file: the server's tools must match their syrupy snapshot "
        "(record or accept with --snapshot-update)",
    )
    group.addoption(
        "--mcp-save-baseline", dest="mcp_save_baseline", metavar="PATH", default=None,
        help="write this run's per-case outcomes and metrics as a baseline (e.g. on the main branch)",
    )
    group.addoption(
        "--mcp-compare", dest="mcp_compare", metavar="PATH", default=None,
        help="compare this run with a baseline case by case (same file, case id and model; repeats averaged)",
    )
    group.addoption(
        "--mcp-fail-on-drop", dest="mcp_fail_on_drop", metavar="MARGIN", type=unit_interval, default=None,
        help="with --mcp-compare: fail when a metric drops by more than MARGIN and the drop is significant",
    )
    group.addoption(
        "--mcp-drop-level", dest="mcp_drop_level", metavar="ALPHA", type=level, default=DEFAULT_DROP_LEVEL,
        help="significance level of the drop test (default 0.05)",
    )
    group.addoption(
        "--mcp-drop-correction", dest="mcp_drop_correction", choices=DROP_CORRECTIONS,
        default=DROP_CORRECTIONS[0],
        help="with --mcp-compare: adjust each model's p-values for the number of metrics compared (holm: Holm's "
        "step-down method; default none)",
    )
    group.addoption(
        "--mcp-drop-metrics", dest="mcp_drop_metrics", metavar="NAMES", type=drop_metrics,
        default=list(DEFAULT_DROP_METRICS),
        help=f"metrics compared: {', '.join(DROP_METRICS)} (default {','.join(DEFAULT_DROP_METRICS)})",
    )
    group.addoption(
        "--mcp-min-detectable-drop", dest="mcp_min_detectable_drop", metavar="X", type=drop_size, default=None,
        help="fail when the drop gate could not flag a fall of X in the recall of a tool some case expects "
        "(too few single-call cases expect it; docs/metrics.md#what-the-gate-can-see)",
    )
    for output in OUTPUTS:  # the files written from the report, one option each (outputs.py)
        group.addoption(output.option, dest=output.dest, metavar="PATH", default=None, help=output.help)


def _shards(group: pytest.OptionGroup) -> None:
    """One run split over machines, merged by ``python -m pytest_mcpeval merge`` (docs/scale.md)."""
    from pytest_mcpeval.shard import shard_spec

    group.addoption(
        "--mcp-shard", dest="mcp_shard", metavar="K/N", type=shard_spec, default=None,
        help="run only shard K of N of the selected cases (by file and case id: every model and repeat of a case in "
        "the same shard; the same split on every machine); the gate is reported, not applied: merge the shards' "
        "--mcp-report files with `python -m pytest_mcpeval merge`",
    )
    group.addoption(
        "--mcp-shard-durations", dest="mcp_shard_durations", metavar="REPORT", default=None,
        help="with --mcp-shard: balance the shards by the cases' durations in an earlier JSON report (default: by "
        "count); every shard must be given the same file",
    )
    group.addoption(
        "--mcp-shard-gate", dest="mcp_shard_gate", action="store_true", default=False,
        help="with --mcp-shard: apply the gate to this shard's cases alone (exit status 1 when it fails)",
    )


def _ini_keys(parser: pytest.Parser) -> None:
    parser.addini("mcp_concurrency", type="linelist", default=[],
                  help="`MODEL = N` lines: calls in flight for that model")
    parser.addini("mcp_record", default="", help="default for --mcp-record")
    parser.addini("mcp_judge_model", default="", help="default for --mcp-judge-model")
    parser.addini("mcp_cache_dir", default="", help="default for --mcp-cache-dir (relative to the rootdir)")
    parser.addini("mcp_prompt_cache", default="", help="default for --mcp-prompt-cache (auto or off)")
    for output in OUTPUTS:
        if output.ini:
            parser.addini(output.dest, default="", help=f"default for {output.option} (relative to the rootdir)")
    parser.addini("mcp_models", type="linelist", default=[],
                  help="models to evaluate when --mcp-models is not given")
    parser.addini("mcp_model_aliases", type="linelist", default=[],
                  help="`NAME = litellm/model-string` lines, e.g. `claude = anthropic/claude-sonnet-4-5`")
    parser.addini("mcp_model_params", type="linelist", default=[],
                  help='`NAME = {json}` lines of litellm parameters, e.g. `claude = {"temperature": 0}`')
    parser.addini("mcp_thresholds", type="linelist", default=[],
                  help="`[MODEL:] METRIC[ [TOOL] ] (>= | <=) VALUE` lines, e.g. `f1[search_issues] >= 0.8`, "
                  "`hallucination_rate <= 0.05`")
