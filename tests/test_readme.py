"""The README's figures come from real runs (issue 23, item 9: its demo excerpt said 61 cases when the demo ran
123).  The case counts are read from the example files; the scripted stand-in's lines of the ``make demo``
excerpt are checked against the demo's own pytest command, run with that model only.  ``local/minilm``'s
lines are not: the embedded model costs about 40 s of CPU on the examples, too much for the suite, so the
README's prose quotes none of its figures and its excerpt lines are refreshed by hand from ``make demo``.
"""

from __future__ import annotations

import os
import re
import subprocess
from contextlib import ExitStack
from pathlib import Path

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
