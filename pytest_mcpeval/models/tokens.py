"""How many tokens a tool catalog costs in every request: tiktoken's ``o200k_base``, offline, without litellm.

Each tool is counted as the JSON (keys sorted) of its OpenAI ``tools`` entry (what the plugin sends), with
``o200k_base``, the encoding of gpt-4o and later OpenAI models.  Providers count a little differently, so
read the figures as the catalog's relative weight, tool by tool, and how it changes in a pull request.

The encoding is the file litellm ships for offline use (``litellm/litellm_core_utils/tokenizers``), found
without importing litellm (seconds): tiktoken is told to read it from there (``TIKTOKEN_CACHE_DIR``, left set as
litellm sets it on import; a folder of the user's that lacks the file is replaced only while loading it).
``litellm.token_counter(model="gpt-4o", text=...)`` counts the same encoding but cuts a text into pieces of
1,024 characters and counts each, so its figures are a little higher where a tool's JSON is longer than
that: 30,839 against 30,780 here for the 117 tools of the GitHub MCP server (tests/data/github-tools.json).

Loading the encoding costs about 0.3 s, so counts are kept with the response cache, per tool by the hash of
what is counted (``<cache dir>/catalog-tokens/<catalog digest>.tokens``, :meth:`ResponseCache.read_tokens`): a
replay reads them and loads no tokenizer.  :func:`use_store` names the cache of the run (the runtime sets it).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pytest_mcpeval.catalog import Catalog

if TYPE_CHECKING:
    import tiktoken


ENCODING = "o200k_base"
# tiktoken's name for the cached o200k_base file: the SHA-1 of the URL it is published at
_CACHED_NAME = "fb374d419588a4632f3f557e76b4b70aebbca790"
_lock = threading.Lock()
_encoding: tiktoken.Encoding | None = None


class TokenStore(Protocol):
    """Where counts are kept between runs: the response cache (:class:`pytest_mcpeval.run.cache.ResponseCache`)."""

    directory: Path

    def read_tokens(self, encoding: str) -> dict[str, int]: ...

    def write_tokens(self, digest: str, encoding: str, counts: Mapping[str, int]) -> None: ...


_store: TokenStore | None = None


def use_store(cache: TokenStore | None) -> None:
    """Read and write counts in ``cache`` (``None``: count every time)."""
    global _store
    _store = cache


def bundled_tokenizers() -> Path | None:
    """litellm's directory of tokenizer files, found without importing litellm; ``None`` without it."""
    spec = importlib.util.find_spec("litellm")
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        folder = Path(location) / "litellm_core_utils" / "tokenizers"
        if (folder / _CACHED_NAME).is_file():
            return folder
    return None


def encoding() -> tiktoken.Encoding:
    """``o200k_base``, loaded once per process from litellm's bundled file (no network)."""
    global _encoding
    with _lock:
        if _encoding is None:
            import tiktoken

            folder = bundled_tokenizers()
            saved = os.environ.get("TIKTOKEN_CACHE_DIR")
            if folder is not None and saved is None:
                # left set, as litellm sets it when imported: put back, it could be unset while litellm loads its
                # own encoding on another thread, which would then be fetched from the network
                os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
                _encoding = tiktoken.get_encoding(ENCODING)
            elif folder is not None and not (Path(saved or "") / _CACHED_NAME).is_file():
                os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)  # the user's folder lacks it: ours while loading
                try:
                    _encoding = tiktoken.get_encoding(ENCODING)
                finally:
                    os.environ["TIKTOKEN_CACHE_DIR"] = saved or ""
            else:
                _encoding = tiktoken.get_encoding(ENCODING)
        return _encoding


def _text(entry: Mapping[str, Any]) -> str:
    """What is counted of a tool: the JSON of its OpenAI ``tools`` entry, keys sorted."""
    return json.dumps(entry, sort_keys=True, ensure_ascii=False)


def _texts(catalog: Catalog) -> dict[str, str]:
    """What is counted of each tool, by MCP name."""
    return {catalog.mcp_name(tool["function"]["name"]): _text(tool) for tool in catalog.openai_tools}


def count(catalog: Catalog) -> dict[str, int]:
    """Tokens per tool (MCP names), counted with :func:`encoding`."""
    enc = encoding()
    return {name: len(enc.encode(text, disallowed_special=())) for name, text in _texts(catalog).items()}


_known: dict[str, int] = {}  # the SHA-1 of a tool's counted text -> its tokens, in this process
_stored: dict[Path, set[str]] = {}  # per store read: the hashes it holds


def entries_tokens(entries: Iterable[Mapping[str, Any]]) -> int:
    """The tokens of OpenAI ``tools`` entries as a request sends them (a local model's, its patterns rewritten),
    summed; each entry is counted once per process, by the hash of its text, as :func:`tool_tokens` keeps them."""
    texts = [_text(entry) for entry in entries]
    keys = [hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest() for text in texts]
    with _lock:
        missing = {key: text for key, text in zip(keys, texts, strict=True) if key not in _known}
    if missing:
        enc = encoding()
        counted = {key: len(enc.encode(text, disallowed_special=())) for key, text in missing.items()}
        with _lock:
            _known.update(counted)
    return sum(_known[key] for key in keys)


def tool_tokens(catalog: Catalog) -> dict[str, int]:
    """Tokens per tool (MCP names): known from the run's response cache or this process, else counted (and kept).

    Counts are kept per tool (by the hash of what is counted), so the many catalogs of cases that show a part
    of the server's tools (``tools``, ``distractors``) cost nothing once the server's tools are known."""
    store = _store
    texts = _texts(catalog)
    keys = {name: hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest() for name, text in texts.items()}
    with _lock:
        held = None
        if store is not None:
            if store.directory not in _stored:
                found = store.read_tokens(ENCODING)
                _known.update(found)
                _stored[store.directory] = set(found)
            held = _stored[store.directory]
        missing = {name for name, key in keys.items() if key not in _known}
    if missing:
        enc = encoding()
        counted = {keys[name]: len(enc.encode(texts[name], disallowed_special=())) for name in missing}
        with _lock:
            _known.update(counted)
    if store is not None and held is not None and not held.issuperset(keys.values()):
        store.write_tokens(catalog.digest, ENCODING, {key: _known[key] for key in keys.values()})
        with _lock:
            held.update(keys.values())
    return {name: _known[key] for name, key in keys.items()}
