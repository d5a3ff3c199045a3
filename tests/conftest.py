"""Shared fixtures: a scripted OpenAI-compatible model server and pytester project helpers.

Every integration test runs the plugin as a user would (pytester, in-process unless a fresh process is
the point) against real components: the model is a local HTTP server reached through litellm.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import pkgutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import first_call
import preloaded_workers
import pytest

import pytest_mcpeval
from pytest_mcpeval.testing import ScriptedModelServer

# pytester's in-process runs drop the modules first imported during a run, and C extensions (numpy,
# PyYAML's loader) cannot be imported twice in one process; litellm also costs seconds to import.  So
# everything a run may import is imported once per test process, as it is configured (before any test's pytester
# takes its snapshot of the modules).  litellm is told first, as the plugin tells it, to read its bundled cost map
# and fetch nothing.  The collector is off during these imports and what they built is frozen after (gc.freeze,
# public): each full pass during the imports would traverse all that was made so far, and every later pass of the
# session all of it again (the plugin does the same for litellm alone: pytest_mcpeval.models.litellm_load).
# xdist's controller runs no test: it skips them (about 5 s of CPU, on the cores the workers need).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
# numpy's BLAS on one thread in every process of the suite (four workers share two cores): its pool of threads only
# spun, and the statistics tests took a quarter more CPU in the same time (test_compare, test_power: 15 s against 12 s)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# Also what litellm imports on its first call, and the modules of xdist's controller and syrupy's extensions that a
# run imports: first imported inside a run, each was imported again by every run (about a third of the CPU of the
# tests that run the plugin in-process; tests/test_preloaded_workers.py checks litellm's and xdist's).
HEAVY = ("jsonschema", "litellm", *first_call.FIRST_CALL, "mcp.client.stdio", "numpy", "scipy.stats",
         "sklearn.feature_extraction.text", "sklearn.metrics", "yaml", "xdist.dsession", "xdist.workermanage",
         "xdist.report", "xdist.scheduler", "syrupy.extensions.json", "syrupy.extensions.single_file")


def _import_heavy() -> None:
    gc.disable()
    for name in HEAVY:
        first_call.preload(name)
    # every module of the plugin, walked rather than listed, so that a new module cannot be forgotten (a module
    # first imported inside an in-process run is imported again by the next one: two classes of the same name,
    # and an `except ServerError` that no longer catches the ServerError raised)
    for module in pkgutil.walk_packages(pytest_mcpeval.__path__, "pytest_mcpeval."):
        importlib.import_module(module.name)
    gc.enable()
    gc.freeze()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    controller = (not hasattr(config, "workerinput") and config.getoption("dist", "no") != "no"
                  and bool(config.getoption("tx", None)) and not config.option.collectonly)  # as xdist decides
    if not controller:
        _import_heavy()
    elif os.environ.get("MCPEVAL_FRESH_WORKERS") != "1":  # one zygote for the whole suite: its workers adopt it
        preloaded_workers.ZYGOTE.start(RUNS_ENV)
        os.environ[preloaded_workers.SHARED] = preloaded_workers.ZYGOTE.socket


GITHUB_TOOLS = Path(__file__).parent / "data" / "github-tools.json"

# A shell without job control starts a background command with SIGINT ignored, and every process it starts inherits
# that (Python keeps an ignored SIGINT ignored): the fault tests' Ctrl-C would then reach runs that cannot hear it.
# The suite's processes get SIGINT as a terminal gives it, however `make test` was started.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# The slowest tests (measured with --durations), started first, slowest first: under xdist the last tests to
# start are then short ones, and no long test runs alone at the end of the suite.  Node id prefixes; every other
# test keeps its place after them.  (The plugin's own xdist scheduler hands out items in collection order.)
SLOW_FIRST = (
    "tests/test_chat_model.py::test_the_real_model_end_to_end",
    "tests/test_tune.py::test_the_demo_keeps_one_rewrite",
    "tests/test_local_model.py::test_local_minilm_choices_are_pinned",
    "tests/test_speed_and_cache.py::test_litellm_set_up_in_a_conftest_sees_every_call",
    "tests/faults/test_fault_workers.py::test_a_killed_worker_costs_its_item_and_stalls_nobody",
    "tests/test_xdist.py::test_a_chosen_dist_mode_is_kept",
    "tests/test_flow_examples.py::test_the_example_flows_score_as_designed",
    "tests/test_servers.py::test_stdio_command",
    "tests/test_flow_engine.py::test_xdist_gives_the_same_report",
    "tests/test_shards.py::test_merged_shards_equal_the_single_run",
    "tests/test_local_model.py::test_recall_gate_and_floor",
    "tests/test_wheel.py::",
    "tests/test_html_browser.py::",
    "tests/test_tune.py::test_proposer_sees_train_misses_only",
    "tests/test_tune.py::test_every_reason_and_an_acceptance",
)


def _slowness(item: pytest.Item) -> int:
    return next((i for i, prefix in enumerate(SLOW_FIRST) if item.nodeid.startswith(prefix)), len(SLOW_FIRST))


# The tests that load local/minilm (the `minilm` fixture): one unit of work under xdist, so that one worker loads
# the model (about 10 s of CPU a load).  xdist's `--dist loadgroup` would be the means, but under pytest 9.2 it groups
# nothing (pytest-xdist#1386: the group suffix it adds to node ids no longer takes effect).
MINILM_TESTS = (
    "tests/test_tune.py::test_the_demo_keeps_one_rewrite_and_drops_the_others_on_the_examples",
    "tests/test_local_model.py::test_local_minilm_choices_are_pinned",
    "tests/test_local_model.py::test_recall_gate_and_floor",
    "tests/test_tool_search.py::test_embedding_search_ranks_with_the_local_model",
)


@pytest.hookimpl(trylast=True)  # after any shuffling (pytest-randomly), so the slow ones still come first
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_slowness)  # a stable sort: the order of the rest is kept
    unlisted = [i.nodeid for i in items if "minilm" in i.fixturenames and i.nodeid not in MINILM_TESTS]
    if unlisted:
        raise pytest.UsageError(f"tests/conftest.py: add {', '.join(unlisted)} to MINILM_TESTS (they load minilm)")


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``-n``'s mode (``--dist load``): the plugin's own scheduler, with MINILM_TESTS one unit."""
    if config.getoption("dist") != "load":
        return None
    from pytest_mcpeval.run.scheduler import BenchmarkSliceScheduling

    class SuiteScheduling(BenchmarkSliceScheduling):
        def unit(self, nodeid: str, slices: dict[str, str]) -> str:
            return "minilm" if nodeid in MINILM_TESTS else super().unit(nodeid, slices)

    return SuiteScheduling(config, log)


