"""The shards' JSON reports, read and checked to be shards of one run; each refusal is one line.

Refused: a file that is no report of this plugin, a report that is no shard's (no ``run.shard``), shards made
by another version of the plugin, shards that disagree on N, a shard index given twice, and shards of different
selections (another benchmark file content, selected cases, model, parameter or verdict-changing option).  A
missing shard is not refused: the merge says which, and its gate fails (:func:`incomplete`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from pytest_mcpeval import __version__
from pytest_mcpeval.results import REPORT_VERSION, Report, ShardInfo, ShardSelection
from pytest_mcpeval.text import plural

MAX_REPORT_BYTES = 2 * 1024 * 1024 * 1024  # a shard's JSON report


class MergeError(Exception):
    """Shards that cannot be merged: the message is the one line the command prints (exit status 4)."""


@dataclass(frozen=True)
class Shard:
    path: str  # as given
    report: Report

    @property
    def info(self) -> ShardInfo:
        return self.report["run"]["shard"]

    @property
    def index(self) -> int:
        return self.info["index"]

    @property
    def count(self) -> int:
        return self.info["count"]


def read_shard(path: str) -> Shard:
    from pytest_mcpeval.json_file import JsonFileError
    from pytest_mcpeval.storage import read_json_file

    try:
        data = read_json_file(path, MAX_REPORT_BYTES)
    except JsonFileError as exc:
        raise MergeError(f"{path}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list) or "gate" not in data:
        raise MergeError(f"{path}: not a JSON report of pytest-mcpeval (one written with --mcp-report)")
    if data.get("version") != REPORT_VERSION:
        raise MergeError(f"{path}: a report of version {data.get('version')!r}; this merge reads version "
                         f"{REPORT_VERSION}")
    run = data.get("run")
    shard = run.get("shard") if isinstance(run, dict) else None
    if not isinstance(shard, dict):
        raise MergeError(f"{path}: not a shard's report (it has no run.shard): run each shard with "
                         "--mcp-shard=K/N --mcp-report=PATH")
    index, count, selection = shard.get("index"), shard.get("count"), shard.get("selection")
    if (not isinstance(index, int) or not isinstance(count, int) or not 1 <= index <= count
            or not isinstance(selection, dict) or not isinstance(selection.get("digest"), str)):
        raise MergeError(f"{path}: run.shard is not a shard's {{index, count, selection}} (1 <= index <= count)")
    from pytest_mcpeval.results.schema import report_problem

    problem = report_problem(data)
    if problem is not None:
        raise MergeError(f"{path}: not a report of this version: {problem}")
    if data.get("plugin_version") != __version__:
        raise MergeError(f"{path}: made by pytest-mcpeval {data.get('plugin_version')}, and this is "
                         f"{__version__}: merge with the version that ran the shards")
    return Shard(path, cast(Report, data))


def check(shards: Sequence[Shard]) -> None:
    """Shards of one run: the same N, each index once, the same selection."""
    first = shards[0]
    for shard in shards[1:]:
        if shard.count != first.count:
            raise MergeError(f"{first.path} is shard {first.index} of {first.count} and {shard.path} shard "
                             f"{shard.index} of {shard.count}: the shards of one run agree on N")
    seen: dict[int, Shard] = {}
    for shard in shards:
        if shard.index in seen:
            raise MergeError(f"shard {shard.index} of {shard.count} given twice: {seen[shard.index].path} and "
                             f"{shard.path}")
        seen[shard.index] = shard
    for shard in shards[1:]:
        mine, theirs = first.info["selection"], shard.info["selection"]
        if mine["digest"] != theirs["digest"]:
            raise MergeError(f"{first.path} and {shard.path} are shards of different selections: "
                             f"{difference(mine, theirs)}")


def difference(a: ShardSelection, b: ShardSelection) -> str:
    """What differs between two selections, in words (the first thing found)."""
    if a.get("plugin_version") != b.get("plugin_version"):
        return f"pytest-mcpeval {a.get('plugin_version')} against {b.get('plugin_version')}"
    files_a, files_b = a.get("files", {}), b.get("files", {})
    for file in sorted({*files_a, *files_b}):
        if file not in files_b or file not in files_a:
            return f"the benchmark file {file} is in {'the first' if file in files_a else 'the second'} only"
        if files_a[file] != files_b[file]:
            return f"the benchmark file {file} differs (another content)"
    changed = _first_change(a.get("params", {}), b.get("params", {}))
    if changed is not None:
        return f"the model {changed} differs (another target or parameters)"
    if a.get("models") != b.get("models"):
        return f"the models {', '.join(a.get('models', []))} against {', '.join(b.get('models', []))}"
    option = _first_change(a.get("options", {}), b.get("options", {}))
    if option is not None:
        options_a, options_b = a.get("options", {}), b.get("options", {})
        return f"the option {option}: {options_a.get(option)!r} against {options_b.get(option)!r}"
    return (f"the selected cases differ (-k, -m, or the files given): {plural(a.get('items', 0), 'case item')} "
            f"against {b.get('items', 0)}")


def _first_change(a: Mapping[str, Any], b: Mapping[str, Any]) -> str | None:
    return next((key for key in sorted({*a, *b}) if a.get(key) != b.get(key)), None)


def incomplete(shards: Sequence[Shard]) -> tuple[list[int], str | None]:
    """The indexes of the missing shards, and why the merged run did not finish (``None``: it did): shards
    missing, or shards that were themselves interrupted."""
    count = shards[0].count
    present = {shard.index for shard in shards}
    missing = [i for i in range(1, count + 1) if i not in present]
    why: list[str] = []
    if missing:
        selected = shards[0].info["selection"]["items"]
        lost = selected - sum(shard.info["items"] for shard in shards)
        which = " and ".join(filter(None, [", ".join(map(str, missing[:-1])), str(missing[-1])]))
        why.append(f"merged without {'shards' if len(missing) > 1 else 'shard'} {which} of {count} "
                   f"({plural(lost, 'case item')} of {selected:,} not in this report)")
    for shard in sorted(shards, key=lambda s: s.index):
        run = shard.report["run"]
        if run.get("interrupted"):
            why.append(f"merged with shard {shard.index} of {count}, which was {run.get('stopped', 'interrupted')}")
    return missing, "; ".join(why) or None
