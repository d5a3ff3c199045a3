"""A 2,000-tool report opens (issue 30, item 8).

2,000 tools x 2,000 cases made a 66 MB report, 62 MB of it a dense 2,039 x 2,039 confusion matrix (one number
per line), and a 19 MB page of 4.2 million heatmap cells that headless Chromium took two minutes to load.  The
report now stores the confusion sparse (the diagonal and the non-empty off-diagonal cells: report version 2) and
the page shows at most ``MATRIX`` x ``MATRIX`` heatmap cells at any catalog size.  The run is
bench/big_report.py's (seeded, built by the plugin's own ``build_report``); docs/performance.md has the figures.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from conftest import make_project, run

from pytest_mcpeval.report.html import render
from pytest_mcpeval.report.html_heatmap import MATRIX
from pytest_mcpeval.storage import json_bytes
from pytest_mcpeval.testing import ScriptedModelServer

BENCH = Path(__file__).resolve().parents[2] / "bench" / "big_report.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("big_report", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("big_report", module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def big() -> tuple[Any, bytes, str]:
    """The 2,000-tool run's report, its JSON as --mcp-report writes it, and its page."""
    report = _bench().build(2000, 2000, seed=0)
    return report, json_bytes(report), render(report)


def _heat_cells(page: str) -> int:
    return sum(table.count("<td") for table in re.findall(r'<table class="heat">.*?</table>', page))


def _heat_shape(page: str) -> tuple[int, int]:
    """(rows, columns) of the heatmap: a row per expected tool shown, a column per tool shown (a tool no case
    expects has no row: issue 32 item 5)."""
    table = re.findall(r'<table class="heat">.*?</table>', page)[0]
    rows, columns = table.count('<th class="r"'), table.count('<th class="c"')
    assert _heat_cells(page) == rows * columns
    return rows, columns


def _expected_rows(confusion: dict[str, Any], shown: set[int]) -> int:
    rows = {i for i, _, _ in confusion["off_diagonal"]} | {i for i, d in enumerate(confusion["diagonal"]) if d}
    return len(rows & shown)


def test_the_report_stores_the_confusion_sparse(big: tuple[Any, bytes, str]) -> None:
    report, data, _ = big
    assert report["version"] == 2
    confusion = report["models"]["big-model"]["confusion"]
    labels = confusion["labels"]
    assert len(labels) == 2039  # 2,000 tools, (none) and 38 invented names
    assert sorted(confusion) == ["diagonal", "labels", "off_diagonal"]
    assert len(confusion["diagonal"]) == len(labels)
    pairs = report["models"]["big-model"]["confused_pairs"]
    assert len(confusion["off_diagonal"]) == len(pairs) == 281
    assert {(labels[i], labels[j], n) for i, j, n in confusion["off_diagonal"]} == \
        {(p["expected"], p["called"], p["count"]) for p in pairs}
    assert sum(confusion["diagonal"]) + sum(n for _, _, n in confusion["off_diagonal"]) == 2000
    # the report grows with the run, not with the labels squared: 66 MB before, 62 MB of it the matrix
    assert len(data) < 5_000_000, len(data)
    assert len(json_bytes({"c": confusion})) < 200_000
    read = json.loads(data)["models"]["big-model"]["confusion"]
    assert read == {**confusion, "off_diagonal": [list(cell) for cell in confusion["off_diagonal"]]}


def test_the_page_shows_the_confused_part_only(big: tuple[Any, bytes, str]) -> None:
    report, _, page = big
    confusion = report["models"]["big-model"]["confusion"]
    involved = {k for i, j, _ in confusion["off_diagonal"] for k in (i, j)}
    assert len(involved) > MATRIX
    rows, columns = _heat_shape(page)
    assert columns == MATRIX and rows <= MATRIX  # 4,157,521 cells before
    assert len(page) < 3_000_000, len(page)  # 19 MB before
    assert (f"2,039 tools: the matrix shows the {len(involved)} confused at least once (expected and another "
            f"called, or called for another). The other {2039 - len(involved):,} are left out: their rows and "
            "columns hold only the diagonal (their counts are the support in the per-tool table). Of the "
            f"confused, the {MATRIX} with the most confusions are in the matrix and the other "
            f"{len(involved) - MATRIX} are left out too; every confusion outside the matrix is listed below it."
            ) in page
    shown = re.findall(r'<th class="c" title="([^"]*)">', page)  # columns; the rows are the expected among them
    assert len(shown) == MATRIX and len(set(shown)) == MATRIX
    outside = [c for c in confusion["off_diagonal"]
               if confusion["labels"][c[0]] not in shown or confusion["labels"][c[1]] not in shown]
    assert f"<p>{len(outside)} confusions outside the matrix:</p>" in page
    inside = sum(n for i, j, n in confusion["off_diagonal"] if (i, j, n) not in outside)
    assert sum(int(n) for n in re.findall(r'<td class="x\d" title="[^"]*">(\d+)', page)) == inside


