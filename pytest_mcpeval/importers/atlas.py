"""``python -m pytest_mcpeval import atlas TASKS --out DIR``: MCP-Atlas tasks -> offline flows (docs/import-atlas.md).

MCP-Atlas (Scale AI) publishes tasks as rows with the columns TASK (an id), PROMPT (one user request),
ENABLED_TOOLS (the 10-25 tool names shown to the agent: the relevant ones and distractors), GTFA_CLAIMS (the
atomic facts a good final answer states) and TRAJECTORY (a reference conversation in the OpenAI message format,
with the real outputs of the tools it called).  Each task becomes one flow:

* ``input`` = PROMPT, ``tools`` = ENABLED_TOOLS (the case key that restricts the tools shown), and the system
  prompt of MCP-Atlas's own harness for the whole file;
* ``expect`` = the trajectory's calls (identical repeats once) in ``order: superset``: every recorded call must
  be made, other calls are allowed; each argument is checked by what it is (:func:`argument_rule`): identifiers
  exactly, names and titles with ``text``, coordinates with ``approx``, free text the recording agent wrote
  (queries, code, commands) only for presence, and size knobs (``limit``, ``radius``) not at all;
* ``mocks`` = the recorded outputs, each answering calls that match the recorded arguments by the same rules
  (tightened where two recorded calls of one tool would otherwise be confused), so a task runs offline;
* ``claims`` = GTFA_CLAIMS, decided by the judge model (``--mcp-judge-model``), as MCP-Atlas scores them.

One tools file holds the union of the tasks' enabled tools: their definitions from ``--tools FILE`` when it has
them, else a schema inferred from the arguments recorded for the tool in any task, flagged as inferred in the
description, in ``annotations`` and in the README written beside it.

This module is the command: its options (:func:`add_arguments`), and :func:`convert`, which runs the three
steps, each in a module of its own:

* :mod:`~pytest_mcpeval.importers.atlas_read`: the input files (CSV, JSON, JSONL, Parquet; ``--tools``) ->
  tasks, a malformed row being one :class:`~pytest_mcpeval.importers.UserError` naming the file, the row, the
  column and the place in it;
* :mod:`~pytest_mcpeval.importers.atlas_map`: a task -> its expected calls and mocks (the argument rules), and
  the tools file's tools (given or inferred);
* :mod:`~pytest_mcpeval.importers.atlas_write`: the benchmark file, the tools file and the README.

Nothing heavy is imported (no litellm).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from pytest_mcpeval.importers import UserError
from pytest_mcpeval.importers.atlas_map import (
    PRESENT,
    Notes,
    Policy,
    argument_rule,
    expected_calls,
    fit_to_schemas,
    mocks_for,
    tool_catalog,
)
from pytest_mcpeval.importers.atlas_read import RecordedCall, Task, load_tasks
from pytest_mcpeval.importers.atlas_rows import COLUMNS, read_tool_definitions
from pytest_mcpeval.importers.atlas_write import benchmark_yaml, readme, write_files
from pytest_mcpeval.text import plural

# The command, and the names tests and callers use from the importer (defined in the step modules).
__all__ = [
    "DEFAULT_MAX_TURNS",
    "PRESENT",
    "Notes",
    "Policy",
    "RecordedCall",
    "Task",
    "add_arguments",
    "argument_rule",
    "convert",
    "load_tasks",
    "mocks_for",
    "run",
]

DEFAULT_MAX_TURNS = 20
NO_OVERRIDES = Policy()  # the argument rules as they are: no --exact, no --loose


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``python -m pytest_mcpeval import atlas`` (docs/import-atlas.md#the-command)."""
    parser.add_argument("tasks", metavar="TASKS", help="MCP-Atlas tasks: a .csv, .json, .jsonl or .parquet file "
                        "with the columns " + ", ".join(COLUMNS))
    parser.add_argument("--out", required=True, metavar="DIR", help="directory to write the benchmark file, the "
                        "tools file and a README into (created if missing; files of the same names are replaced)")
    parser.add_argument("--tools", metavar="FILE", help="tool definitions (a JSON list of MCP tools, or "
                        "{\"tools\": [...]}) named as in ENABLED_TOOLS; tools it lacks get a schema inferred from "
                        "the recorded arguments")
    parser.add_argument("--name", default="atlas", type=_file_stem, metavar="NAME",
                        help="stem of the files written: NAME.mcpeval.yaml and NAME-tools.json (default: atlas)")
    parser.add_argument("--max-turns", type=_positive_int, default=DEFAULT_MAX_TURNS, metavar="N",
                        help=f"model calls a flow may make (default: {DEFAULT_MAX_TURNS})")
    parser.add_argument("--no-claims", action="store_true", help="leave the GTFA claims out: the flows then "
                        "check only the calls, and need no judge model")
    parser.add_argument("--exact", action="append", default=[], metavar="ARG[,ARG...]",
                        help="argument names whose recorded values must be matched exactly (repeatable)")
    parser.add_argument("--loose", action="append", default=[], metavar="ARG[,ARG...]",
                        help="argument names whose recorded values are the agent's own wording: only their presence "
                        "is checked (repeatable)")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not at least 1")
    return value


