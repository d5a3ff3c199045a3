"""What the drop gate can see: the fewest changed cases that can be significant, and the smallest detectable drop.

Every test of the gate is an exact paired test (:mod:`.significance`): only the *discordant* cases (whose outcome
changed between the runs) carry evidence, and ``k`` of them never give a p-value below ``2 / 2**k`` (the observed
pattern and its mirror always count).  A change is significant when ``p < level``; with Holm's correction over a
family of ``m`` testable changes, the smallest p-value must be below ``level / m``.  So

    min_changed(level, m) = the smallest k with 2 / 2**k * m < level

(6 at level 0.05, 8 at level 0.01; 8 at level 0.05 with m = 5 tests).  A metric measured on ``support`` cases can
show a drop only when at least ``min_changed`` of them change: the smallest fall it could flag is
``min_changed / support`` (``detectable_drop``), and a metric with fewer cases than that is *blind*: it can fall
from 1.0 to 0.0 without the gate noticing.  Pure: no numpy, no pytest.
"""

from __future__ import annotations

import math

__all__ = ["detectable_drop", "min_changed"]


def min_changed(level: float, tests: int = 1) -> int:
    """The fewest discordant cases whose best p-value ``2 / 2**k`` (times ``tests``, Holm's factor for the smallest
    of ``tests`` p-values) is below ``level``."""
    if not 0.0 < level < 1.0 or not math.isfinite(level):
        raise ValueError(f"level must be strictly between 0 and 1, not {level!r}")
    if tests < 1:
        raise ValueError(f"tests must be at least 1, not {tests!r}")
    k = 1
    while 2.0 ** (1 - k) * tests >= level:
        k += 1
    return k


def detectable_drop(support: int, changed: int) -> float | None:
    """``changed / support``: the smallest fall of a share over ``support`` cases that ``changed`` discordant cases
    can show; ``None`` when ``support < changed`` (blind: no fall, however large, can be significant)."""
    if support < changed or support <= 0:
        return None
    return changed / support
