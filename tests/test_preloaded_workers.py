"""The suite's forked xdist workers (tests/preloaded_workers.py) behave as the fresh interpreters they stand in for."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from importlib.metadata import version
from pathlib import Path

import first_call
import preloaded_workers
import pytest
from conftest import run

from pytest_mcpeval.testing import ScriptedModelServer

pytestmark = pytest.mark.skipif(os.environ.get("MCPEVAL_FRESH_WORKERS") == "1",
                                reason="MCPEVAL_FRESH_WORKERS=1: the suite runs without its zygote")


@pytest.fixture
def python(pytester: pytest.Pytester) -> list[str]:
    """The command execnet runs for a forked gateway (the fixture in conftest.py has started the zygote)."""
    return preloaded_workers.ZYGOTE.python().split()


def child(python: list[str], code: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*python, "-u", "-c", code], capture_output=True, text=True, timeout=30, **kwargs)


PROBE = ("import os, sys; "
         "print('litellm' in sys.modules, os.getcwd(), os.environ.get('PYTEST_PROBE'), sys.argv, sys.path[0])")


def test_a_fork_takes_the_callers_place(python: list[str], tmp_path: Path) -> None:
    done = child(python, PROBE, cwd=tmp_path, env={**os.environ, "PYTEST_PROBE": "seen"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", str(tmp_path), "seen", "['-c']"]  # sys.path[0] is '' as for -c


@pytest.mark.parametrize(("code", "returncode"), [
    ("import sys; sys.exit(3)", 3),
    ("raise ValueError('boom')", 1),
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", -signal.SIGKILL),
    ("import os, signal; os.kill(os.getpid(), signal.SIGTERM)", -signal.SIGTERM),
])
def test_a_fork_ends_as_a_fresh_interpreter_ends(python: list[str], code: str, returncode: int) -> None:
    done = child(python, code)
    assert done.returncode == returncode
    assert ("ValueError: boom" in done.stderr) == (returncode == 1)


@pytest.mark.parametrize(("change", "forked"), [
    ({"LITELLM_LOG": "DEBUG"}, False),  # read by litellm's import: a fork would have the zygote's setting
    ({"AZURE_OPENAI_ENDPOINT": "http://127.0.0.1:9"}, False),
    ({"HTTPS_PROXY": "http://127.0.0.1:9", "PYTEST_PROBE": "seen"}, True),  # read when a client is made: the fork's
])
def test_a_variable_the_imports_read_gets_a_fresh_interpreter(python: list[str], change: dict[str, str],
                                                              forked: bool) -> None:
    done = child(python, PROBE, env={**os.environ, **change})
    assert done.returncode == 0 and done.stdout.split()[0] == str(forked)


def test_a_request_the_zygote_cannot_read_leaves_it_serving(python: list[str]) -> None:
    import socket

    path = python[4]  # (the wrapper's arguments: the zygote's socket, then the interpreter)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(path)
        conn.sendall(b"\x00\x00\x00\x05{bad")
    long = {f"PYTEST_LONG_{i}": "x" * 50_000 for i in range(4)}  # a request of 200 kB, read whole
    done = child(python, PROBE, env={**os.environ, **long})
    assert done.returncode == 0 and done.stdout.split()[0] == "True"


def test_a_fork_writes_bytecode_as_the_environment_says(python: list[str]) -> None:
    code = "import sys; print(sys.dont_write_bytecode)"
    fresh = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert child(python, code).stdout.split() == fresh.stdout.split() == [str(bool(sys.flags.dont_write_bytecode))]


def test_a_signal_to_the_wrapper_reaches_the_fork_and_killing_it_ends_the_fork(python: list[str]) -> None:
    code = "import os, time; print(os.getpid(), flush=True); time.sleep(60)"
    wrapper = subprocess.Popen([*python, "-u", "-c", code], stdout=subprocess.PIPE, text=True)
    assert wrapper.stdout is not None
    int(wrapper.stdout.readline())
    wrapper.terminate()
    assert wrapper.wait(timeout=10) == -signal.SIGTERM
    wrapper = subprocess.Popen([*python, "-u", "-c", code], stdout=subprocess.PIPE, text=True)
    assert wrapper.stdout is not None
    fork = int(wrapper.stdout.readline())
    wrapper.kill()
    wrapper.wait(timeout=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and Path(f"/proc/{fork}").exists():  # (the zygote reaps it)
        time.sleep(0.05)
    assert not Path(f"/proc/{fork}").exists()


def test_an_in_process_run_under_xdist_runs_on_forks_and_a_subprocess_run_does_not(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("import sys\ndef test_probe():\n    print('litellm' in sys.modules)\n    assert 0\n")
    forked = pytester.runpytest("-n", "1", "-p", "no:randomly")
    forked.stdout.fnmatch_lines(["*Captured stdout call*", "True", "*1 failed*"])
    assert "warnings summary" not in forked.stdout.str()
    fresh = pytester.runpytest_subprocess("-n", "1", "-p", "no:randomly")
    fresh.stdout.fnmatch_lines(["*Captured stdout call*", "False", "*1 failed*"])


# a module first imported inside an in-process run is dropped with the run (pytester restores sys.modules) and imported
# again by the next: what litellm imports on its first call was imported again by every run, and by every fork
# (tests/first_call.py).  Under the litellm they were found with, none of litellm's modules may be imported again;
# under another, only the listed ones are checked (a module a new litellm adds costs time, not a failure).
IMPORTS_PROBE = """
import json, sys

