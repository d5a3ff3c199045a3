"""The plugin's settings, read once from the command line and the ini file at configure time.

Option values are checked by argparse ``type=`` functions (one clear message each); ini values here,
raising :class:`pytest.UsageError`.  Nothing heavy is imported.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_mcpeval.overlay import Overlay
    from pytest_mcpeval.results import Baseline

from pytest_mcpeval.defaults import (
    DEFAULT_CLAIMS_THRESHOLD,
    DEFAULT_CONCURRENCY,
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_DROP_LEVEL,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    PROMPT_CACHE_MODES,
)
from pytest_mcpeval.gate.thresholds import Threshold, ThresholdError, parse_threshold
from pytest_mcpeval.models.config import ModelConfigError, ModelRegistry, ModelSpec, split_names
from pytest_mcpeval.outputs import OUTPUTS
from pytest_mcpeval.redact import Redactor
from pytest_mcpeval.redact import use as use_redactor
from pytest_mcpeval.results.registry import DEFAULT_DROP_METRICS
from pytest_mcpeval.storage import unwritable_file

FILE_SUFFIXES = (".mcpeval.yaml", ".mcpeval.yml")


def unit_interval(text: str) -> float:
    """argparse type: a number in [0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number between 0 and 1") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not between 0 and 1")
    return value


def recall_at(text: str) -> tuple[int, float]:
    """argparse type: ``K:X``, e.g. ``5:0.9`` (recall@5 at least 0.9)."""
    from pytest_mcpeval.results.registry import KS

    k, sep, x = text.partition(":")
    if not sep or not k.strip().isdigit() or int(k) not in KS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not K:X with K one of {', '.join(map(str, KS))} (e.g. 5:0.9)"
        )
    return int(k), unit_interval(x)


