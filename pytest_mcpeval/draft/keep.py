"""Which drafts are kept, and why each other one is dropped.

A draft is kept only if, in this order:
1. its request does not name its tool (``names its tool``): a request that says which tool to call tests nothing;
2. it is a valid case of the file format (``invalid case``) and its expected call passes the lint against the
   live schemas (``lint: unknown_argument`` and the lint's other kinds): the tool's argument names, types, enums
   and required arguments (:func:`pytest_mcpeval.checks.lint.check_expectations`, the check ``--mcp-lint`` runs);
3. its request is not a near-duplicate of its tool's description (``copies the description``: a small drafter
   turns the description into a request, which tests only that the words match), of a case of the benchmark
   (``near-duplicate of a case``) or of a draft kept before it (``near-duplicate of a draft``): TF-IDF cosine >=
   :data:`NEAR_DUPLICATE`, with the lint's tokenizer and weighting (:mod:`pytest_mcpeval.scoring.confusable`),
   fitted on the benchmark's requests, the descriptions and the drafts together.
"""

from __future__ import annotations

import re
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.draft.ask import Draft

NEAR_DUPLICATE = 0.8  # TF-IDF cosine from which two requests are the same request said twice

NAMES_TOOL = "names its tool"
INVALID = "invalid case"
MALFORMED = "malformed"
BEYOND = "beyond --per-tool"
COPIES_DESCRIPTION = "copies the description"
DUPLICATE_CASE = "near-duplicate of a case"
DUPLICATE_DRAFT = "near-duplicate of a draft"


@dataclass
class Kept:
    drafts: list[Draft] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)  # reason -> drafts dropped for it
    examples: dict[str, str] = field(default_factory=dict)  # reason -> the first dropped draft's detail


def names_tool(draft: Draft) -> bool:
    """Whether the request writes its tool's name (any case, as a whole word: ``get_me``, not ``get me``)."""
    return re.search(rf"(?<![\w-]){re.escape(draft.target.tool)}(?![\w-])", draft.input, re.IGNORECASE) is not None


def case_data(draft: Draft, case_id: str) -> dict[str, Any]:
    """The draft as a case of a benchmark file."""
    return {"id": case_id, "input": draft.input, "expect": [{"tool": draft.target.tool, "args": draft.args}],
            "draft": True}


def _lint(drafts: Sequence[Draft], catalog: Catalog) -> list[str | None]:
    """Per draft, why it is not a case the lint passes (``None``: it is), each read back from a file as a run
    reads it: a value the file format reads as a matcher is checked as that matcher."""
    import yaml

    from pytest_mcpeval.benchmark.loader import load
    from pytest_mcpeval.benchmark.problems import BenchmarkError
    from pytest_mcpeval.checks.lint import check_expectations

    out: list[str | None] = []
    with tempfile.TemporaryDirectory(prefix="mcpeval-draft-") as folder:
        path = Path(folder) / "one.mcpeval.yaml"
        for draft in drafts:
            path.write_text(yaml.safe_dump({"version": 1, "cases": [case_data(draft, "d")]}, sort_keys=False,
                                           allow_unicode=True), encoding="utf-8")
            try:
                bench = load(path)
            except BenchmarkError as exc:
                out.append(f"{INVALID}\t{exc.problems[0].message}")
                continue
            problems = [p for p in check_expectations(bench, catalog, "draft") if p.fails]
            out.append(f"lint: {problems[0].kind}\t{problems[0].message}" if problems else None)
    return out


def request_text(case_input: Any) -> str:
    """A case's request as text: its input, or the last user message of a conversation."""
    if isinstance(case_input, str):
        return case_input
    users = [m.content for m in case_input if getattr(m, "role", None) == "user"]
    return str(users[-1]) if users else ""


def keep(drafts: Sequence[Draft], malformed: int, beyond: int, existing: Sequence[str], catalog: Catalog) -> Kept:
    """The drafts kept, in order, and the count of every dropped one by reason (``malformed`` and ``beyond``:
    items of the replies that were no draft, drafts past ``--per-tool``)."""
    from pytest_mcpeval.scoring.confusable import tfidf_matrix

    kept = Kept()
    kept.dropped[MALFORMED] += malformed
    kept.dropped[BEYOND] += beyond

    def drop(reason: str, detail: str) -> None:
        kept.dropped[reason] += 1
        kept.examples.setdefault(reason, detail)

    named = [d for d in drafts if names_tool(d)]
    for d in named:
        drop(NAMES_TOOL, d.input)
    rest = [d for d in drafts if d not in named]
    valid: list[Draft] = []
    for draft, problem in zip(rest, _lint(rest, catalog), strict=True):
        if problem is None:
            valid.append(draft)
        else:
            reason, detail = problem.split("\t", 1)
            drop(reason, f"{detail}; request {draft.input!r}")  # the problem first: the example is cut at 160
    if not valid:
        return kept
    names = sorted({d.target.tool for d in valid})
    descriptions = [str(catalog.by_name[n].get("description") or "") for n in names]
    _, matrix = tfidf_matrix([*existing, *(d.input for d in valid), *descriptions])
    similarity = matrix @ matrix.T
    base = len(existing)
    own = {name: base + len(valid) + i for i, name in enumerate(names)}  # the row of each tool's description
    chosen: list[int] = []
    for k, draft in enumerate(valid):
        row = similarity[base + k]
        if row[own[draft.target.tool]] >= NEAR_DUPLICATE:
            drop(COPIES_DESCRIPTION, f"{draft.input!r} ({row[own[draft.target.tool]]:.2f})")
            continue
        close_case = max(range(base), key=lambda i: row[i], default=None)
        if close_case is not None and row[close_case] >= NEAR_DUPLICATE:
            drop(DUPLICATE_CASE, f"{draft.input!r} ~ {existing[close_case]!r} ({row[close_case]:.2f})")
            continue
        close_draft = max(chosen, key=lambda i: row[base + i], default=None)
        if close_draft is not None and row[base + close_draft] >= NEAR_DUPLICATE:
            drop(DUPLICATE_DRAFT, f"{draft.input!r} ~ {valid[close_draft].input!r} ({row[base + close_draft]:.2f})")
            continue
        chosen.append(k)
        kept.drafts.append(draft)
    return kept