def _file_stem(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a file name stem (letters, digits, `_`, `.`, `-`)")
    return text


# -- the command ------------------------------------------------------------------------------------------------


def _names(values: Sequence[str]) -> frozenset[str]:
    return frozenset(n.strip() for v in values for n in v.split(",") if n.strip())


def convert(path: Path, out: Path, *, tools: Path | None = None, stem: str = "atlas",
            max_turns: int = DEFAULT_MAX_TURNS, claims: bool = True, policy: Policy = NO_OVERRIDES,
            command: str = "") -> tuple[list[Path], list[Task], list[str], Notes]:
    """Import ``path`` into ``out``: the files written, the tasks, the tools whose schema was inferred and the
    notes."""
    notes = Notes()
    tasks = load_tasks(path)
    given = read_tool_definitions(tools) if tools is not None else {}
    fit_to_schemas(tasks, given, notes)
    catalog, inferred = tool_catalog(tasks, given, str(tools) if tools is not None else None, notes)
    source = path.name
    command = command or f"python -m pytest_mcpeval import atlas {source} --out DIR"
    bench = benchmark_yaml(tasks, source, f"{stem}-tools.json", len(inferred), len(catalog), max_turns, policy,
                           claims, notes)
    text = readme(tasks, source, stem, inferred, len(catalog), claims, command)
    written = write_files(out, stem, bench, catalog, text)
    return written, tasks, inferred, notes


def run(args: argparse.Namespace) -> int:
    """The command: import, print a summary and the files written, then the notes on stderr."""
    policy = Policy(exact=_names(args.exact), loose=_names(args.loose))
    both = policy.exact & policy.loose
    if both:
        raise UserError(f"--exact and --loose both name {', '.join(sorted(both))}")
    path, out = Path(args.tasks), Path(args.out)
    command = " ".join(["python -m pytest_mcpeval import atlas", path.name, "--out DIR",
                        *(["--tools", Path(args.tools).name] if args.tools else []),
                        *(["--name", args.name] if args.name != "atlas" else []),
                        *(["--max-turns", str(args.max_turns)] if args.max_turns != DEFAULT_MAX_TURNS else []),
                        *(["--no-claims"] if args.no_claims else []),
                        *(["--exact", ",".join(sorted(policy.exact))] if policy.exact else []),
                        *(["--loose", ",".join(sorted(policy.loose))] if policy.loose else [])])
    written, tasks, inferred, notes = convert(
        path, out, tools=Path(args.tools) if args.tools else None, stem=args.name, max_turns=args.max_turns,
        claims=not args.no_claims, policy=policy, command=command)
    calls = sum(len(expected_calls(t, policy)) for t in tasks)
    print(f"{plural(len(tasks), 'task')} -> {plural(len(tasks), 'flow')}, {plural(calls, 'expected call')}; "
          f"{len(json.loads(written[1].read_text(encoding='utf-8')))} tools"
          + (f" ({len(inferred)} with inferred schemas)" if inferred else ""))
    for path_written in written:
        print(f"wrote {path_written}")
    for line in notes.lines:
        print(f"note: {line}", file=sys.stderr)
    return 0
