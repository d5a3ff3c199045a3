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

from pytest_mcpeval.gate.power import min_changed
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
TOO_FEW = "too_few_held_out"  # fewer held-out cases could change the tool's F1 than a significant gain needs


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


def affected(tools: set[str], outcomes: Mapping[str, Outcome], expected: Mapping[str, list[str]]) -> set[str]:
    """The cases a change of a tool's description can affect: expecting or calling the tool or a tool it is
    confused with (``tools``: the tool and its confusions)."""
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


def measure(tool: str, pairs: Sequence[tuple[Outcome, Outcome]], hit: set[str], rerun: int,
            errors: Sequence[str] = ()) -> dict[str, Any]:
    """The tool's F1 over the part, and the accuracy over the cases of it the tool can affect (``hit``).
    ``errors``: re-run cases that ended in an error (they keep their baseline outcome: not compared)."""
    f1 = stats.tool_f1(tool, pairs)
    acc = stats.accuracy([(b, a) for b, a in pairs if b.key in hit], "accuracy_affected")
    return {"cases": len(pairs), "rerun": rerun, "affected": len(hit), "errors": len(errors), "f1": f1.as_data(),
            "accuracy_affected": acc.as_data(), "_f1": f1, "_acc": acc}


def gained(f1: stats.Change, acc: stats.Change, level: float) -> bool:
    """The gain rule: the tool's F1 rises significantly (its paired permutation test at ``level``) and the accuracy
    over the cases it can affect does not fall.  One test decides, so the level is the chance of accepting a
    rewrite that changes nothing."""
    return stats.significant_gain(f1, level) and (acc.diff or 0.0) >= 0.0


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
        self.first: Evaluation | None = None  # the run without any change: what token growth is measured from
        self.deltas: dict[str, int] = {}  # tool -> tokens its latest measured description adds to its definition

    def scope(self, tool: str, base: Evaluation, part: Sequence[str],
              seen: Sequence[str] | None = None) -> tuple[set[str], set[str]]:
        """The cases of ``part`` the tool can affect, by its confusions in the cases ``seen`` (default ``part``: on
        train, the held-out outcomes play no part in choosing a candidate), and the guard sample of the others."""
        confused = confused_with(tool, [base.outcomes[k] for k in (part if seen is None else seen)
                                        if k in base.outcomes])
        outcomes = {k: base.outcomes[k] for k in part if k in base.outcomes}
        expected = {k: self.expected[k] for k in part if k in self.expected}
        hit = affected({tool} | confused, outcomes, expected)
        return hit, guard_sample(set(expected) - hit, self.settings.seed, tool)

    def growth(self, after: Evaluation | None, overlay: Mapping[str, str]) -> dict[str, Any]:
        """The tokens per request ``overlay`` adds to the catalog it grows most, against the run without any change:
        each tool's own tokens before and after (a tool the run did not show keeps its last measured change)."""
        first = self.first
        assert first is not None
        for tool in overlay:
            if after is not None and tool in after.tool_sizes and tool in first.tool_sizes:
                self.deltas[tool] = after.tool_sizes[tool] - first.tool_sizes[tool]
        deltas = {t: self.deltas.get(t, 0) for t in overlay}
        worst = {"before": 0, "after": 0, "growth": 0.0}
        for total, names in first.catalogs:
            changed = names & deltas.keys()
            if not total or not changed:
                continue
            grown = total + sum(deltas[t] for t in changed)
            if not worst["before"] or grown / total - 1 > worst["growth"]:
                worst = {"before": total, "after": grown, "growth": round(grown / total - 1, 4)}
        return worst

    def reach(self, tool: str, base: Evaluation) -> tuple[int, int]:
        """The held-out single calls whose change can raise the tool's F1: ``(expecting it, that the run ``base``
        wrongly routed to it)`` (a rewrite gains by recall, or by false calls going away; nothing else moves it)."""
        singles = [base.outcomes[k] for k in self.held if k in base.outcomes and not base.outcomes[k].flow]
        return (sum(o.expected == tool for o in singles),
                sum(o.called == tool and o.expected != tool for o in singles))

    def unreachable(self, base: Evaluation, tools: Iterable[str]) -> dict[str, tuple[int, int]]:
        """The tools whose F1 no candidate can raise significantly on the held-out part: fewer cases can change it
        than the fewest whose change the gain test can call significant (:func:`pytest_mcpeval.gate.power.
        min_changed` at the level), with what :meth:`reach` counted."""
        need = min_changed(self.settings.level)
        reached = {tool: self.reach(tool, base) for tool in sorted(set(tools))}
        return {tool: counts for tool, counts in reached.items() if sum(counts) < need}

    def round(self, number: int, accepted: dict[str, str], base: Evaluation,
              candidates: Sequence[Candidate]) -> list[Trial]:
        """Judge ``candidates`` against ``base`` (the run with ``accepted``); the accepted are re-checked together."""
        if self.first is None:
            self.first = base
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
        blind = self.unreachable(base, by_tool)
        need = min_changed(self.settings.level)
        for tool, group in sorted(by_tool.items()):
            if tool in blind:
                expecting, routed = blind[tool]
                note = (f"only {expecting + routed} held-out cases can change its F1 ({expecting} expect it, "
                        f"{routed} wrongly routed to it): a significant gain needs at least {need} changed at level "
                        f"{self.settings.level:g}; not evaluated")
                trials += [Trial(c, reason=TOO_FEW, note=note, before_description=base.descriptions.get(tool, ""))
                           for c in group]
                continue
            trials += self.tool_round(number, tool, group, accepted, base)
        self.recheck(number, [t for t in trials if t.verdict == "accepted"], accepted, base)
        return trials

    def tool_round(self, number: int, tool: str, group: Sequence[Candidate], accepted: Mapping[str, str],
                   base: Evaluation) -> list[Trial]:
        hit, guard = self.scope(tool, base, self.train)
        on_train = sorted(hit | guard)
        trials = []
        for index, candidate in enumerate(group):
            trial = Trial(candidate, before_description=base.descriptions.get(tool, ""))
            after = self.evaluator.run({**accepted, tool: candidate.description}, on_train,
                                       f"r{number}-{tool}-{index}-train") if on_train else None
            measured = measure(tool, pairs_over(self.train, base.outcomes, after.outcomes if after else {}),
                               hit, len(on_train), after.errors if after else ())
            trial.train = public(measured)
            f1_after = measured["_f1"].after
            trial.rank = (-1.0 if f1_after is None else f1_after, measured["_acc"].after or 0.0,
                          -len(candidate.description))
            trials.append(trial)
        best = max(trials, key=lambda t: t.rank)
        for trial in trials:
            if trial is not best:
                trial.reason, trial.note = WORSE, "another candidate for the tool did better on the train cases"
        self.judge(number, best, accepted, base)
        return trials

    def judge(self, number: int, trial: Trial, accepted: Mapping[str, str], base: Evaluation) -> None:
        tool = trial.candidate.tool
        hit, guard = self.scope(tool, base, self.held, seen=[*self.train, *self.held])  # every confusion known
        on_held = sorted(hit | guard)
        overlay = {**accepted, tool: trial.candidate.description}
        after = self.evaluator.run(overlay, on_held, f"r{number}-{tool}-holdout") if on_held else None
        pairs = pairs_over(self.held, base.outcomes, after.outcomes if after else {})
        measured = measure(tool, pairs, hit, len(on_held), after.errors if after else ())
        trial.holdout = public(measured)
        level = self.settings.level
        drops = [c for c in regression_family(tool, pairs, level) if stats.significant_drop(c, level)]
        trial.regressions = [c.as_data() for c in drops]
        trial.tokens = self.growth(after, overlay)
        growth = float(trial.tokens["growth"])
        f1, acc = measured["_f1"], measured["_acc"]
        if drops:
            trial.reason = REGRESSION
            trial.note = "significant drop (Holm) of " + ", ".join(f"{c.metric} {c.before:.3f} -> {c.after:.3f}"
                                                                   for c in drops)
        elif growth > self.settings.max_token_growth:
            trial.reason = TOKEN_GROWTH
            trial.note = (f"tokens per request {trial.tokens['before']} -> {trial.tokens['after']} (+{growth:.0%}) "
                          "against the run without any change")
        elif not gained(f1, acc, level):
            trial.reason = NO_GAIN
            trial.note = no_gain_note(f1, acc, len(on_held), level)
        else:
            trial.verdict, trial.reason = "accepted", None
            trial.note = f"f1[{tool}] {f1.before or 0:.3f} -> {f1.after or 0:.3f} on held-out, p = {f1.p:.4g}"
            self.confirm(number, trial, accepted, base)

    def confirm(self, number: int, trial: Trial, accepted: Mapping[str, str], base: Evaluation) -> None:
        """A change that passed on the cases it can affect and the guard sample runs on every held-out case: what
        it takes from a tool outside its scope is a regression too.  (Only a change about to be accepted pays for
        this run: a rejected one may hide such a regression behind its reason, never behind an acceptance.)"""
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
        """Changes accepted alone are run together on every held-out case: every tool's F1 (the accepted tools'
        too), the accuracy, the flows, each accepted tool's own gain and the tokens of them all must hold.  If
        they do not, only the one with the smallest p-value is kept (it was checked alone)."""
        if len(trials) < 2:
            return
        combined = {**accepted, **{t.candidate.tool: t.candidate.description for t in trials}}
        after = self.evaluator.run(combined, self.held, f"r{number}-combined")
        pairs = pairs_over(self.held, base.outcomes, after.outcomes)
        level = self.settings.level
        drops = [c for c in regression_family(None, pairs, level) if stats.significant_drop(c, level)]
        lost = [t.candidate.tool for t in trials
                if not stats.significant_gain(stats.tool_f1(t.candidate.tool, pairs), level)]
        tokens = self.growth(after, combined)
        over = float(tokens["growth"]) > self.settings.max_token_growth
        if not drops and not lost and not over:
            return
        keep = min(trials, key=lambda t: (t.holdout or {}).get("f1", {}).get("p", 1.0))
        why = [f"significant drop of {', '.join(c.metric for c in drops)}"] if drops else []
        why += [f"no significant gain left for {', '.join(lost)}"] if lost else []
        why += [f"tokens per request +{float(tokens['growth']):.0%}"] if over else []
        for trial in trials:
            if trial is not keep:
                trial.verdict = "rejected"
                trial.reason = REGRESSION if drops or lost else TOKEN_GROWTH
                trial.note = f"combined with the other accepted changes: {'; '.join(why)}"
                trial.regressions = [c.as_data() for c in drops]


def no_gain_note(f1: stats.Change, acc: stats.Change, held: int, level: float) -> str:
    if stats.smallest_p(f1.discordant) >= level:
        return (f"{held} held-out cases re-run, {f1.discordant} of them changed: they cannot show a significant "
                f"gain (the smallest p-value {f1.discordant} changed cases can give is "
                f"{stats.smallest_p(f1.discordant):.4g}, level {level:g})")
    if stats.significant_gain(f1, level):
        return (f"f1 {f1.before or 0:.3f} -> {f1.after or 0:.3f} on held-out, p = {f1.p:.4g}, but the accuracy over "
                f"the cases it can affect fell ({acc.before or 0:.3f} -> {acc.after or 0:.3f})")
    return f"f1 {f1.before or 0:.3f} -> {f1.after or 0:.3f} on held-out, p = {f1.p:.4g} (level {level:g})"
