"""Candidate descriptions: from a candidates file, and from a proposer model.

A candidates file::

    version: 1
    candidates:
      search_issues:
        - "Full-text search over issue titles and comments ..."
        - "Search issues by keywords, author or topic ..."

The proposer is any litellm model (``--proposer``, parameters from ``--proposer-params`` JSON).  It is asked
with the tool's current description, the descriptions of the tools it is confused with, and the *train* cases
it misses (never a held-out input), and answers ``{"descriptions": [...]}``.  Its replies are kept in
``OUT/proposer-cache`` (the plugin's response cache format), so a rerun asks nothing again.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_mcpeval.run.asked import CachedAsker
from pytest_mcpeval.text import did_you_mean
from pytest_mcpeval.tune import TuneError

MAX_MISSES = 12  # train inputs shown to the proposer per tool
MAX_DESCRIPTION = 2000  # characters of a proposed description kept
MAX_REPLY = 100_000  # characters of a proposer's reply: beyond, it is not read (reply_problem)
MAX_PROPOSALS = 3  # alternatives kept of one reply (the prompt asks for 1 to 3; a small model may repeat itself)
QUOTE_RUN = 6  # words in a row shared with a case's request that make a candidate a quote of it
QUOTE_MIN = 4  # a request this long or longer, repeated whole, is quoted too

SYSTEM_PROMPT = """\
You write the description of one tool of an MCP server, for a model that picks one tool among many by their \
descriptions. You are shown the tool's current description, the tools it is confused with, and requests where \
the wrong tool was picked. Write 1 to 3 NEW descriptions of THIS tool only: what it does and which kinds of \
requests it is for, and, where it helps, when to use one of the other tools instead. Never copy the current \
description, another tool's description or a request: describe the kind of request in general words instead of \
quoting one. Keep each under 60 words. Answer only with a JSON object {"descriptions": ["...", "..."]}."""


@dataclass(frozen=True)
class Candidate:
    tool: str
    description: str
    source: str  # "file" or "proposer"
    round: int = 1


def load_candidates(path: Path) -> list[Candidate]:
    """The candidates of a file; a :class:`TuneError` for a malformed one (read before anything is run: the names
    are checked against the catalog by :func:`check_tools` once it is known)."""
    from pytest_mcpeval.benchmark.problems import BenchmarkError
    from pytest_mcpeval.benchmark.yaml_source import load_bounded_yaml

    try:
        data = load_bounded_yaml(path, path.read_bytes())  # no alias bomb, no absurd nesting
    except BenchmarkError as exc:
        raise TuneError(f"--candidates={str(exc).splitlines()[0]}") from None
    except FileNotFoundError:
        raise TuneError(f"--candidates={path}: no such file") from None
    except OSError as exc:
        raise TuneError(f"--candidates={path}: cannot be read: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict) or data.get("version") != 1 or not isinstance(data.get("candidates"), dict):
        raise TuneError(f"--candidates={path}: expected `version: 1` and `candidates: {{TOOL: [DESCRIPTION, ...]}}`")
    out: list[Candidate] = []
    for tool, texts in data["candidates"].items():
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) and t.strip() for t in texts):
            quote = any(isinstance(t, dict) for t in texts) if isinstance(texts, list) else isinstance(texts, dict)
            raise TuneError(f"--candidates={path}: candidates.{tool}: expected a list of non-empty descriptions"
                            + (" (a description holding `: ` must be quoted)" if quote else ""))
        out += [Candidate(str(tool), text.strip(), "file") for text in dict.fromkeys(texts)]
    return out


def same_text(text: str) -> str:
    """``text`` with its whitespace runs as one space: two candidates that differ only there are one."""
    return " ".join(text.split())


def distinct(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Each candidate once per tool (the first of those whose texts differ only in whitespace): each costs
    evaluations, and the same text judged twice would be compared against itself."""
    seen: set[tuple[str, str]] = set()
    out = []
    for candidate in candidates:
        key = (candidate.tool, same_text(candidate.description))
        if key not in seen:
            seen.add(key)
            out.append(candidate)
    return out


