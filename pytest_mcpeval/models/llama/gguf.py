"""What a GGUF file says of its model: the few header values the context size is computed from.

GGUF (llama.cpp's weights format) starts with ``GGUF``, a version, the tensor and key/value counts, then the
key/value pairs (``general.architecture``, ``<arch>.context_length``, ``<arch>.block_count``, the attention head
counts, the chat template, the tokenizer's vocabulary...).  Only the scalars are kept; arrays (the vocabulary:
150,000 strings for Qwen2.5) are skipped.  Read with bounds: a file that is not GGUF, or whose header is cut short
or absurd, is one :class:`~pytest_mcpeval.models.llama.LlamaError`.  The format: llama.cpp's ``docs/gguf.md``
(``ggml/include/gguf.h``), versions 2 and 3 (64-bit counts and lengths).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pytest_mcpeval.models.llama import LlamaError

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
MAX_KEYS = 1_000_000
MAX_STRING = 64 << 20  # a chat template is a few KB; a vocabulary entry a few bytes
SHORT_ARRAY = 1024  # numbers kept as a list up to this many (per-layer values); a vocabulary is far longer


class _Cut(Exception):
    pass


def _read(handle: IO[bytes], size: int) -> bytes:
    data = handle.read(size)
    if len(data) != size:
        raise _Cut
    return data


def _string(handle: IO[bytes], keep: bool = True) -> str:
    (length,) = struct.unpack("<Q", _read(handle, 8))
    if length > MAX_STRING:
        raise _Cut
    if not keep:
        handle.seek(length, 1)
        return ""
    return _read(handle, length).decode("utf-8", errors="replace")


def _value(handle: IO[bytes], kind: int, size: int) -> Any:
    if kind in _SCALARS:
        fmt = _SCALARS[kind]
        return struct.unpack(fmt, _read(handle, struct.calcsize(fmt)))[0]
    if kind == _STRING:
        return _string(handle)
    if kind == _ARRAY:  # skipped, but for a short one of numbers (a value per layer): its length, or its values
        inner, count = struct.unpack("<IQ", _read(handle, 12))
        if count > size - handle.tell():  # every element takes a byte at least
            raise _Cut
        if inner in _SCALARS:
            width = struct.calcsize(_SCALARS[inner])
            if count <= SHORT_ARRAY:
                return list(struct.unpack(f"<{count}{_SCALARS[inner][1]}", _read(handle, width * count)))
            handle.seek(width * count, 1)
        elif inner == _STRING:
            for _ in range(count):
                _string(handle, keep=False)
        else:
            raise _Cut
        return count
    raise _Cut


def metadata(path: Path) -> dict[str, Any]:
    """The header's key/value pairs (arrays as their lengths)."""
    try:
        with open(path, "rb") as handle:
            try:
                size = os.fstat(handle.fileno()).st_size
                if _read(handle, 4) != b"GGUF":
                    raise LlamaError(f"{path} is not a GGUF file (it does not start with GGUF)")
                version, _tensors, count = struct.unpack("<IQQ", _read(handle, 20))
                if version < 2 or count > MAX_KEYS:
                    raise _Cut
                found: dict[str, Any] = {}
                for _ in range(count):
                    key = _string(handle)
                    (kind,) = struct.unpack("<I", _read(handle, 4))
                    found[key] = _value(handle, kind, size)
                return found
            except (_Cut, struct.error, ValueError, OverflowError, MemoryError):
                raise LlamaError(f"{path}: the GGUF header is cut short or not one llama.cpp reads") from None
    except OSError as exc:
        raise LlamaError(f"cannot read the GGUF file {path}: {exc.strerror or exc}") from None


@dataclass(frozen=True)
class ModelShape:
    """What the context size needs: the trained context, and the bytes one token of context costs (K and V, f16)."""

    architecture: str
    context_length: int
    kv_bytes_per_token: int
    template_has_tools: bool | None  # None: no chat template in the file


def shape(path: Path) -> ModelShape:
    meta = metadata(path)
    arch = str(meta.get("general.architecture", ""))

    def number(key: str, default: int | None = None) -> int:
        value = meta.get(f"{arch}.{key}", default)
        if isinstance(value, list):  # one per layer (hybrid models): the largest bounds the cache
            value = max((v for v in value if isinstance(v, int)), default=None)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise LlamaError(f"{path}: its GGUF header has no usable {arch}.{key} (architecture "
                             f"{arch or 'unnamed'})")
        return value

    heads = number("attention.head_count")
    kv_heads = number("attention.head_count_kv", heads)
    key_length = number("attention.key_length", max(1, number("embedding_length") // heads))
    value_length = number("attention.value_length", key_length)
    per_token = number("block_count") * kv_heads * (key_length + value_length) * 2
    template = meta.get("tokenizer.chat_template")
    has_tools = ("tools" in template) if isinstance(template, str) else None
    return ModelShape(arch, number("context_length"), per_token, has_tools)
