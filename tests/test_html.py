"""--mcp-html: the self-contained HTML report.  Its numbers (bootstrap intervals checked against scipy, the
label order, the recall curve), its escaping (hostile strings reach the page only as text, checked with an
HTML parser), its size for 1,000 cases x 2 models, the option and ini key, and the JUnit XML properties of
the case items.  tests/test_html_browser.py opens the page of :func:`compare_project` in Chromium."""

from __future__ import annotations

import json
import re
import time
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from typing import Any

import numpy as np
import pytest
from conftest import make_project, read_report, run
from scipy.stats import bootstrap

from pytest_mcpeval.report.html import render
from pytest_mcpeval.report.html_data import argument_problems, label_order, line_diff, recall_curve, word_diff
from pytest_mcpeval.report.html_escape import script_json
from pytest_mcpeval.report.model import build_report
from pytest_mcpeval.scoring.case import NONE
from pytest_mcpeval.scoring.intervals import headline
from pytest_mcpeval.testing import ScriptedModelServer

# ------------------------------------------------------------------------------ a real run to render

HOSTILE_DESCRIPTION = ('Read one issue. <script>window.__pwned = "desc"</script> </details></pre> '
                       '<img src=x onerror="window.__pwned=1"> ``` `code` ' + "x" * 3000)



def with_baseline(report: Any, baseline: Any) -> Any:
    """The report as the session leaves it with --mcp-compare: its ``comparison`` holds what the page shows of the
    baseline (the changed tools, the baseline's F1); a comparison the test wrote by hand is kept as it is."""
    from pytest_mcpeval.gate.compare import compare, comparison_section

    section = comparison_section(compare(baseline, report), baseline, report, "baseline.json", "none")
    own = report.get("comparison")
    if own is not None:
        section = {**own, "changed_tools": section["changed_tools"], "baseline_tools": section["baseline_tools"]}
    return {**report, "comparison": section}

def tools(list_description: str) -> list[dict[str, Any]]:
    string = {"type": "string"}
    return [
        {"name": "list_issues", "description": list_description,
         "inputSchema": {"type": "object", "properties": {"project": string, "state": string},
                         "required": ["project"]}},
        {"name": "search_issues", "description": "Full-text search over issue titles and comments.",
         "inputSchema": {"type": "object", "properties": {"query": string}, "required": ["query"]}},
        {"name": "get_issue", "description": HOSTILE_DESCRIPTION,
         "inputSchema": {"type": "object", "properties": {"key": string}, "required": ["key"]}},
    ]


OLD_LIST = "List issues of a project by state, newest first."
NEW_LIST = "List or search issues of a project by state or text, newest first."

BENCH = """server: {tools_file: tools.json}
cases:
%s  - id: read-web-7
    input: Read WEB-7
    expect: [{tool: get_issue, args: {key: WEB-7}}]
  - id: thanks
    input: Thanks!
    expect: []
  - id: owner-of-login-bug
    input: Who reported the login bug?
    expect:
      - {tool: search_issues, args: {query: {regex: "(?i).*login.*"}}}
      - {tool: get_issue, args: {key: {from_result: {tool: search_issues, path: "items.0.key"}}}}
    mocks:
      search_issues: [{result: {structured: {items: [{key: WEB-7, title: "Login <b>times</b> out"}]}}}]
      get_issue:
        - {when: {key: WEB-7}, result: {text: "WEB-7 reported by alice </pre><script>window.__pwned=3</script>"}}
    claims:
      - {claim: "Names alice", check: {contains: alice}}
  - id: open-web-bugs
    input: What open bugs does WEB have?
    expect: [{tool: list_issues, args: {project: WEB}}]
    mocks:
      list_issues: [{when: {project: WEB}, result: {structured: {items: []}}}]
    claims:
      - {claim: "Says there are none", check: {contains: "no open"}}
"""
LIST_CASES = 8


