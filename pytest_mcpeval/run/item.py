"""The body of every case item: make its calls (the whole group's at once), run each repeat, keep the
results for the report, and raise what pytest should show (an error, or a miss under ``--mcp-strict``).

Each case item also records what it measured as JUnit XML properties (:func:`record_properties`), so CI
systems that read ``--junitxml`` show the model, the tool and the diagnosis next to the test."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_mcpeval.keys import CASE_KEY, MASKED_KEY, RESULT_KEY, SETTINGS_KEY
from pytest_mcpeval.run.case import CaseError, unscored_result
from pytest_mcpeval.text import printable, utf8_safe

if TYPE_CHECKING:
    from pytest_mcpeval.results import CaseResult, SkippedCase
    from pytest_mcpeval.run.runtime import Runtime


class CaseMissed(Exception):
    """Raised under --mcp-strict so a miss fails its test; the message is the diff."""


def run_case(request: pytest.FixtureRequest, mcp_server: object) -> None:
    """The body of every case item: run, score, and keep the result for the report.

    The session's runtime is the ``mcpeval_runtime`` fixture's, which the item's setup made sure of
    (:meth:`pytest_mcpeval.collect.CaseItem.setup`)."""
    from pytest_mcpeval.report.terminal import miss_lines
    from pytest_mcpeval.run.prefetch import group_items, prefetch_group
    from pytest_mcpeval.run.runtime import RUNTIME_KEY

    item = request.node
    mcpeval_runtime: Runtime = item.config.stash[RUNTIME_KEY]
    group = prefetch_group(item)  # the items whose calls this process makes, all at once
    if mcpeval_runtime.needs_prefetch(group):  # the group's first item: list the rest once, not per item
        refs = (other.stash.get(CASE_KEY, None) for other in group_items(item, group))
        mcpeval_runtime.prefetch(group, [r for r in refs if r and r.model and not r.case.skip], mcp_server)
    ref = item.stash[CASE_KEY]
    # every result, whatever made it, made UTF-8 safe here; masked here too (the same JSON encoding tells both) unless
    # a pytest_mcpeval_case_result hook is to see it first, as it always has, unmasked: then the report masks it
    hook = item.config.hook.pytest_mcpeval_case_result
    hooked = bool(hook.get_hookimpls())
    settle = utf8_safe if hooked else item.config.stash[SETTINGS_KEY].redactor.safe_data
    results = [settle(mcpeval_runtime.run(ref, mcp_server, repeat)) for repeat in range(mcpeval_runtime.repeats)]
    for result in results:
        hook(item=item, result=result)
    item.stash[RESULT_KEY] = results
    item.stash[MASKED_KEY] = not hooked
    record_properties(item, results)
    errors = [r["error"] for r in results if r["error"]]
    if errors:
        raise CaseError(errors[0])
    missed = [r for r in results if not r["passed"]]
    if missed and item.config.stash[SETTINGS_KEY].strict and not ref.case.draft:  # a draft is not the gate's
        raise CaseMissed("\n".join(miss_lines(missed[0])))


def results_of_failure(item: pytest.Item, when: str, excinfo: pytest.ExceptionInfo[BaseException]) -> list[CaseResult]:
    """Error results for a case item that failed before it had any: its setup failed (a fixture such as
    ``mcp_server`` raised), or our own code raised.  The case is then an error of the report, never lost."""
    ref = item.stash[CASE_KEY]
    exc = excinfo.value
    what = f"{type(exc).__name__}: {exc}".strip().rstrip(":")
    raised_in = Path(str(excinfo.traceback[-1].path)) if excinfo.traceback else None
    ours = raised_in is not None and Path(__file__).parents[1] in raised_in.parents
    if when == "setup":
        message = f"setup of the case failed ({what}); the traceback is in the test's report"
    elif not ours and raised_in is not None:  # a user's hook or fixture, not the plugin
        message = (f"an exception raised in {raised_in.name}:{excinfo.traceback[-1].lineno + 1} while the case ran "
                   f"({what}); the traceback is in the test's report")
    else:
        message = (f"internal error of pytest-mcpeval ({what}); this is a bug in the plugin, not a model miss: "
                   "please report it with the traceback from the test's report")
    repeats = item.config.stash[SETTINGS_KEY].repeat
    results = [unscored_result(ref.identity(item.config.rootpath), repeat, message) for repeat in range(repeats)]
    record_properties(item, results)
    return results


def skipped_case(item: pytest.Item, longrepr: object) -> SkippedCase:
    """What the report lists for a case item pytest skipped (``skip:`` in the file, a skip mark, no model, a flow
    for a retriever): the case, its model, and the reason pytest gave."""
    from pytest_mcpeval.run.case import relative_to_root

    ref = item.stash[CASE_KEY]
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr or "")
    return {"file": relative_to_root(ref.bench.path, item.config.rootpath), "line": ref.line, "id": ref.case.id,
            "model": ref.model.name if ref.model is not None else None,
            "reason": str(reason).removeprefix("Skipped: ")}


def record_properties(item: pytest.Item, results: list[CaseResult]) -> None:
    """The case's results as JUnit XML properties (what ``record_property`` records): :func:`case_properties`.
    Masked like everything the plugin writes (a model or tool name could hold a secret), control characters
    escaped."""
    if not results:
        return
    tool = results[0].get("expected_label")
    if tool is None:  # an error result: the case's first expected call
        expect = item.stash[CASE_KEY].case.expect
        tool = expect[0].tool if expect else "(none)"
    redactor = item.config.stash[SETTINGS_KEY].redactor
    item.user_properties.extend((name, printable(redactor.text(str(value))))
                                for name, value in case_properties(results, tool))


def case_properties(results: list[CaseResult], tool: str) -> list[tuple[str, object]]:
    """``model``, ``tool`` (the expected tool, ``(none)`` for ``expect: []``), then per run ``outcome``
    (``passed``, ``missed`` or ``error``), ``called`` (the tool called first), ``diagnosis`` (a miss's) and, for a
    flow with claims, ``coverage``; with ``--mcp-repeat`` each run's properties follow a ``repeat`` property.  Also
    what the merge of shards replays (merge/replay.py)."""
    properties: list[tuple[str, object]] = [("model", results[0]["model"]), ("tool", tool)]
    for result in results:
        if len(results) > 1:
            properties.append(("repeat", result.get("repeat", 0)))
        error, passed = result.get("error"), result.get("passed")
        properties.append(("outcome", "error" if error or passed is None else "passed" if passed else "missed"))
        if result.get("called_label") is not None:
            properties.append(("called", result["called_label"]))
        if result.get("diagnosis"):
            properties.append(("diagnosis", result["diagnosis"]))
        coverage = result.get("coverage")
        if result.get("flow") and coverage is not None:
            properties.append(("coverage", f"{coverage:.4f}"))
    return properties