_configured = set()


def pytest_configure(config):
    _configured.update(sys.modules)


def pytest_sessionfinish(session):
    name = "fork.json" if hasattr(session.config, "workerinput") else "run.json"
    with open(name, "w") as f:
        json.dump({"all": sorted(sys.modules), "since_configure": sorted(set(sys.modules) - _configured)}, f)
"""


def _again(modules: Iterable[str]) -> list[str]:
    """The modules among ``modules`` that the preload should have spared: under :data:`first_call.MEASURED_WITH`,
    all of litellm's and tiktoken's; under another litellm, those of :data:`first_call.FIRST_CALL`."""
    if version("litellm") != first_call.MEASURED_WITH:
        return sorted(set(modules) & set(first_call.FIRST_CALL))
    return sorted(m for m in modules if m.split(".")[0] in ("litellm", "tiktoken", "tiktoken_ext"))


def test_a_run_and_a_fork_import_nothing_that_was_preloaded(two_benchmark_files: pytest.Pytester,
                                                            model_server: ScriptedModelServer) -> None:
    pytester = two_benchmark_files
    (pytester.path / "conftest.py").write_text(IMPORTS_PROBE)
    before = set(sys.modules)
    run(pytester, "--mcp-models=fake", "--mcp-record=off", "-k", "a0").assert_outcomes(passed=1)
    imported = set(json.loads((pytester.path / "run.json").read_text())["all"]) - before
    assert _again(imported) == []
    run(pytester, "--mcp-models=fake", "--mcp-record=off", "-k", "a0", "-n", "1").assert_outcomes(passed=1)
    assert len(model_server.requests) == 2  # a call in the run, and one in the fork
    controller = set(json.loads((pytester.path / "run.json").read_text())["all"]) - before
    assert sorted(m for m in controller if m.split(".")[0] == "xdist") == []  # xdist's controller: preloaded too
    fork = json.loads((pytester.path / "fork.json").read_text())["since_configure"]
    assert _again(fork) == []


@pytest.mark.fresh_workers
def test_a_test_marked_fresh_workers_runs_on_fresh_interpreters(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("import sys\ndef test_probe():\n    print('litellm' in sys.modules)\n    assert 0\n")
    pytester.runpytest("-n", "1", "-p", "no:randomly").stdout.fnmatch_lines(["*Captured stdout call*", "False"])