def script(server: ScriptedModelServer, flipped: int) -> None:
    """The scripted model: ``flipped`` of the list cases reach for search_issues (the description change's
    effect), the read case passes, the small talk gets hostile text, and two flows (one passes, one misses)."""
    for i in range(LIST_CASES):
        if i < flipped:
            server.call(f"Open issues of project P{i}", "search_issues", query=f"project:P{i} is:open")
        else:
            server.call(f"Open issues of project P{i}", "list_issues", project=f"P{i}", state="open")
    server.call("Read WEB-7", "get_issue", key="WEB-7")
    server.script("Thanks!", {"tool_calls": [{"name": "<img src=x onerror=window.__pwned=2>", "arguments": {}}]})
    server.flow("Who reported the login bug?", [{"name": "search_issues", "arguments": {"query": "login"}}],
                [{"name": "get_issue", "arguments": {"key": "WEB-7"}}], "It was alice. <img src=x onerror=1>")
    server.flow("What open bugs does WEB have?", [{"name": "list_issues", "arguments": {"project": "MOBILE"}}],
                "There are 3 bugs </details><script>window.__pwned=4</script>")


def compare_project(pytester: pytest.Pytester, server: ScriptedModelServer, *args: str) -> pytest.RunResult:
    """A baseline run, then a run after list_issues' description changed that sends 6 of its 8 cases to
    search_issues (a significant drop), with the HTML report, the JSON report and JUnit XML."""
    cases = "".join(f"  - id: list-p{i}\n    input: Open issues of project P{i}\n"
                    f"    expect: [{{tool: list_issues, args: {{project: P{i}}}, extra_args: allow}}]\n"
                    for i in range(LIST_CASES))
    make_project(pytester, server, {"bench.mcpeval.yaml": BENCH % cases}, tools=tools(OLD_LIST))
    script(server, 0)
    assert run(pytester, "--mcp-models=fake", "--mcp-record=off", "--mcp-save-baseline=base.json").ret == 0
    (pytester.path / "tools.json").write_text(json.dumps(tools(NEW_LIST)))
    script(server, 6)
    return run(pytester, "--mcp-models=fake", "--mcp-record=off", "--mcp-compare=base.json",
               "--mcp-fail-on-drop=0.02", "--mcp-html=out/report.html", "--mcp-report=report.json",
               "--junitxml=junit.xml", *args)


