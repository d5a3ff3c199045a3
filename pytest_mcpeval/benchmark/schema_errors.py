"""pydantic's validation errors of a benchmark file -> :class:`~pytest_mcpeval.benchmark.problems.Problem` s that a
person can act on: the line, the field in the file's own words (union branches left out), what was expected, a
did-you-mean where a name is close; and the duplicate case ids pydantic cannot see."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from pytest_mcpeval.benchmark.problems import Loc, Problem, render_loc
from pytest_mcpeval.benchmark.schema import keys_at
from pytest_mcpeval.text import closest, did_you_mean

_UNION_TAGS = frozenset({"str", "int", "float", "bool", "list", "dict", "none"})


def _is_tag(part: Any) -> bool:
    """A pydantic union-branch or key tag (``str``, ``list[Message]``, ``[key]``), not a place in the file."""
    return isinstance(part, str) and ("[" in part or part in _UNION_TAGS)


def _clean_loc(loc: Sequence[Any]) -> Loc:
    """Drop pydantic's tags; a mapping key that failed validation (``(..., 1, "[key]")``) stays a key."""
    out: list[str | int] = []
    for part in loc:
        if part == "[key]" and out:
            out[-1] = str(out[-1])
        elif not _is_tag(part):
            out.append(part)
    return tuple(out)


def _losing_branches(errors: Sequence[Any]) -> set[int]:
    """Errors of union branches that failed at once when another branch of the same union got further.

    ``input: [{rol: user, ...}]`` fails as ``str`` (not a string) and as ``list[Message]`` (unknown
    field `rol`): only the second says something useful.
    """
    deeper: set[tuple[Any, ...]] = set()
    for error in errors:
        loc = tuple(error["loc"])
        deeper.update(loc[:k] for k, part in enumerate(loc[:-1]) if _is_tag(part))
    return {n for n, error in enumerate(errors) if error["loc"] and _is_tag(error["loc"][-1])
            and tuple(error["loc"][:-1]) in deeper}


def nearest_line(locations: dict[Loc, int], loc: Loc) -> int | None:
    for end in range(len(loc), -1, -1):
        if loc[:end] in locations:
            return locations[loc[:end]]
    return None


