"""BFCL import, reading: the question and possible-answer files (JSON lines) -> :class:`Question` objects and each
question's accepted answers, every malformed entry one :class:`~pytest_mcpeval.importers.UserError` naming the file,
the line and the field (see :mod:`pytest_mcpeval.importers.bfcl`)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_mcpeval.benchmark.schema import CASE_ID_PATTERN
from pytest_mcpeval.bounds import loads
from pytest_mcpeval.importers import UserError
from pytest_mcpeval.text import did_you_mean, plural

#: category -> how many calls it expects: "one", "several" (parallel: any order) or "none"
CATEGORIES = {
    "simple": "one",
    "simple_python": "one",
    "multiple": "one",
    "parallel": "several",
    "parallel_multiple": "several",
    "irrelevance": "none",
}
_ROLES = ("system", "user", "assistant")
_BFCL_ID = re.compile(r"^(.+)_\d+(-\d+-\d+)?$")  # `multiple_12`; live categories add `-3-15`


# -- reading -----------------------------------------------------------------------------------------------


def read_entries(path: Path, what: str) -> list[tuple[str, dict[str, Any]]]:
    """The JSON objects of a BFCL file (JSON lines; a whole-file JSON list is accepted too), each with where it
    is (``FILE:LINE``) for error messages."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: no such file (the {what} file)") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, expected the {what} file") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text (expected BFCL's JSON lines)") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read the file: {exc.strerror}") from None
    if text.lstrip().startswith("["):
        try:
            whole = loads(text)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}, column {exc.colno})") from None
        except ValueError as exc:  # nested too deep, NaN: strict, bounded JSON (bounds.py)
            raise UserError(f"{path}: {exc}") from None
        rows = [(f"{path}: entry {i}", value) for i, value in enumerate(whole)]
    else:
        rows = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append((f"{path}:{n}", loads(line)))
            except json.JSONDecodeError as exc:
                raise UserError(f"{path}:{n}: not valid JSON ({exc.msg}, column {exc.colno}); BFCL files hold one "
                                "JSON object per line") from None
            except ValueError as exc:
                raise UserError(f"{path}:{n}: {exc}") from None
    if not rows:
        raise UserError(f"{path}: the file is empty; expected one JSON object per line (the {what} file)")
    for where, value in rows:
        if not isinstance(value, dict):
            raise UserError(f"{where}: expected a JSON object, got {type(value).__name__}")
    return rows


def _require(where: str, entry: Mapping[str, Any], key: str, kind: type, expected: str) -> Any:
    value = entry.get(key)
    if value is None:
        known = [k for k in entry if isinstance(k, str)]
        raise UserError(f"{where}: missing `{key}` ({expected}){did_you_mean(key, known)}")
    if not isinstance(value, kind):
        raise UserError(f"{where}: `{key}` must be {expected}, got {type(value).__name__}")
    return value


@dataclass
class Question:
    where: str
    id: str
    category: str
    messages: list[dict[str, str]]
    functions: list[dict[str, Any]]

    @classmethod
    def parse(cls, where: str, entry: dict[str, Any]) -> Question:
        if "ground_truth" in entry and "question" not in entry:
            raise UserError(f"{where}: this is a possible-answer entry (it has `ground_truth`); give the question "
                            "file first, then the possible-answer file")
        id_ = _require(where, entry, "id", str, "a string such as `multiple_0`")
        where = f"{where}: {id_}"
        if not re.match(CASE_ID_PATTERN, id_):
            raise UserError(f"{where}: the id must match {CASE_ID_PATTERN} (it becomes the case id)")
        category = category_of(id_, where)
        turns = _require(where, entry, "question", list, "a list of turns, each a list of messages")
        if len(turns) != 1 or not isinstance(turns[0], list) or not turns[0]:
            raise UserError(f"{where}: `question` must hold exactly one turn (a non-empty list of messages); "
                            f"multi-turn entries are not supported (got {plural(len(turns), 'turn')})")
        messages = []
        for k, message in enumerate(turns[0]):
            if not isinstance(message, dict) or message.get("role") not in _ROLES \
                    or not isinstance(message.get("content"), str):
                raise UserError(f"{where}: question[0][{k}] must be {{role, content}} with role one of "
                                f"{', '.join(_ROLES)} and content a string")
            messages.append({"role": message["role"], "content": message["content"]})
        if not any(m["role"] == "user" for m in messages):
            raise UserError(f"{where}: the question has no user message")
        functions = _require(where, entry, "function", list, "a list of function definitions")
        seen: set[str] = set()
        for k, function in enumerate(functions):
            check_function(f"{where}: function[{k}]", function)
            if function["name"] in seen:
                raise UserError(f"{where}: function[{k}]: two functions are named `{function['name']}`")
            seen.add(function["name"])
        if not functions and CATEGORIES[category] != "none":
            raise UserError(f"{where}: `function` is empty; a {category} question needs the functions to call")
        return cls(where, id_, category, messages, functions)