class Page(HTMLParser):
    """Every element and the text of the page, as a browser's parser sees the tags."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        (self.scripts if self._in_script else self.text).append(data)

    @classmethod
    def of(cls, page: str) -> Page:
        parser = cls()
        parser.feed(page)
        parser.close()
        return parser

    def count(self, tag: str, **attrs: str) -> int:
        return sum(1 for t, a in self.tags if t == tag and all(a.get(k) == v for k, v in attrs.items()))


SAFE_TAGS = {"html", "head", "meta", "link", "title", "style", "body", "header", "h1", "h2", "h3", "h4", "p", "nav",
             "a", "main", "section", "div", "span", "b", "i", "table", "thead", "tbody", "tr", "th", "td", "details",
             "summary", "code", "pre", "ul", "ol", "li", "del", "ins", "svg", "line", "text", "polyline", "circle",
             "script"}


def assert_only_text(page: str, hostile: list[str]) -> Page:
    """No element or attribute the page does not write itself, exactly its own two scripts, and every hostile
    string present as text."""
    parsed = Page.of(page)
    assert {tag for tag, _ in parsed.tags} <= SAFE_TAGS
    assert not [(t, k) for t, attrs in parsed.tags for k in attrs if k.startswith("on") or k in ("src", "srcdoc")]
    assert [a.get("type") for t, a in parsed.tags if t == "script"] == ["application/json", None]
    assert not [a for t, a in parsed.tags if t == "a" and not str(a.get("href", "")).startswith("#")]
    text = "".join(parsed.text)
    values = {v for _, attrs in parsed.tags for v in attrs.values()}
    for value in hostile:  # as text, or as a whole attribute value (a title)
        assert value in text or value in values, value[:80]
    return parsed


def test_a_compared_run_writes_the_page_even_when_the_gate_fails(pytester: pytest.Pytester,
                                                                 model_server: ScriptedModelServer) -> None:
    result = compare_project(pytester, model_server)
    assert result.ret == 1  # the drop fails the gate; the page is written all the same
    result.stdout.fnmatch_lines(["HTML report written to *report.html", "*GATE FAILED model fake: accuracy dropped*"])
    report = read_report(pytester)
    page = (pytester.path / "out" / "report.html").read_text(encoding="utf-8")
    parsed = assert_only_text(page, [
        HOSTILE_DESCRIPTION[:1000] + "… [truncated, 3,124 chars]",  # the tool's title in the catalog: cut, visibly
        "<img src=x onerror=window.__pwned=2>",  # a tool name the model invented
        "WEB-7 reported by alice </pre><script>window.__pwned=3</script>",  # a mock's answer
        "There are 3 bugs </details><script>window.__pwned=4</script>",  # a final answer
    ])
    assert page == render(report)  # the page is the report's alone (its comparison holds the baseline's part)
    # the description diff next to the F1 change it caused
    (change,) = re.findall(r'<div class="desc-change" data-tool="list_issues">.*?</div></div>', page)
    assert ('<pre class="diff"><span class="dl del"><span class="sign">-</span>List issues of a project by '
            '<del>state,</del> newest first.</span><span class="dl ins"><span class="sign">+</span>List<ins> or '
            'search</ins> issues of a project by <ins>state or text,</ins> newest first.</span></pre>') in change
    assert "significant drop" in change and "1.000 → 0.400" in change  # 8/8 -> 2/(2 + 0 + 6) ... F1 of list_issues
    f1 = next(c for c in report["comparison"]["changes"] if c["metric"] == "f1[list_issues]")
    assert f1["drop"] and f"{f1['diff']:+.3f}" in change
    # the heatmap: list_issues -> search_issues, 6 cases, with the count in the cell and on hover
    assert parsed.count("td", title="expected list_issues, called search_issues: 6 cases") == 1
    assert '<td class="x5" title="expected list_issues, called search_issues: 6 cases">6' in page
    # headline with intervals and the comparison's verdict
    accuracy = next(c for c in report["comparison"]["changes"] if c["metric"] == "accuracy")
    assert "95% CI [" in page and f"vs baseline {accuracy['before']:.1%}: " in page
    # the flows' transcripts: the failed one open, answers with their source
    at = {c["id"]: i for i, c in enumerate(report["cases"])}
    assert f'<details class="flow" id="flow-{at["owner-of-login-bug"]}"><summary>' in page
    assert f'<details class="flow" id="flow-{at["open-web-bugs"]}" open><summary>' in page
    assert '<span class="badge b-unmatched">unmatched</span>' in page and '<span class="badge b-mock">mock' in page
    assert "Says there are none" in page and "not_fulfilled" in page
    # JUnit XML: what each case measured, as properties
    junit = ET.parse(pytester.path / "junit.xml").getroot()
    props = {case.get("name"): [(p.get("name"), p.get("value")) for p in case.iter("property")]
             for case in junit.iter("testcase")}
    assert props["list-p0[fake]"] == [("model", "fake"), ("tool", "list_issues"), ("outcome", "missed"),
                                      ("called", "search_issues"), ("diagnosis", "wrong_tool")]
    assert props["list-p7[fake]"] == [("model", "fake"), ("tool", "list_issues"), ("outcome", "passed"),
                                      ("called", "list_issues")]
    assert props["open-web-bugs[fake]"] == [("model", "fake"), ("tool", "list_issues"), ("outcome", "missed"),
                                            ("called", "list_issues"), ("diagnosis", "wrong_argument_value"),
                                            ("coverage", "0.0000")]
    assert ("coverage", "1.0000") in props["owner-of-login-bug[fake]"]


def test_junit_properties_of_errors_and_repeats_under_xdist(pytester: pytest.Pytester,
                                                             model_server: ScriptedModelServer) -> None:
    """The properties ride on the test reports from the workers (without xdist: the first test above)."""
    bench = ("server: {tools_file: tools.json}\ncases:\n"
             "  - {id: ok, input: one, expect: [{tool: search_issues}]}\n"
             "  - {id: down, input: two, expect: [{tool: get_issue}]}\n")
    make_project(pytester, model_server, {"bench.mcpeval.yaml": bench}, tools=tools(OLD_LIST))
    model_server.call("one", "search_issues", query="x")
    model_server.script("two", {"status": 400, "error": "bad request"})
    result = run(pytester, "--mcp-models=fake", "--mcp-record=off", "--mcp-repeat=2", "--mcp-retries=0",
                 "--junitxml=junit.xml", "-n", "1")
    assert result.ret == 1
    junit = ET.parse(pytester.path / "junit.xml").getroot()
    props = {case.get("name"): [(p.get("name"), p.get("value")) for p in case.iter("property")]
             for case in junit.iter("testcase")}
    assert props["ok[fake]"] == [("model", "fake"), ("tool", "search_issues"),
                                 ("repeat", "0"), ("outcome", "passed"), ("called", "search_issues"),
                                 ("repeat", "1"), ("outcome", "passed"), ("called", "search_issues")]
    assert props["down[fake]"] == [("model", "fake"), ("tool", "get_issue"), ("repeat", "0"), ("outcome", "error"),
                                   ("repeat", "1"), ("outcome", "error")]


def test_the_ini_key_and_a_path_that_cannot_be_written(pytester: pytest.Pytester,
                                                       model_server: ScriptedModelServer) -> None:
    bench = "server: {tools_file: tools.json}\ncases:\n  - {id: one, input: one, expect: [{tool: search_issues}]}\n"
    make_project(pytester, model_server, {"bench.mcpeval.yaml": bench}, tools=tools(OLD_LIST),
                 ini_extra="mcp_html = reports/run.html\n")
    model_server.call("one", "search_issues", query="x")
    sub = pytester.mkdir("sub")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(sub)  # the ini key is relative to the rootdir, not to where pytest was started
        assert run(pytester, str(pytester.path), "--mcp-models=fake", "--mcp-record=off").ret == 0
    page = (pytester.path / "reports" / "run.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "Gate passed" in page
    result = run(pytester, "--mcp-models=fake", f"--mcp-html={sub}")
    result.stderr.fnmatch_lines([f"*--mcp-html={sub}: is a directory; give a file name"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_a_report_broken_by_a_hook_fails_the_gate_in_one_line(pytester: pytest.Pytester,
                                                               model_server: ScriptedModelServer) -> None:
    bench = "server: {tools_file: tools.json}\ncases:\n  - {id: one, input: one, expect: [{tool: search_issues}]}\n"
    make_project(pytester, model_server, {"bench.mcpeval.yaml": bench}, tools=tools(OLD_LIST))
    pytester.makeconftest("def pytest_mcpeval_report(config, report):\n"
                          "    report['models']['fake']['confusion']['off_diagonal'] = None\n")
    model_server.call("one", "search_issues", query="x")
    (pytester.path / "old.html").write_text("an older page")
    result = run(pytester, "--mcp-models=fake", "--mcp-record=off", "--mcp-html=old.html", "--mcp-report=r.json")
    result.stdout.fnmatch_lines(["GATE FAILED could not write --mcp-html=*old.html (the page could not be rendered: "
                                 "TypeError): *"])
    assert result.ret == 1 and not (pytester.path / "old.html").exists()
    assert "HTML report written" not in result.stdout.str()


# ------------------------------------------------------------------------------------- report dicts


def single(i: int, expected: str, called: str, model: str = "m", repeat: int = 0, **extra: Any) -> dict[str, Any]:
    right = expected == called
    return {"file": "b.mcpeval.yaml", "line": i + 3, "id": f"c{i}", "model": model, "repeat": repeat, "tags": [],
            "error": None, "expected": [] if expected == NONE else [{"tool": expected}], "expected_label": expected,
            "called": [] if called == NONE else [{"tool": called, "args": {}}], "called_label": called,
            "correct": right, "passed": right, "arguments": None, "diagnosis": None if right else "wrong_tool",
            **extra}


def flow(i: int, passed: bool, coverage: float | None, model: str = "m", repeat: int = 0) -> dict[str, Any]:
    case = single(1000 + i, "search_issues", "search_issues", model, repeat)
    claims = [] if coverage is None else [{"claim": "c", "method": "check", "score": coverage,
                                           "verdict": "fulfilled", "justification": "j"}]
    case.update(flow=True, passed=passed, coverage=coverage, order="in_order", order_ok=True, turns=1,
                trajectory=[{"calls": [], "content": "done"}], final_answer="done", claims=claims, matches=[],
                forbidden_called=[], unmatched=[], diagnosis=None if passed else "answer_incomplete")
    return case


def test_headline_point_estimates_are_the_reports_numbers() -> None:
    rng = np.random.default_rng(3)
    pool = ["a", "b", "c", NONE]
    cases = [single(i, str(e), str(e) if rng.random() < 0.7 else str(rng.choice(pool)))
             for i, e in enumerate(rng.choice(pool, 60))]
    cases[0].update(called_label="made_up", hallucinated_tools=["made_up"], correct=False, passed=False)  # invented
    cases += [flow(i, bool(i % 3), [1.0, 0.5, None][i % 3]) for i in range(9)]
    metrics = build_report(cases, {}, ["m"])["models"]["m"]
    est = headline(cases)
    assert est["accuracy"]["value"] == pytest.approx(metrics["accuracy"])
    assert est["pass_rate"]["value"] == pytest.approx(metrics["pass_rate"])
    assert est["macro_f1"]["value"] == pytest.approx(metrics["macro_f1"])  # the invented label left out, as there
    assert est["flow_pass_rate"]["value"] == pytest.approx(metrics["flows"]["pass_rate"])
    assert est["coverage"]["value"] == pytest.approx(metrics["claims"]["mean_coverage"])
    assert (est["accuracy"]["n"], est["coverage"]["n"]) == (60, 6)
    for e in est.values():
        assert e["low"] is not None and e["high"] is not None and e["low"] <= e["value"] <= e["high"]
    assert headline(cases) == est  # seeded


def test_the_interval_is_scipys_percentile_bootstrap() -> None:
    rng = np.random.default_rng(7)
    right = rng.random(200) < 0.8
    cases = [single(i, "a", "a" if ok else "b") for i, ok in enumerate(right)]
    est = headline(cases, resamples=20_000)["accuracy"]
    ref = bootstrap((right.astype(float),), np.mean, n_resamples=20_000, method="percentile",
                    confidence_level=0.95, random_state=np.random.default_rng(1)).confidence_interval
    assert est["low"] == pytest.approx(ref.low, abs=0.01) and est["high"] == pytest.approx(ref.high, abs=0.01)


def test_the_repeats_of_a_case_are_resampled_together() -> None:
    rng = np.random.default_rng(11)
    outcomes = rng.random(40) < 0.6
    once = [single(i, "a", "a" if ok else "b") for i, ok in enumerate(outcomes)]
    thrice = [single(i, "a", "a" if ok else "b", repeat=r) for i, ok in enumerate(outcomes) for r in range(3)]
    a, b = headline(once)["accuracy"], headline(thrice)["accuracy"]
    assert (b["n"], b["clusters"]) == (120, 40)
    # identical repeats carry no more evidence than one run: the same interval, not one sqrt(3) times narrower
    assert (b["value"], b["low"], b["high"]) == pytest.approx((a["value"], a["low"], a["high"]))


def test_confused_labels_sit_together() -> None:
    labels = ["a", "b", "c", "d", "e", NONE]
    m = np.zeros((6, 6), dtype=int)
    m[0, 3], m[3, 0], m[1, 4], m[3, 2] = 3, 2, 2, 1  # a<->d 5, b->e 2, d->c 1
    np.fill_diagonal(m, 4)
    cells = [(i, j, int(m[i, j])) for i in range(6) for j in range(6) if i != j and m[i, j]]
    order = [labels[i] for i in label_order(len(labels), cells)]
    assert order == ["d", "a", "c", "b", "e", NONE]  # the d-a-c group (6 confusions) first; never confused last
    assert label_order(6, []) == list(range(6))


def test_the_recall_curve_agrees_with_the_reports_recall_at_k() -> None:
    rng = np.random.default_rng(5)
    cases = []
    for i in range(30):
        ranks = {f"t{j}": {"rank": int(r) if r <= 20 else None, "score": 0.5, "outranked_by": []}
                 for j, r in enumerate(rng.integers(1, 24, size=int(rng.integers(1, 3))))}
        cases.append(single(i, "t0", "t1", retrieval={"tools": 20, "top": [], "expected": ranks}))
    cases.append(single(99, NONE, NONE, retrieval={"tools": 20, "top": [], "expected": {}}))  # expects no tool
    metrics = build_report(cases, {}, ["m"])["models"]["m"]["retrieval"]
    curve = dict(recall_curve(cases))
    assert len(curve) == 20 and all(curve[k] <= curve[k + 1] for k in range(1, 20))
    for k, value in metrics["recall_at"].items():
        assert curve[int(k)] == pytest.approx(value)


def test_the_word_diff_gives_both_texts_back() -> None:
    runs = word_diff(OLD_LIST, NEW_LIST)
    assert "".join(t for op, t in runs if op != "+") == OLD_LIST
    assert "".join(t for op, t in runs if op != "-") == NEW_LIST
    assert runs == [("=", "List"), ("+", " or search"), ("=", " issues of a project by "), ("-", "state,"),
                    ("+", "state or text,"), ("=", " newest first.")]


def test_the_description_diff_is_a_line_diff_with_the_changed_words_marked_in_each_line() -> None:
    """Removed lines, then added ones, as GitHub's unified view; the words are marked within each pair, and a
    line with no partner is removed (or added) whole, so removed and added words never run together."""
    old = "Get the issue.\nNewest first.\nDeprecated."
    new = "Return the internal issue.\nNewest first."
    lines = line_diff(old, new)
    assert lines == [("-", [(True, "Get"), (False, " the "), (False, "issue.")]),
                     ("+", [(True, "Return"), (False, " the "), (True, "internal "), (False, "issue.")]),
                     ("=", [(False, "Newest first.")]),
                     ("-", [(False, "Deprecated.")])]
    assert ["".join(t for _, t in runs) for op, runs in lines if op != "+"] == old.splitlines()
    assert ["".join(t for _, t in runs) for op, runs in lines if op != "-"] == new.splitlines()
    report = build_report([single(0, "get_issue", "get_issue")], {"c": {"server": "s", "tokens": 5, "tools": {
        "get_issue": {"hash": "h2", "description": new, "tokens": 5}}}}, ["m"])
    baseline = {"models": {}, "catalogs": {"c": {"server": "s", "tools": {
        "get_issue": {"hash": "h1", "description": old + " <b>", "tokens": 5}}}}}
    page = render(with_baseline(report, baseline))
    (diff,) = re.findall(r'<pre class="diff">.*?</pre>', page)
    assert diff == ('<pre class="diff">'
                    '<span class="dl del"><span class="sign">-</span><del>Get</del> the issue.</span>'
                    '<span class="dl ins"><span class="sign">+</span><ins>Return</ins> the <ins>internal </ins>issue.'
                    '</span><span class="dl"><span class="sign"> </span>Newest first.</span>'
                    '<span class="dl del"><span class="sign">-</span>Deprecated. &lt;b&gt;</span></pre>')


def test_a_local_models_load_is_shown_apart_from_its_latency() -> None:
    """The case that loaded the model carries ``load_s``; the latency quantiles are the queries' alone."""
    cases = [single(i, "a", "a", usage={"cached": False}, latency_s=0.01 * (i + 1)) for i in range(20)]
    cases[0]["load_s"] = 8.85
    usage = build_report(cases, {}, ["m"])["models"]["m"]["usage"]
    assert (usage["load_s"], usage["loads"], usage["latency_s"]["p95"]) == (8.85, 1, 0.2)
    assert ("latency p50 0.11 s, p95 0.20 s; model load 8.85 s (1 load, once per process and catalog, not in the "
            "latency)</p>") in render(build_report(cases, {}, ["m"]))
    assert "load_s" not in build_report(cases[1:], {}, ["m"])["models"]["m"]["usage"]  # only where one was paid


