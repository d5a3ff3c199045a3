"""Claims on a flow's final answer: deterministic checks, verdict scores and coverage (docs/claims.md).

A claim scores 1.0 (fulfilled), 0.5 (partially fulfilled) or 0.0 (not fulfilled), as in MCP-Atlas;
a case's coverage is the mean over its claims.  A claim with a ``check`` is decided here, without a
judge, and scores 1.0 or 0.0:

* ``contains``: the text occurs in the answer, ignoring case (``str.casefold``) and treating every run
  of whitespace as one space on both sides ("Open" finds "open", "due on March 3" finds a line break
  after "on").  For an exact-case test write a ``regex``.
* ``regex``: :func:`re.search` (anywhere in the answer, not a full match), with no flags: add ``(?i)``,
  ``(?m)`` or ``(?s)`` in the pattern to change that.
* ``any_of``: any of its checks passes (they nest).

No final answer (``None``: the flow stopped at its turn limit, or the model sent no text) fails every
check, a ``regex`` that matches the empty string included.  Judged claims are :mod:`pytest_mcpeval.run.judge`.
"""

from __future__ import annotations

import math
import re
from typing import Literal

from pytest_mcpeval.benchmark.schema import Claim, ClaimCheck
from pytest_mcpeval.results import ClaimView

Verdict = Literal["fulfilled", "partially_fulfilled", "not_fulfilled"]
VERDICT_SCORES: dict[Verdict, float] = {"fulfilled": 1.0, "partially_fulfilled": 0.5, "not_fulfilled": 0.0}
_SPACE = re.compile(r"\s+")


def _folded(text: str) -> str:
    return _SPACE.sub(" ", text).casefold()


def check_claim(check: ClaimCheck, answer: str | None) -> bool:
    """Whether ``answer`` passes ``check`` (``contains`` / ``regex`` / ``any_of``); ``None`` passes nothing."""
    if answer is None:
        return False
    if check.contains is not None:
        return _folded(check.contains) in _folded(answer)
    if check.regex is not None:
        return re.search(check.regex, answer) is not None
    return any(check_claim(inner, answer) for inner in check.any_of or ())


def checked_claim(claim: Claim, answer: str | None) -> ClaimView:
    """The view of a claim decided by its ``check``: 1.0 fulfilled or 0.0 not fulfilled."""
    assert claim.check is not None, "a claim without a check is judged (run.judge.judge_claims)"
    passed = check_claim(claim.check, answer)
    verdict: Verdict = "fulfilled" if passed else "not_fulfilled"
    if answer is None:
        why = "no final answer"
    else:
        why = f"{_describe(claim.check)}: {'found' if passed else 'not found'} in the final answer"
    return {"claim": claim.claim, "method": "check", "score": VERDICT_SCORES[verdict], "verdict": verdict,
            "justification": why}


def _describe(check: ClaimCheck) -> str:
    if check.contains is not None:
        return f"contains {check.contains!r}"
    if check.regex is not None:
        return f"regex {check.regex!r}"
    return "any_of [" + ", ".join(_describe(inner) for inner in check.any_of or ()) + "]"


def coverage(claims: list[ClaimView]) -> float | None:
    """The mean claim score (exact for halves: 1, 0.5, 1, 0.5 is 0.75); ``None`` when there are no claims."""
    if not claims:
        return None
    return math.fsum(view["score"] for view in claims) / len(claims)
