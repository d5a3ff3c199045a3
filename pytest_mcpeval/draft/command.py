"""``python -m pytest_mcpeval draft PATH... --model MODEL [--tools blind|confused|NAMES] [--per-tool N] ...``.

Exit status 0 when it ran (whether or not a draft was kept), 4 on a usage error (no model, an unknown tool, a
malformed benchmark file or report, an --out file holding reviewed cases), 3 when the server gave no tools or
the drafter failed; one line on stderr each.
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_mcpeval.cli import json_object, one_line_usage
from pytest_mcpeval.draft import DraftError

if TYPE_CHECKING:
    from pytest_mcpeval.draft.ask import Drafter
    from pytest_mcpeval.draft.keep import Kept
    from pytest_mcpeval.draft.source import Source
    from pytest_mcpeval.draft.targets import Target

HELP = "propose cases for the tools the drop gate is blind to, marked draft: true for a person to review"
DEFAULT_OUT = "drafts.mcpeval.yaml"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    one_line_usage(parser, "draft")
    parser.add_argument("paths", nargs="+", metavar="PATH", help="benchmark files or folders, as for pytest")
    parser.add_argument("--model", help="the drafter: a litellm model string or local/qwen2.5-coder-0.5b")
    parser.add_argument("--model-params", default="{}", metavar="JSON",
                        help='litellm parameters of the drafter, e.g. {"api_base": "http://..."}')
    parser.add_argument("--tools", default="blind,confused", metavar="blind|confused|NAMES",
                        help="comma-separated: `blind` (tools with too few cases for the drop gate), `confused` "
                             "(pairs of --report's confusions and the lint's similar pairs), tool names "
                             "(default: blind,confused)")
    parser.add_argument("--per-tool", type=int, default=3, metavar="N", help="drafts asked per target (default 3)")
    parser.add_argument("--max-targets", type=int, default=None, metavar="N",
                        help="draft for the first N targets only (a slow drafter on a large catalog)")
    parser.add_argument("--out", type=Path, default=None, metavar="FILE",
                        help=f"the benchmark file written (default: {DEFAULT_OUT} beside the first PATH)")
    parser.add_argument("--report", type=Path, default=None, metavar="FILE",
                        help="a JSON report (--mcp-report) whose confusions are drafted contrastively")
    parser.add_argument("--seed", type=int, default=0, help="seed of the drafter and of the examples shown (default 0)")
    parser.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                        help="seconds the drafter has to answer each attempt; one retry (default 120)")
    parser.add_argument("--cache-dir", type=Path, default=Path(".mcpeval/cache"), metavar="DIR",
                        help="the response cache the drafter's replies are kept in (default .mcpeval/cache)")


def run(args: argparse.Namespace) -> int:
    try:
        return draft(args)
    except DraftError as exc:
        print(f"python -m pytest_mcpeval draft: {exc}", file=sys.stderr)
        return exc.status
    except KeyboardInterrupt:
        print("python -m pytest_mcpeval draft: interrupted; nothing was written (the replies so far are kept in "
              f"{args.cache_dir} for a rerun)", file=sys.stderr)
        return 2


def _check(args: argparse.Namespace) -> tuple[dict[str, Any], Path]:
    if not args.model:
        raise DraftError("no model: give --model MODEL (e.g. local/qwen2.5-coder-0.5b)")
    if args.per_tool < 1:
        raise DraftError(f"--per-tool={args.per_tool}: expected a number of drafts of 1 or more")
    if args.max_targets is not None and args.max_targets < 1:
        raise DraftError(f"--max-targets={args.max_targets}: expected a number of targets of 1 or more")
    if not math.isfinite(args.timeout) or args.timeout <= 0:
        raise DraftError(f"--timeout={args.timeout:g}: expected a number of seconds above 0")
    try:
        params = json_object(args.model_params, "--model-params")
    except ValueError as exc:
        raise DraftError(str(exc)) from None
    first = Path(args.paths[0])
    out: Path = args.out or (first if first.is_dir() else first.parent) / DEFAULT_OUT
    from pytest_mcpeval.settings import FILE_SUFFIXES

    if not out.name.endswith(FILE_SUFFIXES):
        raise DraftError(f"--out={out}: a benchmark file's name ends {' or '.join(FILE_SUFFIXES)} (pytest collects "
                         "only those)")
    _check_out(out)
    return params, out


def _check_out(out: Path) -> None:
    """An --out file that exists is rewritten only if every case of it is still a draft: a case whose mark a
    person removed is reviewed work, never overwritten."""
    if out.is_dir():
        raise DraftError(f"--out={out}: is a folder; expected a file")
    if not out.exists():
        if not out.parent.is_dir():
            raise DraftError(f"--out={out}: the folder {out.parent} does not exist")
        return
    from pytest_mcpeval.benchmark.loader import load
    from pytest_mcpeval.benchmark.problems import BenchmarkError

    try:
        reviewed = [c.id for c in load(out).spec.cases if not c.draft]
    except BenchmarkError as exc:
        raise DraftError(f"--out={out}: exists and is not a benchmark file draft wrote "
                         f"({str(exc).splitlines()[0]}); give another --out") from None
    if reviewed:
        raise DraftError(f"--out={out}: holds {len(reviewed)} reviewed case(s) (no `draft: true`: "
                         f"{', '.join(reviewed[:3])}{', ...' if len(reviewed) > 3 else ''}); move them to another "
                         "benchmark file or give another --out")


def draft(args: argparse.Namespace) -> int:
    from pytest_mcpeval.draft.ask import Drafter, messages
    from pytest_mcpeval.draft.keep import keep, request_text
    from pytest_mcpeval.draft.source import load_source
    from pytest_mcpeval.draft.targets import blind_summary, choose, report_confusions, support

    params, out = _check(args)
    confusions = report_confusions(args.report) if args.report else {}
    source = load_source(args.paths, out, args.timeout)
    for note in source.notes:
        _say(note)
    counts = support(source.files)
    targets = choose(args.tools, source.catalog, counts, confusions)
    _say(blind_summary(source.catalog, counts))
    if args.max_targets is not None and len(targets) > args.max_targets:
        _say(f"--max-targets={args.max_targets}: drafting for the first {args.max_targets} of {len(targets)} targets")
        targets = targets[:args.max_targets]
    if not targets:
        _say("nothing to draft for: no target tool (name tools with --tools)")
    existing: dict[str, list[str]] = {}  # expected tool -> the benchmark's requests (drafts of earlier runs too)
    texts: list[str] = []
    for bench in source.files:
        for case in bench.spec.cases:
            text = request_text(case.input)
            texts.append(text)
            if case.expect:
                existing.setdefault(case.expect[0].tool, []).append(text)
    drafter = Drafter(args.model, params, args.cache_dir, args.timeout, args.seed)
    drafts, malformed, beyond, notes = [], 0, 0, []
    for target in targets:
        reply = drafter.draft(target, messages(target, source.catalog, args.per_tool, existing, args.seed))
        drafts += reply.drafts[:args.per_tool]
        beyond += max(len(reply.drafts) - args.per_tool, 0)
        malformed += reply.malformed
        if reply.note:
            notes.append(f"`{target.tool}`: {reply.note}")
            _say(f"nothing drafted for `{target.tool}`: {reply.note}")
    kept = keep(drafts, malformed, beyond, texts, source.catalog)
    _write(out, source, kept, args)
    _summary(out, targets, kept, drafter, notes)
    return 0


def _say(line: str) -> None:
    print(f"draft: {line}", file=sys.stderr, flush=True)


def _write(out: Path, source: Source, kept: Kept, args: argparse.Namespace) -> None:
    """The kept drafts as a benchmark file (the first file's server block), checked by loading it back."""
    import yaml

    from pytest_mcpeval.benchmark.loader import load
    from pytest_mcpeval.benchmark.problems import BenchmarkError
    from pytest_mcpeval.draft.keep import NEAR_DUPLICATE, case_data
    from pytest_mcpeval.storage import write_text

    first = source.first
    assert first.spec.server is not None  # load_source keeps the files of a server block only
    server = first.spec.server.model_dump(mode="json", exclude_unset=True)
    if out.resolve().parent != first.path.parent:  # paths of the server block are relative to the file
        _say(f"the server block is copied from {first.path}: its relative paths, if any, now read from {out.parent}")
    ids: dict[str, int] = {}
    cases = []
    for d in kept.drafts:
        stem = "draft-" + "".join(c if c.isalnum() or c in "-_" else "-" for c in d.target.tool)
        ids[stem] = ids.get(stem, 0) + 1
        cases.append(case_data(d, f"{stem}-{ids[stem]}"))
    command = "python -m pytest_mcpeval draft " + shlex.join([*args.paths, f"--model={args.model}",
                          f"--tools={args.tools}", f"--per-tool={args.per_tool}", f"--seed={args.seed}"])
    header = (f"# Drafted by: {command}\n"
              "# Every case is a proposal (`draft: true`): it runs and is reported apart, but no metric, gate,\n"
              "# baseline or comparison counts it. Review each: fix its request and arguments (loosen free text\n"
              "# with {text: ...} or {regex: ...}), then remove its `draft: true` line (docs/drafting.md).\n"
              f"# Kept only if it names no tool, passes the lint against the live schemas and is no near-duplicate\n"
              f"# (TF-IDF cosine < {NEAR_DUPLICATE:g}) of a case or of another draft.\n")
    if not cases:  # a benchmark file needs a case: none is written (pytest would fail to collect an empty one)
        return
    body = yaml.safe_dump({"version": 1, "server": server, "cases": cases}, sort_keys=False, allow_unicode=True,
                          width=120)
    write_text(header + body, out)
    try:
        load(out)
    except BenchmarkError as exc:  # a bug of this command, not the user's: said as such
        raise DraftError(f"{out}: the file written does not load ({str(exc).splitlines()[0]}): please report this",
                         status=3) from None


def _summary(out: Path, targets: Sequence[Target], kept: Kept, drafter: Drafter, notes: Sequence[str]) -> None:
    from pytest_mcpeval.text import plural

    dropped = sum(kept.dropped.values())
    total = len(kept.drafts) + dropped
    tools = len({d.target.tool for d in kept.drafts})
    print(f"draft: {len(kept.drafts)} of {plural(total, 'draft')} kept for {plural(len(targets), 'target')} "
          f"({plural(tools, 'tool')} with a kept draft); {drafter.calls} drafter call(s), {drafter.replayed} replayed "
          "from the cache")
    for reason, count in sorted(kept.dropped.items(), key=lambda kv: (-kv[1], kv[0])):
        if count:
            example = kept.examples.get(reason)
            print(f"  dropped {count}: {reason}" + (f" (e.g. {example[:160]})" if example else ""))
    if notes:
        print(f"  {plural(len(notes), 'reply', 'replies')} held no draft")
    if kept.drafts:
        print(f"written to {out}: review each case, then remove its `draft: true` (docs/drafting.md)")
    else:
        print(f"no draft kept; nothing written to {out}")