def _whole_number(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"{text!r} is not at least {minimum}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    return _whole_number(text, 1)


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    return _whole_number(text, 0)


def seconds(text: str) -> float:
    """argparse type: a positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def usd(text: str) -> float:
    """argparse type: a positive amount of US dollars (``--mcp-max-cost``)."""
    try:
        value = float(text.strip().lstrip("$"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an amount of US dollars (e.g. 2.50)") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive amount of US dollars")
    return value


def prompt_cache_mode(text: str) -> str:
    """argparse type: one of :data:`~pytest_mcpeval.defaults.PROMPT_CACHE_MODES`."""
    if text.strip().lower() not in PROMPT_CACHE_MODES:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(PROMPT_CACHE_MODES)}")
    return text.strip().lower()


def record_mode(text: str) -> str:
    """argparse type: one of the record modes."""
    from pytest_mcpeval.defaults import RECORD_MODES as MODES  # run.cache imports pydantic: not at configure

    if text not in MODES:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(MODES)}")
    return text


def processes(text: str) -> int | None:
    """argparse type: ``auto`` (``None``) or a whole number >= 0 of worker processes for model calls."""
    if text.strip() == "auto":
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not auto or a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not auto or a whole number >= 0")
    return value


def drop_metrics(text: str) -> list[str]:
    """argparse type: comma-separated metrics compared against the baseline."""
    from pytest_mcpeval.results.registry import DROP_METRICS

    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in DROP_METRICS]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"{text!r}: expected some of {', '.join(DROP_METRICS)}")
    return names


def level(text: str) -> float:
    """argparse type: a significance level in (0, 1)."""
    value = unit_interval(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not strictly between 0 and 1")
    return value


def drop_size(text: str) -> float:
    """argparse type: a fall of a share in (0, 1]."""
    value = unit_interval(text)
    if value == 0.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not above 0 (a fall of a share in (0, 1], e.g. 0.2)")
    return value


def model_list(text: str) -> list[str]:
    """argparse type: comma-separated model names."""
    names = split_names(text)
    if not names:
        raise argparse.ArgumentTypeError(f"{text!r} names no model (expected e.g. openai/gpt-5,claude)")
    return names


@dataclass
class Settings:
    models: list[str] = field(default_factory=list)
    registry: ModelRegistry = field(default_factory=ModelRegistry)
    thresholds: list[Threshold] = field(default_factory=list)
    strict: bool = False
    outputs: dict[str, Path] = field(default_factory=dict)  # option (--mcp-report ...) -> PATH (outputs.OUTPUTS)
    concurrency: int = DEFAULT_CONCURRENCY
    per_model_concurrency: dict[str, int] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    retries: int = DEFAULT_RETRIES
    repeat: int = 1
    record: str = "new"
    cache_dir: Path = Path(".mcpeval/cache")
    max_catalog_tokens: int | None = None
    lint: bool = False
    snapshots: bool = False
    snapshot_update: bool = False  # syrupy's --snapshot-update: snapshots are recorded, no model is called
    no_preflight: bool = False  # --mcp-no-preflight: models and servers are not tried before the run
    save_baseline: Path | None = None
    compare_path: Path | None = None
    baseline: Baseline | None = None
    fail_on_drop: float | None = None
    drop_level: float = DEFAULT_DROP_LEVEL
    drop_metrics: tuple[str, ...] = DEFAULT_DROP_METRICS
    drop_correction: str = "none"  # --mcp-drop-correction: "none" or "holm" (gate.compare.holm)
    min_detectable_drop: float | None = None  # --mcp-min-detectable-drop (gate.power.detectable_failures)
    list_tools: bool = False
    judge_model: str | None = None  # --mcp-judge-model / ini mcp_judge_model: judges claims without a check
    claims_threshold: float = DEFAULT_CLAIMS_THRESHOLD
    redactor: Redactor = field(default_factory=Redactor)  # masks this run's secrets in what it writes
    processes: int | None = None  # --mcp-processes: no longer used (a notice says so when given)
    max_cost: float | None = None  # --mcp-max-cost: USD the run's model calls may spend (run.budget)
    prompt_cache: str = PROMPT_CACHE_MODES[0]  # --mcp-prompt-cache / ini mcp_prompt_cache (models.cost)
    overlay: Overlay | None = None  # --mcp-overlay: descriptions that replace the catalog's (overlay.py)
    tool_search: tuple[str, int | None] | None = None  # --mcp-tool-search METHOD[:K] (docs/tool-search.md)

    @property
    def report_path(self) -> Path | None:  # --mcp-report: the JSON report
        return self.outputs.get("--mcp-report")

    @property
    def html_path(self) -> Path | None:  # --mcp-html / ini mcp_html: the self-contained HTML report
        return self.outputs.get("--mcp-html")

    def model_specs(self, file_models: list[str]) -> list[ModelSpec]:
        return [self.registry.resolve(name) for name in (self.models or file_models)]

    @classmethod
    def from_config(cls, config: pytest.Config) -> Settings:
        """Every option and ini key, checked: a bad value is one :class:`pytest.UsageError`."""
        opt = config.option
        models = _models(config)  # checked in this order: with several mistakes, the first one is said
        registry = _registry(config)
        thresholds = _thresholds(config)
        snapshots = _snapshots(config)
        paths = _Paths(config)
        baseline = _baseline(config, paths)
        per_model = _per_model_concurrency(config)
        record = _record(config)
        judge = _judge_model(config, registry)
        prompt_cache = _prompt_cache(config)
        registry.prompt_cache = prompt_cache != "off"
        overlay = _overlay(config, paths)
        return cls(models, registry, thresholds, bool(opt.mcp_strict), paths.outputs,
                   concurrency=opt.mcp_concurrency, per_model_concurrency=per_model,
                   timeout=opt.mcp_timeout, connect_timeout=opt.mcp_connect_timeout,
                   retries=opt.mcp_retries, repeat=opt.mcp_repeat, record=record,
                   cache_dir=_cache_dir(config), max_catalog_tokens=opt.mcp_max_catalog_tokens,
                   lint=bool(opt.mcp_lint), snapshots=snapshots, save_baseline=paths.save_baseline,
                   snapshot_update=bool(getattr(opt, "update_snapshots", False)),
                   no_preflight=bool(opt.mcp_no_preflight),
                   compare_path=paths.compare, baseline=baseline, fail_on_drop=opt.mcp_fail_on_drop,
                   drop_level=opt.mcp_drop_level, drop_metrics=tuple(opt.mcp_drop_metrics),
                   drop_correction=opt.mcp_drop_correction, min_detectable_drop=opt.mcp_min_detectable_drop,
                   list_tools=bool(opt.mcp_tools),
                   judge_model=judge,
                   claims_threshold=(opt.mcp_claims_threshold if opt.mcp_claims_threshold is not None
                                     else DEFAULT_CLAIMS_THRESHOLD),
                   redactor=use_redactor(Redactor.for_run(registry.params.values())),
                   processes=getattr(opt, "mcp_processes", None), max_cost=getattr(opt, "mcp_max_cost", None),
                   prompt_cache=prompt_cache, overlay=overlay, tool_search=getattr(opt, "mcp_tool_search", None))


def _models(config: pytest.Config) -> list[str]:
    """``--mcp-models`` (each name once, in order), else the ini key ``mcp_models``."""
    models: list[str] = []
    for chunk in config.option.mcp_models or []:
        models += [m for m in chunk if m not in models]
    return models or split_names(config.getini("mcp_models"))


def _registry(config: pytest.Config) -> ModelRegistry:
    try:
        return ModelRegistry.from_ini(config.getini("mcp_model_aliases"), config.getini("mcp_model_params"))
    except ModelConfigError as exc:
        raise pytest.UsageError(str(exc)) from None


def _thresholds(config: pytest.Config) -> list[Threshold]:
    """The ``--mcp-min-*`` options, then the ini key ``mcp_thresholds``, as threshold objects."""
    opt = config.option
    thresholds: list[Threshold] = []
    try:
        if opt.mcp_min_accuracy is not None:
            thresholds.append(parse_threshold(f"accuracy >= {opt.mcp_min_accuracy}", "--mcp-min-accuracy"))
        for k, x in opt.mcp_min_recall_at or []:
            thresholds.append(parse_threshold(f"recall_at_{k} >= {x}", "--mcp-min-recall-at"))
        if opt.mcp_min_f1 is not None:
            thresholds.append(parse_threshold(f"macro_f1 >= {opt.mcp_min_f1}", "--mcp-min-f1"))
        if opt.mcp_min_coverage is not None:
            thresholds.append(parse_threshold(f"coverage >= {opt.mcp_min_coverage}", "--mcp-min-coverage"))
        if opt.mcp_min_pass_rate is not None:
            thresholds.append(parse_threshold(f"flow_pass_rate >= {opt.mcp_min_pass_rate}", "--mcp-min-pass-rate"))
        for line in config.getini("mcp_thresholds"):
            if line.strip() and not line.strip().startswith("#"):
                thresholds.append(parse_threshold(line, "ini mcp_thresholds"))
    except ThresholdError as exc:
        raise pytest.UsageError(str(exc)) from None
    return thresholds


def _snapshots(config: pytest.Config) -> bool:
    if config.option.mcp_snapshots and not config.pluginmanager.has_plugin("syrupy"):
        raise pytest.UsageError("--mcp-snapshots needs the syrupy plugin, which this run disabled (-p no:syrupy)")
    return bool(config.option.mcp_snapshots)


class _Paths:
    """The files the run writes (relative to where pytest was started; ini mcp_html to the rootdir), each checked
    to be writable now, not after the run has paid for its calls; and the baseline compared against."""

    def __init__(self, config: pytest.Config) -> None:
        opt = config.option
        self.here = Path(config.invocation_params.dir)
        self.save_baseline = self.path(opt.mcp_save_baseline)
        self.compare = self.path(opt.mcp_compare)
        self.outputs: dict[str, Path] = {}
        asked: list[tuple[str, Path | None]] = []
        for output in OUTPUTS:
            given = self.path(getattr(opt, output.dest))
            ini = config.getini(output.dest).strip() if output.ini else ""
            value = given or (Path(config.rootpath) / ini if ini else None)
            if value is not None:
                self.outputs[output.option] = value
            asked.append((output.option if given or not ini else f"ini {output.dest}", value))
        asked.append(("--mcp-save-baseline", self.save_baseline))
        for option, value in asked:
            problem = unwritable_file(value)
            if problem:
                raise pytest.UsageError(f"{option}={value}: {problem}")

    def path(self, value: str | None) -> Path | None:
        return None if not value else (Path(value) if Path(value).is_absolute() else self.here / value)


def _baseline(config: pytest.Config, paths: _Paths) -> Baseline | None:
    """The baseline of ``--mcp-compare``, read now (a bad file is a usage error before any call)."""
    opt = config.option
    if opt.mcp_compare:
        from pytest_mcpeval.gate.baseline import BaselineError, load_baseline

        try:
            return load_baseline(paths.compare or "")
        except BaselineError as exc:
            raise pytest.UsageError(f"--mcp-compare: {exc}") from None
    if opt.mcp_fail_on_drop is not None:
        raise pytest.UsageError("--mcp-fail-on-drop needs --mcp-compare=BASELINE")
    return None


def _per_model_concurrency(config: pytest.Config) -> dict[str, int]:
    per_model: dict[str, int] = {}
    for line in config.getini("mcp_concurrency"):
        name, sep, value = line.partition("=")
        if line.strip().startswith("#") or not line.strip():
            continue
        if not sep or not value.strip().isdigit() or int(value) < 1:
            raise pytest.UsageError(f"ini key mcp_concurrency: expected `MODEL = N` with N >= 1, got {line!r}")
        per_model[name.strip()] = int(value)
    return per_model


def _record(config: pytest.Config) -> str:
    record = config.option.mcp_record or config.getini("mcp_record") or "new"
    try:
        return record_mode(record)
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"ini key mcp_record: {exc}") from None


def _judge_model(config: pytest.Config, registry: ModelRegistry) -> str | None:
    judge = config.option.mcp_judge_model or config.getini("mcp_judge_model").strip() or None
    if judge is not None and registry.resolve(judge).target.startswith("local/"):
        raise pytest.UsageError(f"--mcp-judge-model={judge}: a local/... model is a tool retriever and cannot "
                                "judge claims; name a chat model (a litellm model string or an alias)")
    return judge


def _overlay(config: pytest.Config, paths: _Paths) -> Overlay | None:
    from pytest_mcpeval.overlay import from_option

    given = getattr(config.option, "mcp_overlay", None)
    if given and config.option.mcp_snapshots and getattr(config.option, "update_snapshots", False):
        raise pytest.UsageError(f"--mcp-overlay={given} with --snapshot-update: the catalog snapshots would record "
                                "the overlay's descriptions as the server's; update them without --mcp-overlay")
    return from_option(given, paths.path(given)) if given else None


def _prompt_cache(config: pytest.Config) -> str:
    chosen = getattr(config.option, "mcp_prompt_cache", None) or config.getini("mcp_prompt_cache").strip() or "auto"
    try:
        return prompt_cache_mode(chosen)
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"ini key mcp_prompt_cache: {exc}") from None


def _cache_dir(config: pytest.Config) -> Path:
    """``--mcp-cache-dir`` relative to where pytest was started, ini ``mcp_cache_dir`` (and the default) to the
    rootdir."""
    opt = config.option
    cache_dir = Path(opt.mcp_cache_dir or config.getini("mcp_cache_dir") or ".mcpeval/cache")
    if not cache_dir.is_absolute():
        base = config.invocation_params.dir if opt.mcp_cache_dir else config.rootpath
        cache_dir = Path(base) / cache_dir
    return cache_dir
