"""``python -m pytest_mcpeval import atlas TASKS --out DIR``: MCP-Atlas tasks -> offline flows (docs/import-atlas.md).

MCP-Atlas (Scale AI) publishes tasks as rows with the columns TASK (an id), PROMPT (one user request),
ENABLED_TOOLS (the 10-25 tool names shown to the agent: the relevant ones and distractors), GTFA_CLAIMS (the
atomic facts a good final answer states) and TRAJECTORY (a reference conversation in the OpenAI message format,
with the real outputs of the tools it called).  Each task becomes one flow:

* ``input`` = PROMPT, ``tools`` = ENABLED_TOOLS (the case key that restricts the tools shown), and the system
  prompt of MCP-Atlas's own harness for the whole file;
* ``expect`` = the trajectory's calls (identical repeats once) in ``order: superset``: every recorded call must
  be made, other calls are allowed; each argument is checked by what it is (:func:`argument_rule`): identifiers
  exactly, names and titles with ``text``, coordinates with ``approx``, free text the recording agent wrote
  (queries, code, commands) only for presence, and size knobs (``limit``, ``radius``) not at all;
* ``mocks`` = the recorded outputs, each answering calls that match the recorded arguments by the same rules
  (tightened where two recorded calls of one tool would otherwise be confused), so a task runs offline;
* ``claims`` = GTFA_CLAIMS, decided by the judge model (``--mcp-judge-model``), as MCP-Atlas scores them.

One tools file holds the union of the tasks' enabled tools: their definitions from ``--tools FILE`` when it has
them, else a schema inferred from the arguments recorded for the tool in any task, flagged as inferred in the
description, in ``annotations`` and in the README written beside it.

Input: ``.csv`` (MCP-Atlas's sample file: list columns as JSON text, claims as JSON or a Python list literal),
``.json`` (a list of row objects), ``.jsonl`` (one row object per line) or ``.parquet`` (Hugging Face's
``ScaleAI/MCP-Atlas``; needs pyarrow, which is not a dependency).  A malformed row is one :class:`UserError`
naming the file, the row, the column and the place in it.  Nothing heavy is imported (no litellm).
"""

from __future__ import annotations

import argparse
import ast
import csv
import importlib
import io
import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pytest_mcpeval.importers import UserError
from pytest_mcpeval.text import canonical_json, did_you_mean, plural

COLUMNS = ("TASK", "PROMPT", "ENABLED_TOOLS", "GTFA_CLAIMS", "TRAJECTORY")
FORMATS = (".csv", ".json", ".jsonl", ".parquet")

#: The system prompt of MCP-Atlas's harness (services/mcp_eval/mcp_completion_script.py, MIT, Scale AI).
ATLAS_SYSTEM_PROMPT = (
    "Role: You are a factual, tool-aware assistant connected to a variety of tools. Use the available tools to "
    "answer the user query. Do not ask the user for clarification; fully complete the task using the information "
    "provided in the prompt."
)
DEFAULT_MAX_TURNS = 20
COORDINATE_TOL = 1e-3  # degrees: about 110 m of latitude; a model that rounds 43.6718771 to 43.672 still matches

