"""The BFCL importer (``python -m pytest_mcpeval import bfcl``) and its fidelity to BFCL's own checker.

* examples/bfcl, made from BFCL's 200 ``multiple`` questions, runs as a user runs it with a scripted stand-in
  that answers every question with its ground truth: 200/200 pass, and the model is shown exactly BFCL's
  function names (dots as underscores) and no other tool.
* Perturbed answers (wrong values, missing and extra arguments, int for float, float for int, empty strings,
  string, list and dict variants, wrong or missing calls) are scored by the imported files through the
  plugin's own scoring and by :func:`bfcl_verdict`, a re-implementation of BFCL's AST checker written from its
  source; the verdicts must agree on at least 99% of them, and every disagreement must be a documented one
  (docs/format.md#comparison-with-bfcl).
* The categories with no data here (simple, parallel, parallel_multiple, irrelevance) come from small files in
  BFCL's format written below; the command line's help and errors are checked as a user sees them.
"""

from __future__ import annotations

import copy
import json
import random
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import run

from pytest_mcpeval.__main__ import main
from pytest_mcpeval.benchmark.loader import Benchmark, load
from pytest_mcpeval.benchmark.matchers import MatcherError, compile_value
from pytest_mcpeval.catalog import Catalog, catalog_from_json
from pytest_mcpeval.importers import bfcl
from pytest_mcpeval.run.case import CaseRef
from pytest_mcpeval.scoring.case import parse_call, score_case
from pytest_mcpeval.testing import ScriptedModelServer

ROOT = Path(__file__).parent.parent
EXAMPLE = ROOT / "examples" / "bfcl"
SOURCE = EXAMPLE / "source"  # BFCL's files, copied unchanged
QUESTIONS, ANSWERS = SOURCE / "BFCL_v4_multiple.json", SOURCE / "possible_answer" / "BFCL_v4_multiple.json"
Call = dict[str, dict[str, Any]]  # BFCL's form of one call: {function name: {parameter: value}}


# -- BFCL's AST checker, re-implemented ------------------------------------------------------------------
# Written from berkeley-function-call-leaderboard/bfcl_eval/eval_checker/ast_eval/ast_checker.py in
# ShishirPatil/gorilla (commit a6da28eeae63c47551517f6c4cd6381292adf6ee), Python categories only.  Each function
# names the one of BFCL it follows; the behaviour kept on purpose, quirks included, is noted where it matters.

CHECKER_TYPES = {"string": str, "integer": int, "float": float, "boolean": bool, "array": list, "tuple": list,
                 "dict": dict, "any": str}  # PYTHON_TYPE_MAPPING


def standardize(text: str) -> str:
    """standardize_string: drop spaces and ``,./-_*^``, lower-case, ``'`` -> ``"``."""
    return re.sub(r"[ ,./\-_*^]", "", text).lower().replace("'", '"')


def answer_type(accepted: list[Any]) -> type | None:
    """get_possible_answer_type: the type of the first accepted value that is not ``""``."""
    return next((type(a) for a in accepted if a != ""), None)


def type_ok(value: Any, accepted: list[Any], expected: type, nested: type | None) -> tuple[bool, bool]:
    """type_checker -> (valid, is_variable).  Nested lists are checked one level deep, against each accepted
    list in turn; an accepted value that is not a list (``""``) passes the nested check outright."""
    first = answer_type(accepted)
    variable = first is not None and first is not expected
    if type(value) is expected:
        if nested is None:
            return True, variable
        for item in accepted:
            if type(item) is not list or all(type_ok(v, item, nested, None)[0] for v in value):
                return True, variable
        return False, variable  # type_error:nested, whatever the fall-through below finds
    if first is not None and type(value) is first:
        return True, True
    return False, False


def string_ok(value: str, accepted: list[Any]) -> bool:
    """string_checker: the normalised value among the normalised accepted strings."""
    return standardize(value) in [standardize(a) for a in accepted if type(a) is str]


def list_ok(value: list[Any], accepted: list[Any]) -> bool:
    """list_checker: strings normalised one level deep on both sides, then ``in`` (``==``) on the lists.  An
    accepted ``""`` is iterated like any other entry, so it stands for ``[]``."""
    norm = [standardize(v) if type(v) is str else v for v in value]
    return norm in [[standardize(x) if type(x) is str else x for x in a] for a in accepted]


def dict_ok(value: dict[str, Any], accepted: list[Any]) -> bool:
    """dict_checker: for some accepted dict (``""`` skipped), every key of the value is in it with an accepted
    value (strings normalised, else ``==``), and every key it lacks has ``""`` among its values."""
    for answer in accepted:
        if answer == "":
            continue
        good = True
        for key, item in value.items():
            if key not in answer:
                good = False
                break
            norm = standardize(item) if type(item) is str else item
            if norm not in [standardize(a) if type(a) is str else a for a in answer[key]]:
                good = False
                break
        if good and all(key in value or "" in values for key, values in answer.items()):
            return True
    return False


def list_dict_ok(value: list[Any], accepted: list[Any]) -> bool:
    """list_dict_checker: some accepted list of the same length (``""`` has length 0) whose dicts accept the
    value's, position by position."""
    return any(len(value) == len(answer) and all(dict_ok(v, [a]) for v, a in zip(value, answer, strict=False))
               for answer in accepted)


