"""examples/flows as a user runs it: the 14 flows against the tracker, the scripted model and judge of the
demo (examples/flows/demo_script.json), the summary, the Markdown and the report, with and without xdist.

The figures are pinned: a change to the examples, the engine or the scoring that moves them shows here.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import read_report, run

from pytest_mcpeval.testing import ScriptedModelServer

EXAMPLES = Path(__file__).parent.parent / "examples"
SCRIPT = json.loads((EXAMPLES / "flows" / "demo_script.json").read_text(encoding="utf-8"))

# what the demo's deliberate mistakes make of each flow: (passed, diagnosis)
EXPECTED = {
    "login-timeout-reporter": (True, None),
    "checkout-root-cause": (True, None),
    "docs-lead-email": (False, "wrong_argument_value"),  # list_issues without the project
    "dark-mode-wrong-key": (False, "failed_error_recovery"),  # gives up after the error result
    "assign-to-unknown-user": (True, None),  # recovers from the error result
    "close-refund-duplicate": (True, None),
    "reopen-webhook-bug": (False, "wrong_order"),  # comments before reopening, in a strict flow
    "file-docs-issue": (True, None),
    "compare-refund-bugs": (False, "premature_stop"),  # never looks up the full name
    "triage-mobile-crashes": (False, "answer_incomplete"),  # labels one issue too many: the claim fails
    "weekly-digest": (True, None),  # subset: MOBILE skipped, coverage exactly 0.75
    "who-reported-urgent": (True, None),
    "live-webhook-docs": (True, None),  # against the real tracker
    "live-mobile-lead": (True, None),
}


@pytest.fixture
def flows_project(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> pytest.Pytester:
    (pytester.path / "examples" / "tracker").mkdir(parents=True)
    shutil.copy(EXAMPLES / "tracker" / "server.py", pytester.path / "examples" / "tracker" / "server.py")
    shutil.copytree(EXAMPLES / "flows", pytester.path / "examples" / "flows")
    for text, turns in SCRIPT["flows"].items():
        model_server.flow(text, *turns, model="scripted")
    for claim, verdict in SCRIPT["verdicts"].items():
        model_server.script(f"*<claim>\n{claim}\n</claim>*", {"content": json.dumps(verdict)}, model="judge")
    params = json.dumps({"api_base": model_server.api_base, "api_key": "none", "num_retries": 0})
    (pytester.path / "pytest.ini").write_text(
        "[pytest]\nmcp_model_aliases =\n    scripted = openai/scripted\n    judge = openai/judge\n"
        f"mcp_model_params =\n    scripted = {params}\n    judge = {params}\n")
    return pytester


def flows_run(project: pytest.Pytester, *args: str) -> pytest.RunResult:
    return run(project, "examples/flows", "--mcp-models=scripted", "--mcp-judge-model=judge", "--mcp-record=off",
               "--mcp-report=report.json", "--mcp-markdown=summary.md", *args)


def stable(cases: list[dict]) -> list[dict]:
    """The cases without what varies between runs (timings, which process reported the catalog)."""
    return [{k: v for k, v in c.items() if k not in ("latency_s", "usage", "judge_usage")} for c in cases]


def test_the_example_flows_score_as_designed(flows_project: pytest.Pytester) -> None:
    result = flows_run(flows_project)
    report = read_report(flows_project)
    cases = {c["id"]: c for c in report["cases"]}
    assert {i: (c["passed"], c["diagnosis"]) for i, c in cases.items()} == EXPECTED
    assert all(c["flow"] and c["error"] is None for c in cases.values())
    assert cases["weekly-digest"]["coverage"] == 0.75  # 1 + 0.5 (a partially fulfilled claim): passes at 0.75
    assert {c["answer"]["source"] for i in ("live-webhook-docs", "live-mobile-lead")
            for t in cases[i]["trajectory"] for c in t["calls"]} == {"live"}
    assert cases["docs-lead-email"]["unmatched"] == [{"tool": "list_issues", "args": {"assignee": "carol"}}]
    flows = report["models"]["scripted"]["flows"]
    assert (flows["cases"], flows["pass_rate"], flows["order_match_rate"]) == (14, 9 / 14, 10 / 14)
    claims = report["models"]["scripted"]["claims"]
    assert claims["cases"] == 14 and claims["pass_rate"] == 9 / 14
    assert claims["mean_coverage"] == pytest.approx(sum(c["coverage"] for c in cases.values()) / 14)
    assert report["models"]["scripted"]["accuracy"] is None  # no single-call case: those metrics stay empty
    judged = [i for i, c in cases.items() if any(cl["method"] == "judge" for cl in c["claims"])]
    judge = report["models"]["scripted"]["judges"]["judge"]  # counted apart from the model's usage
    assert (judge["cases"], judge["cached"], judge["cost_usd"]) == (len(judged), 0, None) and len(judged) == 9
    assert judge["attempts"] == sum(1 for c in cases.values() for cl in c["claims"] if cl["method"] == "judge")
    result.stdout.fnmatch_lines([
        "scripted: 14 scored (0 single calls, 14 flows), 0 errors*",
        "  flows (14 cases): passed 64.3%, order held 71.4%, exact tool set 85.7% | multi-label micro F1*",
        "  claims (14 cases): mean coverage 0.845, passed 64.3%",
        "  judge judge: 9 cases (0 replayed), * + * tokens, cost unknown",
        "  top failures: answer_incomplete 1, failed_error_recovery 1, premature_stop 1",
    ])
    result.stdout.fnmatch_lines([
        "*::dark-mode-wrong-key[[]scripted[]]  failed_error_recovery (flow, order in_order, 2 turns)",
        "  - expected get_issue {\"issue_key\": \"WEB-99\"}",
        "  - expected search_issues *   <- not met",
        "*",
        "  + turn 0: get_issue {\"issue_key\": \"WEB-99\"}  -> mock ERROR",
        "  = answer: *",
        "    claim not_fulfilled (judge): The dark mode issue is WEB-3.",
    ])
    markdown = (flows_project.path / "summary.md").read_text()
    assert "| `scripted` | 14 | 64.3% | 71.4% | 85.7% |" in markdown
    # the same report under xdist (the flows, live calls and judge requests made on the workers)
    flows_run(flows_project, "-n", "1")
    spread = read_report(flows_project)
    assert stable(spread["cases"]) == stable(report["cases"])
    assert spread["models"]["scripted"]["flows"] == flows and spread["models"]["scripted"]["claims"] == claims