# -- how each recorded argument is checked (docs/import-atlas.md#arguments) --------------------------------------
# Argument names are split into lower-case words ("from_latitude" -> from, latitude; "departmentId" -> department,
# id) and classified by them.  Free text is what the recording agent wrote in its own words: its wording is not
# ground truth, so only its presence is checked.
FREE_TEXT_WORDS = frozenset({
    "query", "q", "search", "keyword", "keywords", "term", "terms", "text", "prompt", "question", "code",
    "script", "expression", "command", "cmd", "sql", "address", "content", "body", "message", "input",
    "instruction", "instructions", "description", "statement", "snippet",
})
KNOB_NAMES = frozenset({
    "limit", "radius", "page", "per_page", "perpage", "page_size", "pagesize", "offset", "count", "top_k", "topk",
    "num_results", "n_results", "n", "size", "timeout", "depth",
})
KNOB_PREFIXES = ("max", "min")
COORDINATE_WORDS = frozenset({"lat", "latitude", "lon", "lng", "long", "longitude"})
NAME_WORDS = frozenset({"title", "name"})
RULES = ("exact", "text", "approx", "present", "ignore")
PRESENT = r"(?s).*\S.*"  # `present`: any text that is not blank


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("tasks", metavar="TASKS", help="MCP-Atlas tasks: a .csv, .json, .jsonl or .parquet file "
                        "with the columns " + ", ".join(COLUMNS))
    parser.add_argument("--out", required=True, metavar="DIR", help="directory to write the benchmark file, the "
                        "tools file and a README into (created if missing; files of the same names are replaced)")
    parser.add_argument("--tools", metavar="FILE", help="tool definitions (a JSON list of MCP tools, or "
                        "{\"tools\": [...]}) named as in ENABLED_TOOLS; tools it lacks get a schema inferred from "
                        "the recorded arguments")
    parser.add_argument("--name", default="atlas", type=_file_stem, metavar="NAME",
                        help="stem of the files written: NAME.mcpeval.yaml and NAME-tools.json (default: atlas)")
    parser.add_argument("--max-turns", type=_positive_int, default=DEFAULT_MAX_TURNS, metavar="N",
                        help=f"model calls a flow may make (default: {DEFAULT_MAX_TURNS})")
    parser.add_argument("--no-claims", action="store_true", help="leave the GTFA claims out: the flows then "
                        "check only the calls, and need no judge model")
    parser.add_argument("--exact", action="append", default=[], metavar="ARG[,ARG...]",
                        help="argument names whose recorded values must be matched exactly (repeatable)")
    parser.add_argument("--loose", action="append", default=[], metavar="ARG[,ARG...]",
                        help="argument names whose recorded values are the agent's own wording: only their presence "
                        "is checked (repeatable)")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not at least 1")
    return value