def function_ok(description: dict[str, Any], call: Call, answer: dict[str, dict[str, list[Any]]]) -> bool:
    """simple_function_checker (Python): the name (dots as underscores, BFCL's convert_func_name for OpenAI-style
    models), every required parameter, no parameter outside the schema or the answer, the type (an int is made a
    float for a float parameter first), the value by type, and every answered parameter without ``""`` given."""
    ((_, accepted_params),) = answer.items()
    shown = description["name"].replace(".", "_")
    if shown not in call:
        return False
    params = call[shown]
    properties = description["parameters"]["properties"]
    if any(r not in params for r in description["parameters"]["required"]):
        return False
    for param, raw in params.items():
        if param not in properties or param not in accepted_params:
            return False
        accepted, declared = accepted_params[param], properties[param]["type"]
        expected = CHECKER_TYPES[declared]
        nested = CHECKER_TYPES[properties[param]["items"]["type"]] if declared in ("array", "tuple") else None
        value = list(raw) if declared == "tuple" and type(raw) is tuple else raw
        value = float(value) if declared == "float" and type(value) is int else value
        valid, variable = type_ok(value, accepted, expected, nested)
        if not valid:
            return False
        if not variable:
            if expected is dict:
                if not dict_ok(value, accepted):
                    return False
                continue
            if expected is list and nested is dict:
                if not list_dict_ok(value, accepted):
                    return False
                continue
            if expected is str:
                if not string_ok(value, accepted):
                    return False
                continue
            if expected is list:
                if not list_ok(value, accepted):
                    return False
                continue
        if value not in accepted:
            return False
    return all(p in params or "" in accepted for p, accepted in accepted_params.items())


def bfcl_verdict(category: str, functions: list[dict[str, Any]], calls: list[Call],
                 answers: list[dict[str, Any]]) -> bool:
    """eval_runner.py: the function-calling handler's decode_ast parses every call's arguments as JSON (a call
    given here as a string is that raw text); if any fails, the output is no function call: an irrelevance entry
    passes with no function call (_evaluate_single_relevance_entry), any other fails (decoder error).  Then
    ast_checker by category."""
    try:
        calls = [{name: json.loads(args) if isinstance(args, str) else args for name, args in call.items()}
                 for call in calls]
    except json.JSONDecodeError:
        return category == "irrelevance"
    if category == "irrelevance":
        return not calls
    if len(calls) != len(answers):  # every checker's wrong_count
        return False
    if "parallel" in category:  # parallel_function_checker_no_order: greedy, first unused output that passes
        used: list[int] = []
        for answer in answers:
            description = next(f for f in functions if f["name"] == next(iter(answer)))
            index = next((i for i, c in enumerate(calls) if i not in used and function_ok(description, c, answer)),
                         None)
            if index is None:
                return False
            used.append(index)
        return True
    if "multiple" in category:  # multiple_function_checker
        return function_ok(next(f for f in functions if f["name"] == next(iter(answers[0]))), calls[0], answers[0])
    return function_ok(functions[0], calls[0], answers[0])  # simple: the first (only) function


# -- the scripted answers and their perturbations --------------------------------------------------------


def first_accepted(accepted: list[Any]) -> Any:
    """The first accepted value, dicts (and lists of dicts) with the first value of each key; ``None`` when only
    ``""`` (absence) is accepted."""
    value = next((a for a in accepted if a != ""), None)
    if isinstance(value, dict):
        return {k: v for k, vs in value.items() if (v := first_accepted(vs)) is not None}
    if isinstance(value, list) and value and all(isinstance(d, dict) for d in value):
        return [first_accepted([d]) for d in value]
    return value


def truth(answers: list[dict[str, Any]]) -> list[Call]:
    """The ground truth as a model would answer it: each call with the first accepted value of each parameter."""
    out = []
    for answer in answers:
        ((name, params),) = answer.items()
        out.append({name.replace(".", "_"): {p: v for p, a in params.items() if (v := first_accepted(a)) is not None}})
    return out


