"""Stash keys shared by the plugin's modules (kept apart so plugin.py imports nothing heavy)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    pass

SETTINGS_KEY = pytest.StashKey["Settings"]()
CASE_KEY = pytest.StashKey["CaseRef"]()
RESULT_KEY = pytest.StashKey[dict[str, Any]]()
