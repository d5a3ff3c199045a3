"""``python -m pytest_mcpeval tune PATH... --model MODEL [--candidates FILE] [--proposer MODEL] ...``.

Exit status 0 when it ran (whether or not a change was accepted), 4 on a usage error (a candidate for an
unknown tool, an empty split, no model, nothing to try), with one line on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import shlex
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_mcpeval.cli import json_object, one_line_usage
from pytest_mcpeval.gate.power import min_changed
from pytest_mcpeval.storage import unwritable_folder
from pytest_mcpeval.text import did_you_mean, plural
from pytest_mcpeval.tool_search import option as tool_search_option
from pytest_mcpeval.tune import TuneError
from pytest_mcpeval.tune.candidates import Candidate, Proposer, check_tools, distinct, load_candidates
from pytest_mcpeval.tune.evaluate import Evaluation, Evaluator
from pytest_mcpeval.tune.loop import Settings, Trial, Tuner, confused_with, missed_tools
from pytest_mcpeval.tune.split import split_cases, stratum
from pytest_mcpeval.tune.write import write_outputs

# what the command writes in --out (write.py, and the evaluations' folders)
OUT_FILES = ("overlay.yaml", "tune.json", "tune.md", "report.json", "report.html", "work/", "proposer-cache/")
HELP = "rewrite tool descriptions and keep only the rewrites that improve held-out cases significantly"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    one_line_usage(parser, "tune")
    parser.add_argument("paths", nargs="+", metavar="PATH", help="benchmark files or directories, as for pytest")
    parser.add_argument("--model", help="the model evaluated (a litellm model string, an ini alias, local/minilm)")
    parser.add_argument("--candidates", type=Path, metavar="FILE",
                        help="candidate descriptions: `version: 1`, `candidates: {TOOL: [DESCRIPTION, ...]}`")
    parser.add_argument("--proposer", metavar="MODEL", help="a litellm model asked for candidate descriptions")
    parser.add_argument("--proposer-params", default="{}", metavar="JSON",
                        help='litellm parameters of the proposer, e.g. {"api_base": "http://..."}')
    parser.add_argument("--proposer-timeout", type=float, default=60.0, metavar="SECONDS",
                        help="seconds the proposer has to answer each attempt; one retry (default 60)")
    parser.add_argument("--tools", metavar="NAMES", help="comma-separated tools to tune (default: those with misses)")
    parser.add_argument("--holdout", type=float, default=0.5, help="the held-out share of the cases (default 0.5)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the split and the guard samples (default 0)")
    parser.add_argument("--level", type=float, default=0.05, help="significance level (default 0.05)")
    parser.add_argument("--max-token-growth", type=float, default=0.25,
                        help="largest growth of the catalog's tokens per request (default 0.25: +25%%)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of proposals (default 1)")
    parser.add_argument("--out", type=Path, default=Path(".mcpeval/tune"), help="output folder")
    parser.add_argument("--max-cost", type=float, default=None, metavar="USD",
                        help="the USD all evaluations may spend (passed on as --mcp-max-cost)")
    parser.add_argument("--tool-search", metavar="METHOD[:K]", default=None,
                        help="evaluate under tool search (passed on as --mcp-tool-search): a rewrite is then judged by "
                        "findability and choice together (docs/tool-search.md)")
    parser.add_argument("--pytest-args", default="", metavar="ARGS",
                        help="more pytest arguments for every evaluation, e.g. \"-o mcp_model_params='...'\"")


def run(args: argparse.Namespace) -> int:
    try:
        return tune(args)
    except TuneError as exc:
        print(f"python -m pytest_mcpeval tune: {exc}", file=sys.stderr)
        return 4
    except KeyboardInterrupt:  # Ctrl-C reaches the evaluation's pytest too; the outputs are written at the end only
        out: Path = args.out
        shutil.rmtree(out / "work", ignore_errors=True)  # the evaluations' files (the final run's report among them)
        with contextlib.suppress(OSError):
            out.rmdir()  # made empty by the check of --out: not left behind
        kept = " (the proposer's replies so far are kept in proposer-cache/ for a rerun)" if out.exists() else ""
        print(f"python -m pytest_mcpeval tune: interrupted; no result was written to {out}{kept}", file=sys.stderr)
        return 2


def _check(args: argparse.Namespace) -> dict[str, Any]:
    if not args.model:
        raise TuneError("no model: give --model MODEL (e.g. local/minilm)")
    if not args.candidates and not args.proposer:
        raise TuneError("nothing to try: give --candidates FILE and/or --proposer MODEL")
    for name in ("holdout", "level", "max_token_growth", "proposer_timeout"):
        if not math.isfinite(getattr(args, name)):
            raise TuneError(f"--{name.replace('_', '-')}={getattr(args, name)}: expected a finite number")
    if not 0 < args.holdout < 1:
        raise TuneError(f"--holdout={args.holdout:g}: the held-out share must be strictly between 0 and 1")
    if not 0 < args.level < 1:
        raise TuneError(f"--level={args.level:g}: expected a level strictly between 0 and 1")
    if args.proposer_timeout <= 0:
        raise TuneError(f"--proposer-timeout={args.proposer_timeout:g}: expected a number of seconds above 0")
    if args.max_token_growth < 0 or args.rounds < 1:
        raise TuneError("--max-token-growth must be >= 0 and --rounds >= 1")
    try:
        params = json_object(args.proposer_params, "--proposer-params")
    except ValueError as exc:
        raise TuneError(str(exc)) from None
    try:
        args.pytest_arguments = shlex.split(args.pytest_args)
    except ValueError as exc:
        raise TuneError(f"--pytest-args={args.pytest_args!r}: {exc}") from None
    if args.tool_search is not None:
        try:
            tool_search_option(args.tool_search)
        except argparse.ArgumentTypeError as exc:
            raise TuneError(f"--tool-search: {exc}") from None
        args.pytest_arguments.append(f"--mcp-tool-search={args.tool_search}")
    problem = unwritable_folder(args.out, OUT_FILES)  # now, not after every evaluation has been paid for
    if problem:
        raise TuneError(f"--out={args.out}: {problem}")
    return params


def _targets(args: argparse.Namespace, tools: list[str], base: Evaluation, train: list[str]) -> list[str]:
    if not args.tools:
        return missed_tools(base.outcomes[k] for k in train if k in base.outcomes)
    names = [n.strip() for n in args.tools.split(",") if n.strip()]
    for name in names:
        if name not in tools:
            raise TuneError(f"--tools: tool `{name}` is not in the catalog{did_you_mean(name, tools)}")
    return names


def _proposals(proposer: Proposer, targets: list[str], base: Evaluation, train: list[str],
               texts: Mapping[str, str], number: int) -> list[Candidate]:
    out: list[Candidate] = []
    train_outcomes = [base.outcomes[k] for k in train if k in base.outcomes]
    for tool in targets:
        confused = {name: base.descriptions.get(name, "") for name in confused_with(tool, train_outcomes)}
        misses = [(texts[o.key], o.expected, o.called) for o in train_outcomes
                  if o.expected != o.called and tool in (o.expected, o.called)]
        out += proposer.propose(tool, base.descriptions.get(tool, ""), confused, misses, number)
    return out


def _say(line: str) -> None:
    print(f"tune: {line}", file=sys.stderr, flush=True)


def _precheck(args: argparse.Namespace, cases: Mapping[str, Any], held: Sequence[str],
              pending: Sequence[Candidate]) -> None:
    """Before any evaluation: stop when the held-out part cannot show any significant gain (fewer single calls than
    the fewest changed cases the gain test needs), and name the tools known to be tuned (``--candidates``,
    ``--tools``) that too few held-out cases expect: their candidates are skipped unless the run without any change
    wrongly routes enough held-out cases to them (known only after that run)."""
    need = min_changed(args.level)
    singles = [k for k in held if not cases[k].get("flow")]
    if len(singles) < need:
        raise TuneError(
            f"nothing can be accepted: the held-out part has {plural(len(singles), 'single-call case')} and a "
            f"significant gain at level {args.level:g} needs at least {need} of them to change; give more cases or "
            f"a larger --holdout (now {args.holdout:g}); nothing was evaluated")
    named = {c.tool for c in pending} | {n.strip() for n in (args.tools or "").split(",") if n.strip()}
    expecting = {tool: sum(stratum(cases[k]["expected"]) == tool for k in singles) for tool in sorted(named)}
    few = {tool: n for tool, n in expecting.items() if n < need}
    if few:
        _say(f"too few held-out cases expect {plural(len(few), 'tool')} for a significant gain ({need} changed "
             f"cases needed at level {args.level:g}): " + ", ".join(f"{t} ({n})" for t, n in few.items())
             + "; their candidates are skipped (too_few_held_out) unless the run without any change wrongly routes "
             "enough held-out cases to them")


def _plan(evaluator: Evaluator, number: int, candidates: Sequence[Candidate]) -> None:
    """Say what the round will do, and how many evaluations it may take at most: each candidate on train, the
    best of each tool on held-out (and on every held-out case if it would be accepted), the combined check, and
    the next run (the final one, or the next round's base)."""
    tools = len({c.tool for c in candidates})
    most = len(candidates) + 2 * tools + (tools > 1) + 1
    evaluator.planned = evaluator.evaluations + most
    _say(f"round {number}: {len(candidates):,} candidate{'s' * (len(candidates) != 1)} for {plural(tools, 'tool')}: "
         f"at most {most:,} more evaluation{'s' * (most != 1)} (one pytest run each)")


def tune(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    params = _check(args)
    pending = load_candidates(args.candidates) if args.candidates else []  # before any evaluation is paid for
    out: Path = args.out
    evaluator = Evaluator(args.paths, args.model, args.pytest_arguments, out / "work", args.max_cost)
    _say(f"collecting the cases of {' '.join(args.paths)}")
    manifest = evaluator.manifest()
    cases = manifest["cases"]
    expected = {key: case["expected"] for key, case in cases.items()}
    train, held = split_cases(expected, args.holdout, args.seed)
    _say(f"{plural(len(cases), 'case')}: {len(train)} train, {len(held)} held-out (seed {args.seed}); first the run "
         "without any change")
    _precheck(args, cases, held, pending)
    base = evaluator.run({}, None, "r1-base")
    tools = sorted(base.descriptions)
    check_tools(pending, tools, args.candidates)
    targets = _targets(args, tools, base, train)
    proposer = (Proposer(args.proposer, params, out / "proposer-cache", args.proposer_timeout)
                if args.proposer else None)
    requests = {key: case["text"] for key, case in cases.items()}
    tuner = Tuner(evaluator, expected, train, held, Settings(args.level, args.max_token_growth, args.seed), requests)
    first, accepted, trials = base, {}, []  # type: ignore[var-annotated]
    for number in range(1, args.rounds + 1):
        candidates = pending if number == 1 else []
        if proposer is not None:
            blind = tuner.unreachable(base, targets)
            if blind:
                _say(f"the proposer is not asked about {', '.join(blind)}: too few held-out cases can change "
                     "their F1 (too_few_held_out)")
            asked = [t for t in targets if t not in blind]
            candidates = candidates + _proposals(proposer, asked, base, train, requests, number)
        candidates = distinct(candidates)
        if not candidates:
            break
        skipped = tuner.unreachable(base, {c.tool for c in candidates})
        _plan(evaluator, number, [c for c in candidates if c.tool not in skipped])
        done: list[Trial] = tuner.round(number, accepted, base, candidates)
        trials += done
        new = {t.candidate.tool: t.candidate.description for t in done if t.verdict == "accepted"}
        if not new or number == args.rounds:
            accepted.update(new)
            break
        accepted.update(new)
        base = evaluator.run(accepted, None, f"r{number + 1}-base")
        targets = _targets(args, tools, base, train)
    # the final run's pages are written in work/ and moved to --out with the rest: an interrupted run leaves none
    final = evaluator.run(accepted, None, "final", html=out / "work" / "final.html")
    data = _summary(args, manifest, train, held, first, final, evaluator, proposer, started)
    write_outputs(out, data, trials, accepted, {"report.json": out / "work" / "final.json",
                                               "report.html": out / "work" / "final.html"})
    shutil.rmtree(out / "work", ignore_errors=True)
    kept = sum(t.verdict == "accepted" for t in trials)
    why = "" if trials else f" ({_why_none(targets, proposer)})"
    print(f"tune: {kept} of {len(trials)} candidates accepted{why}; {out / 'tune.md'}, {out / 'overlay.yaml'}, "
          f"{out / 'report.html'}")
    return 0


def _why_none(targets: Sequence[str], proposer: Proposer | None) -> str:
    """Why no candidate was judged: what the proposer said, or that it was asked about no tool."""
    if proposer is not None and proposer.notes:
        return "; ".join(proposer.notes)
    if proposer is not None and not targets:
        return ("no tool has a miss or a confusion on the train cases, so the proposer was asked nothing: name "
                "tools with --tools")
    return "no candidate"


def _summary(args: argparse.Namespace, manifest: Mapping[str, Any], train: list[str], held: list[str],
             first: Evaluation, final: Evaluation, evaluator: Evaluator, proposer: Proposer | None,
             started: float) -> dict[str, Any]:
    from pytest_mcpeval.tune import stats
    from pytest_mcpeval.tune.loop import pairs_over

    pairs = pairs_over(held, first.outcomes, final.outcomes)
    tools = sorted({o.expected for b, a in pairs for o in (b, a)} | {o.called for b, a in pairs for o in (b, a)})
    changes = [stats.tool_f1(tool, pairs) for tool in tools] + [stats.accuracy(pairs)]
    return {
        "model": args.model, "paths": list(args.paths), "rootdir": manifest["rootdir"], "seed": args.seed,
        "holdout_share": args.holdout, "level": args.level, "max_token_growth": args.max_token_growth,
        "rounds": args.rounds, "split": {"train": train, "holdout": held},
        "held_out_before_after": [c.as_data() for c in changes if c.before != c.after],
        "proposer_notes": list(proposer.notes) if proposer else [],
        "cost": {"evaluations": evaluator.evaluations, "calls": evaluator.calls,
                 "proposer_calls": proposer.calls if proposer else 0,
                 "cost_usd": round(evaluator.cost_usd + (proposer.cost_usd if proposer else 0.0), 6),
                 "seconds": round(time.perf_counter() - started, 1), "pytest_seconds": round(evaluator.seconds, 1)},
    }
