"""The confusion heatmap of the HTML page, bounded at any catalog size.

A matrix of up to :data:`MATRIX` labels is shown whole.  A bigger one (a catalog of 2,000 tools has 4 million
cells: a 19 MB page Chromium needed two minutes to open) shows only the labels confused at least once, either
way: every other label's row and column hold nothing but the diagonal, which the per-tool table already gives
(its support and predicted counts).  When even the confused labels are more than :data:`MATRIX`, the matrix keeps
the :data:`MATRIX` with the most confusions and every confusion outside it is listed below it (the first
:data:`LIST`; the report's ``confused_pairs`` has them all).  So the page holds at most
``MATRIX ** 2`` heatmap cells, whatever the catalog.  Pure rendering of the report's sparse ``confusion``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pytest_mcpeval.report.html_data import label_order
from pytest_mcpeval.report.html_escape import attr, text
from pytest_mcpeval.results import Confusion
from pytest_mcpeval.text import plural

__all__ = ["MATRIX", "heatmap"]

MATRIX = 100  # labels a heatmap shows at most (10,000 cells)
LIST = 200  # confusions listed outside a capped matrix


def _level(count: int, top: int) -> int:
    return max(1, min(5, math.ceil(5 * math.sqrt(count / top)))) if top else 1


def _shown(confusion: Confusion) -> list[int]:
    """The labels (indices) the matrix shows, in :func:`label_order`."""
    n = len(confusion["labels"])
    cells = confusion["off_diagonal"]
    if n <= MATRIX:  # but the labels of an empty row and column: a tool no case expects and none called
        used = {k for i, j, _ in cells for k in (i, j)} | {i for i, d in enumerate(confusion["diagonal"]) if d}
        return [i for i in label_order(n, cells) if i in used]
    total = [0] * n
    for i, j, count in cells:
        total[i] += count
        total[j] += count
    confused = sorted((i for i in range(n) if total[i]), key=lambda i: (-total[i], i))[:MATRIX]
    keep = set(confused)
    return [i for i in label_order(n, [c for c in cells if c[0] in keep and c[1] in keep]) if i in keep]


def _table(labels: Sequence[str], order: Sequence[int], confusion: Confusion) -> str:
    diagonal = confusion["diagonal"]
    off = {(i, j): count for i, j, count in confusion["off_diagonal"]}
    top_diagonal = max(diagonal, default=0)
    top_off = max(off.values(), default=0)
    head = "".join(f'<th class="c" title="{attr(labels[j])}">{text(labels[j], 40)}' for j in order)
    rows = []
    expected = {i for i, _, _ in confusion["off_diagonal"]} | {i for i, d in enumerate(diagonal) if d}
    for i in (i for i in order if i in expected):  # a tool no case expects has an empty row: its column is enough
        cells = []
        for j in order:
            count = diagonal[i] if i == j else off.get((i, j), 0)
            if not count:
                cells.append("<td>")
                continue
            css = f"d{_level(count, top_diagonal)}" if i == j else f"x{_level(count, top_off)}"
            tip = f"expected {labels[i]}, called {labels[j]}: {plural(count, 'case')}"
            cells.append(f'<td class="{css}" title="{attr(tip, 500)}">{count}')
        rows.append(f'<tr><th class="r" title="{attr(labels[i])}">{text(labels[i], 40)}{"".join(cells)}')
    return ('<div class="heatwrap"><table class="heat"><thead><tr><th class="corner">expected ↓ called →'
            f'{head}</thead><tbody>{"".join(rows)}</tbody></table></div>')


def _outside(labels: Sequence[str], shown: set[int], confusion: Confusion) -> str:
    """The confusions a capped matrix leaves out, most frequent first."""
    left = sorted(((count, labels[i], labels[j]) for i, j, count in confusion["off_diagonal"]
                   if i not in shown or j not in shown), key=lambda c: (-c[0], c[1], c[2]))
    rows = "".join(f"<tr><td>{text(e)}<td>{text(c)}<td class=n>{count}</tr>" for count, e, c in left[:LIST])
    more = (f"<p class=muted>The first {LIST} of {len(left):,}; the report's <code>confused_pairs</code> has every "
            "one.</p>" if len(left) > LIST else "")
    return (f"<p>{plural(len(left), 'confusion')} outside the matrix:</p><table class=sortable><thead><tr>"
            f"<th>expected<th>called<th>cases</tr></thead><tbody>{rows}</tbody></table>{more}")


def heatmap(confusion: Confusion) -> str:
    """The confusion matrix as a table of coloured cells: rows expected, columns called, in :func:`label_order`;
    each non-empty cell shows its count and says it on hover (``title``).  Bounded as the module says."""
    labels = confusion["labels"]
    n = len(labels)
    if not n:
        return ""
    order = _shown(confusion)
    if n <= MATRIX:
        rows = {i for i, _, _ in confusion["off_diagonal"]} | {i for i, d in enumerate(confusion["diagonal"]) if d}
        unexpected = [labels[i] for i in order if i not in rows]
        note = (f"<p class=muted>No row for {plural(len(unexpected), 'tool')} no case expects (called only: "
                f"{text(', '.join(unexpected), 400)}); their calls are in the columns.</p>") if unexpected else ""
        return note + _table(labels, order, confusion)
    involved = {k for i, j, _ in confusion["off_diagonal"] for k in (i, j)}
    if not involved:
        return (f"<p class=muted>None of the {n:,} tools was confused with another: every row holds only its "
                "diagonal, which the per-tool table gives (support).</p>")
    note = (f"<p class=muted>{n:,} tools: the matrix shows the {len(involved):,} confused at least once (expected "
            f"and another called, or called for another). The other {n - len(involved):,} are left out: their rows "
            "and columns hold only the diagonal (their counts are the support in the per-tool table).")
    if len(involved) > MATRIX:
        note += (f" Of the confused, the {MATRIX} with the most confusions are in the matrix and the other "
                 f"{len(involved) - MATRIX:,} are left out too; every confusion outside the matrix is listed below it.")
        return note + "</p>" + _table(labels, order, confusion) + _outside(labels, set(order), confusion)
    return note + "</p>" + _table(labels, order, confusion)
