"""``--mcp-overlay`` checked before any model is called: the selected files' servers are started once, and every
tool and parameter the overlay names must be in their catalogs (the overlay itself is :mod:`pytest_mcpeval.overlay`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from pytest_mcpeval.benchmark.loader import Benchmark
from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.overlay import Overlay

_CHECKED_KEY = pytest.StashKey[bool]()


def check(config: pytest.Config, benches: Iterable[Benchmark], overlay: Overlay) -> None:
    """The catalogs of the selected files' servers (started once, then stopped) must have every tool and
    parameter the overlay names: a usage error otherwise, before any model is called.  Not when a ``conftest.py``
    overrides ``mcp_server`` (the fixture decides the server per item): the overlay then changes what it finds."""
    import tempfile

    from pytest_mcpeval.run.prefetch import server_overridden
    from pytest_mcpeval.servers import ServerError, ServerPool

    if config.stash.get(_CHECKED_KEY, False) or server_overridden(config):
        return
    config.stash[_CHECKED_KEY] = True
    pool = ServerPool(Path(tempfile.mkdtemp(prefix="mcpeval-overlay-")))
    catalogs: dict[str, Catalog] = {}
    try:
        for bench in {id(b): b for b in benches}.values():
            if bench.spec.server is None:
                continue
            try:
                catalog = pool.catalog_for_spec(bench.spec.server, bench.path.parent, config.rootpath)
            except ServerError:
                continue  # the pre-flight check or the cases say why
            catalogs[catalog.digest] = catalog
    finally:
        pool.close()
    if not catalogs:
        return
    problems = overlay.problems(catalogs.values())
    if problems:
        raise pytest.UsageError("\n".join(problems))
