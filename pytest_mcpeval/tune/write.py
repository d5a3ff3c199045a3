"""What the tune command writes to ``--out``: ``overlay.yaml`` (the accepted changes only), ``tune.json`` (every
candidate, the split, the figures) and ``tune.md`` (the human summary, whose untrusted text (tool names, the
proposer's descriptions, the reasons) goes through the report's Markdown escaping: no markup, no control
character)."""

from __future__ import annotations

import difflib
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_mcpeval.numbers import format_p
from pytest_mcpeval.overlay import dump_overlay
from pytest_mcpeval.report.escape import MAX_SENTENCE, code, fenced, text
from pytest_mcpeval.text import plural
from pytest_mcpeval.tune.loop import Trial

VERSION = 1


def _lines(description: str) -> list[str]:
    """A description's own lines, each longer than 90 characters wrapped at spaces only: never re-flowed into its
    neighbours, never cut inside a word or at a hyphen (``read-only`` stays whole)."""
    out: list[str] = []
    for line in description.splitlines() or [""]:
        out += textwrap.wrap(line, 90, break_on_hyphens=False, break_long_words=False,
                             drop_whitespace=True) or [""]
    return out


def description_diff(before: str, after: str) -> list[str]:
    """A unified diff of two descriptions, line by line as written, long lines wrapped (no header)."""
    old = _lines(before)
    new = _lines(after)
    return [line for line in difflib.unified_diff(old, new, lineterm="", n=20)][2:]


def _number(value: Any) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _pair(metric: Mapping[str, Any] | None) -> str:
    if not metric:
        return "not measured"
    shown = f"{_number(metric.get('before'))} → {_number(metric.get('after'))}"
    return f"{shown} (p = {format_p(float(metric.get('p', 1.0)))}, {metric.get('discordant', 0)} cases changed)"


def summary_table(trials: Sequence[Trial]) -> list[str]:
    """One row per candidate, by tool, the kept one first: held-out F1 before -> after, its p-value, the verdict."""
    if not trials:
        return []
    lines = ["| tool | candidate | held-out f1 | p | verdict |", "| --- | --- | --- | --- | --- |"]
    for trial in sorted(trials, key=lambda t: (t.candidate.tool, t.verdict != "accepted")):
        c = trial.candidate
        f1 = (trial.holdout or {}).get("f1") or {}
        short = c.description if len(c.description) <= 60 else c.description[:57] + "..."
        change = f"{_number(f1.get('before'))} → {_number(f1.get('after'))}" if f1 else "not judged"
        p = format_p(float(f1["p"])) if f1 else ""
        verdict = "**kept**" if trial.verdict == "accepted" else code(trial.reason, table=True)
        lines.append(f"| {code(c.tool, table=True)} | {text(short)} ({c.source}) | {change} | {p} | {verdict} |")
    return [*lines, ""]


def markdown(data: Mapping[str, Any], trials: Sequence[Trial]) -> str:
    split = data["split"]
    lines = [f"# Tuning descriptions for {code(data['model'])}", "",
             f"{plural(len(split['train']), 'train case')}, {plural(len(split['holdout']), 'held-out case')} "
             f"(seed {data['seed']}, stratified by expected tool). A change is kept only when its tool's held-out "
             f"F1 rises significantly (level {data['level']:g}), no other tool's F1, the accuracy, a flow's pass rate "
             f"or coverage drops significantly (Holm), and tokens per request grow by at most "
             f"{data['max_token_growth']:.0%}.", "",
             f"**{plural(sum(t.verdict == 'accepted' for t in trials), 'change')} accepted** of "
             f"{plural(len(trials), 'candidate')}.", ""]
    lines += summary_table(trials)
    for trial in trials:
        c = trial.candidate
        verdict = "kept" if trial.verdict == "accepted" else f"dropped: {code(trial.reason)}"
        lines += [f"## {code(c.tool)} ({c.source}, round {c.round}): {verdict}", ""]
        if trial.holdout is not None:
            lines.append(f"- held-out f1[{text(c.tool)}]: {_pair(trial.holdout.get('f1'))}")
            lines.append(f"- held-out accuracy over the {trial.holdout.get('affected', 0)} cases it can affect: "
                         f"{_pair(trial.holdout.get('accuracy_affected'))}")
        if trial.train is not None:
            lines.append(f"- train f1[{text(c.tool)}]: {_pair(trial.train.get('f1'))}")
        if trial.tokens is not None:
            lines.append(f"- tokens per request: {trial.tokens['before']} → {trial.tokens['after']}")
        lines += [f"- why: {text(trial.note, limit=MAX_SENTENCE)}" if trial.note else "- why: accepted", "",
                  *fenced("\n".join(description_diff(trial.before_description, c.description)), "diff"), ""]
    cost = data["cost"]
    lines += ["## Cost", "",
              f"{plural(cost['evaluations'], 'evaluation')} (one pytest run each), "
              f"{plural(cost['calls'], 'model call')} made (the rest replayed from the cache), "
              f"{plural(cost['proposer_calls'], 'proposer call')}, ${cost['cost_usd']:.4f}, "
              f"{cost['seconds']:.1f} s.", ""]
    return "\n".join(lines)


def write_outputs(out: Path, data: dict[str, Any], trials: Sequence[Trial], accepted: Mapping[str, str],
                  made: Mapping[str, Path] = {}) -> None:
    """The files of ``--out``; ``made``: name -> a file an evaluation wrote (the final run's report and page),
    moved in."""
    import os

    from pytest_mcpeval.storage import write_json, write_text

    out.mkdir(parents=True, exist_ok=True)  # each file atomically: a reader never sees half of one
    for name, path in made.items():
        if path.exists():
            os.replace(path, out / name)
    write_text(dump_overlay(accepted), out / "overlay.yaml")
    data = {**data, "version": VERSION, "candidates": [t.as_data() for t in trials], "accepted": dict(accepted)}
    write_json(data, out / "tune.json")
    write_text(markdown(data, trials), out / "tune.md")
