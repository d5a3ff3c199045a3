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

Writes are atomic (temp file + ``os.replace``), so concurrent xdist workers never see half a file.  An entry
is read only from a regular file of at most :data:`MAX_ENTRY_BYTES` (not a FIFO, whose open would wait for a
writer, nor a device) and validated (:class:`_Entry`: the reply's shape and types, finite non-negative counts);
one that does not validate is :class:`BadEntry`, which the dispatcher treats as absent: called again and
overwritten, or under ``--mcp-record=none`` an error naming the file, and the summary says which
(:attr:`ResponseCache.corrupted`).  Entries carry the id of the run that wrote
them: in mode ``all`` only this run's entries are replayed (a request two cases share, or the calls a
crashed worker completed before a replacement runs the rest of its file).  Nothing secret is written:
parameters that look like keys, tokens or headers never enter an entry, those under such a name deeper down
(``extra_body.session_auth``) are masked, and every entry goes through the run's redactor before it is written
(a reply that echoed a key).  The key is computed before any of that, from what was sent, as it always was.

A cache that cannot be written (the directory is a file or read-only, the disk is full) costs no
result: the reply is used, not stored, and the reason is noted once in :attr:`ResponseCache.unwritable`.
Entries are UTF-8 JSON; an entry holding text that UTF-8 cannot encode (a lone surrogate such as
``"\\ud83d"``: legal JSON, and models do send it) is written as ASCII JSON instead, where the
``\\ud83d`` escape reads back as the identical string.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, cast

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictStr, ValidationError

from pytest_mcpeval.defaults import RECORD_MODES
from pytest_mcpeval.json_file import JsonFileError, first_problem
from pytest_mcpeval.models.config import SECRET_PARAM, ModelSpec
from pytest_mcpeval.storage import read_json
from pytest_mcpeval.text import canonical_json, plural

log = logging.getLogger(__name__)

MODES = RECORD_MODES
ENTRY_VERSION = 2  # of the request key (request_key)
LEGACY_VERSION = 1  # keys still read (legacy_request_key)
# parameters that do not change what the model answers: left out of the key
TRANSPORT_PARAMS = frozenset({"api_base", "base_url", "timeout", "num_retries", "max_retries", "request_timeout"})
# beside the models' directories: the token counts of catalogs (models.tokens), as JSON in `<digest>.tokens` files
# (not `.json`: the entries are the `.json` files of the cache)
TOKENS_DIR = "catalog-tokens"
TOKENS_VERSION = 1  # of how a tool is counted (its OpenAI form, keys sorted): a change makes counts stale
# a reply's text is cut at CACHE_CONTENT_CAP (1M characters), so a real entry is a few MB at most
MAX_ENTRY_BYTES = 64 << 20
# what became of an entry that did not validate (ResponseCache.corrupted), as the summary says it
CALLED_AGAIN, REPLAYED_OLDER, FAILED = "called again", "replayed older", "failed"


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


def model_folder(directory: Path, model: ModelSpec) -> Path:
    """Where the cache keeps the answers of ``model`` (the pre-flight check asks whether it holds any)."""
    return directory / _slug(model.target)


_STRICT = ConfigDict(strict=True, allow_inf_nan=False, extra="ignore")
_Count = Annotated[int, Field(ge=0)]
_Seconds = Annotated[float, Field(ge=0)]


class _Call(BaseModel):
    model_config = _STRICT

    name: str
    arguments: str
    id: str = ""
    fields: dict[str, Any] | None = None  # what the provider needs back with the call (Gemini's thought_signature)


class _Search(BaseModel):
    """One search the provider ran for a reply (native tool search): its query and the tools it surfaced."""

    model_config = _STRICT

    query: str
    tools: list[str] = []
    error: str | None = None


