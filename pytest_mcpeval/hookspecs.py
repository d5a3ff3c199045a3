"""Hooks pytest-mcpeval offers to conftest.py files and other plugins.

Implement them like any pytest hook, in a ``conftest.py``::

    def pytest_mcpeval_case_result(item, result):
        result["ticket"] = item.get_closest_marker("ticket") and item.get_closest_marker("ticket").args[0]
"""

from __future__ import annotations

from typing import Any

import pytest


@pytest.hookspec
def pytest_mcpeval_case_result(item: pytest.Item, result: dict[str, Any]) -> None:
    """Called on the process that ran the case, after scoring, before the result is reported.

    ``result`` is the case's result dict (docs/report.md); a hook may add keys, which the report masks with the rest.
    Values must stay plain data (dict, list, str, int, float, bool, None): the dict crosses the xdist channel and
    lands in the JSON report as it is.

    Example: tag cases that touched a deprecated tool::

        def pytest_mcpeval_case_result(item, result):
            result["deprecated"] = any(c["tool"] in {"list_issue_types"} for c in result["called"])
    """


@pytest.hookspec
def pytest_mcpeval_report(config: pytest.Config, report: dict[str, Any]) -> None:
    """Called once on the controller with the finished report, after the gate, before it is written.

    Use it to export the report elsewhere (a dashboard, a database) or to add top-level keys.

    Example: keep only the headline numbers in a CI artifact::

        def pytest_mcpeval_report(config, report):
            headline = {m: v["accuracy"] for m, v in report["models"].items()}
            Path("accuracy.json").write_text(json.dumps(headline))
    """