def _file_stem(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a file name stem (letters, digits, `_`, `.`, `-`)")
    return text


# -- the tasks -----------------------------------------------------------------------------------------------


@dataclass
class RecordedCall:
    """One tool call of a reference trajectory, with the output it got."""

    tool: str
    args: dict[str, Any]
    output: str
    is_error: bool


@dataclass
class Task:
    where: str  # "row 3 (TASK 68...)" for messages
    id: str
    prompt: str
    tools: list[str]
    claims: list[str]
    turns: list[list[RecordedCall]]  # the calls of each assistant message that made any

    @property
    def calls(self) -> list[RecordedCall]:
        return [call for turn in self.turns for call in turn]


@dataclass
class Notes:
    """What the import did that a user should know, printed after the summary (never an error)."""

    lines: list[str] = field(default_factory=list)

    def add(self, text: str) -> None:
        self.lines.append(text)


class _RowError(Exception):
    """A problem inside one cell, with where in the cell (``[3].tool_calls[0]``); made a UserError by the caller."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(message)
        self.where = where
        self.message = message


def read_rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """The rows of a tasks file, each with how messages name it (``row 3`` or ``row 3 (line 7)``)."""
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise UserError(f"{path}: unknown format `{path.suffix or '(no suffix)'}`: expected a file ending in "
                        f"{', '.join(FORMATS)}")
    if suffix == ".parquet":
        return _parquet_rows(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read the file: {exc}") from None
    if suffix == ".csv":
        return _csv_rows(path, text)
    if suffix == ".jsonl":
        rows: list[tuple[str, dict[str, Any]]] = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                rows.append((f"row {len(rows) + 1} (line {number})", _json_object(path, line, number)))
        return rows
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg} (column {exc.colno})") from None
    if isinstance(data, Mapping) and isinstance(data.get("tasks"), list):
        data = data["tasks"]
    if not isinstance(data, list):
        raise UserError(f"{path}: expected a JSON list of task objects (or {{\"tasks\": [...]}}), got "
                        f"{_kind(data)}")
    out: list[tuple[str, dict[str, Any]]] = []
    for i, row in enumerate(data):
        if not isinstance(row, Mapping):
            raise UserError(f"{path}: row {i + 1}: expected a task object with the columns {', '.join(COLUMNS)}, "
                            f"got {_kind(row)}")
        out.append((f"row {i + 1}", dict(row)))
    return out


def _json_object(path: Path, line: str, number: int) -> dict[str, Any]:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}:{number}: not valid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(row, dict):
        raise UserError(f"{path}:{number}: expected a task object, got {_kind(row)}")
    return row


def _csv_rows(path: Path, text: str) -> list[tuple[str, dict[str, Any]]]:
    csv.field_size_limit(2**31 - 1)  # a trajectory cell holds every tool output: far above the 128 KiB default
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
    rows: list[tuple[str, dict[str, Any]]] = []
    start = 1
    try:
        if reader.fieldnames is None:
            raise UserError(f"{path}: the file is empty: expected a header row with {', '.join(COLUMNS)}")
        start = reader.line_num + 1
        for row in reader:
            if None in row:  # more cells than header columns
                raise UserError(f"{path}: row {len(rows) + 1} (line {start}): {len(row) - 1 + len(row[None])} "
                                f"cells for {len(row) - 1} columns (a quote not closed or not doubled?)")
            rows.append((f"row {len(rows) + 1} (line {start})", dict(row)))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise UserError(f"{path}:{start}: row {len(rows) + 1}: not valid CSV: {exc}") from None
    return rows


def _parquet_rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    try:
        pq = importlib.import_module("pyarrow.parquet")  # optional, and only for this format
    except ImportError:
        raise UserError(f"{path}: reading Parquet needs pyarrow, which is not installed: `pip install pyarrow` (it "
                        "is not a dependency of pytest-mcpeval), or convert the file to CSV or JSON") from None
    if not path.exists():
        raise UserError(f"{path}: no such file")
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for a file that is not Parquet
        raise UserError(f"{path}: cannot read it as Parquet: {exc}") from None
    return [(f"row {i + 1}", dict(row)) for i, row in enumerate(table.to_pylist())]


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string" if value.strip() else "an empty string"
    if isinstance(value, list | tuple):
        return "a list"
    return "an object"


def parse_task(path: Path, where: str, row: Mapping[str, Any]) -> Task:
    """One row as a :class:`Task`; a :class:`UserError` naming the row, the column and the place otherwise."""
    columns = {str(k).strip().upper(): k for k in row}
    missing = [c for c in COLUMNS if c not in columns]
    if missing:
        found = [str(k) for k in row]
        hints = "".join(did_you_mean(c, found) for c in missing[:1])
        raise UserError(f"{path}: {where}: missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)}"
                        f"{hints} (found: {', '.join(found) or 'none'})")

    def cell(name: str) -> Any:
        return row[columns[name]]

    task_id = cell("TASK")
    if isinstance(task_id, int) and not isinstance(task_id, bool):
        task_id = str(task_id)
    if not isinstance(task_id, str) or not task_id.strip():
        raise UserError(f"{path}: {where}: column TASK: expected the task id, got {_kind(task_id)}")
    task_id = task_id.strip()
    where = f"{where} (TASK {task_id})"

    def parsed(name: str, parse: Callable[[Any], Any]) -> Any:
        try:
            return parse(cell(name))
        except _RowError as exc:
            raise UserError(f"{path}: {where}: column {name}{exc.where}: {exc.message}") from None

    prompt = cell("PROMPT")
    if not isinstance(prompt, str) or not prompt.strip():
        raise UserError(f"{path}: {where}: column PROMPT: expected the user's request, got {_kind(prompt)}")
    tools = parsed("ENABLED_TOOLS", _tool_names)
    claims = parsed("GTFA_CLAIMS", _claims)
    turns = parsed("TRAJECTORY", _trajectory)
    if not any(turns):
        raise UserError(f"{path}: {where}: column TRAJECTORY: the reference trajectory makes no tool call, so there "
                        "is nothing to expect or to answer offline")
    shown = set(tools)
    for n, call in enumerate(c for t in turns for c in t):
        if call.tool not in shown:
            raise UserError(f"{path}: {where}: column TRAJECTORY: call {n + 1} is to `{call.tool}`, which is not in "
                            f"ENABLED_TOOLS{did_you_mean(call.tool, tools)} (the model could not be shown it)")
    return Task(where, task_id, prompt, tools, claims, turns)


def _decoded(value: Any, what: str) -> Any:
    """A cell that may hold JSON text (CSV, and string columns of Parquet) or the value itself."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise _RowError("", f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno}); expected {what}") \
            from None


