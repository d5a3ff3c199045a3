"""Which per-tool rows the terminal and Markdown summaries show, so both show the same ones.

A retriever over a catalog of 117 tools calls dozens of tools no case expects, once or twice each: as rows
(``P 0.000  R n/a  F1 0.000  support 0``) they buried the tools the benchmark is about (``make demo`` printed
about 70 rows for ``local/minilm``).  So the rows are the expected tools below F1 1.0, worst first and, at the
same F1, the most expected first; the tools only ever called wrongly are one line, by how often they were called
(each of those calls is a miss of some case, listed with the misses).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from pytest_mcpeval.results import ModelPower, ToolMetrics
from pytest_mcpeval.results.registry import title
from pytest_mcpeval.text import plural

REPEATS_NOTE = "the repeats of a case count once"  # where the figures are shown with --mcp-repeat


def weak_tools(tools: Mapping[str, ToolMetrics]) -> list[tuple[str, ToolMetrics]]:
    """The expected tools (support > 0) with F1 below 1.0: lowest F1 first, then highest support, then name."""
    weak = [(t, v) for t, v in tools.items() if v["support"] and v["f1"] is not None and v["f1"] < 1.0]
    return sorted(weak, key=lambda tv: (tv[1]["f1"] or 0.0, -tv[1]["support"], tv[0]))


def never_expected(tools: Mapping[str, ToolMetrics]) -> list[tuple[str, int]]:
    """The tools no case expects that the model called, with how many times: most called first."""
    called = [(t, v["predicted"]) for t, v in tools.items() if not v["support"] and v["predicted"]]
    return sorted(called, key=lambda tp: (-tp[1], tp[0]))


def detects(tool: ToolMetrics) -> str:
    """The smallest fall in the tool's recall the drop gate could flag (``50%``), ``blind`` when none, ``""`` in a
    report written before the figure."""
    if "detectable_drop" not in tool:
        return ""
    drop = tool["detectable_drop"]
    return "blind" if drop is None else f"{drop:.0%}"


def power_lines(power: ModelPower | None) -> Iterator[str]:
    """What the drop gate can see of a model, in words (docs/metrics.md#what-the-gate-can-see): one line when
    tools are blind or untested, one with the smallest detectable drop of each headline metric."""
    if power is None:
        return
    need = power["min_changed"]
    how = f"level {power['level']:g}"
    if power["correction"] == "holm":
        how += (f", Holm over {power['tests']} testable metrics; a drop confined to one metric needs "
                f"{power['min_changed_alone']}")
    repeats = f"; {REPEATS_NOTE}" if power["repeats"] > 1 else ""
    unseen = len(power["blind"]) + len(power["untested"])
    if unseen:
        total = unseen + len(power["detectable"])
        none = len(power["untested"]) + len(power["no_single_call"])
        yield (f"the drop gate cannot see drops on {unseen} of {plural(total, 'tool')}: fewer than {need} "
               f"single-call cases each ({none} {'has' if none == 1 else 'have'} none; {how}{repeats})")
    figures = power["headline"]
    if figures:
        shown = ", ".join(
            f"{title(name)} " + (f"{f['detectable_drop']:.0%} ({f['min_changed']} of {f['n']} cases)"
                                 if f["detectable_drop"] is not None else f"blind ({plural(f['n'], 'case')})")
            for name, f in figures.items())
        yield f"smallest detectable drops: {shown}" + ("" if unseen else f" ({how}{repeats})")
