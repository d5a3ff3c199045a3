"""MCP-Atlas import, step 1: the input files -> :class:`Task` objects (for ``python -m pytest_mcpeval import atlas``;
the files are read as rows by :mod:`.atlas_rows`).

Owns everything about what the user hands in, and nothing about what is written:

* the tasks file: ``.csv`` (MCP-Atlas's sample file: list columns as JSON text, claims as JSON or a Python list
  literal), ``.json`` (a list of row objects, or ``{"tasks": [...]}``), ``.jsonl`` (one row object per line) or
  ``.parquet`` (Hugging Face's ``ScaleAI/MCP-Atlas``; needs pyarrow, which is not a dependency) -> rows:
  :func:`~pytest_mcpeval.importers.atlas_rows.read_rows`;
* one row's cells (TASK, PROMPT, ENABLED_TOOLS, GTFA_CLAIMS, TRAJECTORY in the OpenAI message format, or the
  harness's AgentOutput records) -> a :class:`Task` with the recorded calls and their outputs
  (:func:`parse_task`), and the whole file -> tasks whose case ids (:func:`case_id`) are unique
  (:func:`load_tasks`);
* the ``--tools FILE`` of real tool definitions (:func:`~pytest_mcpeval.importers.atlas_rows.read_tool_definitions`).

A malformed row is one :class:`~pytest_mcpeval.importers.UserError` naming the file, the row, the column and
the place in the cell (``column TRAJECTORY[3].tool_calls[0].id: ...``).  Only the standard library and, for
Parquet, pyarrow are imported; the tools file reader is imported when ``--tools`` is given.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_mcpeval.bounds import TooDeep, check_depth, loads
from pytest_mcpeval.importers import UserError
from pytest_mcpeval.importers.atlas_rows import COLUMNS, cell_kind, read_rows
from pytest_mcpeval.text import did_you_mean

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
    """One row: its prompt, the tools shown, the GTFA claims and the reference trajectory's calls by turn."""

    where: str  # "row 3 (TASK 68...)" for messages
    id: str
    prompt: str
    tools: list[str]
    claims: list[str]
    turns: list[list[RecordedCall]]  # the calls of each assistant message that made any

    @property
    def calls(self) -> list[RecordedCall]:
        return [call for turn in self.turns for call in turn]