def mutate(value: Any) -> Any:
    """A different value of the same type."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 3
    if isinstance(value, str):
        return value + " extra"
    if isinstance(value, list):
        return [*value, value[-1]] if value else ["extra"]
    if isinstance(value, dict):
        key = next(iter(value), None)
        return {**value, key: mutate(value[key])} if key is not None else {"extra": 1}
    return "extra"


def typed_value(schema: dict[str, Any]) -> Any:
    """A plausible value for a parameter the answer does not name."""
    if "enum" in schema:
        return schema["enum"][0]
    return {"integer": 2, "float": 2.5, "boolean": True, "array": ["a"], "tuple": ["a"], "dict": {"a": "b"}}.get(
        schema.get("type", "string"), "something")


def string_variants(text: str) -> list[tuple[str, str]]:
    variants = [("string_upper", text.upper()), ("string_punct", text.replace(" ", "-") + "."),
                ("string_spaced", " ".join(text)), ("string_other", "zz" + text[1:])]
    if "'" in text or '"' in text:
        variants.append(("string_quotes", text.replace('"', "'").replace("'", '"')))
    return variants


def perturbations(functions: list[dict[str, Any]], answers: list[dict[str, Any]],
                  rng: random.Random) -> list[tuple[str, list[Call]]]:
    """(kind, model output) pairs: the ground truth and its variants, each changing one thing."""
    base = truth(answers)
    out: list[tuple[str, list[Call]]] = [("truth", base), ("no_call", []), ("duplicate_call", [*base, base[0]])] \
        if base else [("no_call", [])]
    out.append(("malformed_call", [{functions[0]["name"].replace(".", "_"): '{"cut off": '}]))
    by_name = {f["name"]: f for f in functions}
    if not base:  # irrelevance: any call is wrong
        f = functions[0]
        return [*out, ("any_call", [{f["name"].replace(".", "_"): {
            p: typed_value(s) for p, s in f["parameters"]["properties"].items()}}])]
    if len(base) > 1:
        out += [("reversed_calls", base[::-1]), ("drop_call", base[1:]), ("same_call_twice", [base[0]] * len(base))]

    def with_call(k: int, args: dict[str, Any]) -> list[Call]:
        ((shown, _),) = base[k].items()
        return [*base[:k], {shown: args}, *base[k + 1:]]

    for k, answer in enumerate(answers):
        ((name, accepted_params),) = answer.items()
        function = by_name[name]
        properties, required = function["parameters"]["properties"], function["parameters"]["required"]
        ((_, args),) = base[k].items()
        others = [f for f in functions if f["name"] != name]
        if others:
            out.append(("wrong_function", [*base[:k], {others[0]["name"].replace(".", "_"): args}, *base[k + 1:]]))
        for param in properties:
            if param not in accepted_params:
                out.append(("extra_schema_param", with_call(k, {**args, param: typed_value(properties[param])})))
        out.append(("extra_unknown_param", with_call(k, {**args, "zz_not_a_parameter": 1})))
        for param, accepted in accepted_params.items():
            declared = properties[param]["type"]
            rest = {p: v for p, v in args.items() if p != param}
            values = [a for a in accepted if a != ""]
            if param in args:
                value = args[param]
                out.append(("wrong_value", with_call(k, {**rest, param: mutate(value)})))
                out.append(("missing_required" if param in required else "missing_answered",
                            with_call(k, rest)))
                if isinstance(value, str):
                    out += [(kind, with_call(k, {**rest, param: v})) for kind, v in string_variants(value)]
                    out.append(("number_for_string", with_call(k, {**rest, param: 7})))
                if declared == "float" and isinstance(value, float):
                    out.append(("int_for_float", with_call(k, {**rest, param: int(value)})))
                    out.append(("string_for_float", with_call(k, {**rest, param: str(value)})))
                if declared == "integer" and isinstance(value, int) and not isinstance(value, bool):
                    out.append(("float_for_int", with_call(k, {**rest, param: float(value)})))
                    out.append(("bool_for_int", with_call(k, {**rest, param: bool(value)})))
                    out.append(("string_for_int", with_call(k, {**rest, param: str(value)})))
                if isinstance(value, bool):
                    out.append(("int_for_bool", with_call(k, {**rest, param: int(value)})))
                if isinstance(value, list):
                    out += list_variants(k, rest, param, value, with_call)
                if isinstance(value, dict):
                    out += dict_variants(k, rest, param, value, with_call)
                if isinstance(value, list | dict) and json.dumps(flipped := bools_for_bits(value)) != json.dumps(value):
                    out.append(("nested_bool_for_int", with_call(k, {**rest, param: flipped})))
            for extra in values[1:3]:  # other accepted values, and in parallel calls in the other order too
                changed = with_call(k, {**rest, param: first_accepted([extra])})
                out.append(("other_accepted", changed))
                if len(changed) > 1:
                    out.append(("other_accepted_reversed", changed[::-1]))
            if "" in accepted:
                out.append(("explicit_empty", with_call(k, {**rest, param: ""})))
                out.append(("omit_optional", with_call(k, rest)))
                if declared in ("array", "tuple"):
                    out.append(("explicit_empty_list", with_call(k, {**rest, param: []})))
            elif declared in ("string", "any"):
                out.append(("empty_string", with_call(k, {**rest, param: ""})))
                out.append(("punctuation_only", with_call(k, {**rest, param: "-"})))
    rng.shuffle(out)
    return out


def bools_for_bits(value: Any) -> Any:
    """``value`` with every 0 and 1 inside it (in lists and dicts) written as false and true."""
    if isinstance(value, list):
        return [bools_for_bits(v) for v in value]
    if isinstance(value, dict):
        return {k: bools_for_bits(v) for k, v in value.items()}
    return bool(value) if type(value) is int and value in (0, 1) else value


def list_variants(k: int, rest: dict[str, Any], param: str, value: list[Any], with_call: Any) -> list[Any]:
    out = [("list_empty", with_call(k, {**rest, param: []})),
           ("list_scalar", with_call(k, {**rest, param: value[0] if value else "x"}))]
    if len(value) > 1:
        out += [("list_reversed", with_call(k, {**rest, param: value[::-1]})),
                ("list_shorter", with_call(k, {**rest, param: value[:-1]}))]
    if value and all(isinstance(v, str) for v in value):
        out.append(("list_strings_upper", with_call(k, {**rest, param: [v.upper() for v in value]})))
    if value and all(isinstance(v, float) for v in value):
        out.append(("list_int_for_float", with_call(k, {**rest, param: [int(v) for v in value]})))
    if value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        out.append(("list_float_for_int", with_call(k, {**rest, param: [float(v) for v in value]})))
    if value and all(isinstance(v, dict) for v in value):
        out.append(("list_dict_changed", with_call(k, {**rest, param: [mutate(value[0]), *value[1:]]})))
        out.append(("list_dict_extra_key", with_call(k, {**rest, param: [{**value[0], "zz": 1}, *value[1:]]})))
    return out


def dict_variants(k: int, rest: dict[str, Any], param: str, value: dict[str, Any], with_call: Any) -> list[Any]:
    out = [("dict_extra_key", with_call(k, {**rest, param: {**value, "zz": 1}})),
           ("dict_empty", with_call(k, {**rest, param: {}}))]
    for key, item in value.items():
        out.append(("dict_missing_key", with_call(k, {**rest, param: {kk: v for kk, v in value.items() if kk != key}})))
        out.append(("dict_changed_value", with_call(k, {**rest, param: {**value, key: mutate(item)}})))
        if isinstance(item, str):
            out.append(("dict_value_upper", with_call(k, {**rest, param: {**value, key: item.upper()}})))
            out.append(("dict_value_empty", with_call(k, {**rest, param: {**value, key: ""}})))
        if isinstance(item, int) and not isinstance(item, bool):
            out.append(("dict_float_for_int", with_call(k, {**rest, param: {**value, key: float(item)}})))
    return out


# -- the imported side -----------------------------------------------------------------------------------


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


class Imported:
    """An imported benchmark file with its tools: scores a BFCL-form model output the way the plugin does."""

    def __init__(self, directory: Path) -> None:
        (path,) = directory.glob("*.mcpeval.yaml")
        self.bench: Benchmark = load(path)
        self.full = catalog_from_json(json.loads((directory / self.bench.spec.server.tools_file).read_text()))
        self.cases = {case.id: case for case in self.bench.spec.cases}
        self._shown: dict[str, tuple[Catalog, dict[str, str]]] = {}

    def shown(self, case_id: str) -> tuple[Catalog, dict[str, str]]:
        """The catalog the case shows and, per MCP name of the question's functions, the name a model sees."""
        if case_id not in self._shown:
            case = self.cases[case_id]
            catalog = self.full.subset(case.tools or self.full.names)
            api = {mcp: name for name, mcp in catalog.from_openai_name.items()}
            self._shown[case_id] = catalog, {mcp: api[mcp] for mcp in case.tools or ()}
        return self._shown[case_id]

    def passes(self, case_id: str, functions: list[dict[str, Any]], calls: list[Call]) -> bool:
        case = self.cases[case_id]
        catalog, api = self.shown(case_id)
        # the model answers in the names it is shown: BFCL's name with dots as underscores maps to ours
        to_shown = {f["name"].replace(".", "_"): api[mcp] for f, mcp in zip(functions, case.tools or (), strict=True)}
        made = [parse_call(to_shown.get(name, name), args if isinstance(args, str) else json.dumps(args), catalog)
                for call in calls for name, args in call.items()]
        return bool(score_case(CaseRef(self.bench, case, None).expectations(), made, catalog)["passed"])


