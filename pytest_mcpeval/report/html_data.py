"""What the HTML page arranges from the report before rendering it: display orders, curves and diffs.

:mod:`pytest_mcpeval.report.html` only renders; these pure functions rearrange what the report holds (no
statistics: the headline intervals are in the report, ``ModelMetrics.intervals``, computed once when it is built
by :mod:`pytest_mcpeval.scoring.intervals`):

* :func:`label_order` — the confusion matrix's labels ordered so that confused pairs sit next to each other;
* :func:`recall_curve` — a retriever's recall@k for every k up to the catalog's size, from the ranks its cases
  hold;
* :func:`argument_problems` — the argument errors by tool, kind and argument name;
* :func:`word_diff` — a word-level diff of two texts;
* :func:`line_diff` — a tool description's change as removed and added lines (a unified diff, as GitHub
  shows one), with the words that changed marked inside each pair of changed lines.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Literal

from pytest_mcpeval.results import CaseResult
from pytest_mcpeval.results.case import NONE


def label_order(n: int, off_diagonal: Iterable[Sequence[int]]) -> list[int]:
    """The indices of ``n`` labels in display order: labels confused with each other (either way) sit together.

    ``off_diagonal`` holds the matrix's non-empty off-diagonal cells as ``(row, column, count)`` (the report's
    sparse ``confusion``).  The labels linked by confusions form groups (connected components); the group with
    the most confusions comes first.  Within a group the order is a greedy chain: it starts at the label with the
    most confusions and adds, each time, the label most confused with the last one placed (or, when the last one
    has no unplaced partner, with any placed label).  Labels never confused with another keep their order at
    the end.  Ties keep the report's order (tools alphabetically, ``(none)`` last), so the result is stable.
    Work grows with the confused labels, not with ``n`` squared.
    """
    weight: dict[int, Counter[int]] = {}
    for i, j, count in off_diagonal:
        if i != j and count:
            weight.setdefault(i, Counter())[j] += int(count)
            weight.setdefault(j, Counter())[i] += int(count)
    total = {i: sum(w.values()) for i, w in weight.items()}
    parent = {i: i for i in weight}

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, partners in weight.items():
        for j in partners:
            parent[root(j)] = root(i)
    groups: dict[int, list[int]] = {}
    for i in sorted(weight):
        groups.setdefault(root(i), []).append(i)
    ordered = sorted(groups.values(), key=lambda g: (-sum(total[i] for i in g), g[0]))
    out: list[int] = []
    for group in ordered:
        rest = set(group)
        current = min(rest, key=lambda i: (-total[i], i))
        chain = [current]
        rest.discard(current)
        attached: Counter[int] = Counter(weight[current])  # per label, its confusions with the chain so far
        while rest:
            last = weight[chain[-1]]
            current = min(rest, key=lambda i: (-last[i], -attached[i], i))
            chain.append(current)
            rest.discard(current)
            attached.update(weight[current])
        out += chain
    return out + [i for i in range(n) if i not in weight]


def recall_curve(cases: Sequence[CaseResult]) -> list[tuple[int, float]]:
    """A retriever's recall@k for k = 1 .. the number of tools ranked (the largest catalog among its cases):
    the mean over cases that expect a tool of the share of their expected tools ranked within the top k, as
    ``recall_at`` in the report (scoring.retrieval) defines it for k = 1, 3, 5, 10.  ``[]`` without rankings."""
    ranked = [r for c in cases if not c.get("error") and (r := c.get("retrieval")) and r["expected"]]
    if not ranked:
        return []
    size = max(int(r["tools"]) for r in ranked)
    gained = [0.0] * (size + 2)  # gained[k]: share of recall first reached at rank k
    for r in ranked:
        ranks = [e["rank"] for e in r["expected"].values()]
        for rank in ranks:
            if rank is not None and rank <= size:
                gained[rank] += 1.0 / len(ranks) / len(ranked)
    out: list[tuple[int, float]] = []
    running = 0.0
    for k in range(1, size + 1):
        running += gained[k]
        out.append((k, min(1.0, running)))
    return out


ProblemKind = Literal["malformed", "hallucinated", "missing_required", "missing_expected", "unexpected",
                      "mismatched"]


def argument_problems(cases: Sequence[CaseResult]) -> list[tuple[str, ProblemKind, str, int]]:
    """``(tool, kind, argument, count)`` over a model's scored single calls whose tool was right, most frequent
    first: every hallucinated, missing (required or expected), unexpected or mismatched argument name, and
    malformed argument text (argument ``""``).  The same cases as the report's argument rates."""
    counts: Counter[tuple[str, ProblemKind, str]] = Counter()
    for case in cases:
        check = case.get("arguments")
        if case.get("error") or case.get("flow") or check is None:
            continue
        tool = str(case.get("called_label") or NONE)
        if check.get("malformed"):
            counts[(tool, "malformed", "")] += 1
        named: tuple[tuple[ProblemKind, list[str]], ...] = (
            ("hallucinated", check.get("hallucinated") or []),
            ("missing_required", check.get("missing_required") or []),
            ("missing_expected", check.get("missing_expected") or []),
            ("unexpected", check.get("unexpected") or []))
        for kind, names in named:
            for name in names:
                counts[(tool, kind, str(name))] += 1
        for mismatch in check.get("mismatched") or []:
            counts[(tool, "mismatched", str(mismatch["name"]))] += 1
    return [(tool, kind, name, count) for (tool, kind, name), count
            in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


_WORDS = re.compile(r"\s+|[^\s]+")


def word_diff(old: str, new: str) -> list[tuple[Literal["=", "-", "+"], str]]:
    """``old`` -> ``new`` as runs of kept (``=``), removed (``-``) and added (``+``) text, word by word
    (whitespace kept, so joining the ``=`` and ``+`` runs gives ``new`` back, ``=`` and ``-`` gives ``old``)."""
    a, b = _WORDS.findall(old), _WORDS.findall(new)
    out: list[tuple[Literal["=", "-", "+"], str]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            out.append(("=", "".join(a[i1:i2])))
            continue
        if i2 > i1:
            out.append(("-", "".join(a[i1:i2])))
        if j2 > j1:
            out.append(("+", "".join(b[j1:j2])))
    return out


DiffOp = Literal["=", "-", "+"]
DiffLine = tuple[DiffOp, list[tuple[bool, str]]]  # a kept, removed or added line as (changed?, text) runs


def _pair(old: str, new: str) -> tuple[DiffLine, DiffLine]:
    """A removed line and the added line that replaces it, each with the words that differ marked."""
    runs = word_diff(old, new)
    return (("-", [(op == "-", chunk) for op, chunk in runs if op != "+"]),
            ("+", [(op == "+", chunk) for op, chunk in runs if op != "-"]))


def line_diff(old: str, new: str) -> list[DiffLine]:
    """``old`` -> ``new`` line by line: kept lines (``=``), then for each changed block its removed lines
    (``-``) before its added lines (``+``), as a unified diff shows them.  Within a block the n-th removed line
    is paired with the n-th added line and the words that differ between the two are marked (``True`` runs,
    :func:`word_diff`); a line without a partner is removed or added whole (one unmarked run).  Joining the
    runs of the ``=`` and ``-`` lines gives the lines of ``old`` back, of ``=`` and ``+`` those of ``new``."""
    a, b = old.splitlines() or [""], new.splitlines() or [""]
    out: list[DiffLine] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            out += [("=", [(False, line)]) for line in a[i1:i2]]
            continue
        removed, added = a[i1:i2], b[j1:j2]
        pairs = [_pair(x, y) for x, y in zip(removed, added, strict=False)]
        out += [minus for minus, _ in pairs] + [("-", [(False, x)]) for x in removed[len(pairs):]]
        out += [plus for _, plus in pairs] + [("+", [(False, y)]) for y in added[len(pairs):]]
    return out
