"""Which of the server's tools a case shows the model: its ``tools`` and ``distractors`` (docs/format.md#tool-exposure).

By default a case shows the whole catalog.  ``tools: [...]`` shows only those tools; ``distractors: N`` adds N
other tools of the server drawn from those most similar to the case's own tools (its ``tools``, else every tool
it expects, mocks or forbids; a case with none of these is compared with its input text).  Similarity is the one
the confusable-tool lint uses (:mod:`pytest_mcpeval.scoring.confusable`: TF-IDF cosine of name + description).
The N are drawn at random from the 2N most similar candidates, with a seed derived from the case id, so a case
shows the same tools on every run and machine (the cache stays valid) while cases of a file do not all get the
same hardest few.  The shown tools keep the server's order.  Pure: no pytest, no I/O.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_mcpeval.benchmark.loader import unknown_tools
from pytest_mcpeval.catalog import Catalog

if TYPE_CHECKING:
    from pytest_mcpeval.benchmark.schema import Case

_MATRICES: dict[str, Any] = {}  # catalog digest -> its l2-normalised TF-IDF matrix (one catalog per server)


@dataclass(frozen=True)
class Exposure:
    """The catalog a case shows (``catalog``), the distractors drawn into it and the seed they were drawn with."""

    catalog: Catalog
    distractors: tuple[str, ...] = ()
    seed: int | None = None


def case_seed(case_id: str) -> int:
    """The seed of a case's distractor draw: stable across runs, machines and Python versions."""
    return int(hashlib.sha256(case_id.encode()).hexdigest()[:8], 16)


def relevant_tools(case: Case) -> list[str]:
    """The tools a case is about: its ``tools``, else the tools it expects, mocks or forbids (first mention order)."""
    if case.tools is not None:
        return list(dict.fromkeys(case.tools))
    return list(dict.fromkeys([*(call.tool for call in case.expect), *case.mocks, *case.forbid]))


def expose(case: Case, full: Catalog) -> Exposure:
    """The tools ``case`` shows the model, out of the server's ``full`` catalog (``full`` itself by default).

    Raises ``ValueError`` when ``tools`` names a tool the server does not publish."""
    if case.tools is None and not case.distractors:
        return Exposure(full)
    unknown = [message for loc, message in unknown_tools(case, full.names) if loc[0] == "tools"]
    if unknown:
        raise ValueError("; ".join(unknown))
    base = [name for name in relevant_tools(case) if name in full.by_name]
    seed = case_seed(case.id)
    query = case.input if isinstance(case.input, str) else " ".join(m.content for m in case.input if m.role == "user")
    drawn = draw_distractors(full, base, case.distractors or 0, seed, query)
    shown = {*base, *drawn}
    return Exposure(full.subset(shown), tuple(drawn), seed if case.distractors else None)


def draw_distractors(full: Catalog, base: list[str], count: int, seed: int, query: str = "") -> list[str]:
    """``count`` tools of ``full`` outside ``base``, drawn with ``seed`` from the ``2 * count`` most similar to
    ``base`` (each candidate's highest similarity to a tool of ``base``; to ``query`` when ``base`` is empty),
    ties broken by name; in catalog order.  Fewer when the server has fewer other tools."""
    names = full.names
    candidates = [j for j, name in enumerate(names) if name not in set(base)]
    if count <= 0 or not candidates:
        return []
    scores = similarity_to(full, base, query)
    ranked = sorted(candidates, key=lambda j: (-scores[j], names[j]))
    pool = ranked[: min(len(ranked), 2 * count)]
    chosen = random.Random(seed).sample(pool, min(count, len(pool)))
    return [names[j] for j in sorted(chosen)]


def similarity_to(full: Catalog, base: list[str], query: str) -> list[float]:
    """Per tool of ``full`` (catalog order): its highest TF-IDF cosine similarity to a tool of ``base``, or to
    the text ``query`` when ``base`` is empty."""
    from pytest_mcpeval.scoring.confusable import tfidf_matrix, tool_texts

    if not base:
        _, matrix = tfidf_matrix([*tool_texts(full), query])
        return [float(v) for v in matrix[:-1] @ matrix[-1]]
    if full.digest not in _MATRICES:
        _MATRICES[full.digest] = tfidf_matrix(tool_texts(full))[1]
    matrix = _MATRICES[full.digest]
    index = {name: j for j, name in enumerate(full.names)}
    sims = matrix @ matrix[[index[name] for name in base]].T
    return [float(v) for v in sims.max(axis=1)]
