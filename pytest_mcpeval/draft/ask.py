"""The drafter: a model asked for user requests and their expected call, its replies in the response cache.

One request per target: the tool (its name, description and arguments), a few requests the benchmark already
has (shown as what *not* to repeat), and, for a contrastive target, the other tool with some of its requests.
The reply is read leniently (a code fence, text around the JSON, a list cut short at the token limit): every
complete ``{"request": ..., "arguments": {...}}`` object counts; whatever else the reply holds is counted too,
as ``malformed``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.draft import DraftError
from pytest_mcpeval.draft.targets import Target
from pytest_mcpeval.run.asked import CachedAsker

MAX_EXAMPLES = 5  # requests of the benchmark shown per tool
MAX_REPLY = 100_000  # characters of a reply read

SYSTEM_PROMPT = """\
You write test cases for one tool of an MCP server. Each case is a request a real person would type to an \
assistant, and the arguments the tool should be called with to answer it. Write varied, realistic requests \
with concrete values (names, numbers, dates). Never write the tool's name in a request, and do not repeat the \
example requests. Use only the tool's own argument names and allowed values, and give every required argument. \
Answer only with JSON: {"cases": [{"request": "...", "arguments": {...}}, ...]}"""


@dataclass(frozen=True)
class Draft:
    target: Target
    input: str
    args: dict[str, Any]


@dataclass
class Reply:
    drafts: list[Draft]
    malformed: int  # objects or items of the reply that are not a request with arguments
    note: str | None = None  # why the reply holds nothing usable


def _arguments(catalog: Catalog, tool: str) -> list[str]:
    """One line per argument: ``- owner (string, required): Repository owner``; enums listed."""
    schema = catalog.by_name[tool].get("inputSchema")
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    required = set(catalog.required(tool))
    lines = []
    for name, prop in (props or {}).items():
        prop = prop if isinstance(prop, Mapping) else {}
        kind = prop.get("type", "any")
        facts = [" or ".join(map(str, kind)) if isinstance(kind, list) else str(kind)]
        if name in required:
            facts.append("required")
        if isinstance(prop.get("enum"), list):
            facts.append("one of " + ", ".join(json.dumps(v) for v in prop["enum"]))
        text = " ".join(str(prop.get("description") or "").split())[:160]
        lines.append(f"- {name} ({', '.join(facts)}){': ' + text if text else ''}")
    return lines or ["(no arguments)"]


def _described(catalog: Catalog, tool: str) -> str:
    text = " ".join(str(catalog.by_name[tool].get("description") or "").split())
    return text[:800] or "(no description)"


def messages(target: Target, catalog: Catalog, per_tool: int, requests: Mapping[str, Sequence[str]],
             seed: int) -> list[dict[str, Any]]:
    """The drafter's request for ``target``; ``requests`` are the benchmark's requests per expected tool, of which
    a seeded sample is shown."""
    rng = random.Random(f"{seed}:{target.tool}:{target.like}")

    def sample(tool: str) -> list[str]:
        own = list(requests.get(tool, []))
        return rng.sample(own, min(MAX_EXAMPLES, len(own)))

    # the tool's name is not shown: a small drafter writes it into its requests (`add_sub_issue 123 ...`), and a
    # request that names its tool is dropped; what the tool does is in its description and arguments
    lines = [f"The tool: {_described(catalog, target.tool)}", "Its arguments:", *_arguments(catalog, target.tool)]
    shown = sample(target.tool)
    if shown:
        lines += ["", "Requests the benchmark already has for it (write different ones):", *(f"- {r}" for r in shown)]
    required = ", ".join(f'"{name}": ...' for name in catalog.required(target.tool))
    lines += ["", f'Each case: {{"request": "...", "arguments": {{{required}}}}}'
              + ("" if required else " (this tool takes no required argument: often {})")]
    if target.like is None:
        lines += ["", f"Write {per_tool} new requests that need this tool, each with its arguments."]
    else:
        lines += ["", f"Another tool, easily confused with it: {_described(catalog, target.like)}"]
        theirs = sample(target.like)
        if theirs:
            lines += ["Requests that need the other tool:", *(f"- {r}" for r in theirs)]
        lines += ["", f"Write {per_tool} new requests that read like requests for the other tool but that only "
                  "this tool answers, each with the arguments of this tool."]
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "\n".join(lines)}]


def _objects(text: str) -> list[Any]:
    """The JSON values of ``text``: the whole text when it parses, else every complete ``{...}`` in it that
    parses (outermost first: a list cut short keeps its complete items)."""
    try:
        return [json.loads(text)]
    except ValueError:
        pass
    decoder = json.JSONDecoder()
    found: list[Any] = []
    i = text.find("{")
    while i != -1:
        try:
            value, end = decoder.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        found.append(value)
        i = text.find("{", end)
    return found


_TEXT_KEYS = ("request", "input", "user_request", "query_text")
_ARG_KEYS = ("arguments", "args", "parameters")


def _items(value: Any) -> list[Any]:
    """The case objects of a parsed value: ``{"cases": [...]}``, a list, or one case object."""
    if isinstance(value, dict):
        for key in ("cases", "requests", "examples"):
            if isinstance(value.get(key), list):
                return list(value[key])
        return [value]
    if isinstance(value, list):
        return [item for v in value for item in (_items(v) if isinstance(v, dict) and "cases" in v else [v])]
    return [value]


def parse_reply(target: Target, content: str | None) -> Reply:
    """The drafts of a reply, and how many of its items are not drafts."""
    text = (content or "").strip()
    if len(text) > MAX_REPLY:
        return Reply([], 0, f"its reply is {len(text):,} characters long, more than drafts take ({MAX_REPLY:,})")
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    drafts: list[Draft] = []
    malformed = 0
    for value in _objects(text):
        for item in _items(value):
            request = next((item[k] for k in _TEXT_KEYS if isinstance(item, dict) and k in item), None)
            args = next((item[k] for k in _ARG_KEYS if isinstance(item, dict) and k in item), None)
            if isinstance(request, str) and request.strip() and isinstance(args, dict | None):
                drafts.append(Draft(target, " ".join(request.split()), dict(args or {})))
            else:
                malformed += 1
    note = None
    if not drafts:
        shown = " ".join(text.split())
        note = ('its reply holds no request with arguments (expected {"cases": [{"request": ..., "arguments": '
                '{...}}]}): ' + (repr(shown[:80] + ("..." if len(shown) > 80 else "")) if shown else "an empty reply"))
    return Reply(drafts, malformed, note)


class Drafter(CachedAsker):
    """A litellm model (or ``local/...``) asked for drafts; each reply kept in the response cache under
    ``cache_dir`` (:class:`CachedAsker`), so a rerun with the same benchmark, catalog and seed asks nothing.
    A reply that holds no draft is not kept (a rerun asks again)."""

    def __init__(self, name: str, params: Mapping[str, Any], cache_dir: Path, timeout: float, seed: int) -> None:
        super().__init__(name, params, cache_dir, "draft", timeout, "--timeout")
        self.seed = seed
        self.failed = 0  # calls that failed after one that succeeded (said per target, the command goes on)

    def draft(self, target: Target, request: list[dict[str, Any]]) -> Reply:
        from pytest_mcpeval.models import ModelCallError

        about = target.tool if target.like is None else f"{target.tool} (against {target.like})"
        announce = f"draft: asking {self.model.name} for `{about}` (at most {self.longest:g} s)"
        try:
            answer = self.ask(request, self.seed, f"draft: {about}", announce, seed=self.seed)
        except ModelCallError as exc:  # a drafter that never answered stops the command; one that did goes on
            if not self.calls:
                raise DraftError(f"--model={self.model.name}: {str(exc).splitlines()[0]}", status=3) from None
            self.failed += 1
            return Reply([], 0, f"the drafter failed: {str(exc).splitlines()[0]}")
        parsed = parse_reply(target, answer.content)
        if parsed.drafts:
            answer.keep()
        return parsed
