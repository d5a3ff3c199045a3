"""Static checks of a benchmark's expected calls against the server's tool catalog.

:func:`check_expectations` finds expectations that describe a call the server could not accept: an
unknown tool or argument, a literal of the wrong type or outside an ``enum``, a required argument the
expectation leaves out.  Such a case can never pass, or passes for the wrong reason, so it is worth
fixing before any model runs.
Tools whose names and descriptions read alike are found by :mod:`pytest_mcpeval.scoring.confusable`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_mcpeval.benchmark.loader import Benchmark, Loc
from pytest_mcpeval.benchmark.matchers import Matcher
from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.run.case import missing_tool_message
from pytest_mcpeval.text import did_you_mean

KINDS = ("unknown_tool", "unknown_argument", "wrong_type", "missing_required", "enum_violation", "unchecked")
NOT_FAILING = frozenset({"unchecked"})  # findings that are reported but do not fail the lint item




@dataclass(frozen=True)
class LintProblem:
    """One problem of one expected call, rendered as ``FILE:LINE: case `ID`: FIELD: MESSAGE``."""

    file: str
    line: int | None
    case: str
    field: str
    kind: str
    message: str

    def __str__(self) -> str:
        place = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{place}: case `{self.case}`: {self.field}: {self.message}"

    @property
    def fails(self) -> bool:
        """Whether this finding fails the lint item (an ``unchecked`` one does not)."""
        return self.kind not in NOT_FAILING


class UncheckedSchemaWarning(UserWarning):
    """An expected value the lint could not check, because of the server's schema (shown as a pytest warning)."""


# -- expectations against the catalog ----------------------------------------------------------------------


def _one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _show(value: Any) -> str:
    return _one_line(repr(value), 80)


def _schema_types(schema: Any) -> set[str] | None:
    """The JSON types a schema admits, or None when it does not say (anything goes)."""
    if not isinstance(schema, Mapping):
        return None
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {str(k) for k in kind}
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            out: set[str] = set()
            for branch in branches:
                if not isinstance(branch, Mapping):
                    return None
                sub = _schema_types(branch)
                if sub is None:
                    return None
                out |= sub
            return out
    return None


def _literal(matcher: Matcher) -> tuple[bool, Any]:
    """``(True, value)`` when the matcher stands for one literal JSON value, else ``(False, None)``."""
    if matcher.kind in ("literal", "equals"):
        return True, matcher.value
    if matcher.kind == "list":
        items = [_literal(m) for m in matcher.value]
        return (True, [v for _, v in items]) if all(ok for ok, _ in items) else (False, None)
    if matcher.kind == "object":
        entries = {k: _literal(m) for k, m in matcher.value.items()}
        if all(ok for ok, _ in entries.values()):
            return True, {k: v for k, (_, v) in entries.items()}
    return False, None


def _type_names(types: Any) -> str:
    if isinstance(types, list):
        return " or ".join(str(t) for t in types)
    return str(types)


Found = tuple[str, str, tuple[str | int, ...]]  # (kind, message, location below the argument)


class _Unchecked(Exception):
    """A value could not be checked against the tool's schema; the message is the reason."""


def _schema_path(parts: Any) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts).lstrip(".")


def _unresolvable(exc: Any) -> str:
    """``unresolvable $ref '#/defs/X'`` from a ``referencing`` error (jsonschema may wrap it)."""
    anchor = getattr(exc, "anchor", None)
    ref = f"#{anchor}" if isinstance(anchor, str) else str(getattr(exc, "ref", ""))
    if ref.startswith("/") or ref == "":  # a JSON pointer within the schema itself
        ref = f"#{ref}"
    return f"unresolvable $ref {ref!r}"


def _tool_validator(schema: Mapping[str, Any]) -> Any:
    """A jsonschema validator of a tool's whole ``inputSchema`` (its ``$schema``, else 2020-12, as MCP says).

    Raises :class:`_Unchecked` when the schema is not a valid schema of its dialect (``check_schema``).
    """
    import jsonschema
    from jsonschema.validators import validator_for

    cls = validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(dict(schema))
    except jsonschema.SchemaError as exc:
        at = _schema_path(exc.absolute_path)
        raise _Unchecked(_one_line(f"invalid schema{f' at {at}' if at else ''}: {exc.message}")) from exc
    return cls(dict(schema))


