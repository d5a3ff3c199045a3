"""Tool calls written as text: the call a model put in its reply's ``content`` instead of ``tool_calls``.

Open models served without a tool parser (vLLM without ``--tool-call-parser``, some Ollama templates,
llama.cpp with a template that does not match the model) write the call they mean as text, in one of a few
shapes, all found here:

* a JSON object, the whole reply or inside prose: ``{"name": "get_issue", "arguments": {"issue_key": "W-1"}}``
  (``parameters`` for ``arguments`` as Llama 3 writes it; ``{"function": {"name", "arguments"}}`` as an
  OpenAI call object; ``arguments`` may be JSON text), or a JSON list of such objects;
* the same inside a Markdown fence, with or without a language (Qwen2.5-Coder writes `````json`` fences);
* the same between ``<tool_call>`` and ``</tool_call>`` (the Hermes format Qwen's templates use).

Only an object whose name is one of ``names`` (the tools the model was shown) counts, so prose that quotes
JSON (an example payload, a result) is not mistaken for a call.  Pure functions of the text: the scoring
uses them to diagnose ``tool_call_in_text``, and a serving layer may use them to turn such text into calls.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any, Literal

Format = Literal["json", "fence", "tag"]

_TAG = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FENCE = re.compile(r"```[ \t]*([\w+-]*)[ \t]*\n(.*?)(?:```|$)", re.DOTALL)
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class TextCall:
    """A call found in text: the tool's name, its arguments as JSON text, and the shape it was written in."""

    name: str
    arguments: str
    format: Format


def _call(value: Any, names: Collection[str]) -> tuple[str, str] | None:
    """``(name, arguments as JSON text)`` when ``value`` is a call object of a tool in ``names``."""
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("function"), dict) and "name" not in value:  # an OpenAI tool-call object
        value = value["function"]
    name = value.get("name")
    if not isinstance(name, str) or name not in names:
        return None
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):  # JSON text, as OpenAI's own calls carry it
        return name, arguments
    if arguments is None:
        arguments = {}
    return name, json.dumps(arguments, ensure_ascii=False)


def _calls_in(value: Any, names: Collection[str]) -> list[tuple[str, str]]:
    items = value if isinstance(value, list) else [value]
    return [found for item in items if (found := _call(item, names)) is not None]


MAX_TEXT = 100_000  # characters of a reply searched for calls: a call is short, a reply may be megabytes
MAX_ATTEMPTS = 64  # starts tried that are not JSON: each attempt may read to the end of the text


def _json_values(text: str) -> Iterator[tuple[int, int, Any]]:
    """Every JSON object or list that starts at a ``{`` or ``[`` of ``text`` and is not inside an earlier one:
    ``(start, end, value)``.  Bounded, as the text is the model's: its first :data:`MAX_TEXT` characters, at
    most :data:`MAX_ATTEMPTS` starts that are not JSON (``[[[[...`` unclosed was quadratic), and values nested
    within the depth bound (deeper JSON is no call, and ``json`` itself overflows its stack near 1,000)."""
    from pytest_mcpeval.bounds import depth_exceeds

    text = text[:MAX_TEXT]
    position = 0
    failures = 0
    while failures < MAX_ATTEMPTS:
        starts = [i for i in (text.find("{", position), text.find("[", position)) if i >= 0]
        if not starts:
            return
        start = min(starts)
        try:
            value, end = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):
            failures += 1
            position = start + 1
            continue
        if not depth_exceeds(value):
            yield start, end, value
        position = end


def find_text_calls(text: str | None, names: Collection[str]) -> list[TextCall]:
    """The calls of tools in ``names`` written in ``text``, in the order they appear (``[]`` for none).

    Tags and fences are read first; the JSON outside them is read as bare JSON."""
    if not text or not names:
        return []
    found: list[tuple[int, TextCall]] = []
    rest = list(text)  # the text with the tags and fences blanked out, for the bare-JSON pass

    def blank(start: int, end: int) -> None:
        rest[start:end] = " " * (end - start)

    for match in _TAG.finditer(text):
        for _, _, value in _json_values(match.group(1)):
            found.extend((match.start(), TextCall(n, a, "tag")) for n, a in _calls_in(value, names))
        blank(match.start(), match.end())
    for match in _FENCE.finditer("".join(rest)):
        blank(match.start(), match.end())  # code in another language is no call, nor is the JSON it quotes
        if match.group(1) and match.group(1).lower() not in ("json", "json5", "tool_call", "tool_code"):
            continue
        for _, _, value in _json_values(match.group(2)):
            found.extend((match.start(), TextCall(n, a, "fence")) for n, a in _calls_in(value, names))
    for start, _, value in _json_values("".join(rest)):
        found.extend((start, TextCall(n, a, "json")) for n, a in _calls_in(value, names))
    found.sort(key=lambda pair: pair[0])  # stable: the calls of one value keep their order
    return [call for _, call in found]