def _tool_names(value: Any) -> list[str]:
    names = _decoded(value, "a JSON list of tool names")
    if not isinstance(names, list) or not names:
        raise _RowError("", f"expected a non-empty list of tool names, got {_kind(names)}")
    out: list[str] = []
    for i, name in enumerate(names):
        if isinstance(name, Mapping):  # MCP-Atlas's harness also takes [{"name": ...}]
            name = name.get("name")
        if not isinstance(name, str) or not name.strip():
            raise _RowError(f"[{i}]", f"expected a tool name, got {_kind(name)}")
        if name.strip() not in out:
            out.append(name.strip())
    return out


_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+")


def _claims(value: Any) -> list[str]:
    """A JSON list, a Python list literal (MCP-Atlas's sample CSV), a list of ``{claim: ...}``, or one claim per
    line (bullets and numbers removed), as MCP-Atlas's scorer reads them."""
    if value is None:
        return []
    claims = value
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return []
        claims = None
        if text.startswith("["):
            try:
                claims = json.loads(text)
            except json.JSONDecodeError:
                try:
                    claims = ast.literal_eval(text)  # literals only: never evaluates code
                except (ValueError, SyntaxError):
                    raise _RowError("", "not a JSON list nor a Python list literal of claims") from None
        else:
            claims = [_BULLET.sub("", line).strip() for line in text.splitlines() if line.strip()]
    if not isinstance(claims, list | tuple):
        raise _RowError("", f"expected a list of claims, got {_kind(claims)}")
    out: list[str] = []
    for i, claim in enumerate(claims):
        if isinstance(claim, Mapping):
            claim = claim.get("claim")
        if not isinstance(claim, str):
            raise _RowError(f"[{i}]", f"expected a claim (text), got {_kind(claim)}")
        if claim.strip():
            out.append(claim.strip())
    return out


def _trajectory(value: Any) -> list[list[RecordedCall]]:
    messages = _decoded(value, "a JSON list of messages")
    if not isinstance(messages, list):
        raise _RowError("", f"expected a list of messages, got {_kind(messages)}")
    turns: list[list[RecordedCall]] = []
    pending: dict[str, tuple[str, RecordedCall]] = {}  # tool_call_id -> (where, call) awaiting its output
    for i, message in enumerate(messages):
        at = f"[{i}]"
        if isinstance(message, Mapping) and "type" in message and "role" not in message:  # the harness's AgentOutput
            if message.get("type") != "message":
                continue  # {"type": "error" | "log" | ..., "data": ...}
            message = message.get("data")
        if not isinstance(message, Mapping):
            raise _RowError(at, f"expected a message object, got {_kind(message)}")
        role = message.get("role")
        if role == "assistant":
            calls = message.get("tool_calls") or []
            if not isinstance(calls, list):
                raise _RowError(f"{at}.tool_calls", f"expected a list, got {_kind(calls)}")
            turn = [_call(f"{at}.tool_calls[{j}]", raw, pending) for j, raw in enumerate(calls)]
            if turn:
                turns.append(turn)
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or call_id not in pending:
                known = f" (calls awaiting an output: {', '.join(pending)})" if pending else ""
                raise _RowError(f"{at}.tool_call_id", f"{call_id!r} names no earlier tool call without an "
                                f"output{known}")
            _, call = pending.pop(call_id)
            call.output, call.is_error = _output(f"{at}.content", message.get("content"))
        elif role not in ("system", "user"):
            raise _RowError(f"{at}.role", f"expected assistant, tool, user or system, got {role!r}")
    if pending:
        where, call = next(iter(pending.values()))
        raise _RowError(where, f"the call of `{call.tool}` has no tool message with its output, so it cannot be "
                        "answered offline")
    return turns


def _call(at: str, raw: Any, pending: dict[str, tuple[str, RecordedCall]]) -> RecordedCall:
    if not isinstance(raw, Mapping):
        raise _RowError(at, f"expected a tool call object, got {_kind(raw)}")
    function = raw.get("function")
    if not isinstance(function, Mapping):
        raise _RowError(f"{at}.function", f"expected {{name, arguments}}, got {_kind(function)}")
    name = function.get("name")
    if not isinstance(name, str) or not name.strip():
        raise _RowError(f"{at}.function.name", f"expected a tool name, got {_kind(name)}")
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise _RowError(f"{at}.function.arguments", f"not valid JSON: {exc.msg} (line {exc.lineno}, column "
                            f"{exc.colno})") from None
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise _RowError(f"{at}.function.arguments", f"expected a JSON object, got {_kind(arguments)}")
    call_id = raw.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise _RowError(f"{at}.id", f"expected the call's id (its output names it), got {_kind(call_id)}")
    if call_id in pending:
        raise _RowError(f"{at}.id", f"{call_id!r} is also the id of {pending[call_id][0]}, which has no output yet")
    call = RecordedCall(name.strip(), arguments, "", False)
    pending[call_id] = (at, call)
    return call