def check_tools(candidates: Sequence[Candidate], tools: Sequence[str], path: Path) -> None:
    """A :class:`TuneError` for the first candidate of the file at ``path`` whose tool the catalog lacks."""
    for candidate in candidates:
        if candidate.tool not in tools:
            raise TuneError(f"--candidates={path}: tool `{candidate.tool}` is not in the catalog"
                            f"{did_you_mean(candidate.tool, tools)}")


def proposer_messages(tool: str, current: str, confused: Mapping[str, str],
                      misses: Sequence[tuple[str, str, str]]) -> list[dict[str, Any]]:
    """The proposer's request: ``misses`` are (train input, expected tool, called tool)."""
    lines = [f"Tool: {tool}", f"Current description: {current or '(none)'}", ""]
    if confused:
        lines.append("Tools it is confused with:")
        lines += [f"- {name}: {text or '(no description)'}" for name, text in sorted(confused.items())]
        lines.append("")
    if misses:
        lines.append("Requests where the wrong tool was chosen:")
        lines += [f"- {text!r}: expected {expected}, chosen {called}" for text, expected, called in misses[:MAX_MISSES]]
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "\n".join(lines)}]


_JSON_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')  # a complete JSON string


def _strings(text: str) -> list[str]:
    """The complete JSON strings of ``text`` that are list items or ``description`` values, left to right; one
    with an escape JSON does not know is left out."""
    out = []
    key = None  # the key the next value belongs to
    for match in _JSON_STRING.finditer(text):
        if text[match.end():].lstrip().startswith(":"):
            key = match.group(1)
            continue
        is_value = text[:match.start()].rstrip().endswith(":")
        if is_value and key != "description":  # {"request": "...", "description": "..."}: the description only
            continue
        try:
            out.append(json.loads(f'"{match.group(1)}"'))
        except ValueError:
            continue
    return out


def parse_proposals(content: str | None) -> list[str]:
    """The descriptions of a proposer's reply: its JSON ``descriptions`` (or a JSON list), else the text itself.

    A reply that starts as JSON but does not parse (cut short at the token limit, a small model repeating itself)
    gives the complete strings of its ``descriptions`` list, never the JSON text itself.  Each distinct one once."""
    text = (content or "").strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    try:
        data = json.loads(text)
    except ValueError:
        if not text.startswith(("{", "[")):
            return [text[:MAX_DESCRIPTION]] if text else []
        _, found, rest = text.partition('"descriptions"')
        data = _strings(rest if found else text)
    if isinstance(data, dict):
        data = data.get("descriptions", data.get("description"))
    if isinstance(data, str):
        data = [data]
    if not isinstance(data, list):
        return []
    data = [d.get("description") if isinstance(d, dict) else d for d in data]  # [{"description": ...}, ...] too
    kept = [d.strip()[:MAX_DESCRIPTION] for d in data if isinstance(d, str) and d.strip()]
    seen: dict[str, str] = {}
    for text in kept:
        seen.setdefault(same_text(text), text)  # the first of those that differ only in whitespace
    return list(seen.values())


def _words(text: str) -> list[str]:
    """Lower-case words, ``owner/repo``, ``e.g.`` and ``don't`` kept whole, a sentence's full stop dropped."""
    return [w for w in (t.strip(".'-") for t in re.findall(r"[\w/.'-]+", text.lower())) if w]


