"""Expected argument values: literals and matchers, compiled once when a benchmark file loads.

Semantics (documented in docs/format.md), modelled on BFCL's AST checker:

* A literal matches after type-aware normalisation: ``1 == 1.0`` (but ``True`` is not ``1``), tuples
  equal lists, mapping key order is irrelevant, two RFC 3339 date-times that name the same instant are
  equal (``2025-04-01T00:00:00Z`` == ``2025-04-01T02:00:00+02:00``).  Strings are otherwise exact.
* A mapping whose keys are matcher keys is a matcher:
  ``{any_of: [a, b]}``, ``{regex: "..."}`` (full match), ``{approx: x, tol: t}``,
  ``{text: "..."}`` (BFCL's loose string comparison), ``{equals: v}`` (literal, also for objects whose
  keys look like matcher keys), ``{ignore: true}``; any of them may carry ``optional: true`` (absence is
  fine, presence must match) and ``integer: true`` (the value must also be an integer: ``5``, not ``5.0``,
  BFCL's rule for integer parameters).  Mixing matcher keys with other keys, or a single key that looks like a
  misspelt matcher key, is an error with a did-you-mean.
* Lists match element-wise with the same length; mappings need the same keys (optional ones aside) and
  matching values, recursively.
* In a flow, ``{from_result: {tool: T, path: "items.0.number", offset: 0}}`` stands for a value of an
  earlier tool result (a :class:`Reference`); it is compiled here and bound by scoring.flow.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from pytest_mcpeval.text import did_you_mean

VALUE_KEYS = ("equals", "any_of", "regex", "approx", "text", "ignore")
MODIFIER_KEYS = ("optional", "tol", "integer")
REFERENCE_KEY = "from_result"
REFERENCE_KEYS = ("tool", "path", "offset")
MATCHER_KEYS = frozenset((*VALUE_KEYS, *MODIFIER_KEYS, REFERENCE_KEY))
_INDEX = re.compile(r"^(0|[1-9][0-9]*)$")
DEFAULT_TOL = 1e-6

_RFC3339 = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"
)
_BFCL_STRIP = re.compile(r"[ ,./\-_*^]")


class MatcherError(ValueError):
    """A malformed expected value.  ``path`` is relative to the ``args`` mapping."""

    def __init__(self, path: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def _instant(text: str) -> tuple[dt.datetime, Decimal] | None:
    """The instant an RFC 3339 date-time names: whole seconds in UTC plus the exact fraction.

    The fraction is kept apart because ``datetime`` cuts it to microseconds."""
    match = _RFC3339.match(text)
    if not match:
        return None
    fraction = match.group(1) or ""
    whole = text.replace(fraction, "", 1) if fraction else text
    try:
        moment = dt.datetime.fromisoformat(whole.replace("z", "Z").replace("t", "T").replace(" ", "T"))
    except ValueError:
        return None
    return moment.astimezone(dt.UTC), Decimal("0" + fraction) if fraction else Decimal(0)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_integer(value: Any) -> bool:
    """An integer as JSON text writes it: ``5``, not ``5.0`` or ``5e0`` (which JSON parsers read as floats);
    never a boolean."""
    return isinstance(value, int) and not isinstance(value, bool)


def values_equal(expected: Any, actual: Any) -> bool:
    """Literal equality with the normalisations above (no matchers)."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected is actual
    if _is_number(expected):
        return _is_number(actual) and expected == actual  # exact: int == float only when the values are equal
    if isinstance(expected, str):
        if not isinstance(actual, str):
            return False
        if expected == actual:
            return True
        a, b = _instant(expected), _instant(actual)
        return a is not None and b is not None and a == b
    if expected is None:
        return actual is None
    if isinstance(expected, Mapping):
        return (
            isinstance(actual, Mapping)
            and set(expected) == set(actual)
            and all(values_equal(expected[k], actual[k]) for k in expected)
        )
    if isinstance(expected, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(expected) == len(actual)
            and all(values_equal(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return bool(expected == actual)


def bfcl_normalise(text: str) -> str:
    """BFCL's string normalisation: drop spaces and ``,./-_*^``, lower-case, ``'`` -> ``"``."""
    return _BFCL_STRIP.sub("", text).lower().replace("'", '"')


@dataclass(frozen=True)
class Reference:
    """``{from_result: {tool, path, offset}}``: the value at ``path`` (dotted; list indices as numbers) in
    the ``offset``-th earlier result of ``tool`` in the same flow.  Resolved by scoring.flow against the
    flow's transcript before the call it checks; parsed, never evaluated."""

    tool: str
    path: tuple[str | int, ...]
    offset: int = 0

    def describe(self) -> dict[str, Any]:
        ref: dict[str, Any] = {"tool": self.tool, "path": ".".join(str(p) for p in self.path)}
        if self.offset:
            ref["offset"] = self.offset
        return {"from_result": ref}


@dataclass(frozen=True)
class Matcher:
    """A compiled expected value.  ``kind`` is one of literal, list, object, or a matcher key.

    ``from_result`` holds a :class:`Reference`: it matches nothing until scoring.flow binds it to the
    value it refers to (a flow's earlier tool result).  ``integer``: the value must also be an integer
    (:func:`is_integer`), whatever the kind."""

    kind: str
    value: Any = None
    optional: bool = False
    tol: float = DEFAULT_TOL
    integer: bool = False

    def matches(self, actual: Any) -> bool:
        kind = self.kind
        if self.integer and not is_integer(actual):
            return False
        if kind in ("literal", "equals"):
            return values_equal(self.value, actual)
        if kind == "ignore":
            return True
        if kind == "from_result":
            return False  # unbound: scoring.flow replaces it by the value it refers to
        if kind == "any_of":
            return any(m.matches(actual) for m in self.value)
        if kind == "regex":
            return isinstance(actual, str) and self.value.fullmatch(actual) is not None
        if kind == "approx":
            return _is_number(actual) and math.isclose(float(actual), self.value, rel_tol=0.0, abs_tol=self.tol)
        if kind == "text":
            return isinstance(actual, str) and bfcl_normalise(actual) == bfcl_normalise(self.value)
        if kind == "list":
            return (
                isinstance(actual, list | tuple)
                and len(actual) == len(self.value)
                and all(m.matches(a) for m, a in zip(self.value, actual, strict=True))
            )
        if kind == "object":
            return isinstance(actual, Mapping) and not check_object(self.value, actual, allow_extra=False)
        raise AssertionError(f"unknown matcher kind {kind}")

    def describe(self) -> Any:
        """A JSON-able rendering for reports and diffs."""
        if self.kind == "literal":
            return self.value
        if self.kind == "list":
            return [m.describe() for m in self.value]
        if self.kind == "object":
            return {k: m.describe() for k, m in self.value.items()}
        out: dict[str, Any] = {}
        if self.kind == "from_result":
            out.update(self.value.describe())
        elif self.kind == "any_of":
            out["any_of"] = [m.describe() for m in self.value]
        elif self.kind == "regex":
            out["regex"] = self.value.pattern
        elif self.kind == "approx":
            out["approx"] = self.value
            out["tol"] = self.tol
        elif self.kind != "ignore" or not self.integer:  # `{integer: true}` alone: no `ignore` key
            out[self.kind] = self.value
        if self.integer:
            out["integer"] = True
        if self.optional:
            out["optional"] = True
        return out


def check_object(expected: Mapping[str, Matcher], actual: Mapping[str, Any], allow_extra: bool) -> list[str]:
    """Names of the keys that fail: missing (non-optional), mismatched, or unexpected extras."""
    bad = [k for k, m in expected.items() if (k in actual and not m.matches(actual[k]))]
    bad += [k for k, m in expected.items() if k not in actual and not m.optional]
    if not allow_extra:
        bad += [k for k in actual if k not in expected]
    return bad


def compile_value(raw: Any, path: tuple[str | int, ...] = ()) -> Matcher:
    """Compile a literal or matcher from the benchmark file; raise :class:`MatcherError`."""
    if isinstance(raw, Mapping):
        keys = [str(k) for k in raw]
        known = [k for k in keys if k in MATCHER_KEYS]
        if not known:
            if len(keys) == 1 and did_you_mean(keys[0], MATCHER_KEYS, cutoff=0.7):
                raise MatcherError(
                    path,
                    f"unknown matcher `{keys[0]}`{did_you_mean(keys[0], MATCHER_KEYS, cutoff=0.7)} "
                    "(to expect a literal object with this key, write {equals: {...}})",
                )
            return Matcher("object", {str(k): compile_value(v, (*path, str(k))) for k, v in raw.items()})
        return _compile_matcher(raw, keys, path)
    if isinstance(raw, list | tuple):
        return Matcher("list", tuple(compile_value(v, (*path, i)) for i, v in enumerate(raw)))
    if raw is not None and not isinstance(raw, str | int | float | bool):
        raise MatcherError(path, f"unsupported value of type {type(raw).__name__}")
    return Matcher("literal", raw)


def _compile_matcher(raw: Mapping[str, Any], keys: list[str], path: tuple[str | int, ...]) -> Matcher:
    for key in keys:
        if key not in MATCHER_KEYS:
            raise MatcherError(
                (*path, key),
                f"unknown matcher key `{key}`{did_you_mean(key, MATCHER_KEYS, cutoff=0.7)} "
                f"(matcher keys: {', '.join(sorted(MATCHER_KEYS))})",
            )
    value_keys = [k for k in keys if k in VALUE_KEYS]
    optional = raw.get("optional", False)
    if not isinstance(optional, bool):
        raise MatcherError((*path, "optional"), "`optional` must be true or false")
    if REFERENCE_KEY in raw:
        if value_keys or "tol" in raw or "integer" in raw:
            other = (value_keys or [k for k in ("tol", "integer") if k in raw])[0]
            raise MatcherError(path, f"`from_result` stands for the whole value: it does not go with `{other}`")
        return Matcher("from_result", compile_reference(raw[REFERENCE_KEY], (*path, REFERENCE_KEY)), optional)
    if "tol" in raw and value_keys != ["approx"]:
        raise MatcherError((*path, "tol"), "`tol` only goes with `approx`")
    if len(value_keys) > 1:
        raise MatcherError(path, f"a matcher takes one of {', '.join(VALUE_KEYS)}; found {', '.join(value_keys)}")
    integer = _integer_flag(raw, value_keys, path)
    if not value_keys:  # {optional: true} alone: any value or none; {optional: false}: any value, required
        return Matcher("ignore", True, optional=optional, integer=integer)
    return replace(_compile_value_key(raw, value_keys[0], optional, path), integer=integer)


def _integer_flag(raw: Mapping[str, Any], value_keys: list[str], path: tuple[str | int, ...]) -> bool:
    """``integer: true|false``; an error where it could never match or says nothing (with ``ignore``)."""
    integer = raw.get("integer", False)
    where = (*path, "integer")
    if not isinstance(integer, bool):
        raise MatcherError(where, "`integer` must be true or false")
    if not integer or not value_keys:
        return integer
    kind = value_keys[0]
    if kind in ("text", "regex"):
        raise MatcherError(where, f"`integer: true` never matches with `{kind}`, which matches strings only")
    if kind == "ignore":
        raise MatcherError(where, "`ignore: true` accepts any value: write `{integer: true}` alone for any integer")
    if kind == "equals" and not _is_number(raw["equals"]):
        raise MatcherError(where, "`integer: true` never matches: `equals` does not give a number")
    if kind == "equals" and not float(raw["equals"]).is_integer():
        raise MatcherError(where, f"`integer: true` never matches: {raw['equals']} is not a whole number")
    return integer


def _compile_value_key(raw: Mapping[str, Any], kind: str, optional: bool, path: tuple[str | int, ...]) -> Matcher:
    arg = raw[kind]
    where = (*path, kind)
    if kind == "equals":
        if not isinstance(arg, str | int | float | bool | list | dict) and arg is not None:
            raise MatcherError(where, "`equals` takes a JSON value")
        return Matcher("equals", arg, optional=optional)
    if kind == "ignore":
        if arg is not True:
            raise MatcherError(where, "write `ignore: true` (or remove the argument from `args`)")
        return Matcher("ignore", True, optional=True)
    if kind == "any_of":
        if not isinstance(arg, list) or not arg:
            raise MatcherError(where, "`any_of` takes a non-empty list of accepted values")
        return Matcher("any_of", tuple(compile_value(v, (*where, i)) for i, v in enumerate(arg)), optional)
    if kind == "regex":
        if not isinstance(arg, str):
            raise MatcherError(where, "`regex` takes a string (a Python regular expression, full match)")
        try:
            return Matcher("regex", re.compile(arg), optional)
        except re.error as exc:
            raise MatcherError(where, f"invalid regular expression: {exc}") from None
    if kind == "approx":
        tol = raw.get("tol", DEFAULT_TOL)
        if not _is_number(arg) or not math.isfinite(arg):
            raise MatcherError(where, "`approx` takes a finite number")
        if not _is_number(tol) or not math.isfinite(tol) or tol < 0:
            raise MatcherError((*path, "tol"), "`tol` takes a non-negative number (absolute tolerance)")
        return Matcher("approx", float(arg), optional, float(tol))
    if not isinstance(arg, str):  # text
        raise MatcherError(where, "`text` takes a string")
    return Matcher("text", arg, optional)


def compile_args(raw: Mapping[str, Any]) -> dict[str, Matcher]:
    return {str(name): compile_value(value, (str(name),)) for name, value in raw.items()}


def compile_reference(raw: Any, where: tuple[str | int, ...]) -> Reference:
    """``{tool: T, path: "items.0.number", offset: 0}`` -> :class:`Reference`; raise :class:`MatcherError`.

    ``path`` is dotted; a segment that is a whole number written without leading zeros (``0``, ``12``) is a
    list index, anything else a key.  ``offset`` (default 0) picks the earlier result of ``tool``: 0 = the first.
    """
    if not isinstance(raw, Mapping):
        raise MatcherError(where, "`from_result` takes a mapping {tool: TOOL, path: DOTTED.PATH, offset: N}")
    for key in raw:
        if key not in REFERENCE_KEYS:
            raise MatcherError(
                (*where, str(key)),
                f"unknown key `{key}` in `from_result`{did_you_mean(str(key), REFERENCE_KEYS)} "
                f"(keys: {', '.join(REFERENCE_KEYS)})",
            )
    tool = raw.get("tool")
    if not isinstance(tool, str) or not tool.strip():
        raise MatcherError((*where, "tool"), "`from_result` needs `tool`: the name of the tool whose earlier result "
                           "holds the value")
    text = raw.get("path")
    if isinstance(text, int) and not isinstance(text, bool) and text >= 0:
        text = str(text)  # `path: 0`: YAML reads a lone index as a number
    if not isinstance(text, str) or not text:
        raise MatcherError((*where, "path"), "`from_result` needs `path`: a dotted path into the result, such as "
                           "`items.0.number` (list indices as numbers)")
    parts = text.split(".")
    if any(not part for part in parts):
        raise MatcherError((*where, "path"), f"`path` {text!r} has an empty segment (write keys and list indices "
                           "separated by single dots, such as `items.0.number`)")
    offset = raw.get("offset", 0)
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise MatcherError((*where, "offset"), "`offset` takes a whole number >= 0: which earlier result of the "
                           "tool (0 = the first, the default)")
    steps = tuple(int(part) if _INDEX.match(part) else part for part in parts)
    return Reference(tool, steps, offset)


def references(matchers: Mapping[str, Matcher] | None) -> list[tuple[tuple[str | int, ...], Reference]]:
    """Every ``from_result`` in compiled ``args``, with its place as a :class:`MatcherError` would name it
    (``("issue_number",)``, ``("filter", "ids", 0)``, ``("q", "any_of", 1)``)."""
    found: list[tuple[tuple[str | int, ...], Reference]] = []

    def walk(matcher: Matcher, path: tuple[str | int, ...]) -> None:
        if matcher.kind == "from_result":
            found.append((path, matcher.value))
        elif matcher.kind == "object":
            for key, inner in matcher.value.items():
                walk(inner, (*path, key))
        elif matcher.kind == "list":
            for index, inner in enumerate(matcher.value):
                walk(inner, (*path, index))
        elif matcher.kind == "any_of":
            for index, inner in enumerate(matcher.value):
                walk(inner, (*path, "any_of", index))

    for name, matcher in (matchers or {}).items():
        walk(matcher, (name,))
    return found
