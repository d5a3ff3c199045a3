"""Model calls in worker processes (``--mcp-processes``): how many, and when they start.

litellm costs ~10 ms of CPU a call and 2.5-5 s to import; worker processes
(:class:`~pytest_mcpeval.models.processes.CallProcesses`) spread that over the cores, and start while pytest
is still collecting, so the import overlaps the collection.  This module decides: ``--mcp-processes=N``
starts them at configure time (:func:`start_chosen_processes`); ``auto`` plans them once this process will
make enough litellm calls (:func:`note_benchmark_file` from a file's ``- id:`` lines before it is parsed,
:func:`note_model_item` as case items are collected), and starts them once those calls are sure to be made.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_mcpeval.keys import SETTINGS_KEY
from pytest_mcpeval.models.local import PREFIX as LOCAL_PREFIX
from pytest_mcpeval.run.cache import ResponseCache

if TYPE_CHECKING:
    from pytest_mcpeval.models.config import ModelSpec
    from pytest_mcpeval.models.processes import CallProcesses

MIN_CALLS_FOR_PROCESSES = 100  # auto: fewer calls than this are made in the pytest process (docs/performance.md)
MAX_AUTO_PROCESSES = 4  # auto: at ~10 ms of CPU a call, 4 processes make 400 calls a second, past most rate limits
_PROCESSES_KEY = pytest.StashKey["CallProcesses | None"]()
_COUNT_KEY = pytest.StashKey[int]()


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def processes_for(config: pytest.Config) -> int:
    """How many worker processes make this process's litellm calls (0: this process): ``--mcp-processes``, or
    for ``auto`` a process per core this process may use (the cores shared among xdist workers; at most
    :data:`MAX_AUTO_PROCESSES`), none on one core or when the session's own code imported litellm (its settings
    are in this process: :func:`~pytest_mcpeval.models.processes.litellm_set_up_here`)."""
    chosen: int | None = config.stash[SETTINGS_KEY].processes
    if chosen is not None:
        return chosen
    from pytest_mcpeval.models.processes import litellm_set_up_here

    if litellm_set_up_here():  # the user's litellm settings are in this process: the calls are made here
        return 0
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    workers = int(workerinput["workercount"]) if workerinput else 1
    cores = available_cores()
    return min(cores // workers, MAX_AUTO_PROCESSES) if cores >= 2 else 0


def note_model_item(item: pytest.Item, model: ModelSpec) -> None:
    """Called for each case item as it is collected: once this process will make enough litellm calls for worker
    processes to pay (``auto``; any number with ``--mcp-processes=N``), plan them and, when the calls are sure
    to be made (the cache holds nothing of the model yet, or is not read), start them now, so that litellm is
    imported while pytest goes on collecting.  Not for replays (``--mcp-record=none``) and runs that call
    nothing (``--collect-only``, ``--mcp-tools``)."""
    if model.target.startswith(LOCAL_PREFIX):
        return
    config = item.config
    planned = config.stash.get(_PROCESSES_KEY, None)
    if planned is not None:
        if not planned.started and _calls_certain(config, model):
            planned.start()
        return
    settings = config.stash[SETTINGS_KEY]
    if settings.record == "none" or config.option.collectonly or settings.list_tools:
        return
    count = config.stash[_COUNT_KEY] = config.stash.get(_COUNT_KEY, 0) + settings.repeat
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    share = count // (int(workerinput["workercount"]) if workerinput else 1)
    if settings.processes is None and share < MIN_CALLS_FOR_PROCESSES:
        return
    wanted = processes_for(config)
    if wanted <= 0:
        return
    from pytest_mcpeval.models.processes import CallProcesses

    planned = config.stash[_PROCESSES_KEY] = CallProcesses(wanted, auto=settings.processes is None)
    if _calls_certain(config, model):
        planned.start()


_CERTAIN_KEY = pytest.StashKey[dict[str, bool]]()
_CASE_LINE = re.compile(rb"(?m)^[ \t]*-[ \t]+id[ \t]*:")


def note_benchmark_file(config: pytest.Config, path: Path) -> None:
    """When a benchmark file is found, before it is parsed: a file that alone holds enough cases for worker
    processes (its ``- id:`` lines, times the models named on the command line or in the ini file) starts them
    now, a parse earlier than :func:`note_model_item` would (0.3 s for 1000 cases)."""
    settings = config.stash[SETTINGS_KEY]
    if (_PROCESSES_KEY in config.stash or not settings.models or settings.record == "none"
            or config.option.collectonly or settings.list_tools):
        return
    models = [m for m in settings.model_specs([]) if not m.target.startswith(LOCAL_PREFIX)]
    try:
        cases = len(_CASE_LINE.findall(path.read_bytes()))
    except OSError:
        return
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    share = cases * len(models) * settings.repeat // (int(workerinput["workercount"]) if workerinput else 1)
    if not models or (settings.processes is None and share < MIN_CALLS_FOR_PROCESSES):
        return
    wanted = processes_for(config)
    if wanted > 0 and any(_calls_certain(config, model) for model in models):
        from pytest_mcpeval.models.processes import CallProcesses

        processes = config.stash[_PROCESSES_KEY] = CallProcesses(wanted, auto=settings.processes is None)
        processes.start()


def start_chosen_processes(config: pytest.Config) -> None:
    """At configure time, with ``--mcp-processes=N`` (N > 0): start the workers now, so litellm is imported while
    pytest starts and collects (not on the xdist controller, which makes no call, nor for runs that call nothing)."""
    settings = config.stash[SETTINGS_KEY]
    controller = bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")
    if controller or settings.record == "none" or config.option.collectonly or settings.list_tools:
        return
    from pytest_mcpeval.models.processes import CallProcesses

    processes = config.stash[_PROCESSES_KEY] = CallProcesses(int(settings.processes or 0))
    processes.start()


def _calls_certain(config: pytest.Config, model: ModelSpec) -> bool:
    """The model's calls will be made: the cache is not read, or holds nothing of the model yet."""
    settings = config.stash[SETTINGS_KEY]
    if settings.record in ("off", "all"):
        return True
    known = config.stash.setdefault(_CERTAIN_KEY, {})
    if model.target not in known:
        folder = ResponseCache(settings.cache_dir, settings.record, "").path(model, "00").parent.parent
        known[model.target] = not folder.is_dir()
    return known[model.target]


def call_processes(config: pytest.Config) -> CallProcesses | None:
    """The worker processes planned for this process's calls (started at the first call if not yet)."""
    processes = config.stash.get(_PROCESSES_KEY, None)
    if processes is None and config.stash[SETTINGS_KEY].processes:  # chosen, though fewer calls than planned for
        from pytest_mcpeval.models.processes import CallProcesses

        processes = config.stash[_PROCESSES_KEY] = CallProcesses(int(config.stash[SETTINGS_KEY].processes or 0))
    return processes


def close_processes(config: pytest.Config) -> None:
    """At the end of the run: workers started while collecting, for calls that no case made (all deselected)."""
    processes = config.stash.get(_PROCESSES_KEY, None)
    if processes is not None:
        processes.close()
