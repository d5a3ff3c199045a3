"""Throwaway fixtures for the reference servers, made once per session (per xdist worker) when a case of this
directory is collected: a Git repository, a folder of files, a knowledge graph (fixtures.py).

The benchmark files read their paths from ``${MCPEVAL_GIT_REPO}``, ``${MCPEVAL_FILES}`` and
``${MCPEVAL_MEMORY_FILE}``, and find the server commands on ``PATH``; both are set here for the session and
restored after it, and the fixtures are deleted.  A case whose server is not installed (``make servers``), or
needs Node.js where there is none, is skipped with the reason; the npm servers' files are tagged ``node``, so
``-m 'not node'`` deselects them.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("mcpeval_example_fixtures", HERE / "fixtures.py")
assert _spec is not None and _spec.loader is not None
fixtures: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fixtures)

_STATE = pytest.StashKey[tuple[Path, dict[str, str | None]]]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    ours = [item for item in items if item.path.parent == HERE and item.path.name in fixtures.SERVERS]
    if not ours or _STATE in config.stash:
        return
    root = Path(tempfile.mkdtemp(prefix="mcpeval-servers-"))
    env = fixtures.prepare(root)
    config.stash[_STATE] = (root, {name: os.environ.get(name) for name in env})
    os.environ.update(env)
    for item in ours:
        reason = fixtures.missing(item.path.name)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is None:
        return
    root, saved = state
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    shutil.rmtree(root, ignore_errors=True)
