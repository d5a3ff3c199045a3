"""Which per-tool rows the terminal and Markdown summaries show, so both show the same ones.

A retriever over a catalog of 117 tools calls dozens of tools no case expects, once or twice each: as rows
(``P 0.000  R n/a  F1 0.000  support 0``) they buried the tools the benchmark is about (``make demo`` printed
about 70 rows for ``local/minilm``).  So the rows are the expected tools below F1 1.0, worst first and, at the
same F1, the most expected first; the tools only ever called wrongly are one line, by how often they were called
(each of those calls is a miss of some case, listed with the misses).
"""

from __future__ import annotations

from collections.abc import Mapping

from pytest_mcpeval.results import ToolMetrics


def weak_tools(tools: Mapping[str, ToolMetrics]) -> list[tuple[str, ToolMetrics]]:
    """The expected tools (support > 0) with F1 below 1.0: lowest F1 first, then highest support, then name."""
    weak = [(t, v) for t, v in tools.items() if v["support"] and v["f1"] is not None and v["f1"] < 1.0]
    return sorted(weak, key=lambda tv: (tv[1]["f1"] or 0.0, -tv[1]["support"], tv[0]))


def never_expected(tools: Mapping[str, ToolMetrics]) -> list[tuple[str, int]]:
    """The tools no case expects that the model called, with how many times: most called first."""
    called = [(t, v["predicted"]) for t, v in tools.items() if not v["support"] and v["predicted"]]
    return sorted(called, key=lambda tp: (-tp[1], tp[0]))