def _schema_error(validator: Any, name: str, value: Any) -> Found | None:
    """The problem when ``value`` is invalid for argument ``name`` of the tool's schema; None when valid.

    The value is validated as ``{name: value}`` against the whole schema, so that a ``$ref`` to the schema's
    ``$defs`` resolves; only errors under ``name`` count (``required`` and the like are checked elsewhere).
    Raises :class:`_Unchecked` when the schema cannot be applied (an unresolvable ``$ref``, ...).
    """
    import jsonschema
    from referencing.exceptions import Unresolvable

    try:
        errors = (e for e in validator.iter_errors({name: value}) if tuple(e.absolute_path)[:1] == (name,))
        error = jsonschema.exceptions.best_match(errors)
    except Unresolvable as exc:
        raise _Unchecked(_unresolvable(exc)) from exc
    except Exception as exc:  # anything else jsonschema trips on in the server's schema (deep recursion, ...): not
        # swallowed, the finding `unchecked` names it (a server's schema must not end the lint item with a traceback)
        raise _Unchecked(_one_line(f"{type(exc).__name__}: {exc}")) from exc
    if error is None:
        return None
    sub = tuple(error.absolute_path)[1:]
    where = name + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in sub)
    got = f"(got {_show(error.instance)})"
    if error.validator in ("enum", "const"):
        options = error.validator_value if error.validator == "enum" else [error.validator_value]
        shown = ", ".join(str(o) for o in options) if isinstance(options, list) else _show(options)
        return "enum_violation", _one_line(f"`{where}` must be one of {shown} {got}"), sub
    if error.validator == "type":
        types = _type_names(error.validator_value)
        return "wrong_type", _one_line(f"`{where}` must be of type {types} {got}"), sub
    return "wrong_type", _one_line(f"`{where}`: {error.message}"), sub


def _matcher_error(validator: Any, name: str, prop: Any, matcher: Matcher) -> Found | None:
    kind = matcher.kind
    if kind == "ignore":
        return None
    if kind == "any_of":
        for k, alternative in enumerate(matcher.value):
            problem = _matcher_error(validator, name, prop, alternative)
            if problem is not None:
                return problem[0], f"{problem[1]} (any_of alternative {k + 1})", ("any_of", k, *problem[2])
        return None
    if kind in ("approx", "regex", "text"):
        wanted = "number" if kind == "approx" else "string"
        types = _schema_types(prop)
        if types is None or wanted in types or (wanted == "number" and "integer" in types):
            return None
        shown = _type_names(sorted(types))
        article = "an" if kind == "approx" else "a"
        message = f"`{name}` must be of type {shown} (got {article} `{kind}` matcher, which expects a {wanted})"
        return "wrong_type", message, (kind,)
    ok, value = _literal(matcher)
    if not ok:  # a list or object holding matchers: not checked
        return None
    problem = _schema_error(validator, name, value)
    if problem is not None and kind == "equals":
        return problem[0], problem[1], ("equals", *problem[2])
    return problem


def check_expectations(bench: Benchmark, catalog: Catalog, shown_path: str) -> list[LintProblem]:
    """Every expected call of every case checked against the tools' input schemas, in file order.

    A value that cannot be checked is an ``unchecked`` finding: on the call's ``args`` when the tool's schema
    is invalid (checked once per tool), on the argument when applying the schema to it failed.
    """
    linter = _Linter(bench, catalog, shown_path)
    for i, case in enumerate(bench.spec.cases):
        for j, call in enumerate(case.expect):
            linter.check_call(i, case.id, j, call.tool)
    return linter.problems