def _output(at: str, content: Any) -> tuple[str, bool]:
    """The text a model is sent (text parts joined by newlines, as for a live result) and whether it is an error."""
    if isinstance(content, str):
        return content, False
    if not isinstance(content, list):
        raise _RowError(at, f"expected the tool's output (text or a list of content parts), got {_kind(content)}")
    texts: list[str] = []
    error = False
    for k, part in enumerate(content):
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, Mapping):
            raise _RowError(f"{at}[{k}]", f"expected a content part, got {_kind(part)}")
        text = part.get("text")
        if text is None:  # an image or resource part: said as such, the model sees no bytes offline
            text = f"[{part.get('type', 'non-text')} content]"
        if not isinstance(text, str):
            raise _RowError(f"{at}[{k}].text", f"expected text, got {_kind(text)}")
        texts.append(text)
        error = error or part.get("isError") is True or part.get("is_error") is True
    return "\n".join(texts), error


# -- arguments: how each is checked --------------------------------------------------------------------------


def words(name: str) -> list[str]:
    """``"from_latitude"`` -> ``["from", "latitude"]``, ``"departmentId"`` -> ``["department", "id"]``."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name)
    return [w.lower() for w in re.split(r"[^A-Za-z0-9]+", spaced) if w]


@dataclass(frozen=True)
class Policy:
    """Argument names the user forced to ``exact`` or ``present`` (``--exact``, ``--loose``)."""

    exact: frozenset[str] = frozenset()
    loose: frozenset[str] = frozenset()


def argument_rule(name: str, value: Any, policy: Policy = Policy()) -> str:
    """How a recorded argument is checked: ``exact``, ``text``, ``approx``, ``present`` or ``ignore``.

    * ``approx`` (within :data:`COORDINATE_TOL`): a number whose name says latitude or longitude;
    * ``ignore``: a number sizing the answer (``limit``, ``radius``, ``max_*``, ``min_*``): the agent's choice;
    * ``present``: a string the agent wrote in its own words (``query``, ``q``, ``code``, ``command``,
      ``expression``, ``address``, ...): it must be given, as text that is not blank (:data:`PRESENT`), but its
      wording is not ground truth;
    * ``text`` (case, spaces and punctuation ignored): a string named ``title`` or ``name`` (``*_name``);
    * ``exact``: everything else: identifiers, paths, URLs, enums, booleans, lists and objects.
    """
    if name in policy.exact:
        return "exact"
    if name in policy.loose:
        return "present"
    split = words(name)
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if number and COORDINATE_WORDS.intersection(split):
        return "approx"
    if number and (name.lower() in KNOB_NAMES or "_".join(split) in KNOB_NAMES
                   or (len(split) > 1 and split[0] in KNOB_PREFIXES)):
        return "ignore"
    if isinstance(value, str) and value.strip() and split and split[-1] in FREE_TEXT_WORDS:
        return "present"  # (a blank one is not text the agent wrote: exact, so its own mock answers it)
    if isinstance(value, str) and split and split[-1] in NAME_WORDS:
        return "text"
    return "exact"


def _needs_equals(value: Any) -> bool:
    """Whether a recorded value holds an object anywhere (written ``{equals: ...}``, so no key reads as a matcher)."""
    if isinstance(value, Mapping):
        return True
    if isinstance(value, list):
        return any(_needs_equals(v) for v in value)
    return False


def matcher(rule: str, value: Any) -> Any:
    """The benchmark-file value of one argument under ``rule``."""
    if rule == "approx":
        return {"approx": value, "tol": COORDINATE_TOL}
    if rule == "text":
        return {"text": value}
    if rule == "present":
        return {"regex": PRESENT}
    if rule == "ignore":
        return {"ignore": True}
    return {"equals": value} if _needs_equals(value) else value


def checked_args(args: Mapping[str, Any], level: int, policy: Policy) -> dict[str, Any]:
    """The arguments as a benchmark file checks them: ``level`` 0 by :func:`argument_rule`, 1 with free text
    compared as ``text`` and knobs exactly, 2 all exactly.  ``ignore`` ones are left out (they check nothing)."""
    out: dict[str, Any] = {}
    for name, value in args.items():
        rule = argument_rule(name, value, policy)
        if level >= 2:
            rule = "exact"
        elif level == 1 and rule in ("present", "ignore"):
            rule = "text" if isinstance(value, str) else "exact"
        if rule != "ignore":
            out[name] = matcher(rule, value)
    return out


def _matches(when: Mapping[str, Any], args: Mapping[str, Any]) -> bool:
    from pytest_mcpeval.scoring.matchers import check_object, compile_args

    return not check_object(compile_args(when), args, allow_extra=True)


@dataclass
class Mocked:
    args: dict[str, Any]
    output: str
    is_error: bool
    level: int = 0


def mocks_for(task: Task, tool: str, policy: Policy, notes: Notes) -> list[dict[str, Any]]:
    """The mocks of one tool in one task: one per distinct recorded argument set, each ``when`` as loose as the
    argument rules allow and no looser than needed to tell the recorded calls apart (the first mock whose
    ``when`` matches answers, so each recorded call must be answered by its own)."""
    distinct: dict[str, Mocked] = {}
    for call in (c for c in task.calls if c.tool == tool):
        key = canonical_json(call.args)
        if key not in distinct:
            distinct[key] = Mocked(call.args, call.output, call.is_error)
        elif (distinct[key].output, distinct[key].is_error) != (call.output, call.is_error):
            notes.add(f"{task.where}: `{tool}` was called twice with the same arguments and answered differently; "
                      "the first answer is used for both")
    entries = list(distinct.values())
    changed = True
    while changed:  # raise both of any two mocks that would answer each other's call, until none does
        changed = False
        for i, a in enumerate(entries):
            for b in entries[i + 1:]:
                confused = (_matches(checked_args(a.args, a.level, policy), b.args)
                            or _matches(checked_args(b.args, b.level, policy), a.args))
                if confused and min(a.level, b.level) < 2:
                    a.level = b.level = min(max(a.level, b.level) + 1, 2)
                    changed = True
    # the most specific first: an exact `when` that another call's arguments include must not come first
    entries.sort(key=lambda m: -len(checked_args(m.args, m.level, policy)))
    mocks: list[dict[str, Any]] = []
    for m in entries:
        when = checked_args(m.args, m.level, policy)
        result = {"error": m.output} if m.is_error else {"text": m.output}
        mocks.append({"when": when, "result": result} if when else {"result": result})
    for m in entries:  # the answer each recorded call gets is its own
        first = next((mock for mock in mocks if _matches(mock.get("when") or {}, m.args)), None)
        if first is None or first["result"] != ({"error": m.output} if m.is_error else {"text": m.output}):
            notes.add(f"{task.where}: two recorded calls of `{tool}` cannot be told apart by their arguments "
                      f"({canonical_json(m.args)[:80]}); one is answered with the other's output")
    return mocks


def expected_calls(task: Task, policy: Policy) -> list[tuple[RecordedCall, dict[str, Any]]]:
    """The recorded calls (an identical repeat once), each with its expected call: the argument rules at level 0."""
    out: list[tuple[RecordedCall, dict[str, Any]]] = []
    seen: set[str] = set()
    for call in task.calls:
        key = canonical_json([call.tool, call.args])
        if key in seen:
            continue
        seen.add(key)
        entry: dict[str, Any] = {"tool": call.tool}
        args = checked_args(call.args, 0, policy)
        if args:
            entry["args"] = args
            entry["extra_args"] = "allow"
        out.append((call, entry))
    return out


# -- tools ---------------------------------------------------------------------------------------------------


def _json_type(values: list[Any]) -> dict[str, Any]:
    """A JSON Schema type covering the recorded values (numbers as ``number``: one int says nothing)."""
    kinds = set()
    for v in values:
        if isinstance(v, bool):
            kinds.add("boolean")
        elif isinstance(v, int | float):
            kinds.add("number")
        elif isinstance(v, str):
            kinds.add("string")
        elif isinstance(v, list):
            kinds.add("array")
        elif isinstance(v, Mapping):
            kinds.add("object")
    if len(kinds) != 1:
        return {}
    kind = kinds.pop()
    if kind == "array":
        items = _json_type([x for v in values for x in v])
        return {"type": "array", "items": items} if items else {"type": "array"}
    return {"type": kind}


def inferred_tool(name: str, recorded: list[dict[str, Any]]) -> dict[str, Any]:
    """A tool definition from the arguments recorded for it: every name seen, typed by its values, none required
    (absence proves nothing), other names allowed; flagged as inferred in the description and annotations."""
    values: dict[str, list[Any]] = {}
    for args in recorded:
        for key, value in args.items():
            values.setdefault(key, []).append(value)
    schema = {
        "type": "object",
        "properties": {key: _json_type(vs) for key, vs in sorted(values.items())},
        "additionalProperties": True,
    }
    source = (f"inferred from {plural(len(recorded), 'recorded call')}" if recorded
              else "no recorded call: no arguments known")
    description = (f"MCP-Atlas tool `{name}`. (Its real description is not available: the input schema is "
                   f"{source}.)")
    return {"name": name, "description": description, "inputSchema": schema,
            "annotations": {"inferredSchema": True}}


def read_tool_definitions(path: Path) -> dict[str, dict[str, Any]]:
    from pytest_mcpeval.benchmark.loader import BenchmarkError
    from pytest_mcpeval.benchmark.tools_file import read_tools_file

    try:
        tools = read_tools_file(path)
    except FileNotFoundError:
        raise UserError(f"--tools {path}: no such file") from None
    except OSError as exc:
        raise UserError(f"--tools {path}: cannot read the file: {exc}") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"--tools {path}: not UTF-8 text: {exc}") from None
    except BenchmarkError as exc:
        raise UserError("--tools " + str(exc).splitlines()[0]) from None
    return {tool["name"]: tool for tool in tools}


def tool_catalog(tasks: Sequence[Task], given: Mapping[str, dict[str, Any]], tools_path: str | None,
                 notes: Notes) -> tuple[list[dict[str, Any]], list[str]]:
    """The union of the tasks' enabled tools, sorted by name, and the names whose schema was inferred."""
    recorded: dict[str, list[dict[str, Any]]] = {}
    for task in tasks:
        for name in task.tools:
            recorded.setdefault(name, [])
        for call in task.calls:
            recorded[call.tool].append(call.args)
    tools: list[dict[str, Any]] = []
    inferred: list[str] = []
    for name in sorted(recorded):
        if name in given:
            tools.append(given[name])
        else:
            tools.append(inferred_tool(name, recorded[name]))
            inferred.append(name)
    if tools_path is not None and inferred:
        shown = ", ".join(f"`{n}`" for n in inferred[:5]) + (", ..." if len(inferred) > 5 else "")
        notes.add(f"{plural(len(inferred), 'enabled tool')} of {len(tools)} not in {tools_path}: schemas inferred "
                  f"from the recorded arguments ({shown})")
    return tools, inferred