class _Reply(BaseModel):
    """:meth:`ModelReply.to_entry` as read back: ``calls`` is required (an empty object is no reply, not a reply
    that called nothing); the rest has the defaults of entries written before it was kept."""

    model_config = _STRICT

    calls: list[_Call]
    content: str | None = None
    usage: dict[str, _Count] = {}
    latency_s: _Seconds = 0.0
    cost_usd: _Seconds | None = None
    attempts: Annotated[int, Field(ge=1)] = 1
    fills_arguments: bool = True
    ranking: list[Annotated[tuple[StrictStr, StrictFloat], Field(strict=False)]] | None = None  # JSON: lists
    top_k: _Count = 10
    content_truncated: _Count | None = None
    thinking_blocks: list[dict[str, Any]] | None = None  # signed, sent back unchanged on a flow's next turn
    finish_reason: str | None = None
    provider_finish_reason: str | None = None
    searches: list[_Search] | None = None


class _Entry(BaseModel):
    model_config = _STRICT

    reply: _Reply
    run: str | None = None
    params_sent: dict[str, Any] | None = None


class _Tokens(BaseModel):
    """A ``.tokens`` file of :data:`TOKENS_DIR` (:meth:`ResponseCache.write_tokens`)."""

    model_config = _STRICT

    v: int
    encoding: str
    tools: dict[str, _Count]