def test_the_baselines_f1_is_marked_on_the_bar() -> None:
    cases = [single(0, "a", "a"), single(1, "a", "b"), single(2, "b", "b")]
    report = build_report(cases, {}, ["m"])
    page = render(with_baseline(report, {"models": {"m": {"tools": {"a": 0.25}}}, "catalogs": {}}))
    assert '<b style="left:25.0%" title="baseline 0.250"></b>' in page  # the baseline run's F1 of `a`
    report["comparison"] = {"baseline": "b.json", "margin": 0.02, "level": 0.05, "drops": [], "improvements": [],
                            "flipped": [], "only_in_baseline": [], "only_in_current": [], "changes": [
                                {"model": "m", "metric": "f1[a]", "before": 0.8, "after": 0.667, "diff": -0.133,
                                 "ci_low": -0.5, "ci_high": 0.0, "p_value": 1.0, "n": 3, "significant": False,
                                 "drop": False, "improvement": False, "level": 0.05, "discordant": 1}]}
    page = render(with_baseline(report, {"models": {"m": {"tools": {"a": 0.25}}}, "catalogs": {}}))
    assert '<b style="left:80.0%" title="baseline 0.800"></b>' in page  # the paired cases' F1, where compared
    assert "not significant" in page


def test_argument_problems_are_counted_by_tool_kind_and_name() -> None:
    check = {"malformed": None, "hallucinated": ["sort"], "missing_required": [], "missing_expected": ["orderBy"],
             "unexpected": ["sort"], "mismatched": [{"name": "state", "expected": "all", "got": "open"}],
             "hallucination": True, "all_required": True, "all_expected": False, "exact": False}
    cases = [single(i, "list_issues", "list_issues", arguments=check) for i in range(2)]
    assert argument_problems(cases) == [("list_issues", "hallucinated", "sort", 2),
                                        ("list_issues", "mismatched", "state", 2),
                                        ("list_issues", "missing_expected", "orderBy", 2),
                                        ("list_issues", "unexpected", "sort", 2)]