@pytest.fixture(scope="session")
def minilm() -> Iterator[Any]:
    """local/minilm loaded in this process before an in-process run uses it, on one thread.

    torch cannot be imported twice in one process, and pytester drops at a test's end the modules imported since
    its ``pytester`` was set up: loaded by this session fixture (set up before any test's ``pytester``), what the
    load imports outlives every run, and every in-process run of this test process reuses the model
    (``Retriever.get`` keeps it), where a subprocess would import torch and load the model again (~10 s of CPU).
    The tests that use it are one unit of work under xdist (MINILM_TESTS): one worker loads it.
    One thread: under the suite's workers each has a share of a core, and torch's threads wait on each other."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("sentence_transformers")
    from pytest_mcpeval.models.local import BUNDLED, Retriever

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    retriever, _ = Retriever.get(BUNDLED)
    yield retriever
    torch.set_num_threads(threads)


# The environment of the tests' runs: this process's, as the session starts, with the module below on the path and
# among the runs' plugins.  The zygote is started with it, and a run whose environment differs from it in anything a
# worker's imports may read (a test's own API key, say) gets fresh workers (tests/preloaded_workers.py).
RUNS_ENV = {**os.environ, "PYTEST_PLUGINS": "preloaded_workers",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parent), os.environ.get("PYTHONPATH")]))}


@pytest.fixture(autouse=True)
def _preloaded_workers(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The xdist workers of a test's pytester runs are forks of this test process's zygote, which has imported
    litellm and mcp once (tests/preloaded_workers.py), unless the test is marked ``fresh_workers`` or the suite runs
    with ``MCPEVAL_FRESH_WORKERS=1`` (every worker a fresh interpreter: to compare).  The runs load the module
    through ``PYTEST_PLUGINS`` (pytest's documented variable), found on ``PYTHONPATH`` by a subprocess run too."""
    if os.environ.get("MCPEVAL_FRESH_WORKERS") == "1" or request.node.get_closest_marker("fresh_workers"):
        return
    if "pytester" in request.fixturenames:
        monkeypatch.setenv("PYTHONPATH", RUNS_ENV["PYTHONPATH"])
        monkeypatch.setenv("PYTEST_PLUGINS", RUNS_ENV["PYTEST_PLUGINS"])
        preloaded_workers.ZYGOTE.start(RUNS_ENV)


