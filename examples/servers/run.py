"""Evaluate the five reference MCP servers offline: no key, no network.

    make servers                                  # once: installs the servers into the project
    python examples/servers/run.py [pytest args]  # e.g. -k git, -m 'not node', -n 2

Two models, as in examples/demo.py:

* ``local/minilm``, the embedded tool retriever (all-MiniLM-L6-v2): single calls only, it makes no flows;
* ``scripted-demo``, a SCRIPTED STAND-IN, not a model: a local OpenAI-compatible server answers with the canned
  replies of examples/servers/script.json (single calls, and each flow turn by turn), with a few mistakes on
  purpose; the plugin calls it over HTTP through litellm, like a hosted model.

The servers themselves are real: each benchmark file starts its server over stdio, and the flows with
``execute: live`` call its tools on throwaway fixtures (conftest.py).  The report goes to
.mcpeval/servers-report.json; the exit status is pytest's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pytest_mcpeval.testing import ScriptedModelServer

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SCRIPT = HERE / "script.json"
REPORT = REPO / ".mcpeval" / "servers-report.json"
LOCAL = "local/minilm"
SCRIPTED = "scripted-demo"


def script_server(server: ScriptedModelServer, model: str = SCRIPTED) -> ScriptedModelServer:
    """Script ``server`` with script.json for ``model``: the single calls, then the flows turn by turn."""
    script = json.loads(SCRIPT.read_text(encoding="utf-8"))
    for text, reply in script["calls"].items():
        server.script(text, reply, model=model)
    for text, turns in script["flows"].items():
        server.flow(text, *turns, model=model)
    return server


def main(argv: list[str]) -> int:
    with ScriptedModelServer() as model_server:
        script_server(model_server)
        params = {"api_base": model_server.api_base, "api_key": "none", "num_retries": 0}
        command = [
            sys.executable, "-m", "pytest", str(HERE),
            f"--rootdir={REPO}",
            f"--mcp-models={LOCAL},{SCRIPTED}",
            f"--mcp-report={REPORT}",
            "--mcp-record=off",  # canned answers: nothing worth recording
            "-o", f"mcp_model_aliases={SCRIPTED} = openai/{SCRIPTED}",
            "-o", f"mcp_model_params={SCRIPTED} = {json.dumps(params)}",
            "-p", "no:cacheprovider",
            "-v",
            *argv,
        ]
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        completed = subprocess.run(command, cwd=REPO, env=env, check=False)
        print(f"\n{len(model_server.requests)} requests answered by the scripted stand-in")
    print(f"report: {REPORT.relative_to(REPO)}")
    return completed.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