def fit_to_schemas(tasks: Sequence[Task], given: Mapping[str, dict[str, Any]], notes: Notes) -> None:
    """Recorded arguments that a given schema does not define are dropped from the calls (a model passing them
    would be flagged as hallucinating, and a mock's ``when`` may not name them), with a note."""
    for task in tasks:
        for call in task.calls:
            schema = (given.get(call.tool) or {}).get("inputSchema") or {}
            props = schema.get("properties") if isinstance(schema, Mapping) else None
            if not isinstance(props, Mapping) or not props:
                continue
            unknown = [k for k in call.args if k not in props]
            if unknown:
                notes.add(f"{task.where}: `{call.tool}` was called with {', '.join(f'`{k}`' for k in unknown)}, "
                          "which its schema does not define: left out of the expected arguments and the mock")
                call.args = {k: v for k, v in call.args.items() if k in props}


# -- writing ---------------------------------------------------------------------------------------------------


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
    head: dict[str, Any] = {"id": _case_id(task.id), "input": task.prompt, "tools": task.tools, "order": "superset"}
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


def _case_id(task_id: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_.\-]", "-", task_id)
    return cleaned if re.match(r"^[A-Za-z0-9]", cleaned) else "task-" + cleaned


def benchmark_yaml(tasks: Sequence[Task], source: str, tools_file: str, inferred: int, total: int,
                   max_turns: int, policy: Policy, claims: bool, notes: Notes) -> str:
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


