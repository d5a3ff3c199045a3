"""The tuning loop: candidates compared on train, the best of each tool judged on the held-out part.

A candidate is accepted only when, on the held-out cases, its tool's F1 (or its accuracy over the cases it can
affect) rises significantly, no other tool's F1 nor the accuracy, a flow's pass rate or claims coverage drops
significantly (Holm across them), and the catalog's tokens per request grow by at most ``max_token_growth``.
Each candidate re-runs only the cases its tool can affect (cases expecting it or a tool it is confused with,
or that called it) and a seeded guard sample of the others; every other case keeps its baseline outcome.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_mcpeval.tune import stats
from pytest_mcpeval.tune.candidates import Candidate, quoted_case
from pytest_mcpeval.tune.evaluate import NONE, Evaluation, Evaluator, Outcome

GUARD_SHARE = 0.25  # of the cases a tool cannot affect, re-run as a guard against regressions
GUARD_MIN = 10

REGRESSION = "regression"
TOKEN_GROWTH = "token_growth"
NO_GAIN = "no_significant_gain"
WORSE = "worse_than_other_candidate"
QUOTES = "quotes_a_case"


@dataclass
class Settings:
    level: float = 0.05
    max_token_growth: float = 0.25
    seed: int = 0


@dataclass
class Trial:
    """A candidate and what became of it (one entry of tune.json)."""

    candidate: Candidate
    train: dict[str, Any] | None = None
    holdout: dict[str, Any] | None = None
    regressions: list[dict[str, Any]] = field(default_factory=list)
    tokens: dict[str, Any] | None = None
    verdict: str = "rejected"
    reason: str | None = None
    note: str = ""
    before_description: str = ""
    rank: tuple[float, ...] = ()

    def as_data(self) -> dict[str, Any]:
        c = self.candidate
        return {"tool": c.tool, "description": c.description, "source": c.source, "round": c.round,
                "description_before": self.before_description, "train": self.train, "holdout": self.holdout,
                "regressions": self.regressions, "tokens": self.tokens, "verdict": self.verdict,
                "reason": self.reason, "note": self.note}


def confused_with(tool: str, outcomes: Iterable[Outcome]) -> set[str]:
    """The tools ``tool`` is confused with: called for it, or it called for them."""
    out = set()
    for o in outcomes:
        if o.expected == tool and o.called != tool:
            out.add(o.called)
        elif o.called == tool and o.expected != tool:
            out.add(o.expected)
    return out - {NONE, tool}


def missed_tools(outcomes: Iterable[Outcome]) -> list[str]:
    """Tools with a miss or a confusion (expected and not called, or called and not expected)."""
    found = {name for o in outcomes if o.expected != o.called for name in (o.expected, o.called)}
    return sorted(found - {NONE})


def affected(tool: str, outcomes: Mapping[str, Outcome], expected: Mapping[str, list[str]]) -> set[str]:
    """The cases a change of ``tool``'s description can affect: expecting it or a tool it is confused with, or
    calling it."""
    tools = {tool} | confused_with(tool, outcomes.values())
    keys = {k for k, o in outcomes.items() if o.called in tools or o.expected in tools}
    return keys | {k for k, names in expected.items() if tools & set(names)}


def guard_sample(rest: Iterable[str], seed: int, tool: str) -> set[str]:
    keys = sorted(rest)
    size = min(len(keys), max(GUARD_MIN, math.ceil(GUARD_SHARE * len(keys))))
    return set(random.Random(f"{seed}:guard:{tool}").sample(keys, size))


def pairs_over(part: Sequence[str], base: Mapping[str, Outcome],
               after: Mapping[str, Outcome]) -> list[tuple[Outcome, Outcome]]:
    """Paired outcomes of ``part``: a case not re-run keeps its baseline outcome."""
    return [(base[k], after.get(k, base[k])) for k in part if k in base]


def regression_family(tool: str | None, pairs: Sequence[tuple[Outcome, Outcome]], level: float) -> list[stats.Change]:
    """Every tool's F1 but ``tool``'s, the accuracy, the flows' pass rate and coverage; Holm-adjusted."""
    labels = sorted({label for b, a in pairs for label in (b.expected, b.called, a.expected, a.called)} - {tool})
    family = [stats.tool_f1(label, pairs) for label in labels]
    family = [c for c in family if c.before is not None and c.after is not None]
    family += [stats.accuracy(pairs), *stats.flow_changes(pairs)]
    stats.holm(family, level)
    return family