def agreement(imported: Imported, questions: list[dict[str, Any]], answers: dict[str, list[dict[str, Any]]],
              seed: int) -> tuple[Counter[str], list[tuple[str, str, list[Call], bool]]]:
    """Per kind of perturbation, how many were scored; and every (id, kind, output, BFCL's verdict) where the
    imported file's verdict differs."""
    rng = random.Random(seed)
    counts: Counter[str] = Counter()
    disagreements = []
    for question in questions:
        category = bfcl.category_of(question["id"], "")
        expected = answers.get(question["id"], [])
        for kind, calls in perturbations(question["function"], expected, rng):
            counts[kind] += 1
            ours = imported.passes(question["id"], question["function"], calls)
            theirs = bfcl_verdict(category, question["function"], copy.deepcopy(calls), expected)
            if ours != theirs:
                disagreements.append((question["id"], kind, calls, theirs))
    return counts, disagreements


# -- small files in BFCL's format for the categories without data here ---------------------------------


def function(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"name": name, "description": description,
            "parameters": {"type": "dict", "properties": properties, "required": required}}


GCD = function("math.gcd", "Greatest common divisor of two integers.",
               {"a": {"type": "integer", "description": "First."}, "b": {"type": "integer", "description": "Second."}},
               ["a", "b"])
CONVERT = function("currency.convert", "Convert an amount between currencies.",
                   {"amount": {"type": "float", "description": "Amount."},
                    "from": {"type": "string", "description": "From currency code."},
                    "to": {"type": "string", "description": "To currency code."}}, ["amount", "from", "to"])
DISTANCE = function(
    "geo.route", "Plan a route between two points.",
    {"origin": {"type": "tuple", "items": {"type": "float"}, "description": "Latitude and longitude."},
     "destination": {"type": "array", "items": {"type": "float"}, "description": "Latitude and longitude."},
     "unit": {"type": "string", "enum": ["km", "mi"], "description": "Distance unit.", "default": "km"},
     "options": {"type": "dict", "description": "Routing options.",
                 "properties": {"avoid": {"type": "string", "description": "What to avoid."},
                                "fast": {"type": "boolean", "description": "Fastest route."}}},
     "label": {"type": "any", "description": "A label for the route."},
     "waypoints": {"type": "array", "items": {"type": "integer"}, "description": "Stop ids.", "optional": True}},
    ["origin", "destination"])
ORDER = function("orders.place", "Place an order of several items.",
                 {"items": {"type": "array", "description": "The order lines.",
                            "items": {"type": "dict", "properties": {"item": {"type": "string"},
                                                                     "qty": {"type": "integer"}}}}}, ["items"])
PLAY = function("music.play", "Play songs.",
                {"songs": {"type": "array", "items": {"type": "string"}, "description": "Titles."},
                 "shuffle": {"type": "boolean", "description": "Shuffle.", "default": False},
                 "volume": {"type": "float", "description": "Volume 0-1."}}, ["songs"])
