"""pytest wiring only: options, ini keys, hooks and fixtures.

Loaded in every pytest process where the package is installed, so it imports nothing heavy: litellm,
numpy, mcp, pydantic and PyYAML are imported by the modules below, only when a benchmark file is
collected or a case runs.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

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
from pytest_mcpeval.keys import (
    BUDGET_DIR_KEY,
    CASE_KEY,
    CORRUPTED_KEY,
    INTERRUPTS_KEY,
    LINT_KEY,
    RESULT_KEY,
    SETTINGS_KEY,
    SNAPSHOT_KEY,
    TOOLS_KEY,
    UNWRITABLE_KEY,
)
from pytest_mcpeval.scoring.registry import DEFAULT_DROP_METRICS, DROP_METRICS
from pytest_mcpeval.settings import (
    FILE_SUFFIXES,
    Settings,
    drop_metrics,
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


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_mcpeval import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mcpeval", "MCP tool-use evaluation (pytest-mcpeval)")
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
    group.addoption(
        "--mcp-report", dest="mcp_report", metavar="PATH", default=None,
        help="write the versioned JSON report to PATH",
    )
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
    group.addoption(
        "--mcp-concurrency", dest="mcp_concurrency", metavar="N", type=positive_int, default=DEFAULT_CONCURRENCY,
        help="model calls in flight per model, across all xdist workers (default 16; per model: ini "
        "mcp_concurrency)",
    )
    group.addoption(
        "--mcp-processes", dest="mcp_processes", metavar="N", type=processes, default=None,
        help="worker processes that make the litellm calls, so litellm's CPU uses every core and its import "
        "overlaps collection (0: in the pytest process; default auto: a process per core, at most 4, for runs of "
        "100 calls or more)",
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
        help="stop making model calls once the run has spent USD dollars (litellm's prices, across xdist and "
        "--mcp-processes workers); the cases not run are errors and the gate fails; replays cost nothing",
    )
    group.addoption(
        "--mcp-overlay", dest="mcp_overlay", metavar="PATH", default=None,
        help="replace the descriptions of the tools an overlay file names (`version: 1`, `tools: {NAME: "
        "{description: ...}}`) before any model sees the catalog; a tool the catalog lacks is a usage error "
        "(docs/tuning.md)",
    )
    group.addoption(
        "--mcp-prompt-cache", dest="mcp_prompt_cache", metavar="MODE", type=prompt_cache_mode, default=None,
        help=f"{' or '.join(PROMPT_CACHE_MODES)}: mark the tool catalog and system prompt as a cacheable prefix for "
        "providers that cache only where asked (Anthropic cache_control; default auto; ini mcp_prompt_cache)",
    )
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
        help="compare this run with a baseline case by case (same file, case id, model and repeat)",
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
        "--mcp-markdown", dest="mcp_markdown", metavar="PATH", default=None,
        help="write the run's summary in Markdown to PATH (with --mcp-compare: the comparison with the baseline); "
        "it is also appended to $GITHUB_STEP_SUMMARY when that is set",
    )
    group.addoption(
        "--mcp-html", dest="mcp_html", metavar="PATH", default=None,
        help="write the run as one self-contained HTML page to PATH (no network needed to view it): intervals, "
        "confusion heatmap, per-tool bars, description diffs against --mcp-compare, every case and flow transcript",
    )
    parser.addini("mcp_concurrency", type="linelist", default=[],
                  help="`MODEL = N` lines: calls in flight for that model")
    parser.addini("mcp_record", default="", help="default for --mcp-record")
    parser.addini("mcp_judge_model", default="", help="default for --mcp-judge-model")
    parser.addini("mcp_cache_dir", default="", help="default for --mcp-cache-dir (relative to the rootdir)")
    parser.addini("mcp_prompt_cache", default="", help="default for --mcp-prompt-cache (auto or off)")
    parser.addini("mcp_html", default="", help="default for --mcp-html (relative to the rootdir)")
    parser.addini("mcp_models", type="linelist", default=[],
                  help="models to evaluate when --mcp-models is not given")
    parser.addini("mcp_model_aliases", type="linelist", default=[],
                  help="`NAME = litellm/model-string` lines, e.g. `claude = anthropic/claude-sonnet-4-5`")
    parser.addini("mcp_model_params", type="linelist", default=[],
                  help='`NAME = {json}` lines of litellm parameters, e.g. `claude = {"temperature": 0}`')
    parser.addini("mcp_thresholds", type="linelist", default=[],
                  help="`[MODEL:] METRIC[ [TOOL] ] (>= | <=) VALUE` lines, e.g. `f1[search_issues] >= 0.8`, "
                  "`hallucination_rate <= 0.05`")


def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """``-n 2`` without pytest-xdist: pytest says only ``unrecognized arguments: -n``.  Where xdist is not
    installed, or disabled (``-p no:xdist``), say what to install instead (pytest reads the command line, with
    ``addopts``, only after this hook)."""
    import re

    wanted = next((a for a in args if a in ("-n", "--numprocesses") or a.startswith("--numprocesses=")
                   or re.fullmatch(r"-n(\d+|auto|logical)", a)), None)
    if wanted is None:
        return
    import importlib.util

    if early_config.pluginmanager.is_blocked("xdist"):
        why = "pytest-xdist is disabled here (-p no:xdist)"
    elif importlib.util.find_spec("xdist") is None:
        why = "pytest-xdist is not installed: pip install 'pytest-mcpeval[xdist]' (or pytest-xdist)"
    else:
        return
    raise pytest.UsageError(f"{wanted} runs the cases in parallel processes with pytest-xdist, and {why}")


def pytest_configure(config: pytest.Config) -> None:
    from pytest_mcpeval.interrupts import Interrupts, end_with_parent

    config.stash[SETTINGS_KEY] = Settings.from_config(config)
    worker = hasattr(config, "workerinput")
    config.stash[INTERRUPTS_KEY] = Interrupts(worker=worker)
    if worker:  # an xdist worker ends with its controller, killed outright too: no call made for a dead run
        import signal

        end_with_parent(signal.SIGTERM)
    if config.stash[SETTINGS_KEY].max_cost is not None:  # one ledger of spend for the whole run (run.budget)
        from pytest_mcpeval.run.budget import WORKERINPUT_KEY as BUDGET_INPUT
        from pytest_mcpeval.run.budget import make_ledger

        workerinput = getattr(config, "workerinput", None)
        config.stash[BUDGET_DIR_KEY] = Path(workerinput[BUDGET_INPUT]) if workerinput else make_ledger()
    if config.stash[SETTINGS_KEY].processes:  # --mcp-processes=N: litellm imports in the workers while pytest collects
        from pytest_mcpeval.run.dispatch import start_chosen_processes

        start_chosen_processes(config)
    if not hasattr(config, "workerinput"):  # xdist workers neither gate nor print
        from pytest_mcpeval.session import EvalSession

        session = EvalSession(config)
        config.pluginmanager.register(session, "mcpeval-session")
        session.remove_stale_outputs()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """SIGINT and SIGTERM stop the run as Ctrl-C does, from here to the end of the session (interrupts.py)."""
    session.config.stash[INTERRUPTS_KEY].install()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodeready(node: Any) -> None:
    """xdist only: the controller passes a signal it receives on to its workers (interrupts.py)."""
    pid = _worker_pid(node)
    if pid is not None:
        node.config.stash[INTERRUPTS_KEY].forward_to.add(pid)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    node.config.stash[INTERRUPTS_KEY].forward_to.discard(_worker_pid(node))  # its pid may be another's later


def _worker_pid(node: Any) -> int | None:
    """The pid of an xdist worker started by execnet's popen gateway (``-n``); ``None`` for another kind of
    gateway (a remote worker), which only xdist's own shutdown then reaches."""
    pid = getattr(getattr(getattr(node.gateway, "_io", None), "popen", None), "pid", None)
    return pid if isinstance(pid, int) else None


