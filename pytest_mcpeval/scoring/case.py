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
from dataclasses import dataclass
from typing import Any

from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.report.types import ArgumentCheck, CalledTool, ExpectedView, Mismatch, Score
from pytest_mcpeval.scoring.matchers import Matcher

NONE = "(none)"


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
        args = json.loads(text)
    except json.JSONDecodeError as exc:
        return {"tool": tool, "args": None, "raw": arguments, "malformed": f"invalid JSON: {exc.msg}"}
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
    hallucinated = sorted(k for k in args if k not in props)
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


def _call_ok(expect: Expectation, call: CalledTool, catalog: Catalog) -> bool:
    if call["tool"] != expect.tool:
        return False
    check = check_arguments(expect, call, catalog)
    return (
        check["malformed"] is None
        and not check["hallucination"]
        and check["all_required"]
        and check["exact"] is not False
    )


def _one_to_one(expects: list[Expectation], calls: list[CalledTool], catalog: Catalog) -> bool:
    """Every expectation matched by a distinct call (order-independent, as BFCL's parallel check)."""
    if len(expects) != len(calls):
        return False
    ok = [[_call_ok(e, c, catalog) for c in calls] for e in expects]

    def assign(i: int, used: frozenset[int]) -> bool:
        if i == len(expects):
            return True
        return any(ok[i][j] and assign(i + 1, used | {j}) for j in range(len(calls)) if j not in used)

    return assign(0, frozenset())


def diagnose(expected_label: str, called_label: str, expected_tools: list[str], calls: list[CalledTool],
             arguments: ArgumentCheck | None, passed: bool) -> str | None:
    """The primary failure mode (names follow MCP-Atlas's tool-call taxonomy where one exists)."""
    if passed:
        return None
    n_expected = len(expected_tools)
    if expected_label == NONE:
        return "tool_use_not_expected"
    if called_label == NONE:
        return "no_tool_use"
    if expected_label != called_label:
        return "wrong_tool"
    if arguments is not None:
        if arguments["malformed"]:
            return "malformed_call"
        if arguments["hallucination"] or not arguments["all_required"] or arguments["exact"] is False:
            return "wrong_arguments"
    if len(calls) > n_expected:
        return "extra_calls"
    if len(calls) < n_expected:
        return "missing_calls"
    if sorted(c["tool"] for c in calls) != sorted(expected_tools):
        return "wrong_tool"
    return "wrong_arguments"


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
        passed = _one_to_one(expects, calls, catalog) and (correct or len(expects) > 1)
    return {
        "expected": [e.describe() for e in expects],
        "expected_label": expected_label,
        "called": calls,
        "called_label": called_label,
        "correct": correct,
        "passed": passed,
        "arguments": arguments,
        "diagnosis": diagnose(expected_label, called_label, [e.tool for e in expects], calls, arguments, passed),
    }