WEATHER = function("weather.get", "Current weather in a city.",
                   {"city": {"type": "string", "description": "City name."},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Unit."}}, ["city"])
SEAT = function("seat_book", "Book one seat in a row.", {"row": {"type": "integer", "description": "Row."}}, ["row"])
GCD_OTHER = {**GCD, "description": "Compute the GCD of two whole numbers."}  # a second definition of math.gcd
LOOKUP = function("lookup", "Look up a word.", {"q": {"type": "string", "description": "Query."}}, ["q"])


def question(id_: str, text: str, *functions: dict[str, Any]) -> dict[str, Any]:
    return {"id": id_, "question": [[{"role": "user", "content": text}]], "function": list(functions)}


HANDWRITTEN: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]] | None]] = {
    "simple": ([
        question("simple_python_0", "Route from (1, 2) to (3.5, -4.25) in km avoiding tolls, quickly.", DISTANCE),
        question("simple_python_1", "Order 2 apples and 1 pear.", ORDER),
        question("simple_python_2", "Play Hey Jude and Let It Be at half volume.", PLAY),
        question("simple_python_3", "What is the GCD of 12 and 18?", GCD),
    ], [
        {"id": "simple_python_0", "ground_truth": [{"geo.route": {
            "origin": [[1.0, 2.0]], "destination": [[3.5, -4.25]], "unit": ["km", ""],
            "options": [{"avoid": ["tolls", ""], "fast": [True]}, ""], "label": ["", "my trip"],
            "waypoints": ["", [4, 5]]}}]},
        {"id": "simple_python_1", "ground_truth": [{"orders.place": {
            "items": [[{"item": ["apple", "apples"], "qty": [2]}, {"item": ["pear"], "qty": [1]}]]}}]},
        {"id": "simple_python_2", "ground_truth": [{"music.play": {
            "songs": [["Hey Jude", "Let It Be"], ["Let It Be", "Hey Jude"]], "volume": [0.5]}}]},
        {"id": "simple_python_3", "ground_truth": [{"math.gcd": {"a": [12], "b": [18]}}]},
    ]),
    "parallel": ([
        question("parallel_0", "Weather in Paris and in Berlin, in celsius?", WEATHER),
        question("parallel_1", "Book two seats: one in row 1 or 2, and one in row 1.", SEAT),
    ], [
        {"id": "parallel_0", "ground_truth": [
            {"weather.get": {"city": ["Paris", "Paris, France"], "unit": ["celsius", ""]}},
            {"weather.get": {"city": ["Berlin"], "unit": ["celsius", ""]}}]},
        {"id": "parallel_1", "ground_truth": [{"seat_book": {"row": [1, 2]}}, {"seat_book": {"row": [1]}}]},
    ]),
    "parallel_multiple": ([
        question("parallel_multiple_0", "Convert 100 USD to EUR and give the GCD of 12 and 18.", CONVERT, GCD),
        question("parallel_multiple_1", "GCD of 8 and 20, and look up 'ephemeral'.", GCD_OTHER, LOOKUP),
        question("parallel_multiple_2", "Look up 'lovelace' and give the GCD of 9 and 6.", LOOKUP, GCD),
    ], [
        {"id": "parallel_multiple_0", "ground_truth": [
            {"currency.convert": {"amount": [100.0], "from": ["USD"], "to": ["EUR"]}},
            {"math.gcd": {"a": [12], "b": [18]}}]},
        {"id": "parallel_multiple_1", "ground_truth": [
            {"math.gcd": {"a": [8], "b": [20]}}, {"lookup": {"q": ["ephemeral"]}}]},
        {"id": "parallel_multiple_2", "ground_truth": [
            {"lookup": {"q": ["lovelace"]}}, {"math.gcd": {"a": [9], "b": [6]}}]},
    ]),
    "irrelevance": ([
        question("irrelevance_0", "Tell me a joke about cats.", GCD, WEATHER),
        question("irrelevance_1", "What is the meaning of life?", CONVERT),
    ], None),
}