# -- pytest-xdist: which worker runs which items (docs/caching.md#with-pytest-xdist) -----------------
DIST_CHOSEN_KEY = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config: pytest.Config) -> Generator[None, Any, Any]:
    """Note whether the user chose a ``--dist`` mode, before pytest-xdist makes ``-n`` mean ``--dist load``."""
    option = config.option
    config.stash[DIST_CHOSEN_KEY] = getattr(option, "dist", "no") != "no" or bool(getattr(option, "distload", False))
    return (yield)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With ``-n`` and no ``--dist``: each worker gets whole slices of the benchmark files (docs/caching.md)."""
    if config.getoption("dist") != "load" or config.stash.get(DIST_CHOSEN_KEY, True):
        return None  # the user's mode
    from pytest_mcpeval.run.dispatch import slice_scheduler

    return slice_scheduler(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Tell each worker which items stay together on one worker (it makes their calls ahead)."""
    from pytest_mcpeval.run.dispatch import WORKERINPUT_KEY, distribution
    from pytest_mcpeval.run.identities import prepare_node

    config = node.config
    node.workerinput[WORKERINPUT_KEY] = distribution(config, config.stash.get(DIST_CHOSEN_KEY, True))
    prepare_node(config, node)
    if BUDGET_DIR_KEY in config.stash:  # --mcp-max-cost: every worker adds its spend to the same ledger
        from pytest_mcpeval.run.budget import WORKERINPUT_KEY as BUDGET_INPUT

        node.workerinput[BUDGET_INPUT] = str(config.stash[BUDGET_DIR_KEY])


