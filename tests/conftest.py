"""Shared fixtures: a scripted OpenAI-compatible model server and pytester project helpers.

Every integration test runs the plugin as a user would (pytester, in a subprocess so each run starts
clean) against real components: the model is a local HTTP server reached through litellm.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_mcpeval.models.scripted import ScriptedModelServer

GITHUB_TOOLS = Path(__file__).parent / "data" / "github-tools.json"


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture(params=["no-xdist", "n2"])
def xdist_args(request: pytest.FixtureRequest) -> list[str]:
    """Run an integration scenario without xdist and with ``-n 2``."""
    return [] if request.param == "no-xdist" else ["-n", "2"]


def ini_for(server: ScriptedModelServer, extra: str = "", name: str = "fake") -> str:
    params = json.dumps({"api_base": server.api_base, "api_key": "not-a-key"})
    return (
        "[pytest]\n"
        f"mcp_model_aliases = {name} = openai/{name}\n"
        f"mcp_model_params = {name} = {params}\n"
        f"{extra}"
    )


def make_project(pytester: pytest.Pytester, server: ScriptedModelServer, files: dict[str, str],
                 ini_extra: str = "", tools: list[dict[str, Any]] | None = None) -> None:
    (pytester.path / "pytest.ini").write_text(ini_for(server, ini_extra))
    if tools is not None:
        (pytester.path / "tools.json").write_text(json.dumps(tools))
    for name, text in files.items():
        path = pytester.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def status(case: str, word: str, xdist_args: list[str]) -> str:
    """The -v line of one item, with or without xdist (which prints the status first)."""
    case = case.replace("[", "?").replace("]", "?")
    return f"*{word}*{case}*" if xdist_args else f"*{case} {word}*"


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", *args)


def read_report(pytester: pytest.Pytester, name: str = "report.json") -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / name).read_text())
    return data
