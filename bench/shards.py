"""One run against the same run in N shards merged (docs/scale.md): the time of each shard and of the merge.

    .venv/bin/python bench/shards.py                       # 1,000 cases, 4 shards, L = 0.2 s
    .venv/bin/python bench/shards.py --cases 200 --shards 2 --latency 0

The model is the scripted server of bench/bench.py, in a process of its own, answering after a fixed latency L;
the benchmark is ``--cases`` single calls over 20 GitHub tools in 10 files.  The single run, then each shard (one
after another: on a CI matrix they run at once, each on a machine of its own), then the merge of the shards'
reports (with the HTML page and the Markdown summary) are each timed as a whole process.  The merged report is
checked to equal the single run's in every metric (timings aside).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench as harness  # bench/bench.py: its project writer and model server


def timed(args: list[str], root: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run(args, cwd=root, capture_output=True, text=True, env=harness.ENV)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    return wall


def without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k not in ("latency_s", "startup_s", "load_s")}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/shards.py")
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.2)
    args = parser.parse_args(argv)
    pytest = [harness.PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "--mcp-models=a",
              "--mcp-record=off"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        script = harness.write_cases(root, args.cases, 10, harness.catalog(20))
        with harness.model_server(script, args.latency) as api_base:
            harness.write_ini(root, api_base)
            single = timed([*pytest, "--mcp-report=single.json"], root)
            shards = [timed([*pytest, f"--mcp-shard={k}/{args.shards}", f"--mcp-report=shard{k}.json"], root)
                      for k in range(1, args.shards + 1)]
        reports = [f"shard{k}.json" for k in range(1, args.shards + 1)]
        merge = timed([harness.PY, "-m", "pytest_mcpeval", "merge", *reports, "--mcp-report=merged.json",
                       "--mcp-html=merged.html", "--mcp-markdown=merged.md"], root)
        merged, alone = (json.loads((root / name).read_text()) for name in ("merged.json", "single.json"))
        same = without_timings(merged["models"]) == without_timings(alone["models"])
        items = [json.loads((root / r).read_text())["run"]["shard"]["items"] for r in reports]
    print(f"{args.cases:,} cases, L = {args.latency:g} s, {args.shards} shards ({', '.join(map(str, items))} cases)")
    print(f"  single run       {single:6.2f} s")
    for k, wall in enumerate(shards, 1):
        print(f"  shard {k}/{args.shards}        {wall:6.2f} s")
    print(f"  slowest shard    {max(shards):6.2f} s  ({single / max(shards):.2f}x faster than the single run)")
    print(f"  merge            {merge:6.2f} s  (report, HTML page, Markdown)")
    print(f"  merged metrics equal the single run's: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