# -- the command ------------------------------------------------------------------------------------------------


def _names(values: Sequence[str]) -> frozenset[str]:
    return frozenset(n.strip() for v in values for n in v.split(",") if n.strip())


def load_tasks(path: Path) -> list[Task]:
    tasks: list[Task] = []
    first: dict[str, str] = {}
    for where, row in read_rows(path):
        task = parse_task(path, where, row)
        case_id = _case_id(task.id)
        if case_id in first:
            raise UserError(f"{path}: {where}: TASK {task.id!r} gives the case id `{case_id}`, as {first[case_id]} "
                            "does (each task becomes a case, and case ids must be unique)")
        first[case_id] = where
        tasks.append(task)
    if not tasks:
        raise UserError(f"{path}: no tasks in the file")
    return tasks


def convert(path: Path, out: Path, *, tools: Path | None = None, stem: str = "atlas",
            max_turns: int = DEFAULT_MAX_TURNS, claims: bool = True, policy: Policy = Policy(),
            command: str = "") -> tuple[list[Path], list[Task], list[str], Notes]:
    """Import ``path`` into ``out``: the files written, the tasks, the tools whose schema was inferred and the
    notes."""
    notes = Notes()
    tasks = load_tasks(path)
    given = read_tool_definitions(tools) if tools is not None else {}
    fit_to_schemas(tasks, given, notes)
    catalog, inferred = tool_catalog(tasks, given, str(tools) if tools is not None else None, notes)
    source = path.name
    command = command or f"python -m pytest_mcpeval import atlas {source} --out DIR"
    bench = benchmark_yaml(tasks, source, f"{stem}-tools.json", len(inferred), len(catalog), max_turns, policy,
                           claims, notes)
    try:
        out.mkdir(parents=True, exist_ok=True)
        written = [out / f"{stem}.mcpeval.yaml", out / f"{stem}-tools.json", out / "README.md"]
        written[0].write_text(bench, encoding="utf-8")
        written[1].write_text(json.dumps(catalog, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        written[2].write_text(readme(tasks, source, stem, inferred, len(catalog), claims, command), encoding="utf-8")
    except OSError as exc:
        raise UserError(f"--out {out}: cannot write: {exc}") from None
    return written, tasks, inferred, notes


def run(args: argparse.Namespace) -> int:
    policy = Policy(exact=_names(args.exact), loose=_names(args.loose))
    both = policy.exact & policy.loose
    if both:
        raise UserError(f"--exact and --loose both name {', '.join(sorted(both))}")
    path, out = Path(args.tasks), Path(args.out)
    command = " ".join(["python -m pytest_mcpeval import atlas", path.name, "--out DIR",
                        *(["--tools", Path(args.tools).name] if args.tools else []),
                        *(["--name", args.name] if args.name != "atlas" else []),
                        *(["--max-turns", str(args.max_turns)] if args.max_turns != DEFAULT_MAX_TURNS else []),
                        *(["--no-claims"] if args.no_claims else []),
                        *(["--exact", ",".join(sorted(policy.exact))] if policy.exact else []),
                        *(["--loose", ",".join(sorted(policy.loose))] if policy.loose else [])])
    written, tasks, inferred, notes = convert(
        path, out, tools=Path(args.tools) if args.tools else None, stem=args.name, max_turns=args.max_turns,
        claims=not args.no_claims, policy=policy, command=command)
    calls = sum(len(expected_calls(t, policy)) for t in tasks)
    print(f"{plural(len(tasks), 'task')} -> {plural(len(tasks), 'flow')}, {plural(calls, 'expected call')}; "
          f"{len(json.loads(written[1].read_text(encoding='utf-8')))} tools"
          + (f" ({len(inferred)} with inferred schemas)" if inferred else ""))
    for path_written in written:
        print(f"wrote {path_written}")
    for line in notes.lines:
        print(f"note: {line}", file=sys.stderr)
    return 0
