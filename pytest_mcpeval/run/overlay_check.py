"""``--mcp-overlay`` checked before any model is called: every tool and parameter the overlay names must be in the
catalogs of the selected files (the overlay itself is :mod:`pytest_mcpeval.overlay`).

The catalogs are those the pre-flight check listed (:func:`pytest_mcpeval.run.preflight.catalogs`): no server is
started for this check when the pre-flight ran, and when it did not (``--mcp-no-preflight``, ``--mcp-tools``)
they are listed as it lists them, all at once and each within ``--mcp-connect-timeout``, leaving no folder
behind.  ``--snapshot-update`` with ``--mcp-snapshots`` is refused with an overlay (:mod:`pytest_mcpeval.settings`):
the snapshots would record the overlay's descriptions as the server's.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from pytest_mcpeval.benchmark.loader import Benchmark
from pytest_mcpeval.overlay import Overlay

_CHECKED_KEY = pytest.StashKey[bool]()


def check(config: pytest.Config, benches: Iterable[Benchmark], overlay: Overlay) -> None:
    """The catalogs of the selected files' servers must have every tool and parameter the overlay names: a usage
    error otherwise, before any model is called.  Not when a ``conftest.py`` overrides ``mcp_server`` (the fixture
    decides the server per item): the overlay then changes what it finds."""
    from pytest_mcpeval.run.prefetch import server_overridden
    from pytest_mcpeval.run.preflight import catalogs

    if config.stash.get(_CHECKED_KEY, False) or server_overridden(config):
        return
    config.stash[_CHECKED_KEY] = True
    found = {catalog.digest: catalog for catalog in catalogs(config, {id(b): b for b in benches}.values())}
    if not found:
        return
    problems = overlay.problems(found.values())
    if problems:
        raise pytest.UsageError("\n".join(problems))
