"""What a candidate changed on a set of paired cases, and whether it is significant.

The tests are the drop gate's (:mod:`pytest_mcpeval.gate.significance`): a tool's F1 by the exact paired
permutation test over its ``tp, support, predicted`` counts, accuracy and a flow's pass rate by the exact
McNemar test, claims coverage by the exact sign-flip test.  The regression family (every other tool's F1, the
accuracy over all the cases, the flows' pass rate and coverage) is adjusted by Holm's step-down method, with the
gate's screening of hypotheses that cannot reach the level (``2 / 2**discordant > level``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pytest_mcpeval.gate.significance import mcnemar_exact, permutation_test, sign_flip_test
from pytest_mcpeval.tune.evaluate import Outcome


@dataclass
class Change:
    """One metric before and after on paired cases, with its two-sided p-value."""

    metric: str
    before: float | None
    after: float | None
    p: float
    discordant: int
    n: int
    p_adjusted: float | None = None

    @property
    def diff(self) -> float | None:
        return None if self.before is None or self.after is None else self.after - self.before

    def as_data(self) -> dict[str, object]:
        data: dict[str, object] = {"metric": self.metric, "before": _round(self.before), "after": _round(self.after),
                                   "p": _round(self.p, 6), "n": self.n, "discordant": self.discordant}
        if self.p_adjusted is not None:
            data["p_adjusted"] = _round(self.p_adjusted, 6)
        return data


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None or math.isnan(value) else round(value, digits)


def _f1(counts: Sequence[float]) -> float | None:
    tp, support, predicted = counts
    return None if support + predicted == 0 else 2 * tp / (support + predicted)


def tool_f1(tool: str, pairs: Sequence[tuple[Outcome, Outcome]]) -> Change:
    """``f1[tool]`` over the single calls of ``pairs`` (before, after)."""
    import numpy as np

    singles = [(b, a) for b, a in pairs if not b.flow]

    def columns(side: Iterable[Outcome]) -> list[list[float]]:
        return [[float(o.expected == tool and o.called == tool), float(o.expected == tool), float(o.called == tool)]
                for o in side]

    cols_b = np.array(columns(b for b, _ in singles), dtype=np.float64).reshape(-1, 3)
    cols_a = np.array(columns(a for _, a in singles), dtype=np.float64).reshape(-1, 3)

    def stat(counts: object) -> object:
        c = np.asarray(counts)
        den = c[:, 1] + c[:, 2]
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(den > 0, 2 * c[:, 0] / np.where(den > 0, den, 1), np.nan)

    p, k = permutation_test(cols_b, cols_a, stat) if len(singles) else (1.0, 0)
    return Change(f"f1[{tool}]", _f1(cols_b.sum(axis=0).tolist()), _f1(cols_a.sum(axis=0).tolist()), p, k, len(singles))


def proportion(metric: str, before: Sequence[bool], after: Sequence[bool]) -> Change:
    """A share of paired 0/1 outcomes (accuracy, pass rate): the exact McNemar test."""
    n = len(before)
    worse = sum(1 for b, a in zip(before, after, strict=True) if b and not a)
    better = sum(1 for b, a in zip(before, after, strict=True) if a and not b)
    if n == 0:
        return Change(metric, None, None, 1.0, 0, 0)
    return Change(metric, sum(before) / n, sum(after) / n, mcnemar_exact(worse, better), worse + better, n)


def accuracy(pairs: Sequence[tuple[Outcome, Outcome]], metric: str = "accuracy") -> Change:
    return proportion(metric, [b.correct for b, _ in pairs], [a.correct for _, a in pairs])


def flow_changes(pairs: Sequence[tuple[Outcome, Outcome]]) -> list[Change]:
    """The flows' pass rate and claims coverage, where the pairs hold flows (and claims)."""
    flows = [(b, a) for b, a in pairs if b.flow]
    if not flows:
        return []
    out = [proportion("flow_pass_rate", [bool(b.passed) for b, _ in flows], [bool(a.passed) for _, a in flows])]
    covered = [(b.coverage, a.coverage) for b, a in flows if b.coverage is not None and a.coverage is not None]
    if covered:
        p, k = sign_flip_test([b for b, _ in covered], [a for _, a in covered])
        n = len(covered)
        out.append(Change("coverage", sum(b for b, _ in covered) / n, sum(a for _, a in covered) / n, p, k, n))
    return out


def holm(family: list[Change], level: float) -> None:
    """Holm's step-down adjustment of ``family``'s p-values, in place (``p_adjusted``); changes that could not
    reach ``level`` with their discordant cases keep their own p-value and do not count in ``m``."""
    testable = [c for c in family if c.diff is not None and 2.0 ** (1 - c.discordant) <= level]
    running = 0.0
    for rank, change in enumerate(sorted(testable, key=lambda c: (c.p, c.metric))):
        running = max(running, min(1.0, (len(testable) - rank) * change.p))
        change.p_adjusted = running
    for change in family:
        if change.p_adjusted is None:
            change.p_adjusted = change.p


def significant_drop(change: Change, level: float) -> bool:
    p = change.p if change.p_adjusted is None else change.p_adjusted
    return change.diff is not None and change.diff < 0 and p < level


def significant_gain(change: Change, level: float) -> bool:
    return change.diff is not None and change.diff > 0 and change.p < level


def smallest_p(discordant: int) -> float:
    """The best p-value ``discordant`` cases can give (``2 / 2**k``): why small support cannot show a gain."""
    return min(1.0, 2.0 ** (1 - discordant))
