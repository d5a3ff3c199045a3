"""The benchmark files of the command's PATHs and the live catalog of their server.

The catalog is the one the first file's ``server`` block gives (started as a run would start it); the cases of
every file with the same server count, so a case of ``flows.mcpeval.yaml`` is a near-duplicate too.  A file with
another server, or none (an ``mcp_server`` fixture's), is left out and said.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_mcpeval.benchmark.loader import Benchmark
from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.draft import DraftError

SKIPPED_DIRS = frozenset({"node_modules", "__pycache__", "venv"})  # and every folder whose name starts with "."


@dataclass
class Source:
    files: list[Benchmark]  # the files of the first file's server, in path order (the out file left out)
    catalog: Catalog
    notes: list[str] = field(default_factory=list)

    @property
    def first(self) -> Benchmark:
        return self.files[0]


def benchmark_paths(paths: Sequence[str]) -> list[Path]:
    """The benchmark files of ``paths`` (files, or folders searched as pytest would), each once, in order."""
    from pytest_mcpeval.settings import FILE_SUFFIXES

    found: list[Path] = []
    for text in paths:
        path = Path(text)
        if path.is_file():
            if not path.name.endswith(FILE_SUFFIXES):
                raise DraftError(f"{text}: not a benchmark file (expected a name ending {' or '.join(FILE_SUFFIXES)})")
            found.append(path)
        elif path.is_dir():
            found += sorted(p for p in path.rglob("*") if p.name.endswith(FILE_SUFFIXES) and p.is_file()
                            and not any(part.startswith(".") or part in SKIPPED_DIRS
                                        for part in p.relative_to(path).parts[:-1]))
        else:
            raise DraftError(f"{text}: no such file or folder")
    unique = list({p.resolve(): p for p in reversed(found)}.values())[::-1]  # each once, as the user named it
    if not unique:
        raise DraftError(f"no benchmark file in {' '.join(paths)}")
    return unique


def load_source(paths: Sequence[str], out: Path, timeout: float) -> Source:
    """The files (``out`` itself left out: the command rewrites it) and the first file's live catalog."""
    from pytest_mcpeval.benchmark.loader import load
    from pytest_mcpeval.benchmark.problems import BenchmarkError
    from pytest_mcpeval.servers import ServerError, ServerPool

    files: list[Benchmark] = []
    for path in benchmark_paths(paths):
        if path.resolve() == out.resolve():
            continue
        try:
            files.append(load(path))
        except BenchmarkError as exc:
            raise DraftError(str(exc).splitlines()[0]) from None
    with_server = [b for b in files if b.spec.server is not None]
    if not with_server:
        raise DraftError(f"no benchmark file of {' '.join(paths)} has a `server` block: draft reads the server's "
                         "tools from it (a server an `mcp_server` fixture gives is not read)")
    first = with_server[0]
    assert first.spec.server is not None
    same = [b for b in with_server if _server_key(b) == _server_key(first)]
    notes = [f"{b.path}: left out (its server is not the one of {first.path})" for b in files if b not in same]
    logs = Path(tempfile.mkdtemp(prefix="mcpeval-draft-"))  # kept only when the server failed: its log is named
    pool = ServerPool(logs, timeout)
    try:
        catalog = pool.catalog_for_spec(first.spec.server, first.path.parent, Path.cwd())
    except ServerError as exc:
        raise DraftError(f"{first.path}: the server did not give its tools: {str(exc).splitlines()[0]}",
                         status=3) from None
    finally:
        pool.close()
    shutil.rmtree(logs, ignore_errors=True)
    return Source(same, catalog, notes)


def _server_key(bench: Benchmark) -> str:
    assert bench.spec.server is not None
    return f"{bench.path.parent}|{bench.spec.server.model_dump_json()}"