def quoted_case(description: str, requests: Mapping[str, str]) -> str | None:
    """The first case (key, in order) whose request ``description`` repeats: the whole request (of
    :data:`QUOTE_MIN` words or more), or :data:`QUOTE_RUN` of its words in a row.  A description that quotes
    the cases that judge it says nothing of other requests: a candidate that does is not evaluated."""
    words = _words(description)
    runs = {tuple(words[i:i + QUOTE_RUN]) for i in range(len(words) - QUOTE_RUN + 1)}
    joined = f" {' '.join(words)} "
    for key in sorted(requests):
        request = _words(requests[key])
        if len(request) >= QUOTE_MIN and f" {' '.join(request)} " in joined:
            return key
        if any(tuple(request[i:i + QUOTE_RUN]) in runs for i in range(len(request) - QUOTE_RUN + 1)):
            return key
    return None


def reply_problem(content: str | None) -> str | None:
    """Why a proposer's reply cannot hold descriptions, or ``None``: longer than :data:`MAX_REPLY` (a reply asked
    for three descriptions of 60 words is a few hundred; what is longer is not an answer, and the cache would keep
    only its start), or an HTML page (a proxy's or the provider's error page, "502 Bad Gateway", sent as text)."""
    text = (content or "").strip()
    if len(text) > MAX_REPLY:
        return f"its reply is {len(text):,} characters long, more than a reply of descriptions may be ({MAX_REPLY:,})"
    if text.startswith("<") and _HTML.search(text[:2000]):
        title = _TITLE.search(text)
        shown = f" ({' '.join(title.group(1).split())[:80]!r})" if title and title.group(1).strip() else ""
        return f"its reply is an HTML page{shown}, not descriptions: an error page of the provider or a proxy?"
    return None


_HTML = re.compile(r"<\s*(!doctype\s+html|html|head|body|title)\b", re.IGNORECASE)
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


class Proposer(CachedAsker):
    """A litellm model asked for descriptions, its replies cached under ``cache_dir`` (:class:`CachedAsker`).  Each
    call has ``timeout`` seconds (``--proposer-timeout``) and one retry: a proposer that never answers holds the
    command ``2 x timeout`` at most, and says so before it asks.  A reply that holds no description (an HTML error
    page, a reply too long, text that is not JSON descriptions) proposes nothing, is not kept in the cache, and is
    one line in :attr:`notes` (printed as it happens)."""

    def __init__(self, name: str, params: Mapping[str, Any], cache_dir: Path, timeout: float = 60.0) -> None:
        super().__init__(name, params, cache_dir, "tune", timeout, "--proposer-timeout")
        self.notes: list[str] = []

    def _note(self, tool: str, why: str) -> None:
        note = f"--proposer={self.model.name}: nothing proposed for `{tool}`: {why}"
        self.notes.append(note)
        print(f"tune: {note}", file=sys.stderr, flush=True)

    def propose(self, tool: str, current: str, confused: Mapping[str, str],
                misses: Sequence[tuple[str, str, str]], round_: int) -> list[Candidate]:
        from pytest_mcpeval.models import ModelCallError

        messages = proposer_messages(tool, current, confused, misses)
        announce = (f"tune: asking the proposer {self.model.name} for `{tool}` (at most {self.longest:g} s: "
                    f"--proposer-timeout={self.timeout:g}, one retry)")
        try:
            answer = self.ask(messages, round_, f"tune proposer: {tool}", announce)
        except ModelCallError as exc:
            raise TuneError(f"--proposer={self.model.name}: {exc}") from None
        content = answer.content
        problem = reply_problem(content)
        found = parse_proposals(content) if problem is None else []
        texts = [t for t in found if same_text(t) != same_text(current)][:MAX_PROPOSALS]
        if not texts:
            shown = " ".join((content or "").split())
            self._note(tool, problem or ("its reply only repeats the current description" if found else
                       'its reply holds no description (expected {"descriptions": [...]}): '
                       + (repr(shown[:80] + ("..." if len(shown) > 80 else "")) if shown else "an empty reply")))
        else:  # a reply that proposes nothing is not kept: a rerun asks again
            answer.keep()
        return [Candidate(tool, text, "proposer", round_) for text in texts]
