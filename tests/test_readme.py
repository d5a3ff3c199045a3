"""The README's figures come from real runs (issue 23, item 9: its demo excerpt said 61 cases when the demo ran
123).  The case counts are read from the example files; the scripted stand-in's lines of the ``make demo``
excerpt are checked against the demo's own pytest command, run with that model only.  ``local/minilm``'s
lines are not: the embedded model costs about 40 s of CPU on the examples, too much for the suite, so the
README's prose quotes none of its figures and its excerpt lines are refreshed by hand from ``make demo``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

import pytest
from conftest import run
from test_github_examples import load_example

from pytest_mcpeval.benchmark.loader import load

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
EXAMPLES = REPO / "examples"


def excerpt() -> list[str]:
    """The lines of the README's ``make demo`` excerpt (the text block after "An excerpt from `make demo`")."""
    found = re.search(r"An excerpt from `make demo`.*?```text\n(.*?)```", README, re.S)
    assert found is not None
    return found.group(1).splitlines()


def cases(path: Path) -> tuple[int, int]:
    """(single-call cases, flows) of a benchmark file."""
    spec = load(path).spec
    flows = sum(1 for c in spec.cases if c.is_flow)
    return len(spec.cases) - flows, flows


def test_the_quick_start_counts_the_example_cases() -> None:
    tracker = cases(EXAMPLES / "tracker" / "tracker.mcpeval.yaml")
    files = sorted((EXAMPLES / "github").glob("*.mcpeval.yaml"))
    github, github_flows = (sum(x) for x in zip(*(cases(p) for p in files), strict=True))
    flows = cases(EXAMPLES / "flows" / "flows.mcpeval.yaml")
    live = sum(1 for c in load(EXAMPLES / "flows" / "flows.mcpeval.yaml").spec.cases if c.execute == "live")
    said = (f"(`examples/tracker`, {tracker[0]} cases, `examples/github`, {github} cases and {github_flows} "
            f"mocked flows against 117 real GitHub MCP\ntool definitions, and `examples/flows`, {flows[1]} multi-step "
            f"flows against the tracker, {['no', 'one', 'two', 'three'][live]} of them live)")
    assert said in README
    single = tracker[0] + github
    assert f"local/minilm: {single} scored, 0 errors" in README
    assert (f"scripted-demo: {single + github_flows + flows[1]} scored ({single} single calls, "
            f"{github_flows + flows[1]} flows)") in README


def test_the_scripted_stand_ins_lines_of_the_demo_excerpt_are_a_real_run(tmp_path: Path) -> None:
    ours, owner = [], ""
    for line in excerpt():  # each line belongs to the model of the block it is in
        if line.startswith(("local/minilm: ", "scripted-demo: ")):
            owner = line.split(":", 1)[0]
        elif line.startswith("examples/"):  # a miss: FILE:LINE::CASE[MODEL]  diagnosis
            owner = line.split("[", 1)[1].split("]", 1)[0]
        elif line.startswith(("misses (", "report written", "=", "catalog ")):
            owner = ""
        if owner == "scripted-demo" and line != "...":
            ours.append(line)
    assert len(ours) > 10
    demo = load_example(EXAMPLES / "demo.py")
    with ExitStack() as stack:
        server = demo.script_server(stack)
        command = demo.pytest_command(server, models=demo.SCRIPTED, report=tmp_path / "report.json")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
        done = subprocess.run([*command, "-p", "no:randomly"], cwd=REPO, env={**env, "PYTHONDONTWRITEBYTECODE": "1"},
                              capture_output=True, text=True, timeout=120)
    out = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    missing = [line for line in ours if line not in out]
    assert missing == [], "\n".join(missing)


MY_SERVER = '''\
from mcp.server import MCPServer

server = MCPServer("tracker", log_level="WARNING")


@server.tool()
def list_issues(project: str | None = None, state: str = "open", limit: int = 20) -> list[dict]:
    """List issues by structured filters (project, state), newest first."""
    return []


@server.tool()
def search_issues(query: str, limit: int = 20) -> list[dict]:
    """Full-text search over issue titles, descriptions and comments, best matches first."""
    return []


server.run()
'''


def block(after: str, lang: str) -> str:
    """The first ``lang`` code block of the README after the text ``after``."""
    found = re.search(re.escape(after) + r".*?```" + lang + r"\n(.*?)```", README, re.S)
    assert found is not None, after
    return found.group(1)


def test_evaluate_your_own_server_with_the_scripted_model_as_written(pytester: pytest.Pytester) -> None:
    """Steps 1, 3 and 5 of "Evaluate your own server": the benchmark file, its three cases, the scripted model's
    answers.json, its command line and the pytest command, as the README writes them (``python`` in the server's
    command made this venv's, as the README says to name the server's Python)."""
    server = block("**1. Point a benchmark file at it**", "yaml").split("cases:")[0]
    server = server.replace("command: [python,", f"command: [{json.dumps(sys.executable)},")
    (pytester.path / "evals").mkdir()
    (pytester.path / "evals" / "my.mcpeval.yaml").write_text(server + block("**3. Write three cases**", "yaml"))
    (pytester.path / "my_server.py").write_text(MY_SERVER)
    (pytester.path / "answers.json").write_text(block("in `answers.json`:", "json"))
    commands = block("start it, and point an alias at it:", "sh").replace("\\\n", " ").splitlines()
    serve = shlex.split(commands[0].removesuffix("&"))
    assert serve[:5] == ["python", "-m", "pytest_mcpeval.testing", "--script", "answers.json"]
    model = subprocess.Popen([sys.executable, *serve[1:-1], "0"], cwd=pytester.path, stdout=subprocess.PIPE,
                             text=True, env={k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"})
    try:
        api_base = model.stdout.readline().strip() if model.stdout else ""
        assert api_base.startswith("http://127.0.0.1:"), api_base
        args = shlex.split(commands[1].replace("http://127.0.0.1:8765/v1", api_base))
        assert args[:2] == ["pytest", "evals"]
        result = run(pytester, *args[1:])
    finally:
        model.terminate()
        model.wait(timeout=10)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "scripted: 3 scored, 0 errors | accuracy 66.7% | *",
        "  arguments (1 call): hallucination 0.0%, *",
        "  confused: expected search_issues -> called list_issues (1x)",
        "*2 passed, 1 missed*",
    ])
    assert (pytester.path / "report.html").exists() and (pytester.path / "report.json").exists()
