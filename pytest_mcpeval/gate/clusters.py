"""The unit of a comparison is the case: ``(file, id, model)`` with all its repeats.

The repeats of a case (``--mcp-repeat``) are not independent evidence: at temperature 0 they are copies, with
sampling they are correlated outcomes of one request.  So the comparison pairs *cases*, not repeats: each side of a
pair holds that case's usable repeats (no error, scored), and every per-case value is the mean over them (a case
with 3 repeats, 2 of them correct, has accuracy 2/3).  The two sides may have different numbers of repeats (a
baseline saved with ``--mcp-repeat=3``, a run with one): the per-case means still pair.  Swapping a pair in the
paired tests swaps all its repeats together: the cluster permutation test (:mod:`.paired`).

:func:`pair_cases` sorts the keys of both runs into paired cases, repeats only in one run, repeats left out for an
error, and cases that are a flow in one run and a single call in the other.  :func:`flips` lists the paired cases
whose outcome changed (``flipped``) and the single calls whose called tool changed (``moved``), one entry per case.
Pure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_mcpeval.results import Flipped

__all__ = ["Pair", "Pairing", "case_key", "flips", "is_flow", "mean_over", "pair_cases", "pair_key"]

Case = Mapping[str, Any]
Pair = tuple[list[Case], list[Case]]  # one paired case: its usable repeats before and after, by repeat number


@dataclass
class Pairing:
    """The cases of two runs, sorted out by :func:`pair_cases`."""

    pairs: dict[str, list[Pair]] = field(default_factory=dict)  # model -> its paired cases, in key order
    only_in_baseline: list[str] = field(default_factory=list)  # repeat keys only the baseline has
    only_in_current: list[str] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)  # repeat keys in both runs left out for an error on either side
    kind_changed: list[str] = field(default_factory=list)  # repeat keys of a case that is a flow in one run only


def case_key(case: Case) -> str:
    """The key of one repeat of a case, as the report lists it: ``file::id[model]#repeat``."""
    return f"{case.get('file', '')}::{case.get('id', '')}[{case.get('model', '')}]#{case.get('repeat', 0)}"


def pair_key(case: Case) -> tuple[str, str, str, int]:
    """``(file, id, model, repeat)``: one repeat of a case."""
    return (str(case.get("file", "")), str(case.get("id", "")), str(case.get("model", "")),
            int(case.get("repeat") or 0))


def is_flow(case: Case) -> bool:
    """A multi-step flow (``flow: true``); a case without the key, as in baselines older than flows, is a single
    call."""
    return bool(case.get("flow"))


def _usable(case: Case) -> bool:
    return not case.get("error") and case.get("correct") is not None


def _by_case(cases: Mapping[tuple[str, str, str, int], Case]) -> dict[tuple[str, str, str], dict[int, Case]]:
    out: dict[tuple[str, str, str], dict[int, Case]] = {}
    for key in sorted(cases):
        out.setdefault(key[:3], {})[key[3]] = cases[key]
    return out


def pair_cases(before: Mapping[tuple[str, str, str, int], Case],
               after: Mapping[tuple[str, str, str, int], Case]) -> Pairing:
    """Pair the cases of two runs (each keyed by :func:`pair_key`) by ``(file, id, model)``.

    A repeat in one run only is listed as such (its case still pairs on its other repeats); a repeat that is an
    error (or unscored) on either side is listed as left out and does not count in its case's mean on either side
    where it is an error; a case pairs when both sides keep at least one usable repeat and both are of the same
    kind (a flow or a single call)."""
    out = Pairing(only_in_baseline=[case_key(before[k]) for k in sorted(before.keys() - after.keys())],
                  only_in_current=[case_key(after[k]) for k in sorted(after.keys() - before.keys())])
    cases_before, cases_after = _by_case(before), _by_case(after)
    for key in sorted(cases_before.keys() & cases_after.keys()):
        b, a = cases_before[key], cases_after[key]
        out.excluded += [case_key(a[r]) for r in sorted(b.keys() & a.keys()) if not (_usable(b[r]) and _usable(a[r]))]
        kept_b = [c for c in b.values() if _usable(c)]
        kept_a = [c for c in a.values() if _usable(c)]
        if not (kept_b and kept_a):
            continue
        if is_flow(kept_b[0]) != is_flow(kept_a[0]):
            out.kind_changed += [case_key(c) for c in kept_a]
        else:
            out.pairs.setdefault(key[2], []).append((kept_b, kept_a))
    return out


