"""Stash keys shared by the plugin's modules (kept apart so plugin.py imports nothing heavy)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_mcpeval.settings import Settings

if TYPE_CHECKING:  # typing only: importing these at run time pulls in pydantic and PyYAML
    from pytest_mcpeval.interrupts import Interrupts  # noqa: F401
    from pytest_mcpeval.results import CaseResult, LintResult, SnapshotResult  # noqa: F401
    from pytest_mcpeval.run.case import CaseRef  # noqa: F401

SETTINGS_KEY = pytest.StashKey[Settings]()
CASE_KEY = pytest.StashKey["CaseRef"]()  # what an item runs: its file, case and model
RESULT_KEY = pytest.StashKey["list[CaseResult]"]()  # one result per repeat
MASKED_KEY = pytest.StashKey[bool]()  # the results were masked when made (no hook was to see them first)
LINT_KEY = pytest.StashKey["LintResult"]()  # what the lint item found, for the report
SNAPSHOT_KEY = pytest.StashKey["SnapshotResult"]()  # how the tool-catalog item's comparison came out, for the report
TOOLS_KEY = pytest.StashKey[dict[str, Any]]()  # what a `tools` item (--mcp-tools) listed
# cache entries that did not validate: (what became of them: run.cache.CALLED_AGAIN ..., "path: what is wrong")
CORRUPTED_KEY = pytest.StashKey[list[tuple[str, str]]]()
BUDGET_DIR_KEY = pytest.StashKey[Path]()  # --mcp-max-cost: the run's spend files (run.budget)
UNWRITABLE_KEY = pytest.StashKey[list[str]]()  # cache writes that failed (the replies were used, not stored)
INTERRUPTS_KEY = pytest.StashKey["Interrupts"]()  # SIGINT / SIGTERM during the session (interrupts.py)