@pytest.hookimpl(trylast=True)  # xdist's controller: after its workers, whose runs' workers are forks of it
def pytest_unconfigure() -> None:
    preloaded_workers.ZYGOTE.stop()


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture(params=["no-xdist", "xdist"])
def xdist_args(request: pytest.FixtureRequest) -> list[str]:
    """Run an integration scenario without xdist and under xdist.  One worker (``-n 1``) takes the whole path a
    result travels under xdist (collected and run on a worker, sent to the controller, reported there) at half the
    processes of ``-n 2``; what needs two workers (the split, one call across workers, a killed worker, the same
    report either way) has tests of its own (test_xdist.py, test_e2e.py, faults/test_fault_workers.py)."""
    return [] if request.param == "no-xdist" else ["-n", "1"]


def ini_for(server: ScriptedModelServer, extra: str = "", name: str = "fake") -> str:
    params = json.dumps({"api_base": server.api_base, "api_key": "not-a-key"})
    return (
        "[pytest]\n"
        f"mcp_model_aliases = {name} = openai/{name}\n"
        f"mcp_model_params = {name} = {params}\n"
        f"{extra}"
    )


def make_project(pytester: pytest.Pytester, server: ScriptedModelServer, files: dict[str, str],
                 ini_extra: str = "", tools: list[dict[str, Any]] | None = None) -> None:
    (pytester.path / "pytest.ini").write_text(ini_for(server, ini_extra))
    if tools is not None:
        (pytester.path / "tools.json").write_text(json.dumps(tools))
    for name, text in files.items():
        path = pytester.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def status(case: str, word: str, xdist_args: list[str]) -> str:
    """The -v line of one item, with or without xdist (which prints the status first)."""
    case = case.replace("[", "?").replace("]", "?")
    return f"*{word}*{case}*" if xdist_args else f"*{case} {word}*"


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """pytest as a user runs it, in this process (fast: the plugin's imports are paid once per worker).

    litellm builds pydantic schemas of its own types lazily, once per process, and pydantic warns about
    them; in a fresh process that happens at import, here inside whichever run comes first.
    """
    return pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly",
                              "-W", "ignore::UserWarning:pydantic._internal._generate_schema", *args)


def run_subprocess(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """For the tests where a fresh process is the point (imports, signals, environment)."""
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", *args)


def read_report(pytester: pytest.Pytester, name: str = "report.json") -> dict[str, Any]:
    """A report the run wrote, checked against the published schema (docs/report.schema.json)."""
    from pytest_mcpeval.results.schema import validate_report

    data: dict[str, Any] = json.loads((pytester.path / name).read_text())
    validate_report(data)
    return data


def get_me_cases(n: int, prefix: str = "q") -> str:
    """A benchmark file of ``n`` cases, each expecting ``get_me`` (GitHub tools in tools.json)."""
    cases = "".join(
        f"  - id: {prefix}{i}\n    input: {prefix} question {i}\n    expect: [{{tool: get_me, args: {{}}}}]\n"
        for i in range(n)
    )
    return "server: {tools_file: tools.json}\ncases:\n" + cases


NOTES_CASES = """
cases:
  - id: list-work
    input: Show the notes in my work folder
    expect: [{tool: list_notes, args: {folder: work}}]
  - id: search-dentist
    input: Which note mentions the dentist?
    expect: [{tool: search_notes, args: {query: {regex: "(?i).*dentist.*"}}}]
"""


@pytest.fixture
def two_benchmark_files(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> pytest.Pytester:
    """Two benchmark files of 6 cases (``a0``..``a5``, ``b0``..``b5``, each expecting ``get_me``) and a
    Python test file of 4 tests: what xdist spreads over its workers."""
    plain = "import pytest\n\n\n@pytest.mark.parametrize('i', range(4))\ndef test_plain(i):\n    pass\n"
    files = {"a.mcpeval.yaml": get_me_cases(6, "a"), "b.mcpeval.yaml": get_me_cases(6, "b"), "test_plain.py": plain}
    make_project(pytester, model_server, files)
    (pytester.path / "tools.json").write_text(GITHUB_TOOLS.read_text())
    model_server.script("*", {"tool_calls": [{"name": "get_me", "arguments": {}}]})
    return pytester
