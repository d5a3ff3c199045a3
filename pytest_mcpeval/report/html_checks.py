"""The HTML report's checks: how each file's tool-catalog snapshot came out (``--mcp-snapshots``) and what its
lint found (``--mcp-lint``), from the report's ``snapshots`` and ``lint`` sections (docs/report.md).

These items fail the run like any test; the page shows them so that a reader of the page alone learns that
a server's catalog changed under the benchmark, or that a file expects calls its server cannot accept.
Pure rendering; every string (paths, server labels, diffs of tool descriptions, lint messages) is escaped.
"""

from __future__ import annotations

from pytest_mcpeval.report.html_escape import LONG, attr, text
from pytest_mcpeval.results import LintSection, Report, SnapshotResult
from pytest_mcpeval.text import plural

__all__ = ["checks"]

DIFF = 40_000  # characters of a changed catalog's diff shown (the report keeps its first 400 lines)
PAIRS = 10  # confusable pairs shown before "all N pairs"

_SNAPSHOT = {  # outcome -> (css class, what it means)
    "matched": ("ok", "matches its snapshot"),
    "recorded": ("ok", "snapshot recorded (--snapshot-update)"),
    "updated": ("warn", "snapshot updated to the server's catalog (--snapshot-update)"),
    "missing": ("bad", "no snapshot yet"),
    "changed": ("bad", "changed since its snapshot"),
    "error": ("bad", "not compared (an error: the server gave no catalog, or syrupy failed)"),
}


def _snapshot_row(s: SnapshotResult) -> str:
    css, meaning = _SNAPSHOT.get(s["outcome"], ("bad", s["outcome"]))
    body = ""
    if s["outcome"] != "matched" and (s["message"] or s["diff"]):
        diff = f'<pre class="snapdiff">{text(chr(10).join(s["diff"]), DIFF)}</pre>' if s["diff"] else ""
        body = f"<div>{text(s['message'], LONG)}</div>{diff}"
    where = f"<code>{text(s['snapshot'], 400)}</code>" if s["snapshot"] else "—"
    status = f'<span class="{css}">{text(meaning)}</span>'
    if body:
        open_ = " open" if css == "bad" else ""
        status = f"<details{open_}><summary>{status}</summary>{body}</details>"
    return (f'<tr data-outcome="{attr(s["outcome"])}"><td>{text(s["file"], 400)}<td>{text(s["server"], 400)}'
            f"<td class=wrap>{status}<td>{where}</tr>")


def _snapshots(snapshots: dict[str, SnapshotResult]) -> str:
    if not snapshots:
        return ""
    failed = sum(1 for s in snapshots.values() if _SNAPSHOT.get(s["outcome"], ("bad",))[0] == "bad")
    head = (f"<h3>Tool-catalog snapshots ({plural(len(snapshots), 'file')}"
            f"{f', {failed} failed' if failed else ''})</h3>")
    return (f'{head}<table id="snapshots"><thead><tr><th>file<th>server<th>catalog<th>snapshot</tr></thead><tbody>'
            + "".join(_snapshot_row(s) for s in snapshots.values()) + "</tbody></table>")


def _lint_file(path: str, section: LintSection) -> str:
    problems = section["problems"]
    out = [f"<h4>{text(path, 400)} <span class=\"ci\">catalog {text(section['catalog'])}</span></h4>"]
    if problems:
        rows = "".join(
            f"<tr><td class=n>{text(p['line'] if p['line'] is not None else '—')}<td>{text(p['case'])}"
            f"<td><code>{text(p['field'])}</code><td class=\"{'warn' if p['kind'] == 'unchecked' else 'bad'}\">"
            f"{text(p['kind'])}<td class=wrap>{text(p['message'], LONG)}</tr>" for p in problems)
        out.append("<table class=lint><thead><tr><th>line<th>case<th>field<th>kind<th>message</tr></thead>"
                   f"<tbody>{rows}</tbody></table>")
    else:
        out.append('<p class="ok">Every expected call fits the server\'s schemas.</p>')
    pairs = section["confusable"]
    if pairs:
        pair_rows = [f"<tr><td><code>{text(p['tools'][0])}</code> · <code>{text(p['tools'][1])}</code>"
                     f"<td class=n>{p['similarity']:.3f}"
                     f"<td class=\"n{' bad' if p['confused'] else ''}\">{p['confused']}</tr>"
                     for p in pairs]
        table = "<table><thead><tr><th>tools that read alike<th>similarity<th>confused</tr></thead><tbody>"
        shown = f"{table}{''.join(pair_rows[:PAIRS])}</tbody></table>"
        if len(pair_rows) > PAIRS:
            shown += (f"<details><summary>all {len(pair_rows)} pairs</summary>{table}"
                      f"{''.join(pair_rows[PAIRS:])}</tbody></table></details>")
        out.append(shown)
    return "".join(out)


def _lint(lint: dict[str, LintSection]) -> str:
    if not lint:
        return ""
    problems = sum(len(s["problems"]) for s in lint.values())
    return (f"<h3>Lint ({plural(len(lint), 'file')}, {plural(problems, 'problem')})</h3>"
            + "".join(_lint_file(path, section) for path, section in lint.items()))


def checks(report: Report) -> str:
    """The checks' section body, or ``""`` when the run had neither ``--mcp-snapshots`` nor ``--mcp-lint``."""
    return _snapshots(report.get("snapshots") or {}) + _lint(report.get("lint") or {})