@pytest.hookimpl(tryfirst=True)  # on a worker, before xdist tells the controller the collection is finished
def pytest_collection_finish(session: pytest.Session) -> None:
    """Flows with claims for the judge and no --mcp-judge-model: a usage error, after -k/-m selection.  On an
    xdist worker: the selected cases' identities, written for the controller (run/identities.py)."""
    import sys

    dispatch = sys.modules.get("pytest_mcpeval.run.dispatch")  # imported when a benchmark file was collected
    if dispatch is not None:
        dispatch.collection_done(session, sum(1 for item in session.items if CASE_KEY in item.stash))
    if hasattr(session.config, "workerinput"):  # under xdist the controller checks (below)
        from pytest_mcpeval.run.identities import publish

        root = session.config.rootpath
        publish(session, {item.nodeid: ref.identity(root) for item in session.items
                          if (ref := item.stash.get(CASE_KEY, None)) is not None and ref.model is not None
                          and not ref.case.skip})
        return
    if any(item.stash.get(CASE_KEY, None) is not None for item in session.items):  # else nothing heavy is imported
        from pytest_mcpeval.collect import check_judge
        from pytest_mcpeval.run import preflight

        check_judge(session.config, session.items)
        overlay = session.config.stash[SETTINGS_KEY].overlay
        if overlay is not None:  # --mcp-overlay names tools the catalogs have
            from pytest_mcpeval.overlay import check

            check(session.config, [bench for bench, _, _ in preflight.from_items(session.items)], overlay)
        if preflight.wanted(session.config):
            preflight.check(session.config, preflight.from_items(session.items))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    from pytest_mcpeval.run.identities import received

    identities = received(node.config, node, ids)
    if identities:
        from pytest_mcpeval.collect import check_judge_ids
        from pytest_mcpeval.run import preflight

        check_judge_ids(node.config, list(identities.values()))
        overlay = node.config.stash[SETTINGS_KEY].overlay
        if overlay is not None:  # --mcp-overlay names tools the catalogs have
            from pytest_mcpeval.overlay import check

            cases = preflight.from_identities(node.config, identities.values())  # type: ignore[arg-type]
            check(node.config, [bench for bench, _, _ in cases], overlay)
        if preflight.wanted(node.config):
            cases = preflight.from_identities(node.config, identities.values())  # type: ignore[arg-type]
            preflight.check(node.config, cases)


def pytest_itemcollected(item: pytest.Item) -> None:
    """Count the model calls as cases are collected: enough of them start the model side now (--mcp-processes)."""
    ref = item.stash.get(CASE_KEY, None)
    if ref is not None and ref.model is not None and item.get_closest_marker("skip") is None:
        from pytest_mcpeval.run.dispatch import note_model_item

        note_model_item(item, ref.model)


