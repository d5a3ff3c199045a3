"""``python -m pytest_mcpeval import bfcl QUESTIONS.json [POSSIBLE_ANSWERS.json] --out DIR`` (docs/import-bfcl.md).

Converts the Berkeley Function Calling Leaderboard's JSON-lines files into one benchmark file, one tools file
and an ``ATTRIBUTION.md``, so that a model scored here is scored as BFCL's AST checker scores it
(``bfcl_eval/eval_checker/ast_eval/ast_checker.py``) and is shown what BFCL shows a function-calling model:

* **Tools.**  Every question's functions go into one tools file, identical definitions once.  Each function
  becomes an MCP tool as BFCL's ``convert_to_tool`` presents it to an OpenAI-style model
  (``bfcl_eval/model_handler/utils.py``): its types through ``GORILLA_TO_OPENAPI`` (``dict`` -> ``object``,
  ``float`` -> ``number`` with ``format: float`` and " This is a float type value." appended to the
  parameter's description, ``tuple`` -> ``array``, ``any`` and unknown types -> ``string``), and the Python
  hint BFCL appends to every description.  A case shows only its question's functions (``tools: [...]``).
  The catalog offers a dotted name such as ``math.gcd`` as ``math_gcd``, as BFCL does, and maps calls back.
  When two questions define *different* functions under one name, the first keeps the name and the k-th
  other definition is published with the name's ``.`` and ``_`` replaced by ``VARIANT_MARKS[k - 2]``
  (``math:gcd``): a character no provider accepts, which the catalog turns back into ``_`` -- so the model
  still sees ``math_gcd``, exactly BFCL's name, while the tools file keeps the definitions apart.
* **Expected calls.**  Each possible answer ``{function: {param: [accepted values]}}`` becomes an expected
  call whose arguments follow the checker's rules per declared type: strings compare after BFCL's
  normalisation (``text``); an ``integer`` parameter takes an integer only (``integer: true``: ``5``, not
  ``5.0``); a ``float`` parameter takes an int or a float; ``""`` among the accepted values makes the
  parameter optional (and an explicit string that normalises to ``""`` is accepted, as is ``[]`` for an
  array, as BFCL's string and list checkers do); lists compare element by element in order; dicts key by key.
* **Categories** (from the ids, ``multiple_0`` -> ``multiple``): ``simple`` (``simple_python``) and
  ``multiple`` expect one call; ``parallel`` and ``parallel_multiple`` several, in any order; ``irrelevance``
  expects no call (``expect: []``) and has no possible answers.

What still differs from BFCL is listed in docs/format.md#comparison-with-bfcl.  Everything here is pure data
handling (json, re, yaml): no model client is imported.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_mcpeval.benchmark.schema import CASE_ID_PATTERN
from pytest_mcpeval.importers import UserError
from pytest_mcpeval.scoring.matchers import MATCHER_KEYS, is_integer
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
#: bfcl_eval/constants/type_mappings.py GORILLA_TO_OPENAPI: the JSON Schema type a function-calling model is shown
TO_JSON_SCHEMA = {
    "integer": "integer", "number": "number", "float": "number", "string": "string", "boolean": "boolean",
    "bool": "boolean", "array": "array", "list": "array", "dict": "object", "object": "object", "tuple": "array",
    "any": "string", "byte": "integer", "short": "integer", "long": "integer", "double": "number",
    "char": "string", "ArrayList": "array", "Array": "array", "HashMap": "object", "Hashtable": "object",
    "Queue": "array", "Stack": "array", "Any": "string", "String": "string", "Bigint": "integer",
}
#: ast_checker.py PYTHON_TYPE_MAPPING: the Python type BFCL's checker wants for each declared type
CHECKER_TYPES: dict[str, type] = {
    "string": str, "integer": int, "float": float, "boolean": bool, "array": list, "tuple": list, "dict": dict,
    "any": str,
}
PYTHON_HINT = " Note that the provided function is in Python 3 syntax."  # bfcl_eval/utils.py, Python categories
FLOAT_HINT = " This is a float type value."  # model_handler/utils.py _cast_to_openai_type
#: the k-th different definition of a name (k >= 2) replaces the name's `.` and `_` by VARIANT_MARKS[k - 2]
VARIANT_MARKS = ":/+~!@=%|"
_INVALID = re.compile(r"[^A-Za-z0-9_-]")  # what catalog.py turns into `_` in a name shown to a provider
_ROLES = ("system", "user", "assistant")
_BFCL_ID = re.compile(r"^(.+)_\d+(-\d+-\d+)?$")  # `multiple_12`; live categories add `-3-15`
ABSENT = object()  # an answered parameter no value can satisfy: left out of `args`, so passing it fails


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("questions", type=Path, metavar="QUESTIONS.json",
                        help="BFCL question file (JSON lines: id, question, function)")
    parser.add_argument("answers", type=Path, nargs="?", metavar="POSSIBLE_ANSWERS.json",
                        help="BFCL possible-answer file (JSON lines: id, ground_truth); not needed for irrelevance")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="directory to write the benchmark file, the tools file and ATTRIBUTION.md into")
    parser.add_argument("--source", metavar="TEXT", default=None,
                        help="where the input files come from (URL, commit), recorded in ATTRIBUTION.md")


def run(args: argparse.Namespace) -> int:
    questions = [Question.parse(where, entry) for where, entry in read_entries(args.questions, "questions")]
    answered = sorted({q.category for q in questions if CATEGORIES[q.category] != "none"})
    if args.answers is None and answered:
        raise UserError(f"{args.questions}: {' and '.join(answered)} questions are scored against possible answers: "
                        "give the possible-answer file after the question file")
    answers = read_answers(args.answers, questions) if args.answers is not None else {}
    imported = convert(questions, answers)
    out: Path = args.out
    stem = args.questions.name.removesuffix(".json").removesuffix(".jsonl")
    bench_path, tools_path = out / f"{stem}.mcpeval.yaml", out / f"{stem}.tools.json"
    inputs = [p for p in (args.questions, args.answers) if p is not None]
    files = {
        tools_path: json.dumps(imported.tools, indent=2, ensure_ascii=False) + "\n",
        bench_path: imported.benchmark_yaml(tools_path.name, args),
        out / "ATTRIBUTION.md": attribution(inputs, [bench_path, tools_path], imported, args.source),
    }
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: not a directory")
    for path, text in files.items():
        try:
            out.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UserError(f"{path}: cannot write the file: {exc.strerror}") from None
    print(f"{bench_path}: {imported.summary()}")
    print(f"{tools_path}: {plural(len(imported.tools), 'tool')}{imported.tool_summary()}")
    for warning in imported.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


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
            whole = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}, column {exc.colno})") from None
        rows = [(f"{path}: entry {i}", value) for i, value in enumerate(whole)]
    else:
        rows = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append((f"{path}:{n}", json.loads(line)))
            except json.JSONDecodeError as exc:
                raise UserError(f"{path}:{n}: not valid JSON ({exc.msg}, column {exc.colno}); BFCL files hold one "
                                "JSON object per line") from None
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


# -- tools -------------------------------------------------------------------------------------------------


def json_schema(function: Mapping[str, Any]) -> dict[str, Any]:
    """The ``inputSchema`` BFCL shows a function-calling model for ``function`` (its ``convert_to_tool``)."""
    params = copy.deepcopy(dict(function["parameters"]))
    params["type"] = "object"
    params["properties"] = _cast_properties(params.get("properties", {}))
    return params


def _cast_properties(properties: dict[str, Any]) -> dict[str, Any]:
    """BFCL's ``_cast_to_openai_type``: each property's type mapped (a float gets ``format: float`` and a hint in
    its description), then nested properties and items (deeper levels the same way, where BFCL stops)."""
    for value in properties.values():
        declared = value.get("type")
        if declared is None:
            value["type"] = "string"
        else:
            if declared == "float":
                value["format"] = "float"
                value["description"] = str(value.get("description", "")) + FLOAT_HINT
            value["type"] = TO_JSON_SCHEMA.get(str(declared), "string")
        _cast_nested(value)
    return properties


def _cast_nested(value: dict[str, Any]) -> None:
    if value["type"] not in ("array", "object"):
        return
    if isinstance(value.get("properties"), dict):
        value["properties"] = _cast_properties(value["properties"])
    elif isinstance(value.get("items"), dict):
        items = value["items"]
        items["type"] = TO_JSON_SCHEMA.get(str(items.get("type")), "string")
        _cast_nested(items)


def shown_name(name: str) -> str:
    """The name an OpenAI-style model is shown (catalog.py's rule; BFCL's is ``.`` -> ``_``)."""
    return _INVALID.sub("_", name)[:64]


@dataclass
class ToolSet:
    """The union of the questions' functions as MCP tools, each distinct definition once."""

    tools: list[dict[str, Any]] = field(default_factory=list)
    by_definition: dict[str, str] = field(default_factory=dict)  # canonical JSON of a BFCL function -> MCP name
    definitions: dict[str, int] = field(default_factory=dict)  # BFCL name -> distinct definitions seen
    renamed: dict[str, str] = field(default_factory=dict)  # MCP name of a variant -> BFCL name
    merged: int = 0  # functions that repeated a definition already in the set

    def add(self, function: Mapping[str, Any]) -> str:
        """The MCP name of ``function``, adding it when its definition is new."""
        key = json.dumps(function, sort_keys=True, ensure_ascii=False)
        if key in self.by_definition:
            self.merged += 1
            return self.by_definition[key]
        name: str = function["name"]
        k = self.definitions.get(name, 0) + 1
        self.definitions[name] = k
        mcp_name = name if k == 1 else self._variant(name, k)
        if mcp_name != name:
            self.renamed[mcp_name] = name
        self.by_definition[key] = mcp_name
        self.tools.append({"name": mcp_name, "description": str(function.get("description") or "") + PYTHON_HINT,
                           "inputSchema": json_schema(function)})
        return mcp_name

    def _variant(self, name: str, k: int) -> str:
        taken = {t["name"] for t in self.tools} | set(self.definitions)
        if re.search(r"[._]", name):
            for mark in VARIANT_MARKS[k - 2:]:
                candidate = re.sub(r"[._]", mark, name)
                if candidate not in taken:
                    return candidate
        n = k
        while f"{name}~{n}" in taken:  # no separator to stand in for: the model sees `name_k`
            n += 1
        return f"{name}~{n}"

    @property
    def visible_renames(self) -> list[str]:
        """Variants whose name a model is shown differs from BFCL's."""
        return [v for v, name in self.renamed.items() if shown_name(v) != shown_name(name)]


