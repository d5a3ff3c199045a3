"""Which calls are made ahead, together: the prefetch group of an item, from what the ``--dist`` mode keeps
on one worker.

When the first item of a group runs, the model calls of the group's items (every repeat) are submitted
(:meth:`~pytest_mcpeval.run.runtime.Runtime.prefetch`), and each item then only waits for its own call, in
collection order.  A group is a benchmark file (the whole session without xdist), and under xdist a part
of one that stays on one worker, so every call is made once, by the process that runs its item.

With ``-n`` and no ``--dist``, the xdist scheduler (:mod:`~pytest_mcpeval.run.scheduler`) cuts each file
into one slice per worker (:func:`benchmark_slices`) and sends a slice's items to one worker.  Under a
``--dist`` mode that spreads a file's items (``load``, ``worksteal``, ``loadgroup``, ``each``) an item's
group is itself.
"""

from __future__ import annotations

import types
from typing import Any

import pytest

from pytest_mcpeval.settings import FILE_SUFFIXES

WORKERINPUT_KEY = "mcpeval_distribution"  # what the controller's --dist mode keeps on one worker: see distribution()
SESSION_GROUP = "<session>"
OUR_PLUGIN = "pytest_mcpeval.plugin"  # the module of the default mcp_server fixture (named: nothing here imports it)
_SLICES_KEY = pytest.StashKey[dict[str, str]]()
_OVERRIDDEN_KEY = pytest.StashKey[bool]()


def prefetch_group(item: pytest.Item) -> str:
    """The group whose calls this process makes ahead when ``item`` is the first of it to run.

    Without xdist the group is the whole session (every call of the run is submitted when its first case
    runs), unless a ``conftest.py`` or plugin overrides the ``mcp_server`` fixture: its value, which decides
    the tools, is only known to items that request it, so the group is then the item's file, whose items
    all see the same conftest files.  Under ``--dist loadfile/loadscope`` it is the file (xdist hands out
    whole files); a slice of the file under the slice scheduler; the item alone under modes that spread
    a file's items.  Cheap: every item asks, only the first of a group goes on to :func:`group_items`.
    """
    kept = scope(item.config)
    if kept == "item":
        return item.nodeid
    if kept == "file":
        if getattr(item.config, "workerinput", None) is None and not server_overridden(item.config):
            return SESSION_GROUP
        return str(item.path)
    return _slices(item).get(item.nodeid, item.nodeid)


def group_items(item: pytest.Item, group: str) -> list[pytest.Item]:
    """The items of ``group`` from ``item`` on (those before it ran elsewhere, on a worker that crashed)."""
    if group == item.nodeid:
        return [item]
    items = item.session.items
    later = items[items.index(item):]
    if group == SESSION_GROUP:
        return later
    if scope(item.config) == "file":
        return [other for other in later if other.path == item.path]
    slices = _slices(item)
    return [other for other in later if slices.get(other.nodeid) == group]


def _slices(item: pytest.Item) -> dict[str, str]:
    slices = item.config.stash.get(_SLICES_KEY, None)
    if slices is None:
        workers = int(item.config.workerinput["workercount"])  # type: ignore[attr-defined]
        slices = item.config.stash[_SLICES_KEY] = benchmark_slices([o.nodeid for o in item.session.items], workers)
    return slices


def server_overridden(config: pytest.Config) -> bool:
    """Whether a plugin or ``conftest.py`` other than ours defines an ``mcp_server`` fixture (asked once the
    items are collected, when every conftest of the collection is loaded).

    pytest has no public API that lists the definitions of a fixture name (``FixtureManager.getfixturedefs``
    and ``Item._fixtureinfo.name2fixturedefs`` are private).  Its public ways of seeing which fixture an
    item gets answer for one item once it runs: ``request.getfixturevalue("mcp_server")``, or the value the
    item receives (a sentinel returned by our fixture would say "not overridden" only for that item);
    ``item.fixturenames`` holds ``mcp_server`` for every case item, overridden or not.  This is asked for
    items that have not run: the pre-flight check runs before any item, and the prefetch group is chosen
    when the first item runs, for all the others.  So the registered plugins are read (public: conftest.py
    files are plugins, ``pluginmanager.get_plugins()``) for an attribute named ``mcp_server``, or a fixture
    given that name with ``@pytest.fixture(name="mcp_server")``: an object of the type ``pytest.fixture``
    returns, taken from ``pytest.fixture`` itself (no private class is named), whose ``name`` is
    ``mcp_server``."""
    found = config.stash.get(_OVERRIDDEN_KEY, None)
    if found is None:
        fixture_type = type(pytest.fixture(_probe))  # pytest >= 8.4: FixtureFunctionDefinition; before, a function
        found = False
        for plugin in config.pluginmanager.get_plugins():
            if plugin is None or (isinstance(plugin, types.ModuleType) and plugin.__name__ == OUR_PLUGIN):
                continue
            spaces = [vars(plugin)] if isinstance(plugin, types.ModuleType) else [
                vars(klass) for klass in type(plugin).__mro__]
            if any(name == "mcp_server" or (isinstance(value, fixture_type)
                                            and getattr(value, "name", None) == "mcp_server")
                   for space in spaces for name, value in list(space.items())):
                found = True
                break
        config.stash[_OVERRIDDEN_KEY] = found
    return found


def _probe() -> None:
    """Decorated with ``pytest.fixture`` only to learn the type it returns (never registered: this module is no
    plugin)."""


def makes_calls_at_once(config: pytest.Config, files: int) -> int:
    """How many processes of this run may have calls in flight at the same time (they share the budget)."""
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput is None:
        return 1
    workers = int(workerinput["workercount"])
    # whole files: a worker makes one file's calls at a time (its items wait for them), so at most one per file
    return max(1, min(workers, files)) if scope(config) == "file" else workers


def distribution(config: pytest.Config, dist_chosen: bool) -> str:
    """On the controller: what the ``--dist`` mode keeps on one worker, ``slice``, ``file`` or ``item``."""
    dist = config.getoption("dist", "no")
    if dist == "load" and not dist_chosen:
        return "slice"  # pytest_xdist_make_scheduler hands xdist the slice scheduler (run/scheduler.py)
    return "file" if dist in ("loadfile", "loadscope") else "item"  # loadscope's scope of file::item is the file


def scope(config: pytest.Config) -> str:
    """What this process's ``--dist`` mode keeps together: ``file`` without xdist, else what the controller said."""
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    return "file" if workerinput is None else str(workerinput.get(WORKERINPUT_KEY, "item"))


def benchmark_slices(nodeids: list[str], workers: int) -> dict[str, str]:
    """``{node id: slice}`` for the benchmark items: each file's items, in collection order, cut into
    ``workers`` runs of equal length (the last one shorter).  Every worker computes the same from its
    collection, which xdist checks is the same on all of them, and so does the scheduler."""
    by_file: dict[str, list[str]] = {}
    for nodeid in nodeids:
        path = nodeid.split("::", 1)[0]
        if path.endswith(FILE_SUFFIXES):
            by_file.setdefault(path, []).append(nodeid)
    slices: dict[str, str] = {}
    for path, ids in by_file.items():
        size = -(-len(ids) // max(1, workers))
        slices.update((nodeid, f"{path}::slice-{i // size}") for i, nodeid in enumerate(ids))
    return slices
