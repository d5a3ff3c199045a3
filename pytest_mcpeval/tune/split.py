"""The seeded, stratified split of the cases into a train part and a held-out part.

Cases are grouped by their expected tool (flows by their first expected tool, cases expecting no call under
``(none)``); each group, in a seeded order, gives ``share * size`` cases to the held-out part, the fraction
rounded up or down by a seeded draw (so groups of one case go either way, about ``share`` of them held out),
and a group of two or more keeps at least one case on each side.  The same cases and seed give the same
split on every machine; the two parts are disjoint and together hold every case.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from pytest_mcpeval.tune import TuneError

NONE = "(none)"


def stratum(expected: list[str]) -> str:
    return expected[0] if expected else NONE


def split_cases(cases: Mapping[str, list[str]], holdout: float, seed: int) -> tuple[list[str], list[str]]:
    """``(train, held_out)`` keys of ``cases`` (key -> expected tools), each sorted."""
    if not 0.0 < holdout < 1.0:
        raise TuneError(f"--holdout={holdout:g}: the held-out share must be strictly between 0 and 1")
    groups: dict[str, list[str]] = {}
    for key in sorted(cases):
        groups.setdefault(stratum(cases[key]), []).append(key)
    train: list[str] = []
    held: list[str] = []
    for label in sorted(groups):
        keys = groups[label]
        rng = random.Random(f"{seed}:{label}")
        rng.shuffle(keys)
        whole, fraction = divmod(holdout * len(keys), 1.0)
        k = int(whole) + (rng.random() < fraction)
        if len(keys) >= 2:
            k = min(max(k, 1), len(keys) - 1)
        held += keys[:k]
        train += keys[k:]
    if not train or not held:
        raise TuneError(f"--holdout={holdout:g} leaves the {'train' if not train else 'held-out'} part empty "
                        f"({len(cases)} cases): give more cases or another share")
    return sorted(train), sorted(held)