def mean_over(repeats: Sequence[Case], value: str, outcome: bool) -> float | None:
    """The case's value ``value``, the mean over its repeats: of a 0/1 ``outcome`` (a repeat without it counts as
    0), or of a number (the repeats without it left out; ``None`` when none has it).  One repeat: its value."""
    if outcome:
        return sum(float(bool(c.get(value))) for c in repeats) / len(repeats)
    found = [float(c[value]) for c in repeats if c.get(value) is not None]
    return sum(found) / len(found) if found else None


def _outcome(case: Case) -> bool:
    """What a flipped case flipped: ``passed`` of a flow (its ``correct`` is only its first call), ``correct``
    of a single call."""
    return bool(case.get("passed")) if is_flow(case) else bool(case["correct"])


def _modal(repeats: Sequence[Case], value: str) -> Any:
    """The most frequent ``value`` among the repeats (a tie: the one of the earliest repeat)."""
    return Counter(c.get(value) for c in repeats).most_common(1)[0][0]


def _majority(repeats: Sequence[Case], value: str) -> bool | None:
    found = [bool(c[value]) for c in repeats if c.get(value) is not None]
    return 2 * sum(found) >= len(found) if found else None


def _flip(bs: Sequence[Case], as_: Sequence[Case]) -> Flipped:
    """One entry of ``flipped`` or ``moved`` for a paired case.  A case with one repeat on each side reads as that
    repeat (``file::id[model]#0``); with more, the key is the case's (``file::id[model]``), ``before``/``after``
    say whether at least half its repeats had the outcome, ``share_before``/``share_after`` how many did, of
    ``repeats_before``/``repeats_after``, and the called tools are the most frequent call."""
    a = as_[0]
    if len(bs) == len(as_) == 1:
        b = bs[0]
        out: Flipped = {
            "case": case_key(a), "model": str(a.get("model")), "expected_label": a.get("expected_label"),
            "before": _outcome(b), "after": _outcome(a),
            "called_before": b.get("called_label"), "called_after": a.get("called_label"),
            "passed_before": b.get("passed"), "passed_after": a.get("passed"),
        }
    else:
        share_b = sum(map(_outcome, bs)) / len(bs)
        share_a = sum(map(_outcome, as_)) / len(as_)
        out = {
            "case": f"{a.get('file', '')}::{a.get('id', '')}[{a.get('model', '')}]", "model": str(a.get("model")),
            "expected_label": a.get("expected_label"), "before": 2 * share_b >= 1, "after": 2 * share_a >= 1,
            "called_before": _modal(bs, "called_label"), "called_after": _modal(as_, "called_label"),
            "passed_before": _majority(bs, "passed"), "passed_after": _majority(as_, "passed"),
            "share_before": share_b, "share_after": share_a, "repeats_before": len(bs), "repeats_after": len(as_),
        }
    if is_flow(a):
        out["flow"] = True
    return out


def flips(pairs: Mapping[str, Sequence[Pair]]) -> tuple[list[Flipped], list[Flipped]]:
    """``(flipped, moved)``, one entry per paired case: ``flipped`` the cases whose outcome changed (with repeats:
    the share of repeats with it), ``moved`` the single calls whose called tool changed (with repeats: the most
    frequent call), flipped or not."""
    flipped: list[Flipped] = []
    moved: list[Flipped] = []
    for model_pairs in pairs.values():
        for bs, as_ in model_pairs:
            if sum(map(_outcome, bs)) / len(bs) != sum(map(_outcome, as_)) / len(as_):
                flipped.append(_flip(bs, as_))
            if not is_flow(bs[0]) and _modal(bs, "called_label") != _modal(as_, "called_label"):
                moved.append(_flip(bs, as_))
    return flipped, moved
