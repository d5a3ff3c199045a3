"""What names each selected case, on the controller of an xdist run, from the node ids its workers send.

The controller collects nothing: it learns the selected items from the node ids each worker sends
(xdist's ``pytest_xdist_node_collection_finished``).  A node id is not parsed back into a case: a file
may be named ``x::y.mcpeval.yaml``, a case id or a model alias may hold ``[``, ``]`` or ``::``
(``we]ird::na[me``), and ``file::id[model]`` is then ambiguous.  Instead the controller names the items
itself, as collection does (:func:`~pytest_mcpeval.run.case.item_name`): for each prefix of a node id that
ends at a ``::`` with a benchmark file suffix and is a file under the rootdir, longest first, it loads that
file (once), builds the name of each of its case items for the run's models and their identities, and
looks the rest of the node id up among those names.  Nothing crosses from the workers but the node ids.
Every worker collects the same items, so this is done once per run.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pytest

from pytest_mcpeval.keys import SETTINGS_KEY
from pytest_mcpeval.settings import FILE_SUFFIXES

if TYPE_CHECKING:
    from pytest_mcpeval.run.case import CaseIdentity

_RESOLVED_KEY = pytest.StashKey["dict[str, CaseIdentity]"]()


def received(config: pytest.Config, ids: Sequence[str]) -> dict[str, CaseIdentity]:
    """``{node id: identity}`` of the case items among ``ids`` (a worker's selected items); resolved once per
    run, for the first worker whose collection arrives."""
    found = config.stash.get(_RESOLVED_KEY, None)
    if found is None:
        found = config.stash[_RESOLVED_KEY] = resolve(config, ids)
    return found


def resolve(config: pytest.Config, ids: Sequence[str]) -> dict[str, CaseIdentity]:
    if config.stash[SETTINGS_KEY].list_tools:  # --mcp-tools: no case items are collected
        return {}
    names: dict[str, dict[str, CaseIdentity]] = {}  # per benchmark file: {item name: identity}
    found: dict[str, CaseIdentity] = {}
    for nodeid in ids:
        for file in _files_of(nodeid):
            if file not in names:
                names[file] = _case_items(config, file)
            identity = names[file].get(nodeid[len(file) + 2:])
            if identity is not None:
                found[nodeid] = identity
                break
    return found


def _files_of(nodeid: str) -> Iterator[str]:
    """The prefixes of ``nodeid`` that may be a benchmark file, longest first."""
    end = nodeid.rfind("::")
    while end > 0:
        if nodeid[:end].endswith(FILE_SUFFIXES):
            yield nodeid[:end]
        end = nodeid.rfind("::", 0, end)


def _case_items(config: pytest.Config, file: str) -> dict[str, CaseIdentity]:
    """``{item name: identity}`` of the evaluated case items a worker collects from ``file`` (relative to the
    rootdir, as node ids are): the skipped cases and the check items are not among them."""
    path = config.rootpath / file
    if not path.is_file():
        return {}
    from pytest_mcpeval.benchmark.loader import BenchmarkError, load
    from pytest_mcpeval.run.case import CaseRef, item_name

    try:
        bench = load(path)
    except BenchmarkError:  # the workers reported it as a collection error: no item of it was collected
        return {}
    models = config.stash[SETTINGS_KEY].model_specs(bench.spec.models)
    return {item_name(case.id, model): CaseRef(bench, case, model).identity(config.rootpath)
            for case in bench.spec.cases if not case.skip for model in models}
