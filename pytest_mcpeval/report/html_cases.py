"""The HTML report's case-level parts: the table of every case, in which each miss or error expands to what
was expected and what the model did, and each flow's transcript (turns, calls with their arguments, the
answers with their source, the final answer, the claims with verdicts and justifications).

Pure rendering of the report's case results (docs/report.md); every untrusted string is escaped
(:mod:`pytest_mcpeval.report.html_escape`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pytest_mcpeval.report import case_notes
from pytest_mcpeval.report.html_escape import LONG, TEXT, attr, compact, text
from pytest_mcpeval.results import CaseResult, TrajectoryCall

__all__ = ["case_label", "cases_table", "flow_anchor", "flow_transcripts", "outcome"]


def outcome(case: Mapping[str, Any]) -> str:
    """``error``, ``passed`` or ``missed``."""
    if case.get("error") or case.get("passed") is None:
        return "error"
    return "passed" if case.get("passed") else "missed"


def case_label(case: Mapping[str, Any]) -> str:
    """``file:line::id`` (``#r`` for a repeat after the first)."""
    repeat = case.get("repeat") or 0
    return f"{case.get('file', '')}:{case.get('line', '')}::{case.get('id', '')}" + (f" #{repeat}" if repeat else "")


def flow_anchor(index: int) -> str:
    return f"flow-{index}"


def _call(call: Mapping[str, Any]) -> str:
    """``tool {args}``, or the raw argument text and why it is unusable."""
    tool = f"<code>{text(call.get('tool', ''))}</code>"
    if call.get("args") is None and "raw" in call:
        return (f"{tool} <code>{text(call.get('raw', ''), LONG)}</code> "
                f"<span class=\"bad\">({text(call.get('malformed', 'malformed'))})</span>")
    if "args" in call and call["args"] is not None:
        return f"{tool} <code>{text(compact(call['args']), LONG)}</code>"
    return tool


def _list(title: str, items: Sequence[str]) -> str:
    if not items:
        return ""
    return f"<div>{title}: " + ", ".join(f"<code>{text(i)}</code>" for i in items) + "</div>"


def _arguments(check: Mapping[str, Any] | None) -> str:
    if not check:
        return ""
    parts = []
    if check.get("malformed"):
        parts.append(f"<li>malformed: {text(check['malformed'], LONG)}</li>")
    for key, label in (("hallucinated", "not in the schema"), ("missing_required", "required, missing"),
                       ("missing_expected", "expected, missing"), ("unexpected", "not expected")):
        names = check.get(key) or []
        if names:
            parts.append(f"<li>{label}: " + ", ".join(f"<code>{text(n)}</code>" for n in names) + "</li>")
    for m in check.get("mismatched") or []:
        parts.append(f"<li><code>{text(m.get('name', ''))}</code>: expected <code>{text(compact(m.get('expected')))}"
                     f"</code>, got <code>{text(compact(m.get('got')))}</code></li>")
    return f"<div><b>arguments</b><ul>{''.join(parts)}</ul></div>" if parts else ""


def _details_body(case: Mapping[str, Any]) -> str:
    """What a miss or an error expands to: the error, the expected calls (a flow's with how each was met), the
    calls made, what was wrong with the arguments, invented or forbidden tools, ranks, the model's text."""
    out = []
    if case.get("error"):
        out.append(f"<pre>{text(case['error'], LONG)}</pre>")
    out.extend(f'<div class="warn">{text(note, LONG)}</div>' for note in case_notes.notes(case))
    expected = case.get("expected") or []
    matches = case.get("matches") or []
    rows = []
    for i, exp in enumerate(expected):
        match = matches[i] if i < len(matches) else None
        if match is None:
            note = ""
        elif match.get("call") is not None:
            note = f' <span class="ok">met by call #{int(match["call"])}</span>'
        else:
            note = "".join(f'<div class="bad">{text(p, LONG)}</div>' for p in match.get("problems") or [])
        rows.append(f"<li>{_call(exp)}{note}</li>")
    out.append(f"<div><b>expected</b><ol start=\"0\">{''.join(rows)}</ol></div>" if rows
               else "<div><b>expected</b> no tool call</div>")
    if not case.get("error") or case.get("called"):
        called = case.get("called") or []
        items = "".join(f"<li>{_call(c)}</li>" for c in called)
        out.append("<div><b>called</b>" + (f"<ol start=\"0\">{items}</ol></div>" if called else " no tool</div>"))
    out.append(_arguments(case.get("arguments")))
    out.append(_list("tools not in the catalog", case.get("hallucinated_tools") or []))
    out.append(_list("forbidden tools called", case.get("forbidden_called") or []))
    retrieval = case.get("retrieval")
    if retrieval:
        ranks = ", ".join(f"<code>{text(tool)}</code> rank {text(info.get('rank') or '—')}"
                          for tool, info in (retrieval.get("expected") or {}).items())
        top = ", ".join(f"{text(name)} {score:.3f}" for name, score in (retrieval.get("top") or [])[:5])
        out.append(f"<div>{ranks}{'; ' if ranks else ''}top: <span class=\"mono\">{top}</span></div>")
    if case.get("content"):
        out.append(f"<div><b>model text</b><pre>{text(case['content'], TEXT)}</pre></div>")
    return "".join(out)


def _flow_summary(case: Mapping[str, Any], anchor: str) -> str:
    """A flow's row expands to the tools expected and called and a link to its transcript (which has the rest)."""
    expected = ", ".join(text(e.get("tool", "")) for e in case.get("expected") or []) or "no tool call"
    called = ", ".join(text(c.get("tool", "")) for c in case.get("called") or []) or "no tool"
    error = f"<pre>{text(case['error'], LONG)}</pre>" if case.get("error") else ""
    return (f"{error}<div><b>expected</b> <code>{expected}</code></div><div><b>called</b> <code>{called}</code>"
            f'</div><div><a href="#{anchor}">transcript ↓</a></div>')


def cases_table(cases: Sequence[CaseResult], model_index: Mapping[str, int], anchors: Mapping[int, str]) -> str:
    """Every case, one row each (model, case, expected tool, called tool, diagnosis, result); a miss or an
    error expands (``<details>``) to expected vs called.  ``anchors`` maps the position of a flow in ``cases``
    to its transcript's id."""
    rows = []
    for i, case in enumerate(cases):
        state = outcome(case)
        diagnosis = case.get("diagnosis") or ""
        label = text(case_label(case), 400)
        if state == "passed":
            cell = label
        else:
            body = _flow_summary(case, anchors[i]) if i in anchors else _details_body(case)
            cell = f"<details><summary>{label}</summary>{body}</details>"
        kind = " <span class=\"badge\">flow</span>" if case.get("flow") else ""
        if case.get("draft"):  # in no metric and no gate until reviewed (docs/drafting.md)
            kind += ' <span class="badge" title="draft: true, left out of the metrics and the gate">draft</span>'
        mark = '<td class="s ok">passed' if state == "passed" else f'<td class="s bad">{state}'
        extra = f' data-diagnosis="{attr(diagnosis)}"' if diagnosis else ""
        extra += " class=miss" if state != "passed" else ""
        rows.append(
            f'<tr data-model="{model_index.get(str(case.get("model")), -1)}" data-outcome="{state}"{extra}>'
            f"<td class=s>{text(case.get('model', ''))}<td class=wrap>{cell}{kind}"
            f"<td>{text(case.get('expected_label') or '')}<td>{text(case.get('called_label') or '')}"
            f"<td>{text(diagnosis)}{mark}</tr>")
    return ('<table id="cases" class="sortable"><thead><tr><th>model<th>case<th>expected<th>called<th>diagnosis'
            "<th>result</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _answer(call: TrajectoryCall) -> str:
    answer = call.get("answer") or {}
    source = str(answer.get("source", ""))
    badge = f'<span class="badge b-{attr(source)}">{text(source)}</span>'
    if answer.get("is_error"):
        badge += ' <span class="badge b-err">error result</span>'
    body = answer.get("text")
    return f"→ {badge}" + (f"<pre>{text(body, TEXT)}</pre>" if body is not None else "")


def _turns(case: Mapping[str, Any]) -> Iterator[str]:
    """One block per model turn: its text, then each call with its arguments and the answer it got."""
    trajectory = case.get("trajectory") or []
    for number, turn in enumerate(trajectory):
        calls = turn.get("calls") or []
        final = number == len(trajectory) - 1 and not calls and case.get("final_answer") is not None
        what = f" ({len(calls)} calls)" if len(calls) > 1 else ": the final answer" if final else ""
        parts = [f'<div class="who">turn {number}: model{what}</div>']
        if turn.get("content"):
            parts.append(f"<pre>{text(turn['content'], LONG if final else TEXT)}</pre>")
        for call in calls:
            parts.append(f'<div class="call">{_call(call)} {_answer(call)}</div>')
        yield f'<div class="turn">{"".join(parts)}</div>'


def _claims(case: Mapping[str, Any]) -> str:
    claims = case.get("claims") or []
    if not claims:
        return ""
    rows = "".join(
        f"<tr><td>{text(c.get('claim', ''), LONG)}<td>{text(c.get('method', ''))}"
        f'<td><span class="badge b-{attr(c.get("verdict", ""))}">{text(c.get("verdict", ""))}</span>'
        f"<td class=n>{float(c.get('score', 0)):.1f}<td>{text(c.get('justification', ''), LONG)}</tr>"
        for c in claims)
    coverage = case.get("coverage")
    head = f"claims (coverage {coverage:.3f})" if isinstance(coverage, int | float) else "claims"
    return (f"<h4>{head}</h4><table><thead><tr><th>claim<th>method<th>verdict<th>score<th>justification</tr>"
            f"</thead><tbody>{rows}</tbody></table>")


def flow_transcripts(cases: Sequence[CaseResult], anchors: Mapping[int, str]) -> str:
    """One ``<details>`` per flow in ``cases`` (positions in ``anchors``), open when it did not pass."""
    out = []
    for i, case in enumerate(cases):
        if i not in anchors:
            continue
        state = outcome(case)
        bits = [state if state != "missed" else f"missed: {case.get('diagnosis') or ''}",
                f"{int(case.get('turns') or 0)} turns", f"order {case.get('order', '')}"]
        if not case.get("order_ok", True):
            bits.append("order did not hold")
        if isinstance(case.get("coverage"), int | float):
            bits.append(f"coverage {case['coverage']:.3f}")
        css = "ok" if state == "passed" else "bad"
        summary = (f"{text(case_label(case), 400)} <span class=\"{css}\">{text(' · '.join(bits))}</span>")
        parts = [_details_body({k: v for k, v in case.items() if k != "content"}), "<h4>transcript</h4>",
                 *_turns(case)]
        if case.get("final_answer") is None and not case.get("error"):
            parts.append('<div class="warn">no final answer (the flow reached its turn limit, or its last reply had '
                         "no text)</div>")
        unmatched = case.get("unmatched") or []
        if unmatched:
            parts.append("<div><b>calls no mock answered</b> (gaps of the benchmark file)<ul>"
                         + "".join(f"<li>{_call(c)}</li>" for c in unmatched) + "</ul></div>")
        parts.append(_claims(case))
        is_open = " open" if state != "passed" else ""
        out.append(f'<details class="flow" id="{anchors[i]}"{is_open}><summary>{summary}</summary>'
                   f"{''.join(parts)}</details>")
    return "".join(out)
