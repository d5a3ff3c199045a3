"""Score one case: expected calls vs the calls a model made -> a builtin-only result dict.

The result crosses the xdist channel on the test report, so it holds only dicts, lists, str, int,
float, bool and None.  Its fields are documented in docs/report.md.

Rules (docs/metrics.md):

* selection label: the first expected tool, or ``(none)`` for ``expect: []``; the called label is the
  first tool the model called, or ``(none)``.  ``correct`` = the two labels are equal.
* argument checks run on the first expected call and the first call made, when ``correct``.
* ``passed`` = as many calls as expected, every expected call matched one-to-one (in any order) by a
  call of the same tool whose arguments are well-formed JSON, define no name outside the schema, give
  every required argument and match the expectation.  With one expected call this implies ``correct``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_mcpeval import bounds
from pytest_mcpeval.benchmark.matchers import Matcher
from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.results import ArgumentCheck, CalledTool, ExpectedView, Mismatch, Score
from pytest_mcpeval.results.case import NONE as NONE  # defined with the data; scoring users import it here
from pytest_mcpeval.text import canonical_json, truncate

RAW_CAP = 1_000  # characters of a too-deep call's argument text the result keeps


@dataclass(frozen=True)
class Expectation:
    tool: str
    matchers: dict[str, Matcher] | None  # None: arguments are not checked
    extra_args: str = "forbid"

    def describe(self) -> ExpectedView:
        out: ExpectedView = {"tool": self.tool}
        if self.matchers is not None:
            out["args"] = {k: m.describe() for k, m in self.matchers.items()}
        return out


def parse_call(name: str, arguments: str, catalog: Catalog) -> CalledTool:
    """A call as the report stores it: ``{"tool", "args"}`` or ``{"tool", "raw", "malformed"}``."""
    tool = catalog.mcp_name(name)
    text = arguments.strip() or "{}"
    try:
        args = bounds.loads(text)  # strict: NaN and Infinity are not JSON; bounded depth
    except bounds.TooDeep as exc:  # the text is cut: nothing after this walks or shows it whole
        return {"tool": tool, "args": None, "raw": truncate(arguments, RAW_CAP),
                "malformed": f"arguments {exc}"}
    except json.JSONDecodeError as exc:
        return {"tool": tool, "args": None, "raw": arguments, "malformed": f"invalid JSON: {exc.msg}"}
    except ValueError as exc:
        return {"tool": tool, "args": None, "raw": arguments, "malformed": f"invalid JSON: {exc}"}
    if not isinstance(args, dict):
        return {"tool": tool, "args": None, "raw": arguments, "malformed": "arguments are not a JSON object"}
    return {"tool": tool, "args": args}


def check_arguments(expect: Expectation, call: CalledTool, catalog: Catalog) -> ArgumentCheck:
    """The four argument metrics for one call of the expected tool, plus what went wrong."""
    required = catalog.required(expect.tool)
    checked = expect.matchers is not None
    malformed = call.get("malformed")
    if malformed:
        return {
            "malformed": malformed,
            "hallucinated": [],
            "missing_required": required,
            "missing_expected": [n for n, m in (expect.matchers or {}).items() if not m.optional],
            "unexpected": [],
            "mismatched": [],
            "hallucination": False,
            "all_required": False,
            "all_expected": False if checked else None,
            "exact": False if checked else None,
        }
    args: dict[str, Any] = call.get("args") or {}
    props = catalog.properties(expect.tool)
    hallucinated = [] if catalog.open_schema(expect.tool) else sorted(k for k in args if k not in props)
    missing_required = [r for r in required if r not in args]
    missing_expected: list[str] = []
    unexpected: list[str] = []
    mismatched: list[Mismatch] = []
    if expect.matchers is not None:
        for name, matcher in expect.matchers.items():
            if name in args:
                if not matcher.matches(args[name]):
                    mismatched.append({"name": name, "expected": matcher.describe(), "got": args[name]})
            elif not matcher.optional:
                missing_expected.append(name)
        if expect.extra_args == "forbid":
            unexpected = sorted(k for k in args if k not in expect.matchers)
    return {
        "malformed": None,
        "hallucinated": hallucinated,
        "missing_required": missing_required,
        "missing_expected": missing_expected,
        "unexpected": unexpected,
        "mismatched": mismatched,
        "hallucination": bool(hallucinated),
        "all_required": not missing_required,
        "all_expected": not missing_expected if checked else None,
        "exact": (not missing_expected and not mismatched and not unexpected) if checked else None,
    }


def arguments_ok(check: ArgumentCheck) -> bool:
    """Well-formed, no hallucinated name, every required argument, and the expectation matched (when given)."""
    return (
        check["malformed"] is None
        and not check["hallucination"]
        and check["all_required"]
        and check["exact"] is not False
    )


def call_ok(expect: Expectation, call: CalledTool, catalog: Catalog) -> bool:
    """Whether ``call`` meets ``expect``: the same tool and :func:`arguments_ok`."""
    return call["tool"] == expect.tool and arguments_ok(check_arguments(expect, call, catalog))


# The argument faults, worst first: the order :func:`argument_fault` tries them in
ARGUMENT_FAULTS = ("malformed_call", "hallucinated_argument", "missing_required_argument", "wrong_argument_value")


def argument_fault(check: ArgumentCheck) -> str | None:
    """The first argument failure of a call of the right tool, in this order: ``malformed_call``,
    ``hallucinated_argument``, ``missing_required_argument``, ``wrong_argument_value`` (an expected argument
    missing or mismatched, or an argument `extra_args: forbid` does not allow); ``None`` when it passes."""
    if check["malformed"]:
        return "malformed_call"
    if check["hallucination"]:
        return "hallucinated_argument"
    if not check["all_required"]:
        return "missing_required_argument"
    if check["exact"] is False:
        return "wrong_argument_value"
    return None


def argument_problems(check: ArgumentCheck) -> list[str]:
    """What is wrong with a call's arguments, one sentence each (empty when :func:`arguments_ok`)."""
    out: list[str] = []
    if check["malformed"]:
        return [f"malformed arguments ({check['malformed']})"]
    if check["hallucinated"]:
        out.append(f"not in the tool's schema: {', '.join(check['hallucinated'])}")
    if check["missing_required"]:
        out.append(f"missing required: {', '.join(check['missing_required'])}")
    if check["missing_expected"]:
        out.append(f"missing expected: {', '.join(check['missing_expected'])}")
    for m in check["mismatched"]:
        out.append(f"`{m['name']}` = {canonical_json(m['got'])}, expected {canonical_json(m['expected'])}")
    if check["unexpected"]:
        out.append(f"not expected (extra_args: forbid): {', '.join(check['unexpected'])}")
    return out


