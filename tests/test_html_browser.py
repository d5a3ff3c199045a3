"""The HTML report in a real browser: the page of a real compared run (tests/test_html.py's
:func:`compare_project`) opened headless in Chromium, driven by Playwright through the executable's path
(Playwright downloads no browser here).  Skipped, saying why, when no Chromium is installed: Debian's
``chromium`` package is what ``.ci/run`` installs; ``MCPEVAL_CHROMIUM=/path/to/chrome`` names another.

``MCPEVAL_HTML_SCREENSHOT=docs/report-html.png`` also writes the screenshot that docs/report-html.md shows.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from test_html import compare_project

from pytest_mcpeval.testing import ScriptedModelServer

pytestmark = pytest.mark.browser

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium() -> str:
    path = os.environ.get("MCPEVAL_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path or not Path(path).is_file():
        pytest.skip("no Chromium executable found: install one (Debian/Ubuntu: `apt-get install -y chromium`) or "
                    "set MCPEVAL_CHROMIUM to a Chrome/Chromium executable")
    return path


def test_the_page_in_chromium(pytester: pytest.Pytester, model_server: ScriptedModelServer, tmp_path: Path) -> None:
    executable = chromium()
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed "
                                   "(pip install playwright; it drives the installed Chromium, no download)")
    assert compare_project(pytester, model_server).ret == 1
    url = (pytester.path / "out" / "report.html").as_uri()
    problems: list[str] = []
    requests: list[str] = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
                    if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(url, wait_until="load")
            check_page(page)
            page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
            assert (tmp_path / "report.png").stat().st_size > 10_000
            docs = os.environ.get("MCPEVAL_HTML_SCREENSHOT")
            if docs:
                docs_screenshot(page, Path(docs))
            # the main content needs no script
            static = browser.new_context(java_script_enabled=False, viewport={"width": 1280, "height": 900})
            plain = static.new_page()
            plain.goto(url, wait_until="load")
            for selector in ("table.heat td[title]", ".desc-change .delta", ".desc-change pre.diff",
                             "details.flow[open] .turn", "#cases tbody tr"):
                assert plain.locator(selector).first.is_visible(), selector
            assert plain.locator(".filters").count() == 0  # the filters are the script's
            static.close()
        finally:
            browser.close()
    assert problems == []
    assert {u for u in requests if u != url} <= {"data:,"}  # nothing from the network


def check_page(page: Any) -> None:
    # the heatmap: coloured cells with their count, and the count on hover (title)
    cell = page.locator('table.heat td[title="expected list_issues, called search_issues: 6 cases"]')
    assert cell.is_visible() and cell.inner_text() == "6"
    assert cell.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(130, 7, 30)"  # the darkest red
    assert page.locator("table.heat td[title]").count() == 4
    # the description diff next to the F1 change it caused
    block = page.locator('.desc-change[data-tool="list_issues"]')
    delta, diff = block.locator(".delta"), block.locator("pre.diff")
    assert delta.is_visible() and diff.is_visible()
    a, b = delta.bounding_box(), diff.bounding_box()
    assert a["x"] + a["width"] <= b["x"] and a["y"] < b["y"] + b["height"] and b["y"] < a["y"] + a["height"]
    assert "significant drop" in delta.inner_text() and "-0.600" in delta.inner_text()
    assert diff.locator("ins").first.is_visible() and diff.locator("del").inner_text() == "state,"
    assert diff.locator(".dl.del").count() == 1 and diff.locator(".dl.ins").count() == 1  # a line diff
    # a flow's transcript: turns, the call with its arguments, the answer's source, the claims
    flow = page.locator("details.flow[open]")
    assert flow.count() == 1 and flow.locator(".turn").count() == 2
    assert flow.locator(".turn").first.is_visible()
    assert flow.locator(".badge.b-unmatched").is_visible()
    assert "Says there are none" in flow.locator("table").inner_text()
    # hostile strings stayed text: no image, no other script, nothing ran
    assert page.locator("img").count() == 0 and page.locator("script").count() == 2
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.get_by_text("There are 3 bugs </details><script>window.__pwned=4</script>").first.is_visible()
    # what the script adds: filters over the cases table
    counter = page.locator(".filters span")
    assert counter.inner_text() == "12 of 12 shown"
    page.locator(".filters input").fill("list-p")
    assert counter.inner_text() == "8 of 12 shown"
    page.locator(".filters select").nth(1).select_option("missed")
    assert counter.inner_text() == "6 of 12 shown"
    page.locator(".filters button", has_text="expand all").click()
    assert page.locator("#cases details[open]").count() == 6
    page.locator(".filters input").fill("")
    page.locator(".filters select").nth(1).select_option("")


def docs_screenshot(page: Any, path: Path) -> None:
    """The description change, the model's headline and its heatmap: what docs/report-html.md shows."""
    page.set_viewport_size({"width": 1100, "height": 900})
    top = page.locator("#descriptions").bounding_box()["y"] + page.evaluate("window.scrollY")
    bottom = page.locator("#model-0 .heatwrap").bounding_box()["y"] + page.evaluate("window.scrollY")
    height = page.locator("#model-0 .heatwrap").bounding_box()["height"]
    page.screenshot(path=str(path), full_page=True,
                    clip={"x": 0, "y": top - 8, "width": 1100, "height": bottom + height - top + 16})
