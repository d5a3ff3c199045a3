"""``--mcp-shard=K/N``: this run keeps its share of the selected case items (docs/scale.md).

The partition is by case (benchmark file and case id): every model and repeat of a case land in the same shard,
so pairs and repeats stay whole.  It is a function of the selection alone, the same on every machine and under
every ``PYTHONHASHSEED``: the cases, heaviest first (by their items, or by their durations in an earlier report,
``--mcp-shard-durations``), ties broken by the sha256 of ``file::id``, each go to the shard with the least load
so far (the lowest index on a tie).  It runs in ``pytest_collection_modifyitems`` after every other deselection
(``-k``, ``-m``: so on each xdist worker, which all select alike) and deselects through ``pytest_deselected``.

Each shard's report says ``run.shard``: its index, the count, and the selection (benchmark files' digests, the
selected items, models and parameters, the options that change verdicts, how the cases were partitioned, the
plugin version) that ``python -m pytest_mcpeval merge`` checks is the same in every shard.  A shard judges only
its share: its gate is reported, not applied to the exit status (``--mcp-shard-gate`` applies it).
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_mcpeval import __version__
from pytest_mcpeval.keys import CASE_KEY, SETTINGS_KEY
from pytest_mcpeval.text import canonical_json

if TYPE_CHECKING:
    from pytest_mcpeval.results import ShardInfo, ShardSelection
    from pytest_mcpeval.run.case import CaseRef
    from pytest_mcpeval.session import EvalSession

WORKEROUTPUT_KEY = "mcpeval_shard"  # what an xdist worker tells the controller of its shard
MAX_DURATIONS_BYTES = 512 * 1024 * 1024  # an earlier report read for its durations


def shard_spec(text: str) -> tuple[int, int]:
    """argparse type: ``K/N`` with ``1 <= K <= N``."""
    index, sep, count = text.strip().partition("/")
    if not sep or not index.isdigit() or not count.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not K/N (e.g. 2/4: the second of four shards)")
    if not 1 <= int(index) <= int(count):
        raise argparse.ArgumentTypeError(f"{text!r}: K must be between 1 and N (e.g. 2/4)")
    return int(index), int(count)


def case_key(file: str, case_id: str) -> str:
    """What the partition assigns: a case of a file, whatever its models and repeats."""
    return f"{file}::{case_id}"


def digest(value: Any) -> str:
    """sha256 of ``value`` as canonical JSON."""
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def plan(weights: Mapping[str, float], count: int) -> dict[str, int]:
    """Each case key -> its shard (1..count): heaviest first, ties by the sha256 of the key, each to the least
    loaded shard, the lowest index on a tie.  Deterministic: no ``hash()``, no set order."""
    order = sorted(weights, key=lambda k: (-weights[k], hashlib.sha256(k.encode("utf-8")).hexdigest()))
    loads = [0.0] * count
    out: dict[str, int] = {}
    for key in order:
        shard = min(range(count), key=lambda j: (loads[j], j))
        out[key] = shard + 1
        loads[shard] += weights[key]
    return out


def durations(path: str, shown: str) -> dict[str, float]:
    """Seconds per case key (its results' latency summed over models and repeats) from an earlier JSON report;
    a file that is not one is a usage error naming it."""
    from pytest_mcpeval.json_file import JsonFileError
    from pytest_mcpeval.storage import read_json_file

    where = f"--mcp-shard-durations={shown}"
    try:
        data = read_json_file(path, MAX_DURATIONS_BYTES)
    except JsonFileError as exc:
        raise pytest.UsageError(f"{where}: {exc}") from None
    cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(cases, list) or "gate" not in data:
        raise pytest.UsageError(f"{where}: not a JSON report of pytest-mcpeval (--mcp-report): no 'cases' list")
    out: dict[str, float] = {}
    for case in cases:
        if isinstance(case, dict) and isinstance(case.get("latency_s"), int | float):
            key = case_key(str(case.get("file", "")), str(case.get("id", "")))
            out[key] = out.get(key, 0.0) + float(case["latency_s"])
    return out


@dataclass(eq=False)  # a plugin: hashable by identity
class ShardPlugin:
    """Registered with ``--mcp-shard``, in every process: deselects the other shards' cases where the items are,
    and puts ``run.shard`` in the controller's report."""

    config: pytest.Config
    index: int
    count: int
    seconds: dict[str, float] | None = None  # --mcp-shard-durations: per case key
    info: ShardInfo | None = None
    deselected: int = 0

    @classmethod
    def register(cls, config: pytest.Config) -> None:
        opt = config.option
        if opt.mcp_shard is None:
            if opt.mcp_shard_durations or opt.mcp_shard_gate:
                given = "--mcp-shard-durations" if opt.mcp_shard_durations else "--mcp-shard-gate"
                raise pytest.UsageError(f"{given} needs --mcp-shard=K/N")
            return
        index, count = opt.mcp_shard
        if opt.mcp_save_baseline:
            raise pytest.UsageError(f"--mcp-save-baseline with --mcp-shard={index}/{count}: a shard's baseline would "
                                    "hold only its share of the cases; save it with `python -m pytest_mcpeval merge "
                                    "REPORT... --mcp-save-baseline=PATH`")
        seconds = None
        if opt.mcp_shard_durations:
            shown = opt.mcp_shard_durations
            path = Path(config.invocation_params.dir) / shown
            seconds = durations(str(path), shown)
        plugin = cls(config, index, count, seconds)
        config.pluginmanager.register(plugin, "mcpeval-shard")

    def session(self) -> EvalSession | None:
        found: EvalSession | None = self.config.pluginmanager.get_plugin("mcpeval-session")
        return found

    @pytest.hookimpl(trylast=True)  # after -k, -m and every other plugin's deselection
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        refs = [(item, ref) for item in items if (ref := item.stash.get(CASE_KEY, None)) is not None]
        if not refs:
            return
        from pytest_mcpeval.collect import CaseItem
        from pytest_mcpeval.run.case import relative_to_root

        root = self.config.rootpath
        keys = {item: case_key(relative_to_root(ref.bench.path, root), ref.case.id)
                for item, ref in refs if isinstance(item, CaseItem)}
        weights: dict[str, float] = {}
        for key in keys.values():
            weights[key] = weights.get(key, 0.0) + 1.0
        if self.seconds is not None:
            weights = self.timed(weights)
        assigned = plan(weights, self.count)
        keep = [item for item in items if item not in keys or assigned[keys[item]] == self.index]
        dropped = [item for item in items if item in keys and assigned[keys[item]] != self.index]
        selected = [(item, ref) for item, ref in refs if item in keys]
        self.info = {"index": self.index, "count": self.count, "items": len(keys) - len(dropped),
                     "selection": self.selection(selected, root)}
        self.deselected = len(dropped)
        if dropped:
            self.config.hook.pytest_deselected(items=dropped)
            items[:] = keep
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput[WORKEROUTPUT_KEY] = {"info": self.info, "deselected": self.deselected}
        else:
            self.publish()

    def timed(self, counts: dict[str, float]) -> dict[str, float]:
        """Each case's seconds in the earlier report; a case it lacks costs the mean second of an item."""
        assert self.seconds is not None
        known = {key: self.seconds[key] for key in counts if key in self.seconds}
        per_item = sum(known.values()) / sum(counts[k] for k in known) if known else 1.0
        return {key: known.get(key, counts[key] * per_item) for key in counts}

    def selection(self, selected: Sequence[tuple[pytest.Item, CaseRef]], root: Path) -> ShardSelection:
        from pytest_mcpeval.redact import mask_params
        from pytest_mcpeval.run.case import relative_to_root

        settings = self.config.stash[SETTINGS_KEY]
        files: dict[str, str] = {}
        nodeids: list[str] = []
        params: dict[str, Any] = {}
        for item, ref in selected:
            file = relative_to_root(ref.bench.path, root)
            if file not in files:
                files[file] = hashlib.sha256(ref.bench.path.read_bytes()).hexdigest()
            nodeids.append(item.nodeid)
            if ref.model is not None and ref.model.name not in params:
                spec = ref.model.to_builtin()
                params[ref.model.name] = {"target": spec["target"], "params": mask_params(spec["params"])}
        partition = "count" if self.seconds is None else f"durations {digest(sorted(self.seconds.items()))}"
        overlay = settings.overlay
        fields: dict[str, Any] = {
            "files": dict(sorted(files.items())), "items": len(nodeids), "items_digest": digest(sorted(nodeids)),
            "models": list(settings.models), "params": dict(sorted(params.items())),
            "options": {"repeat": settings.repeat, "strict": settings.strict,
                        "claims_threshold": settings.claims_threshold, "judge_model": settings.judge_model,
                        "overlay": overlay.digest if overlay is not None else None, "partition": partition},
            "plugin_version": __version__,
        }
        return {"digest": digest(fields), **fields}  # type: ignore[typeddict-item]

    def publish(self) -> None:
        """The controller's report says which shard it is; its gate does not set the exit status."""
        session = self.session()
        if session is not None and self.info is not None:
            session.run_info["shard"] = self.info

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """xdist's controller: the shard as a worker selected it (every worker selects alike)."""
        shard = getattr(node, "workeroutput", {}).get(WORKEROUTPUT_KEY)
        if isinstance(shard, dict) and self.info is None:
            self.info = shard["info"]
            self.deselected = int(shard["deselected"])
            self.publish()

    def pytest_sessionstart(self) -> None:
        session = self.session()  # registered after this plugin, in the same pytest_configure
        if session is not None and not self.config.option.mcp_shard_gate:
            session.gate_applies = False

    @pytest.hookimpl(trylast=True)  # after the session's gate (tryfirst)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if hasattr(self.config, "workerinput"):
            return
        if session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and self.deselected:
            session.exitstatus = pytest.ExitCode.OK  # more shards than cases: this one had none, which is no error
        evaluation = self.session()
        report = evaluation.report if evaluation is not None else None
        if report is not None and not report["gate"]["passed"] and not self.config.option.mcp_shard_gate:
            evaluation.notes.append(  # type: ignore[union-attr]
                f"--mcp-shard={self.index}/{self.count}: this shard's gate is reported, not applied (exit status 0 "
                "for it): `python -m pytest_mcpeval merge` gates the shards' report as one run "
                "(--mcp-shard-gate applies it here)")
