"""Client-side tool search (docs/tool-search.md): the search tool a model is shown and the ranking it answers with.

Under tool search the model does not see the server's catalog: it sees one tool, :func:`search_tool` (a name,
a one-line description and one required string argument, ``query``), and the tools the file keeps loaded.  A
call of it is answered with the top K tools of the case's catalog for the query (:func:`rank`), names and
one-line descriptions (:func:`answer_text`); their full definitions are added to the next request, as
Anthropic's tool references are.  Two methods rank here, both over the fields Anthropic's search tools read
(a tool's name, description, and its arguments' names and descriptions, :func:`tool_text`):

* ``bm25``: Okapi BM25 (k1 = 1.2, b = 0.75, the idf ``ln(1 + (N - df + 0.5) / (df + 0.5))`` of Lucene, never
  negative) over lower-cased words, ``_``, ``-`` and camelCase splitting words; tools scoring 0 are left out.
* ``regex``: Python's ``re.search`` of the pattern over the same text, matches in catalog order; a pattern
  that does not compile (or is longer than 200 characters, Anthropic's limit) is :class:`SearchError`.

``embedding`` (the local retriever's ranking) is made by the strategy that owns the model (run.search).

``native`` and ``native-regex`` are the provider's own search (:data:`NATIVE`): the whole catalog is sent with
``defer_loading: true`` and Anthropic's search tool (:func:`native_tool`); the provider searches and loads, and
the searches are read back from its reply.  :func:`native_problem` says which models run it.
Pure: no I/O, no model.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

SEARCH_TOOL = "tool_search"
# the provider's own search: method -> Anthropic's search tool (its type, and the name its calls carry)
NATIVE = {"native": ("tool_search_tool_bm25_20251119", "tool_search_tool_bm25"),
          "native-regex": ("tool_search_tool_regex_20251119", "tool_search_tool_regex")}
METHODS = ("bm25", "regex", "embedding", *NATIVE)
DEFAULT_TOP_K = 5
DEFAULT_MAX_SEARCHES = 3
MAX_PATTERN = 200  # characters of a regex pattern (Anthropic's limit for its regex search tool)
LINE_CAP = 200  # characters of a tool's one-line description in a search's answer
K1 = 1.2
B = 0.75

# the litellm routes that send Anthropic's search tool and defer_loading as Anthropic's Messages API takes them:
# anthropic/ (and a bare claude-* name, which litellm sends there), and the Claude models of azure_ai/ (Microsoft
# Foundry), vertex_ai/ and bedrock/invoke/ (Bedrock runs it through InvokeModel only, not Converse)
_NATIVE_ROUTE = re.compile(r"^(anthropic/|claude-|(azure_ai|vertex_ai|bedrock/invoke)/.*claude)", re.IGNORECASE)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD = re.compile(r"[a-z0-9]+")

_DESCRIPTIONS = {
    "bm25": "Search the available tools by keywords; returns the best matches, whose definitions are then loaded.",
    "regex": "Search the available tools with a Python regular expression over their names, descriptions and "
             "arguments; matching tools are then loaded.",
    "embedding": "Search the available tools by describing what you need; returns the closest tools, whose "
                 "definitions are then loaded.",
}
_QUERY = {
    "bm25": "Keywords describing the tool you need.",
    "regex": "A Python regular expression (re.search), e.g. `(?i)issue`.",
    "embedding": "What the tool you need should do.",
}


class SearchError(ValueError):
    """A query the method cannot run (a bad regex): answered to the model as an error result."""


def search_tool(method: str) -> dict[str, Any]:
    """The one tool a model under search is shown (an MCP tool definition)."""
    return {
        "name": SEARCH_TOOL,
        "description": _DESCRIPTIONS[method],
        "inputSchema": {"type": "object", "properties": {"query": {"type": "string", "description": _QUERY[method]}},
                        "required": ["query"]},
    }


def native_tool(method: str) -> dict[str, Any]:
    """The provider's search tool of a ``native`` method, as litellm takes it in ``tools`` (Anthropic's shape)."""
    type_, name = NATIVE[method]
    return {"type": type_, "name": name}


def native_problem(name: str, target: str) -> str | None:
    """Why model ``name`` (litellm model string ``target``) cannot run a native search, or ``None`` when it can."""
    if _NATIVE_ROUTE.match(target):
        return None
    return (f"model {name} ({target}): native tool search is the provider's own, run by Anthropic (anthropic/..., "
            "and litellm's azure_ai/, vertex_ai/ and bedrock/invoke/ Claude routes), not by this model's provider: "
            "use --mcp-tool-search=bm25 (the same search on the client side, with any model)")


def tokenize(text: str) -> list[str]:
    """Lower-case words of letters and digits; ``_``, ``-`` and camelCase break words."""
    return _WORD.findall(_CAMEL.sub(" ", text).lower())


def tool_text(tool: Mapping[str, Any]) -> str:
    """What a search reads of a tool: its name, description, and each argument's name and description."""
    parts = [str(tool.get("name") or ""), str(tool.get("description") or tool.get("title") or "")]
    schema = tool.get("inputSchema")
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    if isinstance(props, Mapping):
        for name, prop in props.items():
            parts.append(str(name))
            if isinstance(prop, Mapping) and isinstance(prop.get("description"), str):
                parts.append(prop["description"])
    return "\n".join(p for p in parts if p)