# Where the imported files and BFCL disagree, on purpose and documented in docs/format.md#comparison-with-bfcl:
# (id, kind of perturbation) -> why
KNOWN_DIFFERENCES = {
    # BFCL matches parallel calls greedily (each expected call takes the first output that fits): the output
    # [row 1, row 2] gives row 1 to "row 1 or 2", and "row 1" finds only row 2 left.  Here a one-to-one matching is
    # found whenever one exists.
    ("parallel_1", "other_accepted_reversed"): "greedy parallel matching",
    # BFCL's nested type check rejects an int inside a float array ([1, 2] for [1.0, 2.0]); here [1, 2] equals it.
    ("simple_python_0", "list_int_for_float"): "int inside a float array",
    # BFCL cannot decode a call whose arguments are not JSON and takes the output for "no function call", which is
    # right for irrelevance; here a malformed call is still a call.
    ("irrelevance_0", "malformed_call"): "malformed call on irrelevance",
    ("irrelevance_1", "malformed_call"): "malformed call on irrelevance",
    # Inside dicts BFCL compares with Python's == and checks no type, so `qty: true` equals `qty: 1`; here a boolean
    # is never a number.
    ("simple_python_1", "nested_bool_for_int"): "boolean for 0 or 1 inside a dict",
}


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def import_handwritten(base: Path, name: str) -> Path:
    """``python -m pytest_mcpeval import bfcl`` on the small file of one category; the output directory."""
    questions, answers = HANDWRITTEN[name]
    args = [str(write_jsonl(base / f"BFCL_v4_{name}.json", questions))]
    if answers is not None:
        args.append(str(write_jsonl(base / f"answers_{name}.json", answers)))
    out = base / name
    assert main(["import", "bfcl", *args, "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def handwritten(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("bfcl")
    return {name: import_handwritten(base, name) for name in HANDWRITTEN}


# -- tests -----------------------------------------------------------------------------------------------


def test_the_committed_example_is_what_the_importer_makes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/bfcl is the importer's output for BFCL's files in examples/bfcl/source, byte for byte."""
    source = (EXAMPLE / "ATTRIBUTION.md").read_text().split("Where the input files come from: ")[1].split("\n")[0]
    monkeypatch.chdir(ROOT)
    assert main(["import", "bfcl", str(QUESTIONS.relative_to(ROOT)), str(ANSWERS.relative_to(ROOT)),
                 "--out", str(tmp_path), "--source", source]) == 0
    for name in ("BFCL_v4_multiple.mcpeval.yaml", "BFCL_v4_multiple.tools.json", "ATTRIBUTION.md"):
        assert (tmp_path / name).read_text() == (EXAMPLE / name).read_text(), name


def test_ground_truth_passes_200_of_200_end_to_end(pytester: pytest.Pytester, model_server: ScriptedModelServer,
                                                  handwritten: dict[str, Path]) -> None:
    """examples/bfcl and the small files of the other categories, run by pytest with a stand-in that answers
    each question with its ground truth in the names the model is shown: everything passes, every request shows
    exactly the question's functions under BFCL's names (dots as underscores), and the calls map back."""
    shutil.copytree(EXAMPLE, pytester.path / "bfcl")
    for name, directory in handwritten.items():
        shutil.copytree(directory, pytester.path / name)
    questions = read_jsonl(QUESTIONS)
    answers = {a["id"]: a["ground_truth"] for a in read_jsonl(ANSWERS)}
    for rows, truths in HANDWRITTEN.values():
        questions += rows
        answers.update({a["id"]: a["ground_truth"] for a in truths or []})
    shown: Counter[tuple[str, frozenset[str]]] = Counter()  # (question text, the names BFCL shows), 4 texts twice
    for q in questions:
        text = q["question"][0][-1]["content"]
        shown[text, frozenset(f["name"].replace(".", "_") for f in q["function"])] += 1
        calls = [{"name": name, "arguments": args} for call in truth(answers.get(q["id"], []))
                 for name, args in call.items()]
        model_server.script(text, {"tool_calls": calls} if calls else {"content": "None of these functions apply."})
    params = json.dumps({"api_base": model_server.api_base, "api_key": "none", "num_retries": 0})
    (pytester.path / "pytest.ini").write_text(
        f"[pytest]\nmcp_model_aliases = stand-in = openai/stand-in\nmcp_model_params = stand-in = {params}\n")
    result = run(pytester, "--mcp-models=stand-in", "--mcp-record=off", "--mcp-report=report.json", "-q")
    cases = json.loads((pytester.path / "report.json").read_text())["cases"]  # (schema checks: test_e2e.py)
    assert len(cases) == 200 + sum(len(q) for q, _ in HANDWRITTEN.values())
    assert [c["id"] for c in cases if not c["passed"]] == []
    assert sum(c["id"].startswith("multiple_") and c["passed"] for c in cases) == 200
    assert result.ret == 0
    sent = Counter((r["messages"][-1]["content"], frozenset(t["function"]["name"] for t in r["tools"]))
                   for r in model_server.requests)
    assert sent == shown
    assert all(t["function"]["description"].endswith(bfcl.PYTHON_HINT) for r in model_server.requests
               for t in r["tools"])
    # the two definitions of math.gcd: the second is published as `math:gcd`, and both are shown as `math_gcd`
    calls = {c["id"]: [call["tool"] for call in c["called"]] for c in cases}
    assert calls["parallel_multiple_0"] == ["currency.convert", "math.gcd"]
    assert calls["parallel_multiple_1"] == ["math:gcd", "lookup"]


def test_verdicts_agree_with_bfcl_on_perturbed_answers(handwritten: dict[str, Path]) -> None:
    """Each perturbed answer is scored by the imported files (the plugin's scoring) and by BFCL's checker
    (re-implemented above); they agree on >= 99%, and the disagreements are exactly the documented ones."""
    answers = {a["id"]: a["ground_truth"] for a in read_jsonl(ANSWERS)}
    total, found = agreement(Imported(EXAMPLE), read_jsonl(QUESTIONS), answers, seed=14)
    assert (sum(total.values()), found) == (5344, [])  # BFCL's own data: every verdict agrees
    for name, (questions, truths) in HANDWRITTEN.items():
        answers = {a["id"]: a["ground_truth"] for a in truths or []}
        counts, more = agreement(Imported(handwritten[name]), questions, answers, seed=14)
        total += counts
        found += more
    scored = sum(total.values())
    differing = {(id_, kind): theirs for id_, kind, _, theirs in found}
    print(f"\n{scored} perturbed answers, {len(found)} disagreements "
          f"({100 * (1 - len(found) / scored):.2f}% agreement): {sorted(differing)}")
    print(dict(sorted(total.items())))
    assert set(differing) == set(KNOWN_DIFFERENCES)
    assert len(found) / scored <= 0.01
    assert all(kind in total for kind in ("wrong_value", "missing_required", "extra_schema_param", "int_for_float",
                                          "float_for_int", "explicit_empty", "empty_string", "string_punct",
                                          "list_reversed", "dict_missing_key", "list_dict_changed", "reversed_calls",
                                          "wrong_function", "no_call", "any_call"))


def test_the_reimplementation_agrees_with_bfcl_on_its_own_examples() -> None:
    """Hand-worked verdicts of BFCL's checker (from reading it) that the re-implementation must give."""
    desc = DISTANCE
    answer = HANDWRITTEN["simple"][1][0]["ground_truth"][0]  # type: ignore[index]
    base = {"origin": [1.0, 2.0], "destination": [3.5, -4.25]}

    def ok(**args: Any) -> bool:
        return function_ok(desc, {"geo_route": {**base, **args}}, answer)

    assert ok() and ok(unit="KM") and ok(unit="") and ok(unit="-")  # "" accepted, normalised like any string
    assert not ok(unit="miles") and not ok(unit=None)
    assert ok(options={"fast": True}) and ok(options={"fast": True, "avoid": "TOLLS"})
    assert not ok(options={"avoid": "tolls"}) and not ok(options={"fast": True, "zz": 1}) and not ok(options="")
    assert ok(waypoints=[]) and ok(waypoints=[4, 5]) and ok(waypoints=[4.0, 5.0])  # optional: no nested check
    assert not ok(origin=[1, 2])  # nested type check: no int -> float inside a list
    assert function_ok(desc, {"geo_route": {**base, "origin": (1.0, 2.0)}}, answer)  # a tuple is a list
    gcd = {"math.gcd": {"a": [12], "b": [18]}}
    assert function_ok(GCD, {"math_gcd": {"a": 12, "b": 18}}, gcd)
    assert not function_ok(GCD, {"math_gcd": {"a": 12.0, "b": 18}}, gcd)  # no float for an integer
    assert not function_ok(GCD, {"math_gcd": {"a": True, "b": 18}}, gcd)
    amount = {"currency.convert": {"amount": [100.0], "from": ["USD"], "to": ["EUR"]}}
    assert function_ok(CONVERT, {"currency_convert": {"amount": 100, "from": "usd", "to": "E.U.R"}}, amount)
    seats = [{"seat_book": {"row": [1, 2]}}, {"seat_book": {"row": [1]}}]
    assert not bfcl_verdict("parallel", [SEAT], [{"seat_book": {"row": 1}}, {"seat_book": {"row": 2}}], seats)
    assert bfcl_verdict("parallel", [SEAT], [{"seat_book": {"row": 2}}, {"seat_book": {"row": 1}}], seats)


def test_what_the_importer_writes(handwritten: dict[str, Path]) -> None:
    """Types, matchers, optional parameters, categories and variants as docs/import-bfcl.md says."""
    text = (handwritten["simple"] / "BFCL_v4_simple.mcpeval.yaml").read_text()
    import yaml

    document = yaml.safe_load(text)
    assert document["server"] == {"tools_file": "BFCL_v4_simple.tools.json"}
    assert document["tags"] == ["bfcl", "simple_python"]
    route = document["cases"][0]
    assert route["tools"] == ["geo.route"]
    assert route["expect"] == [{"tool": "geo.route", "args": {
        "origin": [1.0, 2.0],
        "destination": [3.5, -4.25],
        "unit": {"any_of": [{"text": "km"}, {"text": ""}], "optional": True},
        "options": {"any_of": [{"avoid": {"any_of": [{"text": "tolls"}, {"text": ""}], "optional": True},
                                "fast": True}], "optional": True},
        "label": {"any_of": [{"text": "my trip"}, {"text": ""}], "optional": True},
        "waypoints": {"any_of": [[4, 5], []], "optional": True}}}]
    orders = document["cases"][1]["expect"][0]["args"]["items"]
    # inside a dict BFCL compares with == and checks no type: 2.0 is accepted for 2, as a plain literal does
    assert orders == [{"item": {"any_of": [{"text": "apple"}, {"text": "apples"}]}, "qty": 2},
                      {"item": {"text": "pear"}, "qty": 1}]
    assert document["cases"][3]["expect"][0]["args"] == {"a": {"equals": 12, "integer": True},
                                                         "b": {"equals": 18, "integer": True}}
    tools = json.loads((handwritten["simple"] / "BFCL_v4_simple.tools.json").read_text())
    schema = tools[0]["inputSchema"]
    assert schema["type"] == "object"
    assert schema["properties"]["origin"] == {"type": "array", "items": {"type": "number"},
                                              "description": "Latitude and longitude."}
    assert schema["properties"]["options"]["type"] == "object"
    assert schema["properties"]["label"]["type"] == "string"  # `any`, as BFCL shows it
    assert tools[0]["description"] == "Plan a route between two points." + bfcl.PYTHON_HINT
    play = json.loads((handwritten["simple"] / "BFCL_v4_simple.tools.json").read_text())[2]["inputSchema"]
    assert play["properties"]["volume"] == {"type": "number", "format": "float",
                                            "description": "Volume 0-1." + bfcl.FLOAT_HINT}
    order_items = tools[1]["inputSchema"]["properties"]["items"]["items"]
    assert order_items["type"] == "object" and order_items["properties"]["qty"]["type"] == "integer"
    # several calls in any order; none for irrelevance
    parallel = yaml.safe_load((handwritten["parallel"] / "BFCL_v4_parallel.mcpeval.yaml").read_text())
    assert [len(c["expect"]) for c in parallel["cases"]] == [2, 2]
    irrelevance = yaml.safe_load((handwritten["irrelevance"] / "BFCL_v4_irrelevance.mcpeval.yaml").read_text())
    assert [(c["tools"], c["expect"]) for c in irrelevance["cases"]] == [
        (["math.gcd", "weather.get"], []), (["currency.convert"], [])]
    # the second definition of math.gcd is a variant, shown to a model under the same name
    many = json.loads((handwritten["parallel_multiple"] / "BFCL_v4_parallel_multiple.tools.json").read_text())
    assert [t["name"] for t in many] == ["currency.convert", "math.gcd", "math:gcd", "lookup"]
    assert Catalog(many).subset(["math:gcd", "lookup"]).openai_tools[0]["function"]["name"] == "math_gcd"


def test_variant_names() -> None:
    """The k-th other definition of a name takes the k-th mark for its `.` and `_`; a name without either can only
    take a suffix, which a model sees (`lookup~2` as `lookup_2`)."""
    tools = bfcl.ToolSet()
    variants = [{**GCD, "description": str(k)} for k in range(4)] + [{**LOOKUP, "description": str(k)}
                                                                   for k in range(3)]
    names = [tools.add(f) for f in [*variants, GCD, variants[1]]]
    assert names == ["math.gcd", "math:gcd", "math/gcd", "math+gcd", "lookup", "lookup~2", "lookup~3", "math~gcd",
                     "math:gcd"]
    assert tools.merged == 1 and tools.visible_renames == ["lookup~2", "lookup~3"]
    assert {bfcl.shown_name(n) for n in names if "gcd" in n} == {"math_gcd"}


def test_the_command_reports_what_it_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    questions, answers = HANDWRITTEN["parallel_multiple"]
    args = [str(write_jsonl(tmp_path / "q.json", questions)), str(write_jsonl(tmp_path / "a.json", answers or []))]
    assert main(["import", "bfcl", *args, "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"{tmp_path / 'out' / 'q.mcpeval.yaml'}: 3 cases (3 parallel_multiple)",
        f"{tmp_path / 'out' / 'q.tools.json'}: 4 tools (2 repeated definitions merged; 1 other definition of a "
        "name published under a variant name (shown to the model as BFCL names it))",
    ]
    attribution = (tmp_path / "out" / "ATTRIBUTION.md").read_text()
    assert "Apache License, Version 2.0" in attribution and "q.json" in attribution and "a.json" in attribution


def test_help_lists_the_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["import", "--help"])
    assert exit_.value.code == 0
    help_text = capsys.readouterr().out
    assert "bfcl" in help_text and "atlas" in help_text
    with pytest.raises(SystemExit):
        main(["import", "bfcl", "--help"])
    assert "POSSIBLE_ANSWERS.json" in capsys.readouterr().out


def bad(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


GOOD_Q = json.dumps(question("simple_python_0", "GCD of 12 and 18?", GCD))
GOOD_A = json.dumps({"id": "simple_python_0", "ground_truth": [{"math.gcd": {"a": [12], "b": [18]}}]})


@pytest.mark.parametrize(("files", "message"), [
    ({"q": None}, "q.json: no such file (the questions file)"),
    ({"q": GOOD_Q + "\n{not json\n"}, "q.json:2: not valid JSON (Expecting property name enclosed in double quotes, "
                                      "column 2); BFCL files hold one JSON object per line"),
    ({"q": ""}, "q.json: the file is empty; expected one JSON object per line (the questions file)"),
    ({"q": GOOD_A}, "q.json:1: this is a possible-answer entry (it has `ground_truth`); give the question file "
                    "first, then the possible-answer file"),
    ({"q": GOOD_Q}, "q.json: simple_python questions are scored against possible answers: give the "
                    "possible-answer file after the question file"),
    ({"q": GOOD_Q.replace("simple_python_0", "live_simpel_0"), "a": GOOD_A},
     "q.json:1: live_simpel_0: category `live_simpel` is not supported (supported: simple, simple_python, "
     "multiple, parallel, parallel_multiple, irrelevance)"),
    ({"q": GOOD_Q.replace("simple_python_0", "multiple_three"), "a": GOOD_A},
     "q.json:1: multiple_three: expected an id of BFCL's form CATEGORY_NUMBER, such as `multiple_0`"),
    ({"q": GOOD_Q, "a": GOOD_A.replace("math.gcd", "math.gdc")},
     "a.json:1: simple_python_0: ground_truth[0]: the question defines no function `math.gdc`; did you mean "
     "`math.gcd`?"),
    ({"q": GOOD_Q, "a": GOOD_A.replace("simple_python_0", "simple_python_9")},
     "a.json:1: simple_python_9: no question has this id in the question file; did you mean `simple_python_0`?"),
    ({"q": GOOD_Q, "a": GOOD_A.replace("[12]", "12")},
     "a.json:1: simple_python_0: ground_truth[0]: `math.gcd.a`: expected a non-empty list of accepted values, got 12"),
    ({"q": GOOD_Q.replace('"integer"', '"integr"', 1), "a": GOOD_A},
     "q.json:1: simple_python_0: `math.gcd.a`: type `integr`: BFCL's checker has no rule for it (it knows string, "
     "integer, float, boolean, array, tuple, dict, any); did you mean `integer`?"),
    ({"q": GOOD_Q.replace('"function"', '"functions"'), "a": GOOD_A},
     "q.json:1: simple_python_0: missing `function` (a list of function definitions); did you mean `functions`?"),
    ({"q": GOOD_Q + "\n" + GOOD_Q, "a": GOOD_A}, "q.json:2: simple_python_0: duplicate id `simple_python_0` "
                                                 "(first at q.json:1)"),
    ({"q": GOOD_Q, "a": GOOD_A + "\n" + GOOD_A}, "a second possible answer for `simple_python_0`"),
])
def test_bad_input_is_one_line_and_exit_status_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 files: dict[str, str | None], message: str) -> None:
    args = [bad(tmp_path, f"{k}.json", v) if v is not None else str(tmp_path / f"{k}.json") for k, v in files.items()]
    assert main(["import", "bfcl", *args, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("python -m pytest_mcpeval import bfcl: ")
    assert message.replace("q.json", str(tmp_path / "q.json")).replace("a.json", str(tmp_path / "a.json")) in err


def test_python_m_exits_2_without_a_traceback(tmp_path: Path) -> None:
    """As a user runs it: a fresh process, one line on stderr, exit status 2."""
    done = subprocess.run([sys.executable, "-m", "pytest_mcpeval", "import", "bfcl", "missing.json", "--out", "out"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "python -m pytest_mcpeval import bfcl: missing.json: no such file (the questions file)\n"


# -- the strict integer matcher (docs/format.md#matchers) ------------------------------------------------


@pytest.mark.parametrize(("raw", "value", "ok"), [
    ({"equals": 5, "integer": True}, 5, True),
    ({"equals": 5, "integer": True}, 5.0, False),  # what a plain 5 accepts
    ({"equals": 5.0, "integer": True}, 5, True),
    ({"equals": 5, "integer": True}, True, False),
    ({"any_of": [5, 6], "integer": True}, 6, True),
    ({"any_of": [5, 6], "integer": True}, 6.0, False),
    ({"approx": 5, "tol": 1, "integer": True}, 4, True),
    ({"approx": 5, "tol": 1, "integer": True}, 4.5, False),
    ({"integer": True}, -3, True),
    ({"integer": True}, "3", False),
    ({"integer": False, "equals": 5}, 5.0, True),
    (5, 5.0, True),
])
def test_integer_matcher(raw: Any, value: Any, ok: bool) -> None:
    assert compile_value(raw).matches(value) is ok


def test_integer_matcher_optional_and_description() -> None:
    matcher = compile_value({"equals": 2, "integer": True, "optional": True})
    assert matcher.optional and matcher.describe() == {"equals": 2, "integer": True, "optional": True}
    assert compile_value({"integer": True}).describe() == {"integer": True}
    assert not compile_value({"integer": True}).optional


@pytest.mark.parametrize(("raw", "message"), [
    ({"integer": "yes"}, "`integer` must be true or false"),
    ({"text": "a", "integer": True}, "`integer: true` never matches with `text`, which matches strings only"),
    ({"regex": "1", "integer": True}, "`integer: true` never matches with `regex`"),
    ({"equals": 2.5, "integer": True}, "`integer: true` never matches: 2.5 is not a whole number"),
    ({"equals": "2", "integer": True}, "`integer: true` never matches: `equals` does not give a number"),
    ({"ignore": True, "integer": True}, "write `{integer: true}` alone for any integer"),
    ({"from_result": {"tool": "t", "path": "a"}, "integer": True}, "does not go with `integer`"),
    ({"integr": True}, "did you mean `integer`?"),
])
def test_integer_matcher_mistakes(raw: Any, message: str) -> None:
    with pytest.raises(MatcherError) as info:
        compile_value(raw, ("n",))
    assert message in info.value.message
