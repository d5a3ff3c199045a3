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

This module is the command (:func:`add_arguments`, :func:`run`), the expected calls and the files written; the
input files are read by :mod:`.bfcl_read` and the tools made by :mod:`.bfcl_tools`.  What still differs from
BFCL is listed in docs/format.md#comparison-with-bfcl.  Everything here is pure data
handling (json, re, yaml): no model client is imported.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_mcpeval.benchmark.matchers import MATCHER_KEYS, is_integer
from pytest_mcpeval.importers import UserError
from pytest_mcpeval.importers.bfcl_read import CATEGORIES, Question, category_of, read_answers, read_entries
from pytest_mcpeval.importers.bfcl_tools import FLOAT_HINT, PYTHON_HINT, VARIANT_MARKS, ToolSet, shown_name
from pytest_mcpeval.text import did_you_mean, plural

__all__ = ["CATEGORIES", "FLOAT_HINT", "PYTHON_HINT", "VARIANT_MARKS", "Question", "ToolSet", "add_arguments",
           "category_of", "convert", "read_answers", "read_entries", "run", "shown_name"]

#: ast_checker.py PYTHON_TYPE_MAPPING: the Python type BFCL's checker wants for each declared type
CHECKER_TYPES: dict[str, type] = {
    "string": str, "integer": int, "float": float, "boolean": bool, "array": list, "tuple": list, "dict": dict,
    "any": str,
}
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
