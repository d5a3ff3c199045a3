"""Record / replay of model responses ("cassettes").

Every response is a JSON file keyed by a hash of everything that determines it: the model string, the
parameters that change the answer (not api_base, keys, timeouts or retry counts), the messages, the
tool list as sent, and the repeat index.  A changed tool description changes the key of every request
that carried it, so exactly those calls are made again.  The directory is meant to be committed.

Modes (``--mcp-record``):

* ``new`` (default): replay hits, call on misses and store them;
* ``none``: replay only, a miss is an error naming the case (CI without keys);
* ``all``: call everything and overwrite;
* ``off``: neither read nor write the directory.

Writes are atomic (temp file + ``os.replace``), so concurrent xdist workers never see half a file; a
corrupted entry is reported once and treated as a miss.  Entries carry the id of the run that wrote
them: in mode ``all`` only this run's entries are replayed (a request two cases share, or the calls a
crashed worker completed before a replacement runs the rest of its file).  Nothing secret is written:
parameters that look like keys, tokens or headers never enter an entry.

A cache that cannot be written (the directory is a file or read-only, the disk is full) costs no
result: the reply is used, not stored, and the reason is noted once in :attr:`ResponseCache.unwritable`.
Entries are UTF-8 JSON; an entry holding text that UTF-8 cannot encode (a lone surrogate such as
``"\\ud83d"``: legal JSON, and models do send it) is written as ASCII JSON instead, where the
``\\ud83d`` escape reads back as the identical string.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_mcpeval import bounds
from pytest_mcpeval.models.config import SECRET_PARAM, ModelSpec
from pytest_mcpeval.text import canonical_json

MODES = ("new", "none", "all", "off")
ENTRY_VERSION = 2  # of the request key (request_key)
LEGACY_VERSION = 1  # keys still read (legacy_request_key)
# parameters that do not change what the model answers: left out of the key
TRANSPORT_PARAMS = frozenset({"api_base", "base_url", "timeout", "num_retries", "max_retries", "request_timeout"})
# beside the models' directories: the token counts of catalogs (models.tokens), as JSON in `<digest>.tokens` files
# (not `.json`: the entries are the `.json` files of the cache)
TOKENS_DIR = "catalog-tokens"
TOKENS_VERSION = 1  # of how a tool is counted (its OpenAI form, keys sorted): a change makes counts stale


def request_key(model: ModelSpec, messages: list[dict[str, Any]], tools: list[dict[str, Any]], repeat: int) -> str:
    """The SHA-256 of the canonical JSON of ``{"messages", "model", "params", "repeat", "tools", "v": 2}``, where
    ``tools`` is the SHA-256 (hex) of the tool list's canonical JSON.

    The tool list is the bulk of a request (130 KB for the GitHub server's 117 tools) and the same for every
    case of a catalog: hashed once per list (:func:`_tools_text`), the key of a case hashes a few hundred
    bytes.  (Version 1 hashed the whole list into every key: 63 ms of every 1000 cases of a replay.  Its entries
    are still read: :func:`legacy_request_key`.)"""
    head = _head(model, messages, repeat)
    return hashlib.sha256(b'%s,"tools":"%s","v":%d}' % (_utf8(head[:-1]), _tools_text(tools)[1],
                                                          ENTRY_VERSION)).hexdigest()


def legacy_request_key(model: ModelSpec, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                       repeat: int) -> str:
    """The key of version 1 entries: the SHA-256 of the canonical JSON of ``{"messages", "model", "params",
    "repeat", "tools", "v": 1}`` with the tool list itself.  Read when an entry of the current version is
    missing, so a cache recorded before still replays; written never."""
    digest = hashlib.sha256(_utf8(_head(model, messages, repeat)[:-1]))  # keys sort: messages ... repeat, tools, v
    digest.update(b',"tools":')
    digest.update(_tools_text(tools)[0])
    digest.update(b',"v":%d}' % LEGACY_VERSION)
    return digest.hexdigest()


def _utf8(text: str) -> bytes:
    """UTF-8, with a lone surrogate (``"\\ud83d"``: legal JSON, and models and servers do send it) kept as its own
    three bytes instead of an error: such a request gets a key like any other."""
    return text.encode("utf-8", "surrogatepass")


def _head(model: ModelSpec, messages: list[dict[str, Any]], repeat: int) -> str:
    params = {k: v for k, v in model.params.items() if k not in TRANSPORT_PARAMS and not SECRET_PARAM.search(k)}
    return canonical_json({"messages": messages, "model": model.target, "params": params, "repeat": repeat})


_TOOLS_TEXT: dict[int, tuple[list[dict[str, Any]], bytes, bytes]] = {}
_TOOLS_TEXT_LOCK = threading.Lock()
_NO_TOOLS = (b"[]", hashlib.sha256(b"[]").hexdigest().encode())


def _tools_text(tools: list[dict[str, Any]]) -> tuple[bytes, bytes]:
    """The canonical JSON of a tool list and its SHA-256 (hex), made once per list object (a catalog's
    ``openai_tools``)."""
    if not tools:
        return _NO_TOOLS
    found = _TOOLS_TEXT.get(id(tools))
    if found is None or found[0] is not tools:  # a new list that took the id of one gone
        text = _utf8(canonical_json(tools))
        found = (tools, text, hashlib.sha256(text).hexdigest().encode())
        with _TOOLS_TEXT_LOCK:
            if len(_TOOLS_TEXT) >= 64:  # catalogs of a run are few; keep it bounded all the same
                _TOOLS_TEXT.clear()
            _TOOLS_TEXT[id(tools)] = found
    return found[1], found[2]


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text)[:80] or "model"


class ResponseCache:
    def __init__(self, directory: Path, mode: str, run_id: str) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown record mode {mode!r}")
        self.directory = directory
        self.mode = mode
        self.run_id = run_id
        self.corrupted: list[str] = []  # entries that could not be read (called again)
        self.unwritable: list[str] = []  # why entries could not be stored, once per reason (replies still used)
        self._lock = threading.Lock()
        self._folders: dict[str, str] = {}  # model string -> its directory, as text

    def path(self, model: ModelSpec, key: str) -> Path:
        folder = self._folders.get(model.target)
        if folder is None:
            folder = self._folders[model.target] = f"{self.directory}{os.sep}{_slug(model.target)}{os.sep}"
        return Path(f"{folder}{key[:2]}{os.sep}{key}.json")

    def has(self, model: ModelSpec, key: str) -> bool:
        return self.path(model, key).is_file()

    def get(self, model: ModelSpec, key: str) -> dict[str, Any] | None:
        """The stored entry, or ``None`` for a miss (including entries this mode must not replay)."""
        path = self.path(model, key)
        try:
            entry = bounds.loads(path.read_text(encoding="utf-8"))  # strict and bounded: a file may be anything
            if not isinstance(entry, dict) or "reply" not in entry:
                raise ValueError("not a cache entry")
        except (FileNotFoundError, NotADirectoryError):  # not recorded (or the cache directory is a file)
            return None
        except (OSError, ValueError) as exc:
            with self._lock:
                note = f"{path}: {exc}"
                if note not in self.corrupted:
                    self.corrupted.append(note)
            return None
        if self.mode in ("all", "off") and entry.get("run") != self.run_id:
            return None  # only what this run recorded counts
        return entry

    def put(self, model: ModelSpec, key: str, entry: Mapping[str, Any]) -> bool:
        """Store ``entry``; ``False`` when it could not be written (the reason is in :attr:`unwritable`)."""
        data = dict(entry)
        data["run"] = self.run_id
        return self._write(self.path(model, key), data)

    def read_tokens(self, encoding: str) -> dict[str, int]:
        """Every token count this cache holds (the hash of a tool's counted text -> tokens; any mode but off)."""
        found: dict[str, int] = {}
        for path in sorted((self.directory / TOKENS_DIR).glob("*.tokens")):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                if data.get("v") == TOKENS_VERSION and data.get("encoding") == encoding:
                    found.update({str(key): int(n) for key, n in data["tools"].items()})
            except (OSError, ValueError, TypeError, KeyError, AttributeError):  # unreadable: counted again
                continue
        return found

    def write_tokens(self, digest: str, encoding: str, counts: Mapping[str, int]) -> None:
        """Keep a catalog's counts for the next run (modes new and all; ``none`` writes nothing)."""
        if self.mode in ("new", "all"):
            self._write(self.directory / TOKENS_DIR / f"{digest}.tokens",
                        {"v": TOKENS_VERSION, "encoding": encoding, "tools": dict(counts)})

    def _write(self, path: Path, data: Mapping[str, Any]) -> bool:
        """Write ``data`` atomically (a temporary file, then ``os.replace``); ``False`` when it could not be."""
        try:
            payload = _encode(data)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.stem[:8]}.", suffix=".tmp", dir=path.parent)
        except (OSError, ValueError, TypeError) as exc:
            self._note_unwritable(exc)
            return False
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(payload)
            os.replace(tmp, path)
        except OSError as exc:
            Path(tmp).unlink(missing_ok=True)
            self._note_unwritable(exc)
            return False
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return True

    def _note_unwritable(self, exc: Exception) -> None:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else f"{type(exc).__name__}: {exc}"
        note = f"{self.directory}: {reason}"  # the same on every xdist worker, so the controller can dedupe
        with self._lock:
            if note not in self.unwritable:
                self.unwritable.append(note)


def _encode(data: Mapping[str, Any]) -> bytes:
    """The entry as UTF-8 JSON, or as ASCII JSON when some text has no UTF-8 form (a lone surrogate)."""
    try:
        return (bounds.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (bounds.dumps(data, indent=1, sort_keys=True, ensure_ascii=True) + "\n").encode("ascii")