HOSTILE = ["<script>window.__pwned=1</script>", "</details></summary></td></table>", "<img src=x onerror=alert(1)>",
           "``` `tick` ```", '"><svg onload=alert(1)>', "&lt;escaped&gt; &amp;", "a\u2028b\u2029c", "\ud83d lone"]


def hostile_report() -> tuple[dict[str, Any], dict[str, Any]]:
    """A report and a baseline with a hostile string in every field that a model, a server, a benchmark file
    or a user's hook can fill."""
    evil = " ".join(HOSTILE) + " " + "y" * 5000
    model = "m<script>window.__pwned=1</script>"
    cases = [single(i, "list_<img src=x onerror=alert(1)>", "search</details>", model) for i in range(3)]
    cases[0].update(content=evil, error=None, called=[{"tool": "search</details>", "args": None, "raw": evil,
                                                       "malformed": evil}])
    cases[1].update(id=evil, file=evil, diagnosis=evil)
    cases.append({**single(9, "x", "x", model), "error": evil, "correct": None, "passed": None})
    fl = flow(0, False, 0.0, model)
    fl["trajectory"] = [{"calls": [{"id": evil, "tool": evil, "args": {evil: evil},
                                    "answer": {"source": "mock", "is_error": True, "text": evil}}], "content": evil},
                        {"calls": [], "content": evil}]
    fl.update(final_answer=evil, claims=[{"claim": evil, "method": "judge", "score": 0.0, "verdict": "not_fulfilled",
                                          "justification": evil}], matches=[{"call": None, "problems": [evil]}],
              unmatched=[{"tool": evil, "args": {"q": evil}}])
    cases.append(fl)
    catalog = {"server": evil, "tokens": 10, "tools": {
        "list_<img src=x onerror=alert(1)>": {"hash": "new", "description": evil, "tokens": 10}}}
    report: dict[str, Any] = dict(build_report(cases, {"c1": catalog}, [model]))
    report["gate"] = {"passed": False, "failures": [evil], "usage_errors": [], "thresholds": [evil]}
    report["comparison"] = {"baseline": evil, "margin": 0.02, "level": 0.05, "drops": [evil], "improvements": [evil],
                            "changes": [{"model": model, "metric": "f1[list_<img src=x onerror=alert(1)>]",
                                         "before": 1.0, "after": 0.0, "diff": -1.0, "ci_low": -1.0, "ci_high": -1.0,
                                         "p_value": 0.01, "n": 9, "significant": True, "drop": True,
                                         "improvement": False, "level": 0.05, "discordant": 9}],
                            "flipped": [{"case": evil, "model": model, "expected_label": evil, "before": True,
                                         "after": False, "called_before": evil, "called_after": evil,
                                         "passed_before": True, "passed_after": False}],
                            "only_in_baseline": [evil], "only_in_current": [evil]}
    report["skipped"] = [{"file": evil, "line": 3, "id": evil, "model": evil, "reason": evil}]
    baseline = {"catalogs": {"c0": {"server": evil, "tokens": 1, "tools": {
        "list_<img src=x onerror=alert(1)>": {"hash": "old", "description": "old " + evil, "tokens": 1}}}}}
    return report, baseline


