"""The gate's power figures against a hand-worked table (docs/metrics.md, "What the gate can see")."""

from __future__ import annotations

import pytest

from pytest_mcpeval.gate.power import detectable_drop, min_changed
from pytest_mcpeval.gate.significance import mcnemar_exact


# level, tests (Holm's m), fewest changed cases: 2 / 2**k * m < level, worked by hand
# 0.05, 1: 2/32 = 0.0625 >= 0.05, 2/64 = 0.03125 < 0.05 -> 6
# 0.01, 1: 2/128 = 0.0156 >= 0.01, 2/256 = 0.0078 < 0.01 -> 8
# 0.05, 5: 5 * 2/128 = 0.078 >= 0.05, 5 * 2/256 = 0.039 < 0.05 -> 8
# 0.01, 5: 5 * 2/512 = 0.0195 >= 0.01, 5 * 2/1024 = 0.0098 < 0.01 -> 10
# 0.0625, 1: 2/32 = 0.0625 is not below 0.0625 -> 6 (p < level, strictly)
@pytest.mark.parametrize(("level", "tests", "expected"), [
    (0.05, 1, 6), (0.01, 1, 8), (0.05, 5, 8), (0.01, 5, 10), (0.0625, 1, 6), (0.1, 1, 5), (0.05, 2, 7),
])
def test_min_changed_matches_the_hand_worked_table(level: float, tests: int, expected: int) -> None:
    assert min_changed(level, tests) == expected


@pytest.mark.parametrize("level", [0.05, 0.01, 0.1])
def test_min_changed_is_where_the_exact_test_first_fires(level: float) -> None:
    k = min_changed(level)
    assert mcnemar_exact(k, 0) < level <= mcnemar_exact(k - 1, 0)


def test_detectable_drop_is_the_share_of_the_support_and_none_when_blind() -> None:
    assert detectable_drop(12, 6) == 0.5
    assert detectable_drop(6, 6) == 1.0
    assert detectable_drop(5, 6) is None
    assert detectable_drop(0, 6) is None


@pytest.mark.parametrize(("level", "tests"), [(0.0, 1), (1.0, 1), (float("nan"), 1), (0.05, 0)])
def test_min_changed_refuses_what_is_not_a_level(level: float, tests: int) -> None:
    with pytest.raises(ValueError):
        min_changed(level, tests)