class BadEntry(Exception):
    """An entry that is there but cannot be replayed: ``note`` is its path and what is wrong, on one line."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason
        self.note = f"{path}: {reason}"


def read_entry(path: Path | str) -> dict[str, Any]:
    """The entry at ``path``, validated; :class:`FileNotFoundError` when none is there, :class:`BadEntry` when
    what is there does not validate.  Parsed by :func:`~pytest_mcpeval.json_file.parse`, which reads a lone
    surrogate (``"\\ud83d"``) back as written (pydantic's validation of JSON text refuses it)."""
    try:
        data = read_json(path, MAX_ENTRY_BYTES)
    except JsonFileError as exc:
        raise BadEntry(Path(path), str(exc)) from None
    try:
        _Entry.model_validate(data)
    except ValidationError as exc:
        raise BadEntry(Path(path), first_problem(exc, data)) from None
    return cast(dict[str, Any], data)  # as written (validation would add defaults and drop unknown keys)


class ResponseCache:
    def __init__(self, directory: Path, mode: str, run_id: str) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown record mode {mode!r}")
        self.directory = directory
        self.mode = mode
        self.run_id = run_id
        # entries that did not validate: (what became of them, "path: what is wrong"), each once
        self.corrupted: list[tuple[str, str]] = []
        self.unwritable: list[str] = []  # why entries could not be stored, once per reason (replies still used)
        self._lock = threading.Lock()
        self._folders: dict[str, str] = {}  # model string -> its directory, as text

    def path(self, model: ModelSpec, key: str) -> Path:
        return Path(self._where(model, key))

    def _where(self, model: ModelSpec, key: str) -> str:
        """:meth:`path` as text: what reading and looking cost (a replay makes a ``Path`` of it only for an error)."""
        folder = self._folders.get(model.target)
        if folder is None:
            folder = self._folders[model.target] = f"{self.directory}{os.sep}{_slug(model.target)}{os.sep}"
        return f"{folder}{key[:2]}{os.sep}{key}.json"

    def has(self, model: ModelSpec, key: str) -> bool:
        return os.path.isfile(self._where(model, key))

    def get(self, model: ModelSpec, key: str) -> dict[str, Any] | None:
        """The stored entry, or ``None`` for a miss (including entries this mode must not replay); raises
        :class:`BadEntry` for an entry that does not validate (the caller decides, and says, what becomes of it:
        :meth:`note_bad`)."""
        try:
            entry = read_entry(self._where(model, key))
        except (FileNotFoundError, NotADirectoryError):  # not recorded (or the cache directory is a file)
            return None
        if self.mode in ("all", "off") and entry.get("run") != self.run_id:
            return None  # only what this run recorded counts
        return entry

    def note_bad(self, bad: BadEntry, outcome: str) -> None:
        """Record an entry that did not validate and what became of it (:data:`CALLED_AGAIN`,
        :data:`REPLAYED_OLDER`, :data:`FAILED`), once."""
        with self._lock:
            if (outcome, bad.note) not in self.corrupted:
                self.corrupted.append((outcome, bad.note))

    def put(self, model: ModelSpec, key: str, entry: Mapping[str, Any]) -> bool:
        """Store ``entry``; ``False`` when it could not be written (the reason is in :attr:`unwritable`)."""
        from pytest_mcpeval.redact import current

        # the directory is meant to be committed: no secret value in it (by value only: see Redactor.data_by_value)
        data = current().data_by_value(dict(entry))
        data["run"] = self.run_id
        return self._write(self.path(model, key), data)

    def read_tokens(self, encoding: str) -> dict[str, int]:
        """Every token count this cache holds (the hash of a tool's counted text -> tokens; any mode but off)."""
        found: dict[str, int] = {}
        for path in sorted((self.directory / TOKENS_DIR).glob("*.tokens")):
            try:  # a regular file only (a FIFO would wait for a writer), of counts that are whole and >= 0
                data = _Tokens.model_validate(read_json(path, MAX_ENTRY_BYTES))
            except (OSError, JsonFileError, ValidationError) as exc:  # unusable: those tools are counted again
                log.debug("token counts %s not used: %s", path, exc)
                continue
            if data.v == TOKENS_VERSION and data.encoding == encoding:
                found.update(data.tools)
        return found

    def write_tokens(self, digest: str, encoding: str, counts: Mapping[str, int]) -> None:
        """Keep a catalog's counts for the next run (modes new and all; ``none`` writes nothing)."""
        if self.mode in ("new", "all"):
            self._write(self.directory / TOKENS_DIR / f"{digest}.tokens",
                        {"v": TOKENS_VERSION, "encoding": encoding, "tools": dict(counts)})

    def _write(self, path: Path, data: Mapping[str, Any]) -> bool:
        """Write ``data`` atomically (:func:`pytest_mcpeval.storage.write_json`); ``False`` when it could not be."""
        from pytest_mcpeval.storage import write_json

        try:
            write_json(data, path, indent=1, sort_keys=True, private=True)
        except (OSError, ValueError, TypeError) as exc:
            self._note_unwritable(exc, path)
            return False
        return True

    def _note_unwritable(self, exc: Exception, path: Path) -> None:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else f"{type(exc).__name__}: {exc}"
        note = f"{self.directory}: {reason}"  # the same on every xdist worker, so the controller can dedupe
        if isinstance(exc, IsADirectoryError) and path.is_dir():  # the entry's own place, not the cache's
            note = f"{path}: a directory stands where this entry goes (remove it to record the entry)"
        with self._lock:
            if note not in self.unwritable:
                self.unwritable.append(note)


_WHAT_BECAME = (  # outcome -> the summary's words, one noun phrase for one entry and one for several
    (CALLED_AGAIN, "could not be used and was called again", "could not be used and were called again"),
    (FAILED, "could not be used, and its case is an error (--mcp-record=none replays only)",
     "could not be used, and their cases are errors (--mcp-record=none replays only)"),
    (REPLAYED_OLDER, "could not be used; the entry of the older key version was replayed instead",
     "could not be used; the entries of the older key version were replayed instead"),
)


def bad_entry_lines(corrupted: list[tuple[str, str]]) -> list[str]:
    """What the summary says of the entries that did not validate: a heading per outcome, then one indented
    ``path: what is wrong`` per entry.  It says "called again" only of entries whose call was made."""
    lines: list[str] = []
    for outcome, one, several in _WHAT_BECAME:
        notes = [note for o, note in corrupted if o == outcome]
        if notes:
            lines.append(f"{plural(len(notes), 'cache entry', 'cache entries')} {one if len(notes) == 1 else several}:")
            lines += [f"  {note}" for note in notes]
    return lines
