"""Files the plugin writes and reads back, in one place: atomic writes of text and JSON, and JSON read back.

* :func:`write_json` / :func:`write_text` / :func:`write_bytes`: to a temporary file next to the target, then
  renamed over it, so a reader (an xdist worker, a CI step, the next run) never sees half a file and a failed
  write leaves the previous file as it was; the temporary file never stays.
* :func:`read_json`: a regular file only, bounded in size and depth (:mod:`pytest_mcpeval.json_file`).
* :func:`unwritable_file` / :func:`unwritable_folder`: why an output place cannot be written, said before any
  work is paid for (the run's ``--mcp-report`` and its kin at configure time; ``tune --out`` before its first
  evaluation).

The report and its renderings (``session`` and :mod:`pytest_mcpeval.outputs`), the baseline
(:mod:`pytest_mcpeval.gate.baseline`) and the response cache (:mod:`pytest_mcpeval.run.cache`) all write and read
through here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_mcpeval import bounds
from pytest_mcpeval.json_file import JsonFileError, parse, read_regular


def json_bytes(data: Any, indent: int = 2, sort_keys: bool = False) -> bytes:
    """Strict JSON (a float JSON cannot hold is written as a string: :func:`pytest_mcpeval.bounds.dumps`) as
    UTF-8; when some string has no UTF-8 form (a lone surrogate from a model's reply, which is legal JSON) the
    whole text falls back to ``\\u`` escapes, which read back to the same string."""
    try:
        return (bounds.dumps(data, indent=indent, ensure_ascii=False, sort_keys=sort_keys) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (bounds.dumps(data, indent=indent, ensure_ascii=True, sort_keys=sort_keys) + "\n").encode("ascii")


def write_json(data: Mapping[str, Any] | Any, path: Path, indent: int = 2, sort_keys: bool = False,
               private: bool = False) -> None:
    """``data`` as JSON (:func:`json_bytes`), atomically (:func:`write_bytes`)."""
    write_bytes(json_bytes(data, indent, sort_keys), path, private)


def write_text(text: str, path: Path) -> None:
    """``text`` as UTF-8, atomically; text that cannot be encoded (a lone surrogate) is escaped."""
    write_bytes(text.encode("utf-8", errors="backslashreplace"), path)


def write_bytes(data: bytes, path: Path, private: bool = False) -> None:
    """``data`` to a temporary file next to ``path``, then renamed over it; the temporary file never stays.
    The file gets the mode ``open()`` would give it (the umask's), or stays ``0600`` when ``private``
    (the response cache's entries, as they always were)."""
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:64]}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        if not private:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)  # as open() would create it (mkstemp makes it 0600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json(path: str | os.PathLike[str], limit: int) -> Any:
    """The JSON value of the regular file at ``path`` (at most ``limit`` bytes, bounded depth);
    :class:`~pytest_mcpeval.json_file.JsonFileError` when it is not one, :class:`FileNotFoundError` when none."""
    return parse(read_regular(path, limit))


def read_json_file(path: str | os.PathLike[str], limit: int) -> Any:
    """:func:`read_json`, where a missing file is a :class:`~pytest_mcpeval.json_file.JsonFileError` too (``no such
    file``): every reason is one clause to follow the file's name."""
    try:
        return read_json(path, limit)
    except FileNotFoundError:
        raise JsonFileError("no such file") from None


def unwritable_file(path: Path | None) -> str | None:
    """Why a file cannot be written at ``path`` (checked before the work that makes it), or ``None``."""
    if path is None:
        return None
    if path.is_dir():
        return "is a directory; give a file name"
    return _unwritable_place(path, path.parent)


def unwritable_folder(path: Path, files: tuple[str, ...] = ()) -> str | None:
    """Why the folder ``path`` and the ``files`` to be written in it (names; sub-folders end in ``/``) cannot be,
    or ``None``: a file where the folder should be or above it, one of ``files`` there as the other kind, or no
    permission.  The folder is made (it will be anyway) and a file is created in it and removed: what is tried
    is what the writing will do, for any user (root too) and a read-only file system."""
    import tempfile

    if path.exists() and not path.is_dir():
        return "is a file, not a directory"
    for name in files:
        inside = path / name.rstrip("/")
        if name.endswith("/") and inside.exists() and not inside.is_dir():
            return f"{inside} is a file, not a directory"
        if not name.endswith("/") and inside.is_dir():
            return f"{inside} is a directory, not a file"
    parent = path
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        return f"cannot create a directory under {parent}: it is a file"
    try:
        path.mkdir(parents=True, exist_ok=True)
        for name in ("", *(n for n in files if n.endswith("/") and (path / n).is_dir())):
            fd, probe = tempfile.mkstemp(prefix=".mcpeval-probe.", dir=path / name)
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:
        return f"cannot be written ({exc.strerror or exc})"
    return None


def _unwritable_place(path: Path, parent: Path) -> str | None:
    while not parent.exists():  # the directories we would create
        parent = parent.parent
    if not parent.is_dir():
        return f"cannot create a directory under {parent}: it is a file"
    if not os.access(parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return f"not writable ({path if path.exists() else parent}: permission denied)"
    return None