def test_a_big_catalog_with_few_confusions_shows_every_confused_tool() -> None:
    """Confusions among fewer than MATRIX tools: all of them, with their diagonals, and no list below."""
    report = _bench().build(2000, 300, seed=1)  # 300 cases over 2,000 tools: ~45 misses
    confusion = report["models"]["big-model"]["confusion"]
    involved = {k for i, j, _ in confusion["off_diagonal"] for k in (i, j)}
    assert 0 < len(involved) <= MATRIX
    page = render(report)
    assert _heat_shape(page) == (_expected_rows(confusion, involved), len(involved))
    n = len(confusion["labels"])
    assert (f"{n:,} tools: the matrix shows the {len(involved)} confused at least once (expected and another "
            f"called, or called for another). The other {n - len(involved):,} are left out: their rows and "
            "columns hold only the diagonal (their counts are the support in the per-tool table).</p>") in page
    assert "outside the matrix" not in page


def test_a_small_matrix_is_shown_whole() -> None:
    report = _bench().build(40, 200, seed=2)
    confusion = report["models"]["big-model"]["confusion"]
    labels = confusion["labels"]
    assert len(labels) <= MATRIX
    page = render(report)
    assert _heat_shape(page) == (_expected_rows(confusion, set(range(len(labels)))), len(labels))
    assert "left out" not in page


def test_building_and_rendering_stay_fast(big: tuple[Any, bytes, str]) -> None:
    report, _, _ = big
    started = time.perf_counter()
    render(report)
    json_bytes(report)
    assert time.perf_counter() - started < 5.0  # about 0.5 s here; 6 s before, on an idle machine


def test_a_report_given_as_the_baseline_is_one_line(pytester: pytest.Pytester,
                                                    model_server: ScriptedModelServer) -> None:
    """--mcp-compare reads a baseline file (--mcp-save-baseline), which never held the matrix: old baselines read
    as before.  A JSON report given instead, of either version, is one line saying what to give."""
    make_project(pytester, model_server, {"bench.mcpeval.yaml": "server: {tools_file: tools.json}\ncases:\n"
                                          "  - {id: one, input: one, expect: [{tool: get_me}]}\n"},
                 tools=[{"name": "get_me", "description": "Who am I", "inputSchema": {"type": "object"}}])
    old = {"version": 1, "plugin_version": "0.1.0", "run": {}, "catalogs": {}, "cases": [],
           "gate": {"passed": True, "failures": [], "thresholds": []},
           "models": {"fake": {"confusion": {"labels": ["get_me"], "matrix": [[1]]}}}}
    (pytester.path / "old-report.json").write_text(json.dumps(old))
    result = run(pytester, "--mcp-models=fake", "--mcp-compare=old-report.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --mcp-compare: baseline {pytester.path / 'old-report.json'}: this is a "
                                 "JSON report (--mcp-report, version 1), not a baseline: write one with "
                                 "--mcp-save-baseline"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert model_server.requests == []


@pytest.mark.browser
def test_the_big_page_loads_in_seconds_in_chromium(big: tuple[Any, bytes, str], tmp_path: Path) -> None:
    from test_html_browser import chromium

    executable = chromium()
    pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    page = tmp_path / "report.html"
    page.write_text(big[2], encoding="utf-8")
    seconds, cells = _bench().load_seconds(page, executable, timeout_s=120)
    assert cells < 100_000  # every table of the page (heatmap, tools, catalog, cases): 4.2 million before
    assert seconds < 20, seconds  # 122 s before (2.2 s after) on this shared machine