def pytest_unconfigure(config: pytest.Config) -> None:
    import sys

    interrupts = config.stash.get(INTERRUPTS_KEY, None)
    if interrupts is not None:
        interrupts.restore()

    dispatch = sys.modules.get("pytest_mcpeval.run.dispatch")  # never imported: nothing was started
    if dispatch is not None:
        dispatch.close_processes(config)
    identities = sys.modules.get("pytest_mcpeval.run.identities")
    if identities is not None:
        identities.clean_up(config)
    if BUDGET_DIR_KEY in config.stash and not hasattr(config, "workerinput"):
        from pytest_mcpeval.run.budget import remove_ledger

        remove_ledger(config.stash[BUDGET_DIR_KEY])


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    if file_path.name.endswith(FILE_SUFFIXES):
        from pytest_mcpeval.collect import BenchmarkFileNode
        from pytest_mcpeval.run.dispatch import note_benchmark_file, pause_gc

        pause_gc(parent.config)
        note_benchmark_file(parent.config, file_path)

        node: pytest.Collector = BenchmarkFileNode.from_parent(parent, path=file_path)
        return node
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report: Any = yield
    ref = item.stash.get(CASE_KEY, None)
    result = item.stash.get(RESULT_KEY, None)
    xfailed = hasattr(report, "wasxfail")  # a failure that an xfail mark turned into a skip: still a failure here
    if (result is None and ref is not None and ref.model is not None and (report.failed or xfailed)
            and call.excinfo is not None and call.when in ("setup", "call")):  # no results: an error, never lost
        from pytest_mcpeval.run.item import results_of_failure

        result = item.stash[RESULT_KEY] = results_of_failure(item, call.when, call.excinfo)
        report.mcpeval = item.config.stash[SETTINGS_KEY].redactor.data(result)
    if call.when in ("setup", "call") and report.skipped and not xfailed and ref is not None and result is None:
        from pytest_mcpeval.collect import CaseItem  # imported already: the item is one of its kind or not
        from pytest_mcpeval.run.item import skipped_case

        if isinstance(item, CaseItem):
            report.mcpeval_skipped = item.config.stash[SETTINGS_KEY].redactor.data(skipped_case(item, report.longrepr))
    if result is not None and call.when == "call":
        # masked where made (on the xdist worker: no secret crosses the channel, and the session's end does
        # not walk every result); builtin-only dicts: they cross the xdist channel as they are
        report.mcpeval = item.config.stash[SETTINGS_KEY].redactor.data(result)
    if ref is not None and report.longrepr is not None:  # failure text reaches the terminal, junit XML: masked,
        from pytest_mcpeval.text import printable  # and no control sequence of a model's or a server's text in it

        redactor = item.config.stash[SETTINGS_KEY].redactor
        if isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:  # a skip's (path, line, reason)
            path, line, reason = report.longrepr  # stays a tuple: -rs folds skips by it
            report.longrepr = (path, line, printable(redactor.text(str(reason))))
        else:
            text = str(report.longrepr)
            masked = printable(redactor.text(text))
            if masked != text:
                report.longrepr = masked
    lint = item.stash.get(LINT_KEY, None)
    if lint is not None and call.when == "call":  # they name the server (a URL's token): masked here too
        report.mcpeval_lint = item.config.stash[SETTINGS_KEY].redactor.data(lint)
    snapshot = item.stash.get(SNAPSHOT_KEY, None)
    if snapshot is not None and call.when == "call":  # the server's label and the diff may hold a URL's token
        report.mcpeval_snapshot = item.config.stash[SETTINGS_KEY].redactor.data(snapshot)
    listing = item.stash.get(TOOLS_KEY, None)
    if listing is not None and call.when == "call":
        report.mcpeval_tools = item.config.stash[SETTINGS_KEY].redactor.data(listing)
    return report  # type: ignore[no-any-return]