def measure(tool: str, pairs: Sequence[tuple[Outcome, Outcome]], hit: set[str], rerun: int) -> dict[str, Any]:
    """The tool's F1 over the part, and the accuracy over the cases of it the tool can affect (``hit``)."""
    f1 = stats.tool_f1(tool, pairs)
    acc = stats.accuracy([(b, a) for b, a in pairs if b.key in hit], "accuracy_affected")
    return {"cases": len(pairs), "rerun": rerun, "affected": len(hit), "f1": f1.as_data(),
            "accuracy_affected": acc.as_data(), "_f1": f1, "_acc": acc}


def public(measured: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in measured.items() if not k.startswith("_")}


class Tuner:
    def __init__(self, evaluator: Evaluator, expected: Mapping[str, list[str]], train: Sequence[str],
                 held: Sequence[str], settings: Settings, requests: Mapping[str, str] | None = None) -> None:
        self.evaluator = evaluator
        self.expected = expected
        self.train = list(train)
        self.held = list(held)
        self.settings = settings
        self.requests = dict(requests or {})  # case key -> its user text: what a candidate must not quote

    def scope(self, tool: str, base: Evaluation) -> tuple[set[str], set[str]]:
        """The cases the tool can affect, and the guard sample of the others."""
        hit = affected(tool, base.outcomes, self.expected)
        return hit, guard_sample(set(self.expected) - hit, self.settings.seed, tool)

    def round(self, number: int, accepted: dict[str, str], base: Evaluation,
              candidates: Sequence[Candidate]) -> list[Trial]:
        """Judge ``candidates`` against ``base`` (the run with ``accepted``); the accepted are re-checked together."""
        trials: list[Trial] = []
        by_tool: dict[str, list[Candidate]] = {}
        for c in candidates:
            quoted = quoted_case(c.description, self.requests)
            if quoted is None:
                by_tool.setdefault(c.tool, []).append(c)
                continue
            part = "held-out" if quoted in set(self.held) else "train"
            trials.append(Trial(c, reason=QUOTES, before_description=base.descriptions.get(c.tool, ""), note=(
                f"it repeats the request of the {part} case {quoted}; a description that quotes the cases that judge "
                "it says nothing of other requests: not evaluated")))
        for tool, group in sorted(by_tool.items()):
            trials += self.tool_round(number, tool, group, accepted, base)
        self.recheck(number, [t for t in trials if t.verdict == "accepted"], accepted, base)
        return trials

    def tool_round(self, number: int, tool: str, group: Sequence[Candidate], accepted: Mapping[str, str],
                   base: Evaluation) -> list[Trial]:
        hit, guard = self.scope(tool, base)
        on_train = sorted((hit | guard) & set(self.train))
        trials = []
        for index, candidate in enumerate(group):
            trial = Trial(candidate, before_description=base.descriptions.get(tool, ""))
            after = self.evaluator.run({**accepted, tool: candidate.description}, on_train,
                                       f"r{number}-{tool}-{index}-train") if on_train else None
            measured = measure(tool, pairs_over(self.train, base.outcomes, after.outcomes if after else {}),
                               hit & set(on_train), len(on_train))
            trial.train = public(measured)
            f1_after = measured["_f1"].after
            trial.rank = (-1.0 if f1_after is None else f1_after, measured["_acc"].after or 0.0,
                          -len(candidate.description))
            trials.append(trial)
        best = max(trials, key=lambda t: t.rank)
        for trial in trials:
            if trial is not best:
                trial.reason, trial.note = WORSE, "another candidate for the tool did better on the train cases"
        self.judge(number, best, (hit, guard), accepted, base)
        return trials

    def judge(self, number: int, trial: Trial, scope: tuple[set[str], set[str]], accepted: Mapping[str, str],
              base: Evaluation) -> None:
        tool = trial.candidate.tool
        hit, guard = scope
        on_held = sorted((hit | guard) & set(self.held))
        after = self.evaluator.run({**accepted, tool: trial.candidate.description}, on_held,
                                   f"r{number}-{tool}-holdout") if on_held else None
        pairs = pairs_over(self.held, base.outcomes, after.outcomes if after else {})
        measured = measure(tool, pairs, hit & set(on_held), len(on_held))
        trial.holdout = public(measured)
        level = self.settings.level
        family = regression_family(tool, pairs, level)
        drops = [c for c in family if stats.significant_drop(c, level)]
        trial.regressions = [c.as_data() for c in drops]
        before_tokens = base.tool_tokens.get(tool, 0)
        after_tokens = after.tool_tokens.get(tool, before_tokens) if after else before_tokens
        growth = after_tokens / before_tokens - 1 if before_tokens else 0.0
        trial.tokens = {"before": before_tokens, "after": after_tokens, "growth": round(growth, 4)}
        f1, acc = measured["_f1"], measured["_acc"]
        gain = ((stats.significant_gain(f1, level) and (acc.diff or 0) >= 0)
                or (stats.significant_gain(acc, level) and (f1.diff or 0) >= 0))
        if drops:
            trial.reason = REGRESSION
            trial.note = "significant drop (Holm) of " + ", ".join(f"{c.metric} {c.before:.3f} -> {c.after:.3f}"
                                                                   for c in drops)
        elif growth > self.settings.max_token_growth:
            trial.reason = TOKEN_GROWTH
            trial.note = f"tokens per request {before_tokens} -> {after_tokens} (+{growth:.0%})"
        elif not gain:
            trial.reason = NO_GAIN
            trial.note = no_gain_note(f1, len(on_held), level)
        else:
            trial.verdict, trial.reason = "accepted", None
            trial.note = f"f1[{tool}] {f1.before or 0:.3f} -> {f1.after or 0:.3f} on held-out, p = {f1.p:.4g}"
            self.confirm(number, trial, accepted, base)

    def confirm(self, number: int, trial: Trial, accepted: Mapping[str, str], base: Evaluation) -> None:
        """A change that passed on the cases it can affect and the guard sample runs on every held-out case: what
        it takes from a tool outside its scope is a regression too."""
        tool = trial.candidate.tool
        after = self.evaluator.run({**accepted, tool: trial.candidate.description}, self.held,
                                   f"r{number}-{tool}-holdout-all")
        family = regression_family(tool, pairs_over(self.held, base.outcomes, after.outcomes), self.settings.level)
        drops = [c for c in family if stats.significant_drop(c, self.settings.level)]
        if drops:
            trial.verdict, trial.reason = "rejected", REGRESSION
            trial.regressions = [c.as_data() for c in drops]
            trial.note = ("on every held-out case, significant drop (Holm) of "
                          + ", ".join(f"{c.metric} {c.before:.3f} -> {c.after:.3f}" for c in drops))

    def recheck(self, number: int, trials: list[Trial], accepted: Mapping[str, str], base: Evaluation) -> None:
        """Changes accepted alone are run together on the held-out part; a joint regression keeps only the one
        with the smallest p-value."""
        if len(trials) < 2:
            return
        combined = {**accepted, **{t.candidate.tool: t.candidate.description for t in trials}}
        after = self.evaluator.run(combined, self.held, f"r{number}-combined")
        family = regression_family(None, pairs_over(self.held, base.outcomes, after.outcomes), self.settings.level)
        family = [c for c in family if not any(c.metric == f"f1[{t.candidate.tool}]" for t in trials)]
        drops = [c for c in family if stats.significant_drop(c, self.settings.level)]
        if not drops:
            return
        keep = min(trials, key=lambda t: (t.holdout or {}).get("f1", {}).get("p", 1.0))
        for trial in trials:
            if trial is not keep:
                trial.verdict, trial.reason = "rejected", REGRESSION
                trial.note = (f"combined with the other accepted changes: significant drop of "
                              f"{', '.join(c.metric for c in drops)}")
                trial.regressions = [c.as_data() for c in drops]


def no_gain_note(f1: stats.Change, held: int, level: float) -> str:
    if stats.smallest_p(f1.discordant) >= level:
        return (f"{held} held-out cases re-run, {f1.discordant} of them changed: they cannot show a significant "
                f"gain (the smallest p-value {f1.discordant} changed cases can give is "
                f"{stats.smallest_p(f1.discordant):.4g}, level {level:g})")
    return f"f1 {f1.before or 0:.3f} -> {f1.after or 0:.3f} on held-out, p = {f1.p:.4g} (level {level:g})"