def category_of(id_: str, where: str) -> str:
    """BFCL's category of an entry id (``multiple_12`` -> ``multiple``), as bfcl_eval.utils does."""
    match = _BFCL_ID.match(id_)
    if not match:
        raise UserError(f"{where}: expected an id of BFCL's form CATEGORY_NUMBER, such as `multiple_0`")
    category = match.group(1)
    if category not in CATEGORIES:
        raise UserError(f"{where}: category `{category}` is not supported{did_you_mean(category, CATEGORIES)} "
                        f"(supported: {', '.join(CATEGORIES)})")
    return category


def check_function(where: str, function: Any) -> None:
    if not isinstance(function, dict):
        raise UserError(f"{where}: expected a function object {{name, description, parameters}}")
    name = _require(where, function, "name", str, "the function's name")
    where = f"{where} (`{name}`)"
    if not name:
        raise UserError(f"{where}: `name` is empty")
    if not isinstance(function.get("description", ""), str):
        raise UserError(f"{where}: `description` must be a string")
    params = _require(where, function, "parameters", dict, "an object {type, properties, required}")
    props = params.get("properties", {})
    if not isinstance(props, dict) or not all(isinstance(p, dict) for p in props.values()):
        raise UserError(f"{where}: parameters.properties must map each parameter name to its definition")
    required = params.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise UserError(f"{where}: parameters.required must be a list of parameter names")


def read_answers(path: Path, questions: list[Question]) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """id -> the expected calls ``(function name, {param: accepted values})``, checked against the questions."""
    by_id = {q.id: q for q in questions}
    seen: dict[str, str] = {}
    answers: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for where, entry in read_entries(path, "possible-answer"):
        if "question" in entry and "ground_truth" not in entry:
            raise UserError(f"{where}: this is a question entry (it has `question`); the possible-answer file comes "
                            "second")
        id_ = _require(where, entry, "id", str, "a string such as `multiple_0`")
        where = f"{where}: {id_}"
        if id_ in seen:
            raise UserError(f"{where}: a second possible answer for `{id_}` (the first is at {seen[id_]})")
        seen[id_] = where
        question = by_id.get(id_)
        if question is None:
            raise UserError(f"{where}: no question has this id in the question file{did_you_mean(id_, by_id)}")
        truth = _require(where, entry, "ground_truth", list, "a list of calls {function: {parameter: [values]}}")
        calls = []
        names = {f["name"] for f in question.functions}
        for k, call in enumerate(truth):
            at = f"{where}: ground_truth[{k}]"
            if not isinstance(call, dict) or len(call) != 1:
                raise UserError(f"{at}: expected one call {{function: {{parameter: [accepted values]}}}}")
            ((name, params),) = call.items()
            if name not in names:
                raise UserError(f"{at}: the question defines no function `{name}`{did_you_mean(name, names)}")
            if not isinstance(params, dict):
                raise UserError(f"{at}: `{name}` must map each parameter to a list of accepted values")
            for param, accepted in params.items():
                if not isinstance(accepted, list) or not accepted:
                    raise UserError(f"{at}: `{name}.{param}`: expected a non-empty list of accepted values, got "
                                    f"{json.dumps(accepted)}")
            calls.append((name, params))
        kind = CATEGORIES[question.category]
        if kind == "one" and len(calls) != 1:
            raise UserError(f"{where}: a {question.category} question expects one call; ground_truth has {len(calls)}")
        if kind == "several" and not calls:
            raise UserError(f"{where}: ground_truth is empty; a {question.category} question expects calls")
        if kind == "none" and calls:
            raise UserError(f"{where}: an irrelevance question expects no call, but ground_truth has {len(calls)}")
        answers[id_] = calls
    missing = [q.id for q in questions if CATEGORIES[q.category] != "none" and q.id not in answers]
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise UserError(f"{path}: no possible answer for {shown}")
    return answers