def pytest_sessionfinish(session: pytest.Session) -> None:
    """An xdist worker hands the secrets it learnt from its benchmark files' servers (and fixtures) to the
    controller, which masks the rest of the report with them: by the channel, never through a file."""
    workeroutput = getattr(session.config, "workeroutput", None)
    learned = session.config.stash[SETTINGS_KEY].redactor.learned if SETTINGS_KEY in session.config.stash else []
    if workeroutput is not None and learned:
        workeroutput["mcpeval_secrets"] = list(learned)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    """A benchmark file's collection error names its server, which may carry a token: masked."""
    report: Any = yield
    if report.longrepr is not None and str(collector.path).endswith(FILE_SUFFIXES):
        from pytest_mcpeval.text import printable

        text = str(report.longrepr)
        masked = printable(collector.config.stash[SETTINGS_KEY].redactor.text(text))
        if masked != text:
            report.longrepr = masked
    return report  # type: ignore[no-any-return]


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> Any:
    if getattr(report, "mcpeval_not_run", False):  # an interrupted run's case never reached (session.py)
        return "not run", "", "NOT RUN"
    results = getattr(report, "mcpeval", None)
    if report.when != "call" or not isinstance(results, list) or not results:
        return None
    if any(r.get("error") for r in results):
        return "error", "E", "ERROR"
    passed = sum(1 for r in results if r.get("passed"))
    if passed == len(results) or report.failed:
        return None
    if passed == 0:
        return "missed", "M", ("MISS", {"yellow": True})
    return "flaky", "K", (f"FLAKY {passed}/{len(results)}", {"yellow": True})


@pytest.fixture(scope="session")
def mcp_server() -> Any:
    """Override in conftest.py to supply the server for the benchmark files below it.

    Return an ``MCPServer`` (in-process), a URL (streamable HTTP), ``StdioServerParameters``, or a list
    of tool dicts; ``None`` (this default) uses each file's ``server`` block.
    """
    return None


@pytest.fixture(scope="session")
def mcpeval_runtime(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Session-wide server connections and the model call path (one per xdist worker)."""
    import uuid

    from pytest_mcpeval.run.cache import ResponseCache
    from pytest_mcpeval.run.dispatch import Dispatcher, DispatchSettings, call_processes, makes_calls_at_once
    from pytest_mcpeval.run.runtime import Runtime

    config = request.config
    settings = config.stash[SETTINGS_KEY]
    workerinput = getattr(config, "workerinput", None)
    run_id = workerinput["testrunuid"] if workerinput else uuid.uuid4().hex
    cache = ResponseCache(settings.cache_dir, settings.record, run_id) if settings.record != "off" else None
    files = {item.path for item in request.session.items if _runs_a_model(item)}
    dispatch = DispatchSettings(settings.concurrency, settings.per_model_concurrency, settings.retries,
                                settings.timeout, workers=makes_calls_at_once(config, len(files)))
    budget = None
    if settings.max_cost is not None:
        from pytest_mcpeval.run.budget import Budget

        budget = Budget(settings.max_cost, config.stash[BUDGET_DIR_KEY])
    dispatcher = Dispatcher(dispatch, cache, call_processes(config), budget,
                            stopping=config.stash[INTERRUPTS_KEY].stopping)
    runtime = Runtime(config.rootpath, tmp_path_factory.mktemp("mcpeval-servers"), dispatcher,
                      settings.repeat, connect_timeout=settings.connect_timeout, settings=settings)
    yield runtime
    runtime.close()
    if cache is not None:
        if workerinput is not None:  # handed to the controller by xdist (see EvalSession)
            for name, notes in (("corrupted", cache.corrupted), ("unwritable", cache.unwritable)):
                if notes:
                    config.workeroutput[f"mcpeval_{name}"] = list(notes)  # type: ignore[attr-defined]
        else:
            config.stash[CORRUPTED_KEY] = list(cache.corrupted)
            config.stash[UNWRITABLE_KEY] = list(cache.unwritable)


def _runs_a_model(item: pytest.Item) -> bool:
    ref = item.stash.get(CASE_KEY, None)
    return ref is not None and ref.model is not None and not ref.case.skip
