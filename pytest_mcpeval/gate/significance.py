"""Exact paired tests for the drop gate (p-values are printed by pytest_mcpeval.numbers.format_p).

Under the null hypothesis the two outcomes of a paired case are exchangeable, so only the *discordant*
cases (whose outcome differs between the runs) carry evidence, and ``k`` of them can never give a p-value
below ``2 / 2**k``: at level 0.05 a drop needs at least six discordant cases.  :func:`mcnemar_exact` is
that test in closed form for a proportion; :func:`permutation_test` swaps the pairs for any statistic, and
:func:`sign_flip_test` is it for the mean of a continuous value (claims coverage).
Everything is seeded: the same inputs give the same output.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from pytest_mcpeval.defaults import DEFAULT_RESAMPLES
from pytest_mcpeval.scoring.bootstrap import CHUNK as _CHUNK

_EXACT_OUTCOMES = 1 << 16  # swap outcomes up to which a permutation test is exact (always for 16 discordant pairs)
_EXACT_PAIRS = 1000  # ... and discordant pairs up to which it is (binomial coefficients stay cheap)
_CELLS = 1 << 20  # floats per array of swap patterns or shifted counts in one product (8 MB)
_TOLERANCE = 1e-12  # a swapped |diff| within this of the observed one counts as reaching it


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for ``b`` and ``c`` discordant pairs (binomial test, p = 0.5).

    It is the paired permutation test of a count (accuracy, pass rate): swapping the two outcomes of a
    discordant pair turns its +1 into -1, so the swapped difference is a sum of fair coin signs.
    """
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1))
    return min(1.0, 2 * tail / (1 << n))


def _exact_share(sizes: Any, counts: Any, extreme: Any) -> float:
    """The share of the ``2**k`` swap patterns (``k = sum(sizes)``) in the rows of ``counts`` (swapped pairs of
    each type) marked ``extreme``: a row stands for the product of C(size, count) patterns.  Exact integers up
    to k = 62, correctly rounded binomial probabilities beyond."""
    import numpy as np

    if extreme.all():
        return 1.0
    k = int(sizes.sum())
    if k <= 62:  # every product of binomial coefficients is at most 2**k
        weights = np.ones(len(counts), dtype=np.int64)
        for g, m in enumerate(sizes.tolist()):
            weights *= np.array([math.comb(m, j) for j in range(m + 1)], dtype=np.int64)[counts[:, g]]
        return int(weights[extreme].sum()) / (1 << k)
    shares = np.ones(len(counts))
    for g, m in enumerate(sizes.tolist()):
        shares *= np.array([math.comb(m, j) / (1 << m) for j in range(m + 1)])[counts[:, g]]
    return min(1.0, float(shares[extreme].sum()))