# -- expected calls ----------------------------------------------------------------------------------------


def _is_matcher(value: Any) -> bool:
    return isinstance(value, dict) and any(k in MATCHER_KEYS for k in value)


def _has_matcher(value: Any) -> bool:
    if isinstance(value, dict):
        return _is_matcher(value) or any(_has_matcher(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_matcher(v) for v in value)
    return False


def combine(alternatives: list[Any], optional: bool, integer: bool = False) -> Any:
    """One expected value from the accepted alternatives (each a literal or a matcher; repeats dropped)."""
    alternatives = list({json.dumps(a, sort_keys=True): a for a in alternatives}.values())
    flags: dict[str, Any] = {}
    if integer:
        flags["integer"] = True
    if optional:
        flags["optional"] = True
    if len(alternatives) == 1:
        (alternative,) = alternatives
        if not flags:
            return alternative
        if _is_matcher(alternative):
            return {**alternative, **flags}
        if not _has_matcher(alternative):
            return {"equals": alternative, **flags}
    return {"any_of": alternatives, **flags}


def _text_or_literal(value: Any) -> Any:
    """A value inside a list or dict: BFCL normalises strings there (list_checker, dict_checker), compares
    anything else with ``==``."""
    return {"text": value} if isinstance(value, str) else value


@dataclass
class Converter:
    warnings: list[str] = field(default_factory=list)

    def parameter(self, where: str, declared: Any, prop: Mapping[str, Any], accepted: list[Any]) -> Any:
        """The expected value of one parameter, or :data:`ABSENT` when no value is accepted (only absence is)."""
        checker_type = CHECKER_TYPES.get(str(declared))
        if checker_type is None:
            raise UserError(f"{where}: type `{declared}`: BFCL's checker has no rule for it (it knows "
                            f"{', '.join(CHECKER_TYPES)}){did_you_mean(str(declared), CHECKER_TYPES)}")
        optional = "" in accepted
        values = [v for v in accepted if v != ""]
        first = type(values[0]) if values else None  # ast_checker.get_possible_answer_type
        if first is not None and first is not checker_type and not (checker_type is float and first is int):
            # BFCL's "variable" case: the answer is not of the declared type; it compares with == only
            self.warnings.append(f"{where}: accepted value {json.dumps(values[0])} is not of the declared type "
                                 f"`{declared}`; compared exactly")
            return combine(values + ([""] if optional and first is str else []), optional)  # `"" in accepted`
        if checker_type is str:
            texts = [{"text": v} for v in values if isinstance(v, str)]
            return combine(texts + ([{"text": ""}] if optional else []), optional)
        if checker_type is list:
            return self._array(where, prop, values, optional)
        if checker_type is dict:
            objects = [self._object(where, v) for v in values if isinstance(v, dict)]
            return combine(objects, optional) if objects else ABSENT
        if not values:  # integer, float, boolean accepted only as absent
            return ABSENT
        return combine(values, optional, integer=checker_type is int)

    def _array(self, where: str, prop: Mapping[str, Any], values: list[Any], optional: bool) -> Any:
        items = prop.get("items")
        nested = CHECKER_TYPES.get(str(items.get("type"))) if isinstance(items, dict) else None
        lists = [v for v in values if isinstance(v, list)]
        if nested is dict:  # list_dict_checker: same length, each element against its dict answer
            alternatives = [[self._object(where, d) if isinstance(d, dict) else d for d in v] for v in lists]
        else:  # list_checker, after the nested type check (skipped when "" is accepted: it passes on "")
            strict = nested is int and not optional
            alternatives = [[{"equals": e, "integer": True} if strict and is_integer(e) else _text_or_literal(e)
                             for e in v] for v in lists]
        if optional:
            alternatives.append([])  # "" becomes [] in list_checker: an explicit empty list is accepted
        return combine(alternatives, optional)

    def _object(self, where: str, answer: dict[str, Any]) -> Any:
        """dict_checker: the model's keys among the answer's, each value accepted, keys without ``""`` present."""
        out: dict[str, Any] = {}
        for key, accepted in answer.items():
            if not isinstance(accepted, list) or not accepted:
                raise UserError(f"{where}: dict key `{key}`: expected a non-empty list of accepted values, got "
                                f"{json.dumps(accepted)}")
            out[key] = combine([_text_or_literal(v) for v in accepted], "" in accepted)
        if any(key in MATCHER_KEYS for key in out):
            self.warnings.append(f"{where}: a dict answer has a key named like a matcher key "
                                 f"({', '.join(k for k in out if k in MATCHER_KEYS)}); compared exactly")
            return {"equals": {k: next((v for v in a if v != ""), "") for k, a in answer.items()}}
        return out

    def call(self, where: str, function: Mapping[str, Any], params: Mapping[str, list[Any]]) -> dict[str, Any]:
        props = function["parameters"].get("properties", {})
        args: dict[str, Any] = {}
        for name, accepted in params.items():
            prop = props.get(name)
            if prop is None:  # BFCL: unexpected when passed, missing when not optional -- never right
                self.warnings.append(f"{where}: the answer names `{name}`, which `{function['name']}` does not "
                                     "define (no call can pass it, as in BFCL)")
                if "" not in accepted:
                    args[name] = combine([v for v in accepted if v != ""], False)
                continue
            value = self.parameter(f"{where}: `{function['name']}.{name}`", prop.get("type"), prop, accepted)
            if value is not ABSENT:
                args[name] = value
        return args


# -- output ------------------------------------------------------------------------------------------------


@dataclass
class Imported:
    cases: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    toolset: ToolSet
    categories: dict[str, int]
    warnings: list[str]

    def summary(self) -> str:
        counts = ", ".join(f"{n} {c}" for c, n in self.categories.items())
        return f"{plural(len(self.cases), 'case')} ({counts})"

    def tool_summary(self) -> str:
        parts = []
        if self.toolset.merged:
            parts.append(f"{self.toolset.merged} repeated definitions merged")
        if self.toolset.renamed:
            parts.append(f"{plural(len(self.toolset.renamed), 'other definition')} of a name published under a "
                         "variant name (shown to the model as BFCL names it"
                         + (f", except {', '.join(self.toolset.visible_renames)})" if self.toolset.visible_renames
                            else ")"))
        return f" ({'; '.join(parts)})" if parts else ""

    def benchmark_yaml(self, tools_file: str, args: argparse.Namespace) -> str:
        import yaml

        mixed = len(self.categories) > 1  # one category: a file tag; several: a tag per case
        tags = ["bfcl"] if mixed else ["bfcl", *self.categories]
        document: dict[str, Any] = {"version": 1, "server": {"tools_file": tools_file}, "tags": tags}
        document["cases"] = [
            {**{k: v for k, v in case.items() if k not in ("_category", "expect")},
             **({"tags": [case["_category"]]} if mixed else {}), "expect": case["expect"]}
            for case in self.cases
        ]
        inputs = " ".join(str(p) for p in (args.questions, args.answers) if p is not None)
        header = (f"# Generated by `python -m pytest_mcpeval import bfcl {inputs}`\n"
                  "# from the Berkeley Function Calling Leaderboard (Apache-2.0, see ATTRIBUTION.md);\n"
                  "# docs/import-bfcl.md says what maps to what.\n"
                  "# Edit the source and re-run the importer rather than this file.\n")
        return header + yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=1 << 20,
                                       default_flow_style=None)


