"""Stash keys shared by the plugin's modules (kept apart so plugin.py imports nothing heavy)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_mcpeval.settings import Settings

SETTINGS_KEY = pytest.StashKey[Settings]()
CASE_KEY = pytest.StashKey[Any]()  # a run.single.CaseRef (not imported here: it pulls in pydantic and PyYAML)
RESULT_KEY = pytest.StashKey[list[dict[str, Any]]]()  # one result per repeat
LINT_KEY = pytest.StashKey[dict[str, Any]]()  # what the lint item found, for the report
TOOLS_KEY = pytest.StashKey[dict[str, Any]]()  # what a `tools` item (--mcp-tools) listed
CORRUPTED_KEY = pytest.StashKey[list[str]]()  # cache entries that could not be read
