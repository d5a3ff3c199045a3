"""``python -m pytest_mcpeval``: the plugin's command-line tools, one subcommand each.

    python -m pytest_mcpeval import bfcl QUESTIONS.json POSSIBLE_ANSWERS.json --out DIR
    python -m pytest_mcpeval import atlas TASKS.csv --out DIR
    python -m pytest_mcpeval tune PATH... --model MODEL --candidates FILE   (docs/tuning.md)
    python -m pytest_mcpeval draft PATH... --model MODEL [--tools blind]      (docs/drafting.md)
    python -m pytest_mcpeval merge REPORT... [gate and output options]       (docs/scale.md)

Each importer lives in ``pytest_mcpeval.importers.<name>``, is listed in
:data:`pytest_mcpeval.importers.IMPORTERS`, and provides ``add_arguments(parser)`` and
``run(args) -> int``; the modules are imported to build the parser, so they import nothing heavy at the
top.  A user mistake (a missing file, a malformed row) raises :class:`~pytest_mcpeval.importers.UserError`
and is one line on stderr with exit status 2, never a traceback.  (The class lives outside this module:
run as ``python -m``, this file is ``__main__``, and a class defined here would not be the one the
importers raise.)
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from pytest_mcpeval.importers import IMPORTERS, UserError

__all__ = ["IMPORTERS", "UserError", "build_parser", "main"]

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_mcpeval", description="Command-line tools of pytest-mcpeval."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    importer = commands.add_parser(
        "import", help="convert a public benchmark into benchmark files", description="Convert a public benchmark."
    )
    kinds = importer.add_subparsers(dest="kind", metavar="FORMAT", required=True)
    for name, text in IMPORTERS.items():
        sub = kinds.add_parser(name, help=text, description=text)
        module = importlib.import_module(f"pytest_mcpeval.importers.{name}")
        module.add_arguments(sub)
        sub.set_defaults(run=module.run, parser=sub)
    from pytest_mcpeval.tune import command as tune

    tuner = commands.add_parser("tune", help=tune.HELP, description=tune.HELP)
    tune.add_arguments(tuner)
    tuner.set_defaults(run=tune.run, parser=tuner)
    from pytest_mcpeval.draft import command as draft

    drafter = commands.add_parser("draft", help=draft.HELP, description=draft.HELP)
    draft.add_arguments(drafter)
    drafter.set_defaults(run=draft.run, parser=drafter)
    from pytest_mcpeval.merge import command as merge

    merger = commands.add_parser("merge", help=merge.HELP, description=merge.HELP)
    merge.add_arguments(merger)
    merger.set_defaults(run=merge.run, parser=merger)
    return parser


def _unrecognized(parser: argparse.ArgumentParser, extra: list[str]) -> str:
    """``unrecognized arguments: --models local/minilm; did you mean --model?``: the subcommand's own words."""
    import re

    from pytest_mcpeval.text import closest

    known = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", parser.format_help()))
    option = next((arg.split("=", 1)[0] for arg in extra if arg.startswith("--")), None)
    near = closest(option, known) if option is not None else None
    return f"unrecognized arguments: {' '.join(extra)}" + (f"; did you mean {near}?" if near else "")


def main(argv: Sequence[str] | None = None) -> int:
    # an argument a subcommand does not know is its error (its usage, its exit status), not the top-level parser's
    raw = list(sys.argv[1:] if argv is None else argv)
    args, extra = build_parser().parse_known_args(raw)
    if extra:
        args.parser.error(_unrecognized(args.parser, extra))
    args.argv = raw[raw.index(args.command) + 1:]  # as given: the merge hands its options to pytest as they are
    try:
        return int(args.run(args))
    except UserError as error:
        print(f"python -m pytest_mcpeval {args.command} {args.kind}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
