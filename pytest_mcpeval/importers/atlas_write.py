"""MCP-Atlas import, step 3: the tasks -> the files written (the benchmark file, the tools file, a README).

Owns the text: the benchmark file is written by hand around ``yaml.dump`` fragments (:func:`benchmark_yaml`,
:func:`case_yaml`) so that it reads like one written by a person -- a header saying how to run it and how the
arguments are checked, a comment per expected call with what was recorded, multi-line outputs as literal blocks,
each mock's ``when`` on one line; the README (:func:`readme`) says what was imported, how to run it, which tool
schemas were inferred, and where the data comes from and under which license.  What each flow contains is
decided in :mod:`~pytest_mcpeval.importers.atlas_map`; :func:`write_files` puts the texts on disk.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from pytest_mcpeval.importers import UserError
from pytest_mcpeval.importers.atlas_map import COORDINATE_TOL, Notes, Policy, expected_calls, mocks_for
from pytest_mcpeval.importers.atlas_read import Task, case_id
from pytest_mcpeval.text import canonical_json, plural

#: The system prompt of MCP-Atlas's harness (services/mcp_eval/mcp_completion_script.py, MIT, Scale AI).
ATLAS_SYSTEM_PROMPT = (
    "Role: You are a factual, tool-aware assistant connected to a variety of tools. Use the available tools to "
    "answer the user query. Do not ask the user for clarification; fully complete the task using the information "
    "provided in the prompt."
)


class _Dumper(yaml.SafeDumper):
    """Multi-line strings as literal blocks (``|``) where YAML allows it, so recorded outputs stay readable."""


def _str(dumper: Any, value: str) -> Any:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def _yaml(value: Any, indent: int, flow: bool | None = False) -> str:
    text: str = yaml.dump(value, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=2**31 - 1,
                          default_flow_style=flow)
    pad = " " * indent
    return "".join(pad + line if line.strip() else line for line in text.splitlines(keepends=True))


def _comment(text: str, limit: int = 160) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 3] + "..."


def case_yaml(task: Task, policy: Policy, claims: bool, notes: Notes) -> str:
    """One task as a flow, with a comment per expected call saying what was recorded."""
    head: dict[str, Any] = {"id": case_id(task.id), "input": task.prompt, "tools": task.tools, "order": "superset"}
    counts = (f"{plural(len(task.calls), 'recorded call')} in {plural(len(task.turns), 'turn')}, "
              f"{plural(len(task.tools), 'tool')} shown, {plural(len(task.claims), 'claim')}")
    out = [f"  # TASK {_comment(task.id)}: {counts}\n"]
    out.append(_yaml([head], 2))
    out.append("    expect:\n")
    for call, entry in expected_calls(task, policy):
        out.append(f"      # recorded: {_comment(call.tool + ' ' + canonical_json(call.args))}\n")
        out.append(_yaml([entry], 6, flow=None))
    out.append("    mocks:\n")
    for tool in dict.fromkeys(c.tool for c in task.calls):
        out.append(_yaml({tool: None}, 6).replace(" null\n", "\n"))
        for mock in mocks_for(task, tool, policy, notes):
            lead = "        - "
            if "when" in mock:
                out.append(lead + "when: " + _yaml(mock["when"], 0, flow=True))
                lead = "          "
            out.append(lead + _yaml({"result": mock["result"]}, 10).lstrip())
    if claims and task.claims:
        out.append(_yaml({"claims": task.claims}, 4))
    return "".join(out)


def benchmark_yaml(tasks: Sequence[Task], source: str, tools_file: str, inferred: int, total: int,
                   max_turns: int, policy: Policy, claims: bool, notes: Notes) -> str:
    """The benchmark file: a header comment (how to run it, how arguments are checked), the file's settings and
    one flow per task (:func:`case_yaml`)."""
    judged = claims and any(t.claims for t in tasks)
    lines = [
        f"# MCP-Atlas tasks as flows: `python -m pytest_mcpeval import atlas {_comment(source)}` "
        "(docs/import-atlas.md).",
        "#",
        "# Each task is a flow: the model sees only the task's ENABLED_TOOLS (`tools`); every call of the reference",
        "# trajectory must be made (`order: superset`, other calls allowed); calls are answered offline by the",
        "# recorded tool outputs (`mocks`, matched on the recorded arguments); the final answer is scored by the",
        "# task's GTFA claims.  A call no recording answers gets the error result `no mock matches ...`.",
        "#",
    ]
    if judged:
        lines += [
            "# The claims are decided by a judge model: a run needs --mcp-judge-model (or import with --no-claims",
            "# to check only the calls):",
            "#",
            "#   pytest DIR --mcp-models=openai/gpt-4o-mini --mcp-judge-model=openai/gpt-4o-mini",
        ]
    else:
        lines += ["#   pytest DIR --mcp-models=openai/gpt-4o-mini"]
    lines += [
        "#",
        f"# Tool schemas ({tools_file}): "
        + (f"{inferred} of {total} inferred from the recorded arguments, flagged `inferredSchema` in their\n"
           "# annotations" + (", the others as given with --tools." if inferred < total else ".")
           if inferred else f"all {total} as given with --tools."),
        "# Arguments (docs/import-atlas.md#arguments): identifiers exactly, names and titles with `text`, coordinates",
        f"# with `approx` (tol {COORDINATE_TOL}); the agent's own free text (queries, code, commands) only has to be",
        "# given (`regex: (?s).*\\S.*`, any text that is not blank); size knobs (limit, radius) are not checked.",
        "# The system prompt is MCP-Atlas's harness prompt (MIT, Scale AI).",
        "",
    ]
    header: dict[str, Any] = {"version": 1, "server": {"tools_file": tools_file}, "tags": ["atlas"],
                              "system": ATLAS_SYSTEM_PROMPT, "max_turns": max_turns}
    body = ["\n".join(lines), _yaml(header, 0), "cases:\n"]
    body += [case_yaml(task, policy, claims, notes) + ("\n" if n + 1 < len(tasks) else "")
             for n, task in enumerate(tasks)]
    return "".join(body)


def readme(tasks: Sequence[Task], source: str, stem: str, inferred: list[str], total: int, claims: bool,
           command: str) -> str:
    """The README written beside the files: what they hold, how to run them, the inferred schemas, the license."""
    calls = sum(len(expected_calls(t, Policy())) for t in tasks)
    judged = claims and any(t.claims for t in tasks)
    run = "pytest . --mcp-models=MODEL" + (" --mcp-judge-model=JUDGE" if judged else "")
    parts = [
        f"# MCP-Atlas tasks imported from `{source}`\n",
        f"Written by `{command}` (see docs/import-atlas.md of pytest-mcpeval).\n",
        f"- `{stem}.mcpeval.yaml`: {plural(len(tasks), 'flow')} (one per task), {plural(calls, 'expected call')}, "
        f"{plural(sum(len(t.claims) for t in tasks) if claims else 0, 'claim')}.",
        f"- `{stem}-tools.json`: the {total} tools enabled by any task (each flow shows only its own).\n",
        "Run it from this directory:\n",
        f"```sh\n{run}\n```\n",
    ]
    if judged:
        parts.append("The GTFA claims are decided by the judge model (`--mcp-judge-model`); without one the run "
                     "stops with a usage error before calling any model.\n")
    if inferred:
        parts += [
            "## Inferred tool schemas\n",
            f"{plural(len(inferred), 'tool')} of {total} have no definition here: their input schema lists the "
            "argument names recorded for them in the trajectories (typed by the recorded values, none required, "
            "`additionalProperties: true`), their description says it is unavailable, and their `annotations` have "
            "`inferredSchema: true`. Models therefore choose among these tools by their names alone, unlike in "
            "MCP-Atlas, where they see the servers' real descriptions; and an argument the recordings never show is "
            "scored as a hallucinated argument. Import again with `--tools FILE` to use the real definitions.\n",
            "\n".join(f"- `{name}`" for name in inferred) + "\n",
        ]
    parts += [
        "## Source and license\n",
        "The tasks (prompts, enabled tools, claims and reference trajectories with the recorded tool outputs) come "
        "from MCP-Atlas by Scale AI (https://github.com/scaleapi/mcp-atlas). Its repository and sample tasks are "
        "under the MIT License; the 500-task public set on Hugging Face (`ScaleAI/MCP-Atlas`) is under CC-BY-4.0. "
        "Keep this attribution, and the license of the data you imported, with these files.\n",
    ]
    return "\n".join(parts)


def write_files(out: Path, stem: str, benchmark: str, catalog: list[dict[str, Any]], readme_text: str) -> list[Path]:
    """Write ``STEM.mcpeval.yaml``, ``STEM-tools.json`` and ``README.md`` into ``out`` (created if missing,
    files of the same names replaced); the paths written, in that order."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        written = [out / f"{stem}.mcpeval.yaml", out / f"{stem}-tools.json", out / "README.md"]
        written[0].write_text(benchmark, encoding="utf-8")
        written[1].write_text(json.dumps(catalog, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        written[2].write_text(readme_text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"--out {out}: cannot write: {exc}") from None
    return written
