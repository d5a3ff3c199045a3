"""The GitHub Actions workflow in docs/pull-requests.md parses and uses only options that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

DOC = Path(__file__).parents[1] / "docs" / "pull-requests.md"


def workflow() -> dict[str, object]:
    block = re.search(r"```yaml\n(.*?)```", DOC.read_text(), re.S)
    assert block is not None, "docs/pull-requests.md has no yaml block"
    data: dict[str, object] = yaml.safe_load(block.group(1))
    return data


def test_workflow_parses_and_runs_pytest_with_known_options(pytester: pytest.Pytester) -> None:
    data = workflow()
    steps = data["jobs"]["eval"]["steps"]  # type: ignore[index]
    runs = " ".join(step["run"] for step in steps if "run" in step)
    used = set(re.findall(r"--mcp-[a-z-]+", runs)) | set(re.findall(r"--snapshot-[a-z-]+", runs))
    assert {"--mcp-save-baseline", "--mcp-compare", "--mcp-fail-on-drop", "--mcp-markdown"} <= used
    help_text = pytester.runpytest_subprocess("--help").stdout.str()
    unknown = sorted(option for option in used if option not in help_text)
    assert unknown == []
