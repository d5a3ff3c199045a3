"""The catalog of a ``tools_file`` (a server block's static tool list), made once per process for each content.

A run reads the same file three or four times (collection, the pre-flight check, the session's servers), and a
catalog is never changed once made: the catalog of a file's bytes is kept (the last few, by their SHA-256), so a
changed file is read anew.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from pathlib import Path

from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.defaults import MAX_FILE_BYTES
from pytest_mcpeval.transports import ServerError

_TOOLS_FILES: dict[bytes, Catalog] = {}  # by the SHA-256 of a tools file's bytes: see load_tools_file
_TOOLS_FILES_KEPT = 8
_LOCK = threading.Lock()  # the pre-flight check and the session's servers may read one from two threads


def load_tools_file(path: Path, shown: str | None = None) -> Catalog:
    """The catalog of a ``tools_file``; a :class:`ServerError` names the file (as ``shown``) and every problem.
    Made once per content (a catalog of the 117 GitHub tools: 16 ms)."""
    from pytest_mcpeval.benchmark.problems import BenchmarkError
    from pytest_mcpeval.benchmark.tools_file import read_tools_file

    key = raw = None
    with contextlib.suppress(OSError):  # not there, or not readable: said below
        if path.stat().st_size <= MAX_FILE_BYTES:
            raw = path.read_bytes()  # hashed and parsed both: a file rewritten meanwhile is not kept under another
            key = hashlib.sha256(raw).digest()
    with _LOCK:
        found = _TOOLS_FILES.get(key) if key is not None else None
    if found is not None:
        return found
    try:
        tools = read_tools_file(path, shown, raw)
    except FileNotFoundError:
        where = os.path.normpath(path)  # the file's directory joined with what it says: show where that leads
        raise ServerError(f"tools_file {path}{f' (that is {where})' if where != str(path) else ''} does not "
                          "exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ServerError(f"tools_file {path} cannot be read: {exc}") from None
    except BenchmarkError as exc:
        raise ServerError(f"tools_file {shown or path} is not a valid tool list:\n{exc}") from None
    try:
        catalog = Catalog(tools)
    except ValueError as exc:  # pragma: no cover - read_tools_file checked names
        raise ServerError(f"tools_file {shown or path}: {exc}") from None
    if key is not None:
        with _LOCK:
            if len(_TOOLS_FILES) >= _TOOLS_FILES_KEPT:
                del _TOOLS_FILES[next(iter(_TOOLS_FILES))]
            _TOOLS_FILES[key] = catalog
    return catalog