class _RowError(Exception):
    """A problem inside one cell, with where in the cell (``[3].tool_calls[0]``); made a UserError by the caller."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(message)
        self.where = where
        self.message = message


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
        raise UserError(f"{path}: {where}: column TASK: expected the task id, got {cell_kind(task_id)}")
    task_id = task_id.strip()
    where = f"{where} (TASK {task_id})"

    def parsed(name: str, parse: Callable[[Any], Any]) -> Any:
        try:
            return parse(cell(name))
        except _RowError as exc:
            raise UserError(f"{path}: {where}: column {name}{exc.where}: {exc.message}") from None

    prompt = cell("PROMPT")
    if not isinstance(prompt, str) or not prompt.strip():
        raise UserError(f"{path}: {where}: column PROMPT: expected the user's request, got {cell_kind(prompt)}")
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
        return loads(value)
    except json.JSONDecodeError as exc:
        raise _RowError("", f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno}); expected {what}") \
            from None
    except ValueError as exc:  # nested too deep, NaN: strict, bounded JSON (bounds.py)
        raise _RowError("", f"{exc}; expected {what}") from None


def _tool_names(value: Any) -> list[str]:
    names = _decoded(value, "a JSON list of tool names")
    if not isinstance(names, list) or not names:
        raise _RowError("", f"expected a non-empty list of tool names, got {cell_kind(names)}")
    out: list[str] = []
    for i, name in enumerate(names):
        if isinstance(name, Mapping):  # MCP-Atlas's harness also takes [{"name": ...}]
            name = name.get("name")
        if not isinstance(name, str) or not name.strip():
            raise _RowError(f"[{i}]", f"expected a tool name, got {cell_kind(name)}")
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
                claims = loads(text)
            except TooDeep as exc:
                raise _RowError("", str(exc)) from None
            except ValueError:
                try:
                    claims = check_depth(ast.literal_eval(text))  # literals only: never evaluates code
                except TooDeep as exc:
                    raise _RowError("", str(exc)) from None
                except (ValueError, SyntaxError, RecursionError, MemoryError):
                    raise _RowError("", "not a JSON list nor a Python list literal of claims") from None
        else:
            claims = [_BULLET.sub("", line).strip() for line in text.splitlines() if line.strip()]
    if not isinstance(claims, list | tuple):
        raise _RowError("", f"expected a list of claims, got {cell_kind(claims)}")
    out: list[str] = []
    for i, claim in enumerate(claims):
        if isinstance(claim, Mapping):
            claim = claim.get("claim")
        if not isinstance(claim, str):
            raise _RowError(f"[{i}]", f"expected a claim (text), got {cell_kind(claim)}")
        if claim.strip():
            out.append(claim.strip())
    return out


def _trajectory(value: Any) -> list[list[RecordedCall]]:
    messages = _decoded(value, "a JSON list of messages")
    if not isinstance(messages, list):
        raise _RowError("", f"expected a list of messages, got {cell_kind(messages)}")
    turns: list[list[RecordedCall]] = []
    pending: dict[str, tuple[str, RecordedCall]] = {}  # tool_call_id -> (where, call) awaiting its output
    for i, message in enumerate(messages):
        at = f"[{i}]"
        if isinstance(message, Mapping) and "type" in message and "role" not in message:  # the harness's AgentOutput
            if message.get("type") != "message":
                continue  # {"type": "error" | "log" | ..., "data": ...}
            message = message.get("data")
        if not isinstance(message, Mapping):
            raise _RowError(at, f"expected a message object, got {cell_kind(message)}")
        role = message.get("role")
        if role == "assistant":
            calls = message.get("tool_calls") or []
            if not isinstance(calls, list):
                raise _RowError(f"{at}.tool_calls", f"expected a list, got {cell_kind(calls)}")
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
        raise _RowError(at, f"expected a tool call object, got {cell_kind(raw)}")
    function = raw.get("function")
    if not isinstance(function, Mapping):
        raise _RowError(f"{at}.function", f"expected {{name, arguments}}, got {cell_kind(function)}")
    name = function.get("name")
    if not isinstance(name, str) or not name.strip():
        raise _RowError(f"{at}.function.name", f"expected a tool name, got {cell_kind(name)}")
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise _RowError(f"{at}.function.arguments", f"not valid JSON: {exc.msg} (line {exc.lineno}, column "
                            f"{exc.colno})") from None
        except ValueError as exc:
            raise _RowError(f"{at}.function.arguments", str(exc)) from None
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise _RowError(f"{at}.function.arguments", f"expected a JSON object, got {cell_kind(arguments)}")
    call_id = raw.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise _RowError(f"{at}.id", f"expected the call's id (its output names it), got {cell_kind(call_id)}")
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
        raise _RowError(at, f"expected the tool's output (text or a list of content parts), got {cell_kind(content)}")
    texts: list[str] = []
    error = False
    for k, part in enumerate(content):
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, Mapping):
            raise _RowError(f"{at}[{k}]", f"expected a content part, got {cell_kind(part)}")
        text = part.get("text")
        if text is None:  # an image or resource part: said as such, the model sees no bytes offline
            text = f"[{part.get('type', 'non-text')} content]"
        if not isinstance(text, str):
            raise _RowError(f"{at}[{k}].text", f"expected text, got {cell_kind(text)}")
        texts.append(text)
        error = error or part.get("isError") is True or part.get("is_error") is True
    return "\n".join(texts), error


# -- the file as tasks, and the tool definitions given ------------------------------------------------------


def case_id(task_id: str) -> str:
    """The case id a TASK becomes: other characters than ``[A-Za-z0-9_.-]`` as ``-``, and ``task-`` in front
    unless it starts with a letter or a digit."""
    cleaned = re.sub(r"[^A-Za-z0-9_.\-]", "-", task_id)
    return cleaned if re.match(r"^[A-Za-z0-9]", cleaned) else "task-" + cleaned


def load_tasks(path: Path) -> list[Task]:
    """Every row of the tasks file as a :class:`Task`; a :class:`UserError` for a malformed row, two tasks with one
    case id, or no task at all."""
    tasks: list[Task] = []
    first: dict[str, str] = {}
    for where, row in read_rows(path):
        task = parse_task(path, where, row)
        key = case_id(task.id)
        if key in first:
            raise UserError(f"{path}: {where}: TASK {task.id!r} gives the case id `{key}`, as {first[key]} "
                            "does (each task becomes a case, and case ids must be unique)")
        first[key] = where
        tasks.append(task)
    if not tasks:
        raise UserError(f"{path}: no tasks in the file")
    return tasks