class _Linter:
    """The findings of one file, and the validator of each tool (built once)."""

    def __init__(self, bench: Benchmark, catalog: Catalog, shown_path: str) -> None:
        self.bench = bench
        self.catalog = catalog
        self.shown_path = shown_path
        self.problems: list[LintProblem] = []
        self.validators: dict[str, Any] = {}  # tool name -> its validator, or the _Unchecked that says why none

    def validator_of(self, tool: str, schema: Mapping[str, Any]) -> Any:
        if tool not in self.validators:
            try:
                self.validators[tool] = _tool_validator(schema)
            except _Unchecked as exc:
                self.validators[tool] = exc
        return self.validators[tool]

    def add(self, case_id: str, field: str, kind: str, message: str, *locs: Loc) -> None:
        """A finding, on the line of the first of ``locs`` the file has."""
        line = next((found for loc in locs if (found := self.bench.line_of(loc)) is not None), None)
        self.problems.append(LintProblem(self.shown_path, line, case_id, field, kind, message))

    def check_call(self, i: int, case_id: str, j: int, tool_name: str) -> None:
        """The ``j``-th expected call of the ``i``-th case: its tool, each argument, the required ones."""
        case_loc: Loc = ("cases", i)
        call_loc: Loc = (*case_loc, "expect", j)
        tool = self.catalog.by_name.get(tool_name)
        if tool is None:
            self.add(case_id, f"expect[{j}].tool", "unknown_tool", missing_tool_message(tool_name, self.catalog),
                     (*call_loc, "tool"), call_loc, case_loc)
            return
        matchers = self.bench.matchers.get((case_id, j))
        if matchers is None:
            return
        schema = tool.get("inputSchema")
        raw_props = schema.get("properties") if isinstance(schema, Mapping) else None
        props: Mapping[str, Any] = raw_props if isinstance(raw_props, Mapping) else {}
        args_loc: Loc = (*call_loc, "args")
        said_unchecked = False
        for name, matcher in matchers.items():
            locs = ((*args_loc, name), args_loc, call_loc, case_loc)
            if name not in props:
                self.add(case_id, f"expect[{j}].args.{name}", "unknown_argument",
                         f"`{tool_name}` has no argument `{name}`{did_you_mean(name, sorted(props))}", *locs)
                continue
            if matcher.kind == "ignore":
                continue
            assert isinstance(schema, Mapping)  # it has properties
            said_unchecked = self.check_argument(case_id, j, tool_name, schema, (name, props[name], matcher), locs,
                                                 said_unchecked)
        for name in self.catalog.required(tool_name):
            if name not in matchers:
                self.add(case_id, f"expect[{j}].args", "missing_required",
                         f"required argument `{name}` of `{tool_name}` is not in the expected args",
                         args_loc, call_loc, case_loc)

    def check_argument(self, case_id: str, j: int, tool_name: str, schema: Mapping[str, Any],
                       argument: tuple[str, Any, Matcher], locs: tuple[Loc, ...], said_unchecked: bool) -> bool:
        """One expected argument (its name, its property's schema, its matcher) against the schema; returns whether
        the call's schema was said to be unchecked (an invalid schema is said once per call)."""
        name, prop, matcher = argument
        arg_loc, args_loc, call_loc, case_loc = locs
        cannot = f"cannot check against the schema of `{tool_name}`"
        validator = self.validator_of(tool_name, schema)
        if isinstance(validator, _Unchecked):  # the tool's schema is invalid: said once per call
            if not said_unchecked:
                self.add(case_id, f"expect[{j}].args", "unchecked", f"{cannot}: {validator}",
                         args_loc, call_loc, case_loc)
            return True
        try:
            found = _matcher_error(validator, name, prop, matcher)
        except _Unchecked as exc:
            self.add(case_id, f"expect[{j}].args.{name}", "unchecked", f"{cannot}: {exc}", *locs)
            return said_unchecked
        if found is not None:
            deeper = [(*arg_loc, *found[2][:end]) for end in range(len(found[2]), 0, -1)]
            self.add(case_id, f"expect[{j}].args.{name}", found[0], found[1], *deeper, *locs)
        return said_unchecked
