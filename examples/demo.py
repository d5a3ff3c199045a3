"""Offline demo: run both example benchmarks against a scripted stand-in model.

    python examples/demo.py [extra pytest arguments]     # or: make demo

No API key and no network are needed. A local OpenAI-compatible server (ScriptedModelServer) answers
every request from examples/demo_script.json, keyed by the last user message; pytest-mcpeval calls it
through litellm exactly as it would call a hosted model, scores the answers and prints its summary.
The script imitates a decent but imperfect model, with deliberate list/search confusions, a malformed
call, a hallucinated argument, a missing required argument, a wrong value, a refusal and a tool call on
small talk, so the report has something to show.

Nothing is written into the repository except the report, .mcpeval/demo-report.json.
The exit status is pytest's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pytest_mcpeval.models.scripted import ScriptedModelServer

EXAMPLES = Path(__file__).resolve().parent
REPO = EXAMPLES.parent
SCRIPT = EXAMPLES / "demo_script.json"
REPORT = REPO / ".mcpeval" / "demo-report.json"
MODEL = "scripted-demo"

BANNER = f"""\
============================================================================================
 pytest-mcpeval demo: model `{MODEL}` is a SCRIPTED STAND-IN, not a real LLM.
 Its answers come from {SCRIPT.relative_to(REPO)} (one canned reply per benchmark input),
 served by a local OpenAI-compatible server and called through litellm like any model.
 Its mistakes are deliberate, so that the report has misses to show.
 To evaluate a real model: pytest examples/tracker --mcp-models=openai/gpt-4o-mini
============================================================================================"""


def main(argv: list[str]) -> int:
    script = json.loads(SCRIPT.read_text(encoding="utf-8"))
    print(BANNER, flush=True)
    with ScriptedModelServer() as model_server:
        for text, reply in script.items():
            model_server.script(text, reply, model=MODEL)
        params = {"api_base": model_server.api_base, "api_key": "none", "num_retries": 0}
        command = [
            sys.executable, "-m", "pytest",
            str(EXAMPLES / "tracker"), str(EXAMPLES / "github"),
            f"--rootdir={REPO}",
            f"--mcp-models={MODEL}",
            f"--mcp-report={REPORT}",
            "-o", f"mcp_model_aliases={MODEL} = openai/{MODEL}",
            "-o", f"mcp_model_params={MODEL} = {json.dumps(params)}",
            "-p", "no:cacheprovider",
            "-q",
            *argv,
        ]
        env = {
            **os.environ,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # litellm must not fetch its price list
            "PYTHONDONTWRITEBYTECODE": "1",  # no __pycache__ next to examples/tracker/server.py
        }
        completed = subprocess.run(command, cwd=REPO, env=env, check=False)
        print(f"\n{len(model_server.requests)} requests answered by the scripted stand-in; report: "
              f"{REPORT.relative_to(REPO)}")
    return completed.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
