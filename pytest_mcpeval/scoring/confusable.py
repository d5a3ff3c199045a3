"""Tools whose names and descriptions read alike, and how often a run actually confused them.

:func:`confusable_pairs` ranks pairs of tools by the TF-IDF cosine similarity of their names and
descriptions (checked against scikit-learn in the tests); :func:`confusion_counts` reads how often the
models of a run confused each pair, to show next to them.  Pure: no pytest, no I/O.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from pytest_mcpeval.catalog import Catalog

DEFAULT_THRESHOLD = 0.18

_STOP_TEXT = """
an the and or but nor of to in on at by for from with without into onto over under as is are was were be been being
it its this that these those there here if then than so not no yes do does done can could may might must should will
would shall you your we our us they them their he she his her me my also only such via per each any all both either
some more most other which who whom whose what when where how why eg ie etc
"""
STOP_WORDS = frozenset(_STOP_TEXT.split())

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[a-z0-9]{2,}")


def tokenize(text: str) -> list[str]:
    """Lower-case words of letters/digits (length >= 2) with ``_``, ``-`` and camelCase as breaks, no stop words."""
    spaced = _CAMEL.sub(" ", text).replace("_", " ").replace("-", " ").lower()
    return [w for w in _WORD.findall(spaced) if w not in STOP_WORDS]


def tool_texts(catalog: Catalog) -> list[str]:
    """``name + " " + description`` of each tool, as the model sees them (catalog order)."""
    return [
        f"{tool['name']} {entry['function']['description']}"
        for tool, entry in zip(catalog.tools, catalog.openai_tools, strict=True)
    ]


def tfidf_matrix(texts: list[str]) -> tuple[list[str], Any]:
    """``(vocabulary, matrix)``: raw term counts times smooth idf ``ln((1+n)/(1+df)) + 1``, rows l2-normalised."""
    import numpy as np

    docs = [Counter(tokenize(text)) for text in texts]
    vocab = sorted({token for doc in docs for token in doc})
    index = {token: k for k, token in enumerate(vocab)}
    counts = np.zeros((len(docs), len(vocab)), dtype=np.float64)
    for row, doc in enumerate(docs):
        for token, count in doc.items():
            counts[row, index[token]] = count
    n = len(docs)
    df = (counts > 0).sum(axis=0)
    idf = np.log((1.0 + n) / (1.0 + df)) + 1.0
    weights = counts * idf
    norms = np.linalg.norm(weights, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vocab, weights / norms


def confusable_pairs(
    catalog: Catalog, threshold: float = DEFAULT_THRESHOLD, top: int | None = None
) -> list[tuple[str, str, float]]:
    """Pairs ``(a, b, similarity)`` with ``a < b``, similarity >= threshold, most similar first."""
    names = catalog.names
    if len(names) < 2:
        return []
    _, matrix = tfidf_matrix(tool_texts(catalog))
    sims = matrix @ matrix.T
    pairs: list[tuple[str, str, float]] = []
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            sim = round(float(sims[i, j]), 4)
            if sim >= threshold and not math.isnan(sim):
                a, b = sorted((names[i], names[j]))
                pairs.append((a, b, sim))
    pairs.sort(key=lambda p: (-p[2], p[0], p[1]))
    return pairs if top is None else pairs[:top]


def confusion_counts(report: Mapping[str, Any], model: str | None = None) -> dict[tuple[str, str], int]:
    """How often each unordered pair ``(a, b)``, ``a < b``, was confused in a JSON report (both directions)."""
    models = report.get("models") or {}
    if model is not None:
        models = {model: models[model]} if model in models else {}
    out: dict[tuple[str, str], int] = {}
    for metrics in models.values():
        for pair in (metrics or {}).get("confused_pairs") or []:
            expected, called = str(pair["expected"]), str(pair["called"])
            if expected == called:
                continue
            a, b = sorted((expected, called))
            out[(a, b)] = out.get((a, b), 0) + int(pair["count"])
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))
