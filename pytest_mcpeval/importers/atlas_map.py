"""MCP-Atlas import, step 2: each task -> what its flow expects and how it is answered; the tools file's tools.

Pure data, no files (docs/import-atlas.md#arguments):

* how each recorded argument is checked (:func:`argument_rule`): identifiers exactly, names and titles with
  ``text``, coordinates with ``approx``, free text the recording agent wrote (queries, code, commands) only for
  presence, and size knobs (``limit``, ``radius``) not at all; ``--exact`` / ``--loose`` override it
  (:class:`Policy`);
* the expected calls: the trajectory's calls, identical repeats once (:func:`expected_calls`);
* the mocks: the recorded outputs, each answering calls that match the recorded arguments by the same rules,
  tightened where two recorded calls of one tool would otherwise be confused (:func:`mocks_for`);
* the tools file: the union of the tasks' enabled tools, their definitions as given with ``--tools`` when it has
  them (recorded arguments it does not define are dropped: :func:`fit_to_schemas`), else a schema inferred from
  the arguments recorded for the tool in any task, flagged as inferred (:func:`tool_catalog`).

What the user should know but is no error goes into :class:`Notes`, printed after the summary.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_mcpeval.importers.atlas_read import RecordedCall, Task
from pytest_mcpeval.text import canonical_json, plural

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


@dataclass
class Notes:
    """What the import did that a user should know, printed after the summary (never an error)."""

    lines: list[str] = field(default_factory=list)

    def add(self, text: str) -> None:
        self.lines.append(text)


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
    from pytest_mcpeval.benchmark.matchers import check_object, compile_args

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
