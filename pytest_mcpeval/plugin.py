"""pytest wiring only: the hooks and fixtures pytest finds here, each handing its work to a module below.

Loaded in every pytest process where the package is installed, so it imports nothing heavy: litellm,
numpy, mcp, pydantic and PyYAML are imported by the modules below, only when a benchmark file is
collected or a case runs.  The options and ini keys are declared in :mod:`pytest_mcpeval.options`.  It
imports downward only, and no module of the package imports it (tests/test_architecture.py).
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_mcpeval.keys import (
    BUDGET_DIR_KEY,
    CASE_KEY,
    INTERRUPTS_KEY,
    LINT_KEY,
    MASKED_KEY,
    RESULT_KEY,
    SETTINGS_KEY,
    SNAPSHOT_KEY,
    TOOLS_KEY,
)
from pytest_mcpeval.settings import FILE_SUFFIXES, Settings


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_mcpeval import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    from pytest_mcpeval.options import add_options

    add_options(parser)


def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """Where pytest would say only ``unrecognized arguments``, one line that helps (pytest reads the command line,
    with ``addopts``, only after this hook): a misspelt ``--mcp-*`` option gets the nearest one; ``-n 2`` without
    pytest-xdist, installed or disabled (``-p no:xdist``), says what to install instead."""
    import re

    from pytest_mcpeval.options import misspelt

    typo = misspelt(parser, args)
    if typo is not None:
        raise pytest.UsageError(typo)

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
    opt = config.option
    if opt.mcp_shard is not None or opt.mcp_shard_durations or opt.mcp_shard_gate:  # one run over machines
        from pytest_mcpeval.shard import ShardPlugin

        ShardPlugin.register(config)
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
    if not hasattr(config, "workerinput"):  # xdist workers neither gate nor print
        from pytest_mcpeval.session import EvalSession

        session = EvalSession(config)
        config.pluginmanager.register(session, "mcpeval-session")
        session.remove_stale_outputs()


@pytest.hookimpl(tryfirst=True)
def pytest_report_header(config: pytest.Config) -> list[str]:
    """A line, not a warning (under -W error a warning would end the run), for an option that is no longer used."""
    if config.stash[SETTINGS_KEY].processes is None:
        return []
    return ["pytest-mcpeval: --mcp-processes is no longer used: the model calls of a process run on its event loop; "
            "-n N (pytest-xdist) uses more cores"]


def pytest_sessionstart(session: pytest.Session) -> None:
    """SIGINT and SIGTERM stop the run as Ctrl-C does, from here to the end of the session (interrupts.py)."""
    session.config.stash[INTERRUPTS_KEY].install()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_newgateway(gateway: Any) -> None:
    """xdist only: the pid of a local worker's process, asked before the worker starts in it (interrupts.py)."""
    from pytest_mcpeval.interrupts import ask_worker_pid

    ask_worker_pid(gateway)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodeready(node: Any) -> None:
    """xdist only: the controller passes a signal it receives on to its workers (interrupts.py)."""
    from pytest_mcpeval.interrupts import worker_pid

    pid = worker_pid(node.gateway)
    if pid is not None:
        node.config.stash[INTERRUPTS_KEY].forward_to.add(pid)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    from pytest_mcpeval.interrupts import worker_pid

    node.config.stash[INTERRUPTS_KEY].forward_to.discard(worker_pid(node.gateway))  # its pid may be another's later


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
    from pytest_mcpeval.run.scheduler import BenchmarkSliceScheduling

    return BenchmarkSliceScheduling(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Tell each worker which items stay together on one worker (it makes their calls ahead)."""
    from pytest_mcpeval.run.prefetch import WORKERINPUT_KEY, distribution

    config = node.config
    node.workerinput[WORKERINPUT_KEY] = distribution(config, config.stash.get(DIST_CHOSEN_KEY, True))
    if BUDGET_DIR_KEY in config.stash:  # --mcp-max-cost: every worker adds its spend to the same ledger
        from pytest_mcpeval.run.budget import WORKERINPUT_KEY as BUDGET_INPUT

        node.workerinput[BUDGET_INPUT] = str(config.stash[BUDGET_DIR_KEY])


def pytest_collection_finish(session: pytest.Session) -> None:
    """Flows with claims for the judge and no --mcp-judge-model: a usage error, after -k/-m selection (under xdist
    the controller checks: below)."""
    import sys

    gc_pause = sys.modules.get("pytest_mcpeval.run.gc_pause")  # imported when a benchmark file was collected
    if gc_pause is not None:
        gc_pause.collection_done(session)
    if hasattr(session.config, "workerinput"):
        return
    if any(item.stash.get(CASE_KEY, None) is not None for item in session.items):  # else nothing heavy is imported
        from pytest_mcpeval.collect import check_judge
        from pytest_mcpeval.run import preflight

        check_judge(session.config, session.items)
        if preflight.wanted(session.config):
            preflight.check(session.config, preflight.from_items(session.items))
        overlay = session.config.stash[SETTINGS_KEY].overlay
        if overlay is not None:  # --mcp-overlay names tools the catalogs have (those pre-flight listed)
            from pytest_mcpeval.run.overlay_check import check

            check(session.config, [ref.bench for item in session.items  # --mcp-tools' items too
                                   if (ref := item.stash.get(CASE_KEY, None)) is not None], overlay)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    from pytest_mcpeval.run.identities import received

    identities = received(node.config, ids)
    if identities:
        from pytest_mcpeval.collect import check_judge_ids
        from pytest_mcpeval.run import preflight

        check_judge_ids(node.config, list(identities.values()))
        cases = preflight.from_identities(node.config, identities.values())  # type: ignore[arg-type]
        if preflight.wanted(node.config):
            preflight.check(node.config, cases)
        overlay = node.config.stash[SETTINGS_KEY].overlay
        if overlay is not None:  # --mcp-overlay names tools the catalogs have (those pre-flight listed)
            from pytest_mcpeval.run.overlay_check import check

            check(node.config, [bench for bench, _, _ in cases], overlay)


def pytest_unconfigure(config: pytest.Config) -> None:
    import sys

    interrupts = config.stash.get(INTERRUPTS_KEY, None)
    if interrupts is not None:
        interrupts.restore()

    llama = sys.modules.get("pytest_mcpeval.models.llama.server")  # a local/qwen2.5-coder-* server was used
    if llama is not None:
        llama.release()  # the last process to give its lease back stops the server
    gc_pause = sys.modules.get("pytest_mcpeval.run.gc_pause")  # a collection that ended without finishing
    if gc_pause is not None:
        gc_pause.resume_gc(config)
    if BUDGET_DIR_KEY in config.stash and not hasattr(config, "workerinput"):
        from pytest_mcpeval.run.budget import remove_ledger

        remove_ledger(config.stash[BUDGET_DIR_KEY])


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    if file_path.name.endswith(FILE_SUFFIXES):
        from pytest_mcpeval.collect import BenchmarkFileNode
        from pytest_mcpeval.run.gc_pause import pause_gc

        pause_gc(parent.config)

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
        report.mcpeval = item.config.stash[SETTINGS_KEY].redactor.safe_data(result)
    if call.when in ("setup", "call") and report.skipped and not xfailed and ref is not None and result is None:
        from pytest_mcpeval.collect import CaseItem  # imported already: the item is one of its kind or not
        from pytest_mcpeval.run.item import skipped_case

        if isinstance(item, CaseItem):
            report.mcpeval_skipped = item.config.stash[SETTINGS_KEY].redactor.data(skipped_case(item, report.longrepr))
    if result is not None and call.when == "call":
        # masked where made (on the xdist worker: no secret crosses the channel, and the session's end does
        # not walk every result); builtin-only dicts: they cross the xdist channel as they are.  A case item's are
        # masked as they come out of their strategy (run/item.py), unless a hook was to see them first
        settled = item.stash.get(MASKED_KEY, False)
        report.mcpeval = result if settled else item.config.stash[SETTINGS_KEY].redactor.safe_data(result)
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
    if call.when == "call" and result is None:  # a check item's findings (a case item has results instead)
        lint = item.stash.get(LINT_KEY, None)
        if lint is not None:  # they name the server (a URL's token): masked here too
            report.mcpeval_lint = item.config.stash[SETTINGS_KEY].redactor.data(lint)
        snapshot = item.stash.get(SNAPSHOT_KEY, None)
        if snapshot is not None:  # the server's label and the diff may hold a URL's token
            report.mcpeval_snapshot = item.config.stash[SETTINGS_KEY].redactor.data(snapshot)
        listing = item.stash.get(TOOLS_KEY, None)
        if listing is not None:
            report.mcpeval_tools = item.config.stash[SETTINGS_KEY].redactor.data(listing)
    return report  # type: ignore[no-any-return]


def pytest_sessionfinish(session: pytest.Session) -> None:
    """An xdist worker hands the secrets it learnt from its benchmark files' servers (and fixtures) to the
    controller, which masks the rest of the report with them: by the channel, never through a file.  And the
    facts it noted once for the run (run/facts.py: catalogs, parameters sent), masked."""
    import sys

    workeroutput = getattr(session.config, "workeroutput", None)
    learned = session.config.stash[SETTINGS_KEY].redactor.learned if SETTINGS_KEY in session.config.stash else []
    if workeroutput is not None and learned:
        workeroutput["mcpeval_secrets"] = list(learned)
    facts = sys.modules.get("pytest_mcpeval.run.facts")  # imported where a case ran
    if workeroutput is not None and facts is not None:
        workeroutput[facts.WORKEROUTPUT_KEY] = session.config.stash[SETTINGS_KEY].redactor.data(
            facts.of(session.config).data())


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
    from pytest_mcpeval.run.runtime import open_runtime

    yield from open_runtime(request, tmp_path_factory)
