"""The paired bootstrap over cases, seeded: resampled column sums and percentile intervals.

Used by the baseline comparison (``gate.compare``, the interval of a change) and by the report's headline
intervals (:mod:`.intervals`), so both resample the same way.  Pure numpy (imported where it is used).
"""

from __future__ import annotations

from typing import Any

CHUNK = 1000  # resamples (or swap patterns) per matrix product: bounds memory to CHUNK x cases floats


def resampled_sums(cols: Any, resamples: int, seed: int) -> Any:
    """Column sums of ``resamples`` paired bootstrap resamples of the rows (cases) of ``cols``, shape
    ``(resamples, columns)``: each resample draws ``n`` row indices with replacement, seeded."""
    import numpy as np

    n = len(cols)
    rng = np.random.default_rng(seed)
    parts = []
    for start in range(0, resamples, CHUNK):
        rows = min(CHUNK, resamples - start)
        idx = rng.integers(0, n, size=(rows, n))
        weights = np.bincount((idx + (np.arange(rows) * n)[:, None]).ravel(), minlength=rows * n)
        parts.append(weights.reshape(rows, n).astype(np.float64) @ cols)
    return np.vstack(parts)


def bootstrap_interval(diffs: Any, level: float) -> tuple[float | None, float | None]:
    """Percentile interval at confidence ``1 - level`` of resampled diffs (NaN resamples left out)."""
    import numpy as np

    valid = diffs[~np.isnan(diffs)]
    if valid.size == 0:
        return None, None
    low, high = np.percentile(valid, [100 * level / 2, 100 * (1 - level / 2)])
    return float(low), float(high)
