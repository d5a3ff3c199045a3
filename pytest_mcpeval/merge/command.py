"""``python -m pytest_mcpeval merge REPORT... [gate and output options]`` (docs/scale.md).

The shards are read and checked first (a refusal is one line, exit status 4, nothing written); then a pytest
session of the plugin's own replays their case results (:mod:`pytest_mcpeval.merge.replay`) with the gate and
output options given here, under the names a run gives them: the report, the gate, the files written and the
exit status (0 passed, 1 gate failed, 4 usage error) are the single run's.  The ini file of the directory the
command runs in is read as a run reads it (its thresholds gate the merge too).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, cast

HELP = ("merge the JSON reports of a run's shards (--mcp-shard=K/N) into the single run's report, gate, outputs "
        "and exit status")

# the run's options the merge takes, by their names in a run (options.py): the gate's, the comparison's, the files'
MERGE_OPTIONS = frozenset({
    "--mcp-min-accuracy", "--mcp-min-f1", "--mcp-min-recall-at", "--mcp-min-coverage", "--mcp-min-pass-rate",
    "--mcp-compare", "--mcp-fail-on-drop", "--mcp-drop-level", "--mcp-drop-correction", "--mcp-drop-metrics",
    "--mcp-min-detectable-drop", "--mcp-max-catalog-tokens", "--mcp-max-cost", "--mcp-save-baseline",
    "--mcp-markdown", "--mcp-html", "--mcp-report",
})


class _Options:
    """Stands for pytest's parser in :func:`pytest_mcpeval.options.add_options`: the options of
    :data:`MERGE_OPTIONS` become the merge's (same names, types, help), ini keys are pytest's to read."""

    def __init__(self, parser: argparse.ArgumentParser, valued: set[str]) -> None:
        self.parser = parser
        self.valued = valued

    def getgroup(self, name: str, description: str = "") -> _Options:
        return self

    def addoption(self, *names: str, **kwargs: Any) -> None:
        if names[0] in MERGE_OPTIONS:
            self.parser.add_argument(*names, **kwargs)
            if kwargs.get("action") not in ("store_true", "store_false", "count"):
                self.valued.update(names)

    def addini(self, *args: Any, **kwargs: Any) -> None:
        pass


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from pytest_mcpeval.cli import one_line_usage
    from pytest_mcpeval.options import add_options

    one_line_usage(parser, "merge")
    parser.add_argument("reports", nargs="+", metavar="REPORT",
                        help="the shards' JSON reports (--mcp-report of each --mcp-shard=K/N run)")
    valued: set[str] = set()
    add_options(cast(Any, _Options(parser, valued)))
    parser.add_argument("--junitxml", "--junit-xml", dest="xmlpath", metavar="PATH",
                        help="write pytest's JUnit XML of the merged run to PATH")
    parser.add_argument("-o", "--override-ini", dest="override_ini", action="append", metavar="KEY=VALUE",
                        help="an ini key for the merge, as pytest takes it (e.g. mcp_thresholds)")
    parser.add_argument("-c", "--config-file", dest="inifile", metavar="FILE", help="the ini file to read")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="list every case item")
    parser.add_argument("-q", "--quiet", action="count", default=0, help="print less")
    valued.update(("--junitxml", "--junit-xml", "-o", "--override-ini", "-c", "--config-file"))
    parser.set_defaults(valued=frozenset(valued))


def split(argv: list[str], valued: frozenset[str]) -> tuple[list[str], list[str]]:
    """The REPORT arguments, and the options to hand to pytest as they were given."""
    reports: list[str] = []
    options: list[str] = []
    take_value = False
    for arg in argv:
        if take_value:
            options.append(arg)
            take_value = False
        elif arg.startswith("-") and arg != "-":
            options.append(arg)
            take_value = arg in valued
        else:
            reports.append(arg)
    return reports, options


def run(args: argparse.Namespace) -> int:
    import importlib.util

    import pytest

    from pytest_mcpeval.merge.replay import MergePlugin
    from pytest_mcpeval.merge.shards import MergeError, check, incomplete, read_shard

    _, options = split(args.argv, args.valued)
    try:
        shards = [read_shard(path) for path in args.reports]
        check(shards)
    except MergeError as error:
        print(f"python -m pytest_mcpeval merge: {error}", file=sys.stderr)
        return 4
    missing, why = incomplete(shards)
    extra = ["-p", "no:cacheprovider", "--assert=plain"]  # no test runs: nothing to rewrite (this plugin, imported
    #                                                       already, would be warned about)
    if importlib.util.find_spec("xdist") is not None:  # an ini's `addopts = -n 2` would start workers: nothing runs
        extra += ["-n", "0"]
    return int(pytest.main([*options, *extra], plugins=[MergePlugin(shards, missing, why)]))
