"""Offline demo of tool search: examples/github with and without search, side by side (docs/tool-search.md).

    python examples/demo_search.py [METHOD[:K]] [extra pytest arguments]     # or: make demo-search

The model is ``keywords``, a SCRIPTED STAND-IN (``{"best_match": true}`` of pytest_mcpeval.testing): it calls the
tool BM25 ranks first for the user's words among the tools it is sent, and, shown only the search tool, searches
with the user's words.  It is not a real model, but its choice depends on the descriptions it is sent, so the two
columns show what search costs or gains per tool: ``keywords`` sees the 117 tools, ``keywords+search`` searches
(bm25:5 unless METHOD[:K] is given; ``embedding`` needs the local extra).  To compare a real model the same way:
``pytest examples/github --mcp-models=MODEL,MODEL+search --mcp-tool-search=bm25:5``.

Nothing is written into the repository except the report, .mcpeval/demo-search-report.json.  The exit status is
pytest's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pytest_mcpeval.testing import ScriptedModelServer

EXAMPLES = Path(__file__).resolve().parent
REPO = EXAMPLES.parent
REPORT = REPO / ".mcpeval" / "demo-search-report.json"
MODEL = "keywords"


def pytest_command(model_server: ScriptedModelServer, method: str = "bm25:5", report: Path = REPORT) -> list[str]:
    params = {"api_base": model_server.api_base, "api_key": "none", "num_retries": 0}
    return [
        sys.executable, "-m", "pytest", str(EXAMPLES / "github" / "github.mcpeval.yaml"), f"--rootdir={REPO}",
        f"--mcp-models={MODEL},{MODEL}+search", f"--mcp-tool-search={method}", f"--mcp-report={report}",
        "--mcp-record=off", "-o", f"mcp_model_aliases={MODEL} = openai/{MODEL}",
        "-o", f"mcp_model_params={MODEL} = {json.dumps(params)}", "-p", "no:cacheprovider", "-q",
    ]


def main(argv: list[str]) -> int:
    method = argv.pop(0) if argv and not argv[0].startswith("-") else "bm25:5"
    print(f"tool search demo: `{MODEL}` is a SCRIPTED keyword model, not an LLM; `{MODEL}+search` searches by {method}",
          flush=True)
    with ScriptedModelServer() as model_server:
        model_server.script("*", {"best_match": True})
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        completed = subprocess.run([*pytest_command(model_server, method), *argv], cwd=REPO, env=env, check=False)
    print(f"report: {REPORT.relative_to(REPO)}")
    return completed.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
