"""Score one multi-step flow: the model's calls over all its turns against ``expect`` (docs/metrics.md#flows).

A call *meets* an expectation as in a single-call case (:func:`pytest_mcpeval.scoring.case.call_ok`: the same
tool; arguments a JSON object, no name outside the schema, every required one, the expectation's matchers
matched) once the expectation's ``from_result`` references are bound (:func:`bind`) against the results of
the calls made *before* that call, in flat order (turn by turn, and in a turn in the order the model listed
its calls).  So whether call ``i`` meets expectation ``j`` is a fixed fact of the transcript, ``ok[j][i]``,
whatever the other calls are paired with: the order modes are then questions about that boolean matrix.

* ``strict``: as many calls as expectations and ``ok[j][j]`` for every ``j``.
* ``in_order``: positions ``i_0 < i_1 < ...`` with ``ok[j][i_j]`` (other calls anywhere).  The greedy
  earliest match finds them whenever they exist: if some increasing assignment ``a`` exists, the greedy
  position ``g_j <= a_j`` for every ``j`` (by induction: ``g_{j-1} <= a_{j-1} < a_j`` and ``ok[j][a_j]``, so
  the earliest ``i > g_{j-1}`` with ``ok[j][i]`` is at most ``a_j``).  The argument needs ``ok[j][i]`` to
  depend on ``j`` and ``i`` only — which holds because a reference reads the N-th earlier result of a tool
  among *all* earlier calls, not the result of the call paired with another expectation.  (Were it the
  latter, the pairing of one expectation would change whether another can match, and greedy could fail.)
* ``unordered``: a perfect one-to-one pairing (as many calls as expectations).
* ``superset``: a pairing that covers every expectation; other calls are allowed.
* ``subset``: a pairing that covers every call; expectations may be left over (no call at all passes).
  The three use a maximum bipartite matching (:func:`pytest_mcpeval.scoring.case.max_matching`), not a
  greedy first fit, which can pair a call with the wrong one of two expectations it meets.

``expect: []`` means no tool may be called, in every mode (subset included: a call is then never "one of the
expected").  A call to a ``forbid`` tool fails the case in every mode.  Diagnoses: :func:`diagnose_flow`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NotRequired

from pytest_mcpeval import bounds
from pytest_mcpeval.benchmark.matchers import Matcher, Reference
from pytest_mcpeval.benchmark.schema import OrderMode
from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.results import (
    ArgumentCheck,
    CalledTool,
    ClaimView,
    ExpectationMatch,
    Score,
    TrajectoryCall,
    TrajectoryTurn,
)
from pytest_mcpeval.scoring.case import (
    ARGUMENT_FAULTS,
    NONE,
    Expectation,
    argument_fault,
    argument_problems,
    arguments_ok,
    check_arguments,
    max_matching,
)
from pytest_mcpeval.scoring.claims import coverage as claims_coverage
from pytest_mcpeval.text import canonical_json


class FlowScore(Score):
    """What scoring adds to a flow case: :class:`Score`'s fields (``called`` is every call of every turn, in
    order; ``arguments`` checks the first call against the first expectation when ``correct``) and these."""

    order_ok: bool
    matches: list[ExpectationMatch]
    forbidden_called: list[str]
    coverage: float | None
    hallucinated_tools: NotRequired[list[str]]  # called names the catalog lacks (a label left out of macro F1)


# ------------------------------------------------------------------------------------------- references


def _content(answer: Mapping[str, Any]) -> tuple[bool, Any]:
    """The structured content of a tool answer, else its text parsed as JSON; ``(False, None)`` if neither."""
    structured = answer.get("structured")
    if structured is not None:
        return True, structured
    text = answer.get("text")
    if not isinstance(text, str):
        return False, None
    try:
        return True, bounds.loads(text)  # strict and bounded: a live server's text may be anything
    except ValueError:
        return False, None


def _dotted(path: Sequence[str | int]) -> str:
    return ".".join(str(p) for p in path)


def resolve(ref: Reference, earlier: Sequence[TrajectoryCall]) -> tuple[Any, str | None]:
    """The value ``ref`` names among the answers of ``earlier`` (flat order), or ``(None, why not)``.

    The ``offset``-th result of ``ref.tool`` counts successful results only: an error result holds no data
    to refer to, so a model that recovers from an error (and calls the tool again) is not penalised for it."""
    where = f"from_result {ref.tool} `{_dotted(ref.path)}`" + (f" (offset {ref.offset})" if ref.offset else "")
    results = [i for i, c in enumerate(earlier) if c["tool"] == ref.tool and not c["answer"]["is_error"]]
    if ref.offset >= len(results):
        failed = sum(1 for c in earlier if c["tool"] == ref.tool and c["answer"]["is_error"])
        had = f"{len(results)} earlier result{'' if len(results) == 1 else 's'}" if results else "no earlier result"
        errors = f", {failed} error result{'' if failed == 1 else 's'} not counted" if failed else ""
        return None, f"{where}: {had} of {ref.tool}{errors}"
    index = results[ref.offset]
    found, node = _content(earlier[index]["answer"])
    if not found:
        return None, f"{where}: the result of call #{index} has no structured content and its text is not JSON"
    for depth, step in enumerate(ref.path):
        at = _dotted(ref.path[:depth]) or "the result"
        if isinstance(node, Mapping):
            if str(step) not in node:
                return None, f"{where}: not found in the result of call #{index} (no key `{step}` in {at})"
            node = node[str(step)]
        elif isinstance(node, list) and isinstance(step, int):
            if step >= len(node):
                return None, (f"{where}: not found in the result of call #{index} (index {step} of {at}, which has "
                              f"{len(node)} item{'' if len(node) == 1 else 's'})")
            node = node[step]
        else:
            kind = "a list" if isinstance(node, list) else f"a {type(node).__name__}" if node is not None else "null"
            return None, f"{where}: not found in the result of call #{index} ({at} is {kind}, no `{step}` in it)"
    return node, None


def bind(matchers: dict[str, Matcher] | None, earlier: list[TrajectoryCall],
         ) -> tuple[dict[str, Matcher] | None, list[str]]:
    """``matchers`` with every ``from_result`` (at any depth) replaced by a literal of the value it refers to
    in the answers of ``earlier`` (the calls before the one checked, flat order), and the problems: one
    sentence per reference that cannot be resolved, naming the argument and the path (such a reference stays
    unbound, and an unbound reference matches nothing)."""
    if matchers is None:
        return None, []
    problems: list[str] = []

    def walk(matcher: Matcher, where: str) -> Matcher:
        kind = matcher.kind
        if kind == "from_result":
            value, problem = resolve(matcher.value, earlier)
            if problem is not None:
                problems.append(f"`{where}`: {problem}")
                return matcher
            return Matcher("literal", value, optional=matcher.optional)
        if kind == "object":
            return replace(matcher, value={k: walk(m, f"{where}.{k}") for k, m in matcher.value.items()})
        if kind == "list":
            return replace(matcher, value=tuple(walk(m, f"{where}[{i}]") for i, m in enumerate(matcher.value)))
        if kind == "any_of":
            return replace(matcher, value=tuple(walk(m, where) for m in matcher.value))
        return matcher

    return {name: walk(m, name) for name, m in matchers.items()}, problems


# ------------------------------------------------------------------------------------------------ scoring


def called_tool(call: TrajectoryCall) -> CalledTool:
    """A flow's call as the report's ``called`` lists it (the shape :func:`.case.parse_call` gives)."""
    out: CalledTool = {"tool": call["tool"], "args": call["args"]}
    if "raw" in call:
        out["raw"] = call["raw"]
    if "malformed" in call:
        out["malformed"] = call["malformed"]
    return out


def in_order_assignment(ok: Sequence[Sequence[bool]]) -> list[int | None]:
    """For each row (expectation) a column (call) with ``ok[row][col]``, columns strictly increasing: the greedy
    earliest match, which finds such an assignment whenever one exists (proof in the module docstring).  A row
    that cannot be placed after the previous one gets ``None``, and the next row is tried from the same place
    (so the report still shows what the later expectations met)."""
    out: list[int | None] = []
    start = 0
    for row in ok:
        found = next((i for i in range(start, len(row)) if row[i]), None)
        out.append(found)
        if found is not None:
            start = found + 1
    return out


@dataclass
class _Pairing:
    """Every expectation checked against every call of its tool, references bound per call."""

    expects: list[Expectation]
    flat: list[TrajectoryCall]
    calls: list[CalledTool]
    catalog: Catalog

    def __post_init__(self) -> None:
        self.checks: dict[tuple[int, int], tuple[ArgumentCheck, list[str]]] = {}
        for j, e in enumerate(self.expects):
            for i, c in enumerate(self.calls):
                if c["tool"] == e.tool:
                    bound, problems = bind(e.matchers, self.flat[:i])
                    check = check_arguments(Expectation(e.tool, bound, e.extra_args), c, self.catalog)
                    self.checks[j, i] = check, problems
        self.ok = [[(j, i) in self.checks and arguments_ok(self.checks[j, i][0]) for i in range(len(self.calls))]
                   for j in range(len(self.expects))]

    def in_order(self) -> list[int | None]:
        return in_order_assignment(self.ok)

    def problems(self, j: int, assigned: list[int | None], order: OrderMode) -> list[str]:
        """Why expectation ``j`` has no call in ``assigned``."""
        tool = self.expects[j].tool
        same = [i for i, c in enumerate(self.calls) if c["tool"] == tool]
        out: list[str] = []
        if order == "strict":
            if j >= len(self.calls):
                out.append(f"strict: no call #{j} (the model made {len(self.calls)})")
            elif self.calls[j]["tool"] != tool:
                out.append(f"strict: call #{j} is {self.calls[j]['tool']}")
        if not same:
            return [*out, f"{tool} was not called"]
        owners = {i: k for k, i in enumerate(assigned) if i is not None}
        for i in same:
            if self.ok[j][i]:
                if i in owners:
                    out.append(f"call #{i} meets it but is paired with expected call #{owners[i]}")
                else:
                    out.append(f"call #{i} meets it but is out of order ({order})")
            else:
                check, refs = self.checks[j, i]
                out.extend(f"call #{i}: {p}" for p in [*refs, *argument_problems(check)])
        return out


def _order_ok(order: OrderMode, pairing: _Pairing, assigned: list[int | None]) -> bool:
    n, m = len(pairing.calls), len(pairing.expects)
    if m == 0:  # `expect: []`: no tool may be called, whatever the mode (in_order and superset would allow any)
        return n == 0
    if None in assigned and order != "subset":
        return False
    if order in ("strict", "unordered"):
        return n == m
    if order == "subset":
        return sum(a is not None for a in assigned) == n
    return True  # in_order, superset: every expectation placed, other calls allowed


def score_flow(expects: list[Expectation], order: OrderMode, forbid: list[str], trajectory: list[TrajectoryTurn],
               catalog: Catalog, *, turn_limit: bool, claims: list[ClaimView], claims_threshold: float) -> FlowScore:
    """Score a flow's transcript.  ``passed`` = the order mode holds, no forbidden tool was called, the flow
    ended with an answer (not at its turn limit) and, when it has claims, coverage >= ``claims_threshold``."""
    flat = [c for turn in trajectory for c in turn["calls"]]
    calls = [called_tool(c) for c in flat]
    pairing = _Pairing(expects, flat, calls, catalog)
    if order == "strict":
        assigned: list[int | None] = [j if j < len(calls) and pairing.ok[j][j] else None for j in range(len(expects))]
    elif order == "in_order":
        assigned = pairing.in_order()
    else:
        assigned = max_matching(pairing.ok)
    order_ok = _order_ok(order, pairing, assigned)
    forbidden = list(dict.fromkeys(c["tool"] for c in calls if c["tool"] in forbid))
    cover = claims_coverage(claims)
    passed = (order_ok and not forbidden and not turn_limit
              and (cover is None or cover >= claims_threshold))
    matches: list[ExpectationMatch] = [
        {"call": a, "problems": [] if a is not None else pairing.problems(j, assigned, order)}
        for j, a in enumerate(assigned)
    ]
    expected_label = expects[0].tool if expects else NONE
    called_label = calls[0]["tool"] if calls else NONE
    correct = expected_label == called_label
    arguments: ArgumentCheck | None = None
    if correct and expects:
        first = expects[0]
        bound, _ = bind(first.matchers, [])
        arguments = check_arguments(Expectation(first.tool, bound, first.extra_args), calls[0], catalog)
    score: FlowScore = {
        "expected": [e.describe() for e in expects],
        "expected_label": expected_label,
        "called": calls,
        "called_label": called_label,
        "correct": correct,
        "passed": passed,
        "arguments": arguments,
        "diagnosis": None if passed else diagnose_flow(
            order, pairing, order_ok, forbidden, trajectory, turn_limit=turn_limit,
            answer_short=cover is not None and cover < claims_threshold),
        "order_ok": order_ok,
        "matches": matches,
        "forbidden_called": forbidden,
        "coverage": cover,
    }
    invented = sorted({c["tool"] for c in calls if c["tool"] not in catalog.by_name})
    if invented:
        score["hallucinated_tools"] = invented
    return score


# ---------------------------------------------------------------------------------------------- diagnosis


# The order in which diagnose_flow tries them (docs/metrics.md#diagnoses-of-flows)
FLOW_DIAGNOSES = ("forbidden_tool", "tool_use_not_expected", "no_tool_use", "failed_error_recovery", "wrong_tool",
                  *ARGUMENT_FAULTS, "turn_limit", "premature_stop", "wrong_order", "extra_calls", "answer_incomplete")


def _designed_error(call: TrajectoryCall) -> bool:
    """An error result the model should recover from: a mock's ``error``, the live server's, or the error of a
    call that could not be made (``invalid``: malformed arguments, an unknown tool); not the error a call no
    mock matches gets, which is a gap of the file rather than something to recover from."""
    return call["answer"]["is_error"] and call["answer"]["source"] != "unmatched"


def _same_call(a: TrajectoryCall, b: TrajectoryCall) -> bool:
    if a["tool"] != b["tool"]:
        return False
    if a["args"] is None or b["args"] is None:
        return a["args"] is None and b["args"] is None and a.get("raw") == b.get("raw")
    return canonical_json(a["args"]) == canonical_json(b["args"])


def failed_recovery(trajectory: list[TrajectoryTurn], turn_limit: bool) -> tuple[bool, bool]:
    """``(stopped, repeated)``: the model answered right after a turn whose calls met an error result (of the
    benchmark: :func:`_designed_error`); it made again a call identical to one that had met such an error, and
    met it again (a retry that succeeds, as a live server's transient error may allow, is a recovery)."""
    flat = [c for turn in trajectory for c in turn["calls"]]
    repeated = any(_designed_error(a) and any(_same_call(a, b) and _designed_error(b) for b in flat[i + 1:])
                   for i, a in enumerate(flat))
    calling = [turn for turn in trajectory if turn["calls"]]
    stopped = not turn_limit and bool(calling) and any(_designed_error(c) for c in calling[-1]["calls"])
    return stopped, repeated


def diagnose_flow(order: OrderMode, pairing: _Pairing, order_ok: bool, forbidden: list[str],
                  trajectory: list[TrajectoryTurn], *, turn_limit: bool, answer_short: bool) -> str:
    """The primary failure mode of a failed flow: the first of :data:`FLOW_DIAGNOSES` that applies.

    The calls are compared with a maximum one-to-one pairing (whatever the mode): expectations left without a
    call are *missing* (a failure unless the mode is subset), calls left without an expectation are *free*
    (a failure in strict, unordered and subset).  A free call of the tool of a missing expectation is an
    *attempt* at it; a free call of a tool no expectation names is *stray*."""
    expects, calls = pairing.expects, pairing.calls
    if forbidden:
        return "forbidden_tool"
    if not expects and calls:
        return "tool_use_not_expected"
    pairs = max_matching(pairing.ok)
    free_expects = [j for j, a in enumerate(pairs) if a is None]
    taken = {a for a in pairs if a is not None}
    free_calls = [i for i in range(len(calls)) if i not in taken]
    missing = order != "subset" and bool(free_expects)
    extra = order in ("strict", "unordered", "subset") and bool(free_calls)
    if missing and not calls:
        return "no_tool_use"
    stopped, repeated = failed_recovery(trajectory, turn_limit)
    if (repeated and (missing or extra or turn_limit)) or (stopped and missing):
        return "failed_error_recovery"
    if missing or extra:
        named = {e.tool for e in expects}
        if free_expects and any(calls[i]["tool"] not in named for i in free_calls):
            return "wrong_tool"
        faults = {argument_fault(pairing.checks[j, i][0])
                  for j in free_expects for i in free_calls if (j, i) in pairing.checks}
        for fault in ARGUMENT_FAULTS:
            if fault in faults:
                return fault
    if turn_limit:
        return "turn_limit"
    if missing:
        return "premature_stop"
    if order in ("strict", "in_order") and None in pairing.in_order():
        return "wrong_order"
    if extra:
        return "extra_calls"
    if answer_short:
        return "answer_incomplete"
    # unreachable: a flow fails on a forbidden tool, its turn limit, its order mode (missing or free calls, or
    # the order) or its coverage, each handled above; kept total so a report never lacks a diagnosis
    return "wrong_order" if not order_ok else "answer_incomplete"
