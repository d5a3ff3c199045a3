"""Escaping for the Markdown the plugin writes, one function per place a string can land.

The Markdown goes to ``$GITHUB_STEP_SUMMARY`` and pull request comments, rendered by GitHub (CommonMark
with GFM tables, raw HTML allowed and only lightly filtered).  Every string the plugin did not write
itself (tool names and descriptions, case ids, model names and output, error text, file names) goes
through the function for its context, so it renders as the text it is and never as markup:

* :func:`code`: an inline code span (table cells, bullets, headings);
* :func:`text`: plain text in a table cell, a bullet or a sentence;
* :func:`html_text`: text inside raw HTML (``<summary>``), where Markdown is not parsed;
* :func:`fenced`: a fenced code block (a description diff).

Each also writes every control character as its escape (``\\x1b``, ``\\u202e``) through
:func:`pytest_mcpeval.text.printable`, the one escaper of control characters that the terminal and the HTML page
use too: GitHub shows a step summary's raw ESC and BEL to whoever copies it into a terminal, and a bidirectional
override makes a name read other than it is.  Long values are cut with a visible marker (:func:`truncate`).  All
functions are pure.
"""

from __future__ import annotations

import html
import re

from pytest_mcpeval.text import marker, printable, truncate

MAX_INLINE = 200  # characters of a name, an id or a table cell
MAX_SENTENCE = 1000  # characters of a gate failure sentence
MAX_BLOCK = 4000  # characters of a fenced block (a description diff)

# str.splitlines' separators: CommonMark ends a line at \n or \r, the rest are folded too for one look.
_LINE_BREAK = re.compile(r"\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
_BACKTICKS = re.compile(r"`+")
_FENCE_START = re.compile(r"[ \t]*(`+)")
# Always markup somewhere: escapes, code, emphasis, links and images, strikethrough, math, table cells.
# An underscore run between two letters or digits (``list_issues``) can neither open nor close emphasis
# (CommonMark's flanking rules), so only the others are escaped.
_PUNCTUATION = re.compile(r"[\\`*\[\]!~$|]|_+")
# Markup only where a block starts: headings, list items, setext underlines, ordered list items.
_BLOCK_START = re.compile(r"[#+=-]|\d{1,9}(?=[.)])")


def one_line(value: object) -> str:
    """``str(value)`` with every line break folded to a space."""
    return _LINE_BREAK.sub(" ", str(value))


def code(value: object, *, table: bool = False, limit: int = MAX_INLINE) -> str:
    """``value`` as an inline code span its own backticks cannot close.

    CommonMark: the fence is a backtick run longer than the longest run inside; one space pads each side
    when the content starts or ends with a backtick, or starts and ends with a space (the renderer strips
    one of each).  Line breaks become spaces.  In a GFM table cell (``table=True``) pipes are written
    ``\\|``, which GFM unescapes before it parses the code span (elsewhere ``\\|`` would show as is).
    """
    content = truncate(printable(one_line(value)), limit)
    if table:
        content = content.replace("|", "\\|")
    if not content:  # a code span cannot be empty: one space is the closest
        return "` `"
    longest = max((len(run) for run in _BACKTICKS.findall(content)), default=0)
    fence = "`" * (longest + 1)
    stripped = content[0] == content[-1] == " " and bool(content.strip(" "))  # the renderer strips one of each
    space = " " if content[0] == "`" or content[-1] == "`" or stripped else ""
    return f"{fence}{space}{content}{space}{fence}"


def text(value: object, *, limit: int = MAX_INLINE) -> str:
    """``value`` as plain text for a table cell, a bullet or a sentence: one line, runs of whitespace
    collapsed, ``&``, ``<`` and ``>`` as HTML entities, pipes and the punctuation that starts inline markup
    backslash-escaped, and a leading block marker (``#``, ``-``, ``+``, ``=``, ``1.``) escaped too."""
    content = truncate(printable(" ".join(str(value).split())), limit)
    content = _PUNCTUATION.sub(lambda m: _escape_punctuation(m, content), content)
    content = html.escape(content, quote=False)
    start = _BLOCK_START.match(content)
    if start is None:
        return content
    if start.group()[0].isdigit():  # "1." -> "1\."
        return f"{start.group()}\\{content[start.end():]}"
    return "\\" + content


def _escape_punctuation(match: re.Match[str], content: str) -> str:
    run, start, end = match.group(), match.start(), match.end()
    if run[0] == "_" and content[start - 1:start].isalnum() and content[end:end + 1].isalnum():
        return run  # intraword: inert
    return "".join("\\" + char for char in run)


def html_text(value: object, *, limit: int = MAX_INLINE) -> str:
    """``value`` as text inside raw HTML (``<summary>…</summary>``): one line (a blank line would end the
    HTML block), HTML-escaped; no Markdown is parsed there, so nothing else is needed."""
    return html.escape(truncate(printable(" ".join(str(value).split())), limit), quote=True)


def fenced(body: str, info: str = "", *, limit: int = MAX_BLOCK) -> list[str]:
    """The lines of a fenced code block holding ``body``: a backtick fence longer than every backtick run
    that starts a line of ``body`` (only such a line can close a backtick fence; tildes cannot), at least
    three.  A longer ``body`` is cut at ``limit`` characters, with the marker on a line of its own."""
    lines = body.splitlines() if len(body) <= limit else [*body[:limit].splitlines(), marker(len(body))]
    lines = [printable(line) for line in lines]
    longest = max((len(m.group(1)) for line in lines if (m := _FENCE_START.match(line))), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + info, *lines, fence]
