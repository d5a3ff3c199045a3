"""The CI workflows of the docs (pull-requests.md, scale.md) parse and use only options that exist."""

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


SCALE = Path(__file__).parents[1] / "docs" / "scale.md"


def test_the_shard_workflows_parse_and_use_known_options(pytester: pytest.Pytester) -> None:
    """GitHub Actions and GitLab: N shards with --mcp-shard, then `python -m pytest_mcpeval merge`."""
    from pytest_mcpeval.__main__ import build_parser

    blocks = [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", SCALE.read_text(), re.S)]
    assert len(blocks) == 2
    github, gitlab = blocks
    commands = [step["run"] for job in github["jobs"].values() for step in job["steps"] if "run" in step]
    commands += [line for job in gitlab.values() for line in job["script"]]
    shards = [c for c in commands if c.startswith("pytest ")]
    merges = [c for c in commands if c.startswith("python -m pytest_mcpeval merge")]
    assert len(shards) == 2 and len(merges) == 2 and all("--mcp-shard=" in c for c in shards)
    help_text = pytester.runpytest("--help").stdout.str()
    used = {o for c in shards for o in re.findall(r"--mcp-[a-z-]+", c)}
    assert sorted(o for o in used if o not in help_text) == []
    merge_help = build_parser().parse_args(["merge", "x.json"]).parser.format_help()
    used = {o for c in merges for o in re.findall(r"--(?:mcp-[a-z-]+|junitxml)", c)}
    assert sorted(o for o in used if o not in merge_help) == []