def convert(questions: list[Question], answers: Mapping[str, list[tuple[str, dict[str, Any]]]]) -> Imported:
    ids: dict[str, str] = {}
    toolset, converter = ToolSet(), Converter()
    cases: list[dict[str, Any]] = []
    categories: dict[str, int] = {}
    for q in questions:
        if q.id in ids:
            raise UserError(f"{q.where}: duplicate id `{q.id}` (first at {ids[q.id].rsplit(': ', 1)[0]})")
        ids[q.id] = q.where
        names = {f["name"]: toolset.add(f) for f in q.functions}
        functions = {f["name"]: f for f in q.functions}
        text_input: Any = q.messages[0]["content"] if len(q.messages) == 1 and q.messages[0]["role"] == "user" \
            else q.messages
        expect = [{"tool": names[name], "args": converter.call(q.where, functions[name], params)}
                  for name, params in answers.get(q.id, [])]
        case: dict[str, Any] = {"id": q.id, "input": text_input}
        if names:
            case["tools"] = list(names.values())
        case["expect"] = expect
        case["_category"] = q.category
        cases.append(case)
        categories[q.category] = categories.get(q.category, 0) + 1
    return Imported(cases, toolset.tools, toolset, categories, converter.warnings)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def attribution(inputs: list[Path], outputs: list[Path], imported: Imported, source: str | None) -> str:
    roles = ("questions", "possible answers")
    files = "\n".join(f"  - {role}: `{p}` (sha256 `{_sha256(p)}`)" for role, p in zip(roles, inputs, strict=False))
    made = " and ".join(f"`{p.name}`" for p in outputs)
    where = f"\n- Where the input files come from: {source}" if source else ""
    return f"""# Attribution

{made} were generated by `python -m pytest_mcpeval import bfcl` (pytest-mcpeval) from
data of the **Berkeley Function Calling Leaderboard (BFCL)**, part of the Gorilla project.

- Project: https://github.com/ShishirPatil/gorilla, folder `berkeley-function-call-leaderboard/bfcl_eval/data/`{where}
- Input files:
{files}
- License: **Apache License, Version 2.0** (https://www.apache.org/licenses/LICENSE-2.0), copyright the
  Gorilla / BFCL authors. If you redistribute these files, include a copy of the license with them (for
  example as `LICENSE-Apache-2.0.txt`).

## Changes made to the data

The questions, functions and possible answers were converted into pytest-mcpeval's formats
({imported.summary()}):

- each question became a case with the same id, showing the model only that question's functions;
- each function became an MCP tool in the tools file, with its types mapped to JSON Schema and its
  descriptions extended as BFCL presents functions to function-calling models; identical definitions
  appear once, and a different definition under a name already taken is published under a variant name
  ({plural(len(imported.toolset.renamed), 'variant')}) that a model is still shown as BFCL names the function;
- each possible answer became an expected call whose argument matchers follow BFCL's AST checker.

Nothing else was changed. pytest-mcpeval's `docs/import-bfcl.md` gives the mapping, and `docs/format.md`
("Comparison with BFCL") lists what still differs from BFCL's own scoring.
"""