def permutation_test(before: Any, after: Any, stat: Callable[[Any], Any], resamples: int = DEFAULT_RESAMPLES,
                     seed: int = 0, exact_limit: int = _EXACT_OUTCOMES) -> tuple[float, int]:
    """Two-sided paired permutation (swap) test of ``stat(after) - stat(before)``: ``(p, discordant)``.

    ``before`` and ``after`` hold one row of count columns per paired case (see ``_columns``); ``stat`` maps
    rows of summed counts, shape ``(m, w)``, to ``m`` metric values (NaN where undefined).  Under the null
    hypothesis the two outcomes of each pair are exchangeable, so each pair is swapped with probability 1/2;
    p is the share of the ``2**k`` swap patterns whose ``|diff|`` reaches the observed one (tolerance 1e-12),
    where ``k`` counts the *discordant* pairs (rows that differ): the others change nothing.  p is at least
    ``2 / 2**k``, since the observed pattern and its mirror always count.

    Pairs whose rows change by the same vector are interchangeable, so a pattern matters only through how
    many pairs of each such type it swaps: ``C(m, j)`` patterns swap ``j`` of a type's ``m`` pairs.  When
    there are at most ``exact_limit`` such combinations (always when ``k <= 16``) and ``k <= 1000``, p is
    computed exactly over all of them; otherwise from ``resamples`` seeded random swap patterns, with
    p = (1 + hits) / (1 + resamples).  A pattern under which the metric is undefined on either side counts
    as reaching the observed difference (no evidence is drawn from it); an undefined observed difference
    gives p = 1.
    """
    import numpy as np

    before = np.asarray(before, dtype=np.float64)
    after = np.asarray(after, dtype=np.float64)
    delta = after - before
    rows = np.flatnonzero(np.any(delta != 0, axis=1))
    k = int(rows.size)
    sum_b, sum_a = before.sum(axis=0)[None, :], after.sum(axis=0)[None, :]
    observed = float(stat(sum_a)[0] - stat(sum_b)[0])
    if k == 0 or math.isnan(observed):
        return 1.0, k
    types, inverse, sizes = np.unique(delta[rows], axis=0, return_inverse=True, return_counts=True)
    threshold = abs(observed) - _TOLERANCE

    def extreme(counts: Any) -> Any:  # shift = counts @ types: before' = before + shift, after' = after - shift
        shift = counts @ types
        diffs = stat(sum_a - shift) - stat(sum_b + shift)
        return np.isnan(diffs) | (np.abs(diffs) >= threshold)

    if math.prod(int(m) + 1 for m in sizes) <= exact_limit and k <= _EXACT_PAIRS:
        grid = np.meshgrid(*(np.arange(int(m) + 1) for m in sizes), indexing="ij")
        counts = np.stack([axis.ravel() for axis in grid], axis=1)
        return _exact_share(sizes, counts, extreme(counts.astype(np.float64))), k
    rng = np.random.default_rng(seed)
    order = np.argsort(inverse.ravel(), kind="stable")  # pairs grouped by type, for counting swaps per type
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    chunk = max(_CHUNK, _CELLS // (k + types.shape[1]))
    count = 0
    for start in range(0, resamples, chunk):
        size = min(chunk, resamples - start)
        bits = np.unpackbits(rng.integers(0, 256, size=(size, (k + 7) // 8), dtype=np.uint8), axis=1, count=k)
        swapped = np.add.reduceat(bits[:, order].astype(np.int64), starts, axis=1)
        count += int(np.count_nonzero(extreme(swapped.astype(np.float64))))
    return (1 + count) / (1 + resamples), k


def sign_flip_test(before: Any, after: Any, resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                   exact_limit: int = _EXACT_OUTCOMES) -> tuple[float, int]:
    """Two-sided paired sign-flip test of ``mean(after) - mean(before)`` for a continuous per-case value (the
    claims ``coverage`` of a flow): ``(p, discordant)``, ``discordant`` = the cases whose value changed.

    Swapping the two values of a pair flips the sign of its difference ``d_i``, so this is
    :func:`permutation_test` on one column: p is the share of the ``2**k`` sign patterns ``s`` with
    ``|sum(s_i * d_i)| >= |sum(d_i)|`` (tolerance 1e-12 on the mean), over the ``k`` non-zero differences.
    Cases with the same difference are interchangeable, so it is exact whenever the product over the distinct
    differences of (cases with it + 1) is at most ``exact_limit`` and ``k <= 1000``: always for ``k <= 16``, and
    for many more cases when few distinct differences occur (claim scores are 1, 0.5 or 0, so with one claim
    per case the differences are +-0.5 and +-1); else seeded Monte-Carlo, p = (1 + hits) / (1 + resamples).
    As for a count, p >= 2 / 2**k: at level 0.05 a drop needs six cases whose coverage changed.
    """
    import numpy as np

    b = np.asarray(before, dtype=np.float64).reshape(-1, 1)
    a = np.asarray(after, dtype=np.float64).reshape(-1, 1)
    n = len(b)
    return permutation_test(b, a, lambda sums: sums[:, 0] / n, resamples, seed, exact_limit)