def max_matching(ok: Sequence[Sequence[bool]]) -> list[int | None]:
    """A maximum one-to-one matching of rows to columns where ``ok[row][col]`` (Kuhn's augmenting paths):
    for each row, its column or ``None``.  Rows are tried in order, each column first-fit, so the result is
    deterministic; its size is the maximum (any unmatched row has no augmenting path)."""
    owner: dict[int, int] = {}  # column -> row

    def augment(row: int, seen: set[int]) -> bool:
        for col, good in enumerate(ok[row]):
            if good and col not in seen:
                seen.add(col)
                if col not in owner or augment(owner[col], seen):
                    owner[col] = row
                    return True
        return False

    for row in range(len(ok)):
        augment(row, set())
    out: list[int | None] = [None] * len(ok)
    for col, row in owner.items():
        out[row] = col
    return out


def _one_to_one(expects: list[Expectation], calls: list[CalledTool], catalog: Catalog) -> bool:
    """Every expectation matched by a distinct call (order-independent, as BFCL's parallel check)."""
    if len(expects) != len(calls):
        return False
    ok = [[call_ok(e, c, catalog) for c in calls] for e in expects]
    return None not in max_matching(ok)


def pairing_fault(expects: list[Expectation], calls: list[CalledTool], catalog: Catalog) -> str:
    """The argument fault of calls that cannot be paired one-to-one with the expectations although their tools
    match: each call's best pairing is the mildest :func:`argument_fault` over the expectations of its tool; the
    result is the worst of those, or ``wrong_argument_value`` when every call fits some expectation (two calls
    fit the same one, so another expectation's values were never given).  Malformed, hallucinated and missing
    required arguments depend only on the call and its tool's schema, so this is also the worst fault of any
    one-to-one pairing chosen to make its worst fault as mild as possible."""
    worst = len(ARGUMENT_FAULTS) - 1  # wrong_argument_value
    for call in calls:
        faults = [argument_fault(check_arguments(e, call, catalog)) for e in expects if e.tool == call["tool"]]
        # rank = position in ARGUMENT_FAULTS (0 is the worst); a pairing without a fault ranks after them all
        ranks = [len(ARGUMENT_FAULTS) if f is None else ARGUMENT_FAULTS.index(f) for f in faults]
        if ranks:
            worst = min(worst, max(ranks))
    return ARGUMENT_FAULTS[worst]


def diagnose(expects: list[Expectation], calls: list[CalledTool], arguments: ArgumentCheck | None, passed: bool,
             catalog: Catalog) -> str | None:
    """The primary failure mode, the first rule that applies (docs/metrics.md#diagnoses); the names are the
    ones flows use, so a model's ``diagnoses`` count one taxonomy over both families."""
    if passed:
        return None
    expected_label = expects[0].tool if expects else NONE
    called_label = calls[0]["tool"] if calls else NONE
    if expected_label == NONE:
        return "tool_use_not_expected"
    if called_label == NONE:
        return "no_tool_use"
    if expected_label != called_label:
        return "wrong_tool"
    if arguments is not None and (fault := argument_fault(arguments)):
        return fault
    if len(calls) > len(expects):
        return "extra_calls"
    if len(calls) < len(expects):
        return "premature_stop"  # answered before making every expected call
    if sorted(c["tool"] for c in calls) != sorted(e.tool for e in expects):
        return "wrong_tool"
    return pairing_fault(expects, calls, catalog)


def score_case(expects: list[Expectation], calls: list[CalledTool], catalog: Catalog,
               fills_arguments: bool = True) -> Score:
    """Score one case.  ``fills_arguments=False`` (a retriever): selection only, no argument checks."""
    expected_label = expects[0].tool if expects else NONE
    called_label = calls[0]["tool"] if calls else NONE
    correct = expected_label == called_label
    arguments: ArgumentCheck | None
    if not fills_arguments:
        arguments = None
        passed = correct
    else:
        arguments = check_arguments(expects[0], calls[0], catalog) if correct and expects else None
        # one call: the selection must be right; several: matched one-to-one in any order (as BFCL parallel)
        if len(expects) == 1 and len(calls) == 1:  # one pairing, checked just above: what _one_to_one would say
            passed = arguments is not None and arguments_ok(arguments)
        else:
            passed = _one_to_one(expects, calls, catalog) and (correct or len(expects) > 1)
    return {
        "expected": [e.describe() for e in expects],
        "expected_label": expected_label,
        "called": calls,
        "called_label": called_label,
        "correct": correct,
        "passed": passed,
        "arguments": arguments,
        "diagnosis": diagnose(expects, calls, arguments, passed, catalog),
    }