def bm25_scores(query: str, documents: Sequence[str]) -> list[float]:
    """The BM25 score of each document for ``query`` (the query's repeated words count once each time)."""
    docs = [Counter(tokenize(d)) for d in documents]
    n = len(docs)
    if not n:
        return []
    lengths = [sum(d.values()) for d in docs]
    average = sum(lengths) / n or 1.0
    df: Counter[str] = Counter(word for d in docs for word in d)
    scores = [0.0] * n
    for word in tokenize(query):
        if word not in df:
            continue
        idf = math.log(1 + (n - df[word] + 0.5) / (df[word] + 0.5))
        for j, doc in enumerate(docs):
            tf = doc.get(word, 0)
            if tf:
                scores[j] += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * lengths[j] / average))
    return scores


def rank(method: str, query: str, tools: Sequence[Mapping[str, Any]]) -> list[str]:
    """The names of ``tools`` that match ``query``, best first (``bm25`` or ``regex``)."""
    texts = [tool_text(t) for t in tools]
    names = [str(t["name"]) for t in tools]
    if method == "regex":
        if len(query) > MAX_PATTERN:
            raise SearchError(f"pattern longer than {MAX_PATTERN} characters")
        try:
            pattern = re.compile(query)
        except re.error as exc:
            raise SearchError(f"invalid regular expression: {exc}") from None
        return [name for name, text in zip(names, texts, strict=True) if pattern.search(text)]
    scores = bm25_scores(query, texts)
    order = sorted(range(len(names)), key=lambda j: (-scores[j], j))
    return [names[j] for j in order if scores[j] > 0]


def one_line(tool: Mapping[str, Any]) -> str:
    """A tool's description as a search answers it: its first line, at most :data:`LINE_CAP` characters."""
    text = str(tool.get("description") or tool.get("title") or "").strip()
    line = text.splitlines()[0].strip() if text else ""
    return line if len(line) <= LINE_CAP else line[: LINE_CAP - 1] + "…"


def answer_text(query: str, names: Sequence[str], by_name: Mapping[str, Mapping[str, Any]]) -> str:
    """The search tool's answer: the tools found (now loaded), one per line, or that none matched."""
    if not names:
        return f"No tools match {query!r}. Try other words."
    lines = [f"- {name}: {one_line(by_name[name])}" for name in names]
    return "Tools found (now available to call):\n" + "\n".join(lines)


def option(text: str) -> tuple[str, int | None]:
    """argparse type of ``--mcp-tool-search``: ``METHOD[:K]`` -> ``(method, K or None)``."""
    import argparse

    method, sep, k = text.strip().partition(":")
    if method not in METHODS:
        raise argparse.ArgumentTypeError(f"{text!r} is not METHOD[:K] with METHOD one of {', '.join(METHODS)}")
    if not sep:
        return method, None
    if method in NATIVE:
        raise argparse.ArgumentTypeError(f"{text!r}: K does not apply to {method}: the provider decides how many "
                                         f"tools each search surfaces (use {method})")
    if not k.isdigit() or int(k) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: K must be a whole number >= 1 (the tools a search answers with)")
    return method, int(k)