def test_hostile_strings_reach_the_page_only_as_text() -> None:
    report, baseline = hostile_report()
    page = render(with_baseline(report, baseline))
    parsed = assert_only_text(page, ["<script>window.__pwned=1</script>", "</details></summary></td></table>",
                                     "<img src=x onerror=alert(1)>", '"><svg onload=alert(1)>',
                                     "&lt;escaped&gt; &amp;", "``` `tick` ```"])
    assert "… [truncated, " in "".join(parsed.text)  # the long line is cut, visibly
    assert "1 case item skipped: not run, not in the metrics" in "".join(parsed.text)
    assert parsed.count("div", **{"class": "desc-change"}) == 1
    data = json.loads(parsed.scripts[0])  # the inline JSON: script-safe, and read back unchanged
    assert data["models"] == ["m<script>window.__pwned=1</script>"]
    assert "</" not in parsed.scripts[0] and "\u2028" not in parsed.scripts[0]
    for value in HOSTILE:
        assert json.loads(script_json({"v": value})) == {"v": value}
        assert not {"<", ">", "&", "\u2028", "\u2029"} & set(script_json(value))


def synthetic_report(cases_per_model: int = 1000, tools_count: int = 60) -> dict[str, Any]:
    """1,000 cases x 2 models as a real benchmark's report would look: 60 tools with descriptions, a tenth of
    the cases flows of three turns, a miss in five with arguments, model text and a diagnosis."""
    rng = np.random.default_rng(0)
    names = [f"tool_number_{i}" for i in range(tools_count)]
    catalog = {"server": "command: node server.js", "tokens": 0, "tools": {
        n: {"hash": f"{i:016x}", "description": f"Does thing {i}. " + "Lorem ipsum dolor sit amet. " * 10,
            "tokens": 80 + i} for i, n in enumerate(names)}}
    cases = []
    for model in ("openai/gpt-5", "anthropic/claude-sonnet-4-5"):
        for i in range(cases_per_model):
            expected = names[int(rng.integers(tools_count))]
            if i % 10 == 9:
                case = flow(i, bool(rng.random() < 0.7), float(rng.choice([0.5, 1.0])), model)
                call = {"id": f"call_{i}", "tool": expected, "args": {"owner": "octo", "repo": "hello"},
                        "answer": {"source": "mock", "is_error": False, "text": '{"items": [1, 2, 3]}' * 8}}
                case["trajectory"] = [{"calls": [call], "content": None}, {"calls": [call], "content": None},
                                      {"calls": [], "content": "The answer is three items. " * 4}]
                case["claims"] = [{"claim": "Says three", "method": "check", "score": 1.0, "verdict": "fulfilled",
                                   "justification": "contains 'three': found in the final answer"}]
            else:
                miss = rng.random() < 0.2
                called = names[int(rng.integers(tools_count))] if miss else expected
                content = "I looked at the repository and will now call the tool to answer. " * 4 if miss else None
                case = single(i, expected, called, model, content=content)
                case["expected"] = [{"tool": expected, "args": {"owner": "octo", "repo": {"regex": "(?i)hello.*"}}}]
                case["called"] = [{"tool": called, "args": {"owner": "octo", "repo": "hello-world", "page": 2}}]
            case["id"] = f"case-{i:04d}-what-users-ask"
            cases.append(case)
    return dict(build_report(cases, {"abcdef0123456789": catalog}, []))


def test_a_thousand_cases_for_two_models_stay_small_and_quick() -> None:
    report = synthetic_report()
    start = time.perf_counter()
    page = render(report)  # type: ignore[arg-type]
    elapsed = time.perf_counter() - start
    size = len(page.encode("utf-8"))
    assert size < 1_500_000, f"{size:,} bytes"
    assert elapsed < 5, f"{elapsed:.1f} s"
    parsed = Page.of(page)
    assert parsed.count("tr", **{"data-model": "0"}) == 1000 and parsed.count("details", **{"class": "flow"}) == 200


def test_the_page_needs_nothing_from_the_network() -> None:
    report, baseline = hostile_report()
    parsed = Page.of(render(with_baseline(report, baseline)))
    (csp,) = [a["content"] for t, a in parsed.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert csp is not None and csp.startswith("default-src 'none'; ") and "script-src 'sha256-" in csp
    urls = {v for _, attrs in parsed.tags for k, v in attrs.items() if k in ("src", "href", "action", "xmlns")}
    assert {u for u in urls if not str(u).startswith("#")} <= {"data:,", "http://www.w3.org/2000/svg"}  # a name
