"""Small text helpers: counts with their nouns, did-you-mean, values cut short with a visible marker, and the
canonical JSON every hash is taken of."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable
from typing import Any


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``plural(1, "case")`` -> ``1 case``; ``plural(2, "entry", "entries")`` -> ``2 entries``."""
    return f"{count} {noun if count == 1 else (nouns or noun + 's')}"


def closest(word: str, choices: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The choice most like ``word`` (difflib's ratio at least ``cutoff``), or ``None``."""
    close = difflib.get_close_matches(word, sorted(set(choices)), n=1, cutoff=cutoff)
    return close[0] if close else None


def did_you_mean(word: str, choices: Iterable[str], cutoff: float = 0.6) -> str:
    """``"; did you mean `list_issues`?"`` for the closest choice, or ``""`` when none is close.

    The one did-you-mean of the plugin: benchmark files, matchers, lint, thresholds, missing tools."""
    close = closest(word, choices, cutoff)
    return f"; did you mean `{close}`?" if close else ""


# What a terminal acts on instead of showing: C0 controls but tab and newline (ESC starts CSI and OSC sequences,
# which move the cursor, clear the screen or set the window title; CR rewrites a line; BEL rings), DEL, C1
# controls (U+009B is a one-character CSI), and the bidirectional overrides and isolates that make text read
# other than it is (CVE-2021-42574, "Trojan Source").
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape_control(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every character a terminal would act on written as its escape (``\\x1b``, ``\\u202e``):
    what the plugin prints of untrusted text (tool names a model invents, descriptions, a server's stderr)
    shows as the characters it is, and cannot retitle, clear or rewrite the terminal."""
    if text.isascii() and text.isprintable():  # most names and numbers: two passes in C, no regex
        return text
    return _CONTROL.sub(_escape_control, text) if _CONTROL.search(text) else text


def canonical_json(obj: Any) -> str:
    """Sorted keys, no spaces, UTF-8 kept: the one text that catalog digests, tool hashes and response-cache
    keys are hashes of (so the same definition always hashes the same)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def json_kind(value: Any) -> str:
    """What a JSON value is, as an error message says it: ``null``, ``a boolean``, ``a number``, ``a string``,
    ``an empty string``, ``a list`` or ``an object``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string" if value else "an empty string"
    if isinstance(value, list | tuple):
        return "a list"
    return "an object"


def marker(length: int) -> str:
    """What replaces the end of a value cut short: ``… [truncated, 20,000 chars]`` (its full length)."""
    return f"… [truncated, {length:,} chars]"


def truncate(value: str, limit: int) -> str:
    """``value`` cut to ``limit`` characters followed by its :func:`marker`; shorter values unchanged."""
    return value if len(value) <= limit else value[:limit] + marker(len(value))


_SURROGATE = re.compile("[\ud800-\udfff]")


def utf8_safe(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (dict keys too) replaced by U+FFFD: a lone surrogate
    (``"\\ud83d"``) is legal JSON, which models and servers do send, but has no UTF-8.

    Almost every value has none: one encoding of its JSON text tells, and only then is it walked.  (A case result
    is made safe with its masking, by one encoding: :meth:`pytest_mcpeval.redact.Redactor.safe_data`.)"""
    try:
        json.dumps(value, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError:
        return _replaced(value)
    except (TypeError, ValueError):  # not JSON at all (a user's hook): walked as before
        return _replaced(value)
    return value


def _replaced(value: Any) -> Any:
    if isinstance(value, str):
        return value if value.isascii() else _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_replaced(k): _replaced(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_replaced(v) for v in value)
    return value