def validation_problems(exc: ValidationError, locations: dict[Loc, int], skip_duplicate_ids: bool) -> list[Problem]:
    """One problem per place.  An unknown key that is a close match of a missing required key of the same
    mapping is reported once, as the unknown key with its did-you-mean."""
    errors = exc.errors()
    losing = _losing_branches(errors)
    kept = [error for n, error in enumerate(errors) if n not in losing]
    missing: dict[Loc, set[str]] = {}
    for error in kept:
        loc = _clean_loc(error["loc"])
        if error["type"] == "missing" and loc and isinstance(loc[-1], str):
            missing.setdefault(loc[:-1], set()).add(loc[-1])
    folded: set[Loc] = set()
    found: dict[Loc, Problem] = {}
    for error in kept:
        kind = error["type"]
        if kind == "extra_forbidden":
            name = str(error["loc"][-1])  # the key itself, even if it reads like a tag (`str`)
            parent = _clean_loc(error["loc"][:-1])
            moved = misplaced(name, parent)
            guess = None if moved else closest(name, missing.get(parent, ())) or closest(name, keys_at(parent))
            if guess is not None and guess in missing.get(parent, ()):
                folded.add((*parent, guess))
            hint = f"; {moved}" if moved else f"; did you mean `{guess}`?" if guess else ""
            line = nearest_line(locations, (*parent, name))
            found.setdefault((*parent, name), Problem(line, render_loc(parent), f"unknown field `{name}`{hint}"))
            continue
        loc = _clean_loc(error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        if kind == "missing":
            message = "this field is required"
        elif error["loc"] and error["loc"][-1] == "[key]":
            message = f"the key `{loc[-1]}` must be a string (quote it)"
        elif skip_duplicate_ids and not loc and message.startswith("duplicate case id"):
            continue  # already reported, with lines, by duplicate_ids
        else:
            message = _reworded(kind, loc, error.get("input"), error.get("ctx") or {}, message)
        found.setdefault(loc, Problem(nearest_line(locations, loc), render_loc(loc), message))
    return [problem for loc, problem in found.items() if loc not in folded]


_QUOTED = re.compile(r"'([^']*)'")
CLAIM_TEXT = "a claim needs a text: one fact the final answer must state"


def _yaml_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "a mapping" if isinstance(value, dict) else type(value).__name__


def _reworded(kind: str, loc: Loc, value: Any, ctx: dict[str, Any], message: str) -> str:
    """pydantic's message in the file's terms: a did-you-mean for a misspelt choice, YAML's type names."""
    choices = _QUOTED.findall(str(ctx.get("expected", ""))) if kind == "literal_error" else []
    if choices and isinstance(value, str):
        noun = "order mode" if loc[-1:] == ("order",) else "value"
        return f"unknown {noun} `{value}`{did_you_mean(value, choices)} (one of {', '.join(choices)})"
    if loc[-1:] == ("claim",) and kind in ("string_too_short", "value_error"):
        return CLAIM_TEXT
    if len(loc) >= 2 and loc[-2] == "claims" and kind == "model_type":
        return f"a claim is a string, or a mapping {{claim, check}}; not {_yaml_type(value)}"
    if len(loc) >= 2 and loc[-2] == "mocks" and kind == "list_type":
        return f"expected a list of mocks (each {{when, result}}), not {_yaml_type(value)}"
    if loc[-1:] == ("mocks",) and kind == "dict_type":
        return f"expected a mapping of tool names to lists of mocks, not {_yaml_type(value)}"
    if kind in ("model_type", "dict_type", "list_type"):
        keys = ", ".join(keys_at(loc)) if kind == "model_type" else ""
        expected = "a list" if kind == "list_type" else f"a mapping (keys: {keys})" if keys else "a mapping"
        return f"expected {expected}, not {_yaml_type(value)}"
    return message


def duplicate_ids(cases: Any, locations: dict[Loc, int]) -> list[Problem]:
    """Duplicate case ids, each at the line of the repeated id."""
    problems: list[Problem] = []
    if not isinstance(cases, list):
        return problems
    first: dict[str, int] = {}
    for i, case in enumerate(cases):
        if isinstance(case, dict) and isinstance(case.get("id"), str):
            line = locations.get(("cases", i, "id"))
            if case["id"] in first:
                message = f"duplicate case id `{case['id']}` (first at line {first[case['id']]})"
                problems.append(Problem(line, f"cases[{i}].id", message))
            else:
                first[case["id"]] = line or 0
    return problems


def misplaced(name: str, parent: Loc) -> str | None:
    """When ``name`` is no key of the mapping at ``parent`` but one of a mapping one level deeper or shallower:
    the indentation is wrong (``args:`` dedented under ``- tool: copy_sheet`` lands in the case), so say that
    rather than guess a similar name (``tags``)."""
    for key in keys_at(parent):
        for deeper in ((*parent, key, 0), (*parent, key)):
            if name in keys_at(deeper):
                item = "an item of " if deeper[-1] == 0 else ""
                return f"`{name}` is a key of {item}`{key}`: indent it under `{key}:`" + (
                    " (as part of its `- ...` item)" if item else "")
    if parent:
        up = parent[:-2] if isinstance(parent[-1], int) and len(parent) >= 2 else parent[:-1]
        if name in keys_at(up) and name not in keys_at(parent):
            where = render_loc(up) or "the top level"
            return f"`{name}` is a key of {where}: indent it less, to the level of the other keys there"
    return None


def with_case_ids(problems: list[Problem], cases: Any) -> list[Problem]:
    """``cases[15].expect`` -> ``cases[15] (`duplicate-sheet`).expect``: a case named by its id, as a person finds
    it in the file (only where the id is a plain string)."""
    if not isinstance(cases, list):
        return problems
    out = []
    for problem in problems:
        match = re.match(r"cases\[(\d+)\]", problem.where)
        index = int(match.group(1)) if match else -1
        case = cases[index] if 0 <= index < len(cases) else None
        case_id = case.get("id") if isinstance(case, dict) else None
        if match and isinstance(case_id, str) and case_id and f"(`{case_id}`)" not in problem.where:
            where = f"{match.group(0)} (`{case_id}`){problem.where[match.end():]}"
            problem = Problem(problem.line, where, problem.message)
        out.append(problem)
    return out


def problem_at(locations: dict[Loc, int], loc: Loc, message: str) -> Problem:
    return Problem(nearest_line(locations, loc), render_loc(loc), message)
