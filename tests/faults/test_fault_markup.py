"""Fault: hostile strings in the Markdown run summary and PR comparison render as text, never as markup.

Tool names (including names a model invents), tool descriptions, case ids, file and model names, model
output and error text come from outside the plugin, and the Markdown lands in ``$GITHUB_STEP_SUMMARY`` and
pull request comments.  Each page is rendered with markdown-it-py (CommonMark, GFM tables and
strikethrough, raw HTML on as GitHub allows it) and parsed with :class:`html.parser.HTMLParser`.  A
hostile page must hold exactly the elements of the clean page built the same way with harmless
placeholders (the same tags, as many of each, ``<details>``/``<summary>`` included), no comment or
declaration, and every hostile string as text, or cut with the truncation marker.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable
from html.parser import HTMLParser
from typing import Any, cast

import pytest
from conftest import make_project, run
from markdown_it import MarkdownIt

from pytest_mcpeval.gate.compare import compare, comparison_section
from pytest_mcpeval.report.escape import MAX_BLOCK, MAX_INLINE, code, fenced, html_text, text
from pytest_mcpeval.report.markdown import comparison_markdown, summary
from pytest_mcpeval.results import Report
from pytest_mcpeval.testing import ScriptedModelServer
from pytest_mcpeval.text import marker, truncate

LONG = ("long:" + "".join(f"{i:05d}" for i in range(4000)))[:20_000]  # a 20,000-char line, prefix unique
HOSTILE: dict[str, str] = {
    "script": "<script>alert(1)</script>",
    "details-close": "</details>",
    "img-onerror": "<img src=x onerror=alert(1)>",
    "h2": "<h2>x</h2>",
    "backtick": "a`b",
    "edge-backticks": "`x`",
    "triple-backticks": "x```y",
    "fence-line": "```",
    "tilde-fence": "~~~",
    "pipe": "| pipe |",
    "bullet": "* bullet",
    "dash-bullet": "- dash",
    "ordered": "1. one",
    "heading": "# heading",
    "js-link": "[link](javascript:alert(1))",
    "image": "![i](x)",
    "autolink": "<https://example.com>",
    "comment": "<!-- open comment",
    "entity": "&lt;b&gt; &amp;",
    "emphasis": "**bold** _it_",
    "strike": "~~del~~",
    "backslash": "back\\slash\\",
    "long-line": LONG,
}
PLACEHOLDER = "harmless"


def md() -> MarkdownIt:
    """CommonMark, close to GitHub's renderer: raw HTML on (GitHub lets most of it through), GFM tables and
    strikethrough on."""
    return MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


class Page(HTMLParser):
    """The elements and the text of rendered HTML."""

    def __init__(self, markdown: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: Counter[str] = Counter()  # "<tag>" and "</tag>"
        self.other: list[str] = []  # comments, declarations, processing instructions: never ours
        self.chunks: list[str] = []
        self.blocks: list[str] = []  # the text of each <pre> block
        self._pre = False
        self.feed(md().render(markdown))
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[f"<{tag}>"] += 1
        if tag == "pre":
            self._pre = True
            self.blocks.append("")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[f"<{tag}/>"] += 1

    def handle_endtag(self, tag: str) -> None:
        self.tags[f"</{tag}>"] += 1
        self._pre = self._pre and tag != "pre"

    def handle_data(self, data: str) -> None:
        self.chunks.append(data)
        if self._pre:
            self.blocks[-1] += data

    def handle_comment(self, data: str) -> None:
        self.other.append(f"<!--{data}-->")

    def handle_decl(self, decl: str) -> None:
        self.other.append(f"<!{decl}>")

    def handle_pi(self, data: str) -> None:
        self.other.append(f"<?{data}>")

    def unknown_decl(self, data: str) -> None:
        self.other.append(f"<![{data}]>")

    @property
    def text(self) -> str:
        return "".join(self.chunks)


def shown(page: Page, value: str) -> int:
    """How many times ``value`` is shown as text; a long value, cut to its first MAX_INLINE characters, in
    how many pieces of text (an element's text shows it once, cut, where the placeholder may be twice)."""
    if len(value) <= MAX_INLINE:
        return page.text.count(value)
    return sum(value[:MAX_INLINE] in chunk for chunk in page.chunks)


def assert_only_text(hostile_markdown: str, clean_markdown: str, value: str) -> Page:
    """The hostile page renders the clean page's elements and nothing else, and shows ``value`` as text
    wherever the clean page shows the placeholder."""
    hostile, clean = Page(hostile_markdown), Page(clean_markdown)
    assert not hostile.other
    assert set(hostile.tags) <= set(clean.tags), set(hostile.tags) - set(clean.tags)
    assert hostile.tags == clean.tags
    places = clean.text.count(PLACEHOLDER) if len(value) <= MAX_INLINE else sum(
        PLACEHOLDER in chunk for chunk in clean.chunks)
    assert places > 0
    assert shown(hostile, value) >= places
    if len(value) > MAX_INLINE:
        assert value not in hostile.text and marker(len(value)) in hostile.text
        assert len(hostile_markdown) < 20 * MAX_BLOCK
    return hostile


# ------------------------------------------------------------------------------------------ run summary


def summary_report(s: str, gate_passed: bool) -> Report:
    """A report as the plugin builds it, with ``s`` in every string that comes from outside the plugin."""
    gate: dict[str, Any] = (
        {"passed": True, "thresholds": [f"{s} >= 0.4"], "failures": [], "usage_errors": []}
        if gate_passed else
        {"passed": False, "thresholds": ["accuracy >= 0.9"], "failures": [f"model {s}: accuracy 0.500 < 0.9", s],
         "usage_errors": [s]}
    )
    tool = {"precision": 0.5, "recall": 1.0, "f1": 0.667, "support": 1, "predicted": 2}
    return cast(Report, {
        "gate": gate,
        "models": {
            s: {"scored": 2, "errors": 1, "accuracy": 0.5, "macro_f1": 0.333, "pass_rate": 0.5,
                "arguments": {"exact_match_rate": None, "applicable": True},
                "tools": {s: tool, f"{s}-invented": {**tool, "precision": 0.0, "recall": 0.0, "f1": 0.0}},
                "confused_pairs": [{"expected": s, "called": f"{s}-invented", "count": 1}]},
        },
        "cases": [
            {"file": s, "id": "a", "model": s, "passed": False, "diagnosis": s, "error": None},
            {"file": f"{s}.mcpeval.yaml", "id": "b", "model": s, "passed": None, "diagnosis": None, "error": s},
        ],
    })


@pytest.mark.parametrize("gate_passed", [False, True], ids=["gate-failed", "gate-passed"])
@pytest.mark.parametrize("name", HOSTILE)
def test_summary_shows_hostile_strings_as_text(name: str, gate_passed: bool) -> None:
    value = HOSTILE[name]
    assert_only_text(summary(summary_report(value, gate_passed)), summary(summary_report(PLACEHOLDER, gate_passed)),
                     value)


# ------------------------------------------------------------------------------------------ comparison


def result(i: int, s: str, called: str, file: str = "", error: str | None = None) -> dict[str, Any]:
    return {"file": file or f"{s}.mcpeval.yaml", "id": f"case-{i}", "model": s, "repeat": 0, "error": error,
            "expected_label": s, "called_label": None if error else called, "correct": None if error else called == s,
            "passed": None if error else called == s}


def catalog(s: str, tail: str) -> dict[str, Any]:
    """Two tools named after ``s``: one whose description changes (``s`` on an unchanged line), one whose
    schema only changes."""
    description = f"Lists things.\n{s}\n{tail}"
    return {"digest-" + tail: {"server": "s", "tokens": 9, "tools": {
        s: {"hash": "h-" + tail, "description": description, "tokens": 5},
        f"{s}-schema": {"hash": "hs-" + tail, "description": s, "tokens": 4},
    }}}


def comparison_page(s: str) -> str:
    """Eight cases flip from ``s`` to an invented tool; one case only in the baseline, one only in this run,
    one left out for an error (``s`` as its text); ``s`` names the model, the file and the tools."""
    base = [result(i, s, s) for i in range(8)] + [result(8, s, s), result(9, s, s)]
    cur = [result(i, s, f"{s}-invented") for i in range(8)] + [result(9, s, s, error=s), result(10, s, s)]
    baseline = {"models": {s: {}}, "cases": base, "catalogs": catalog(s, "old tail")}
    current = {"models": {s: {}}, "cases": cur, "catalogs": catalog(s, "new tail")}
    comparison = compare(baseline, current, resamples=200)
    assert comparison.failures() and len(comparison.flipped) == 8
    assert comparison.only_in_baseline and comparison.only_in_current and comparison.excluded
    section = comparison_section(comparison, baseline, current, "baseline.json", comparison.correction)
    return comparison_markdown({**current, "comparison": section})  # type: ignore[typeddict-item]


@pytest.mark.parametrize("name", HOSTILE)
def test_comparison_shows_hostile_strings_as_text(name: str) -> None:
    value = HOSTILE[name]
    page = assert_only_text(comparison_page(value), comparison_page(PLACEHOLDER), value)
    (diff,) = page.blocks  # one description diff, whole: no line of it closed the fence
    body = f"--- baseline\n+++ current\n@@ -1,3 +1,3 @@\n Lists things.\n {value}\n-old tail\n+new tail"
    assert diff == (body if len(body) <= MAX_BLOCK else body[:MAX_BLOCK] + "\n" + marker(len(body))) + "\n"


# ------------------------------------------------------------------------------------------ end to end

INVENTED = "ev`il<img src=x onerror=alert(1)>"  # a tool name a model makes up
TOOL = "</details><h2>x</h2> `|` * bullet [link](javascript:alert(1))"  # an MCP tool name (any string)
ERROR = "<script>alert(1)</script> </details> | pipe | ```"
OUTPUT = "<h2>x</h2>\n```\n* bullet"  # the model's text next to its call
DESCRIPTION = "\n".join(["Lists things.", "<script>alert(1)</script>", "```", "</details> <img src=x onerror=alert(1)>",
                         "| pipe | * bullet", "[link](javascript:alert(1)) <h2>x</h2> a`b", "```"])
SAFE = {INVENTED: "invented_tool", TOOL: "other_tool", ERROR: "plain error", OUTPUT: "plain output",
        DESCRIPTION: "Lists things.\nsafe line"}


def tools(names: Callable[[str], str], after: bool = False) -> list[dict[str, Any]]:
    """``list_x`` (its description holds markup and fence lines) and a tool named with markup; ``after``
    changes the first line of the description, adds a last one and changes the other tool's schema."""
    description = names(DESCRIPTION)
    if after:
        description = description.replace("Lists things.", "Lists things (v2).") + "\nnew line"
    schema = "integer" if after else "string"
    return [{"name": "list_x", "description": description,
             "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}},
            {"name": names(TOOL), "description": "Other.", "inputSchema": {"type": "object",
                                                                           "properties": {"q": {"type": schema}}}}]


def summary_project(pytester: pytest.Pytester, server: ScriptedModelServer, names: Callable[[str], str]) -> None:
    bench = ("server: {tools_file: tools.json}\ncases:\n"
             "  - {id: a, input: one, expect: [{tool: list_x}]}\n"
             f"  - {{id: b, input: two, expect: [{{tool: {json.dumps(names(TOOL))}}}]}}\n"
             "  - {id: c, input: three, expect: [{tool: list_x}]}\n"
             "  - {id: d, input: four, expect: [{tool: list_x}]}\n")
    make_project(pytester, server, {"bench.mcpeval.yaml": bench}, tools=tools(names))
    server.script("one", {"tool_calls": [{"name": names(INVENTED), "arguments": {}}]})
    server.script("two", {"tool_calls": [{"name": "list_x", "arguments": {}}]})
    server.script("three", {"status": 400, "error": names(ERROR)})
    server.script("four", {"content": names(OUTPUT), "tool_calls": [{"name": "list_x", "arguments": {}}]})


def test_run_summary_end_to_end(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    """A model invents a tool named with markup, a tool's name and description hold markup, a provider
    error holds markup: ``--mcp-markdown`` renders all of it as text."""
    pages = {}
    for kind, names in (("clean", SAFE.__getitem__), ("hostile", str)):
        summary_project(pytester, model_server, names)
        result = run(pytester, "--mcp-models=fake", "--mcp-markdown=summary.md", "--mcp-record=off")
        assert result.ret == 1, result.stdout.str()  # a miss fails its item
        pages[kind] = (pytester.path / "summary.md").read_text(encoding="utf-8")
    assert "### Errors (excluded from the metrics) (1)" in pages["hostile"]
    hostile, clean = Page(pages["hostile"]), Page(pages["clean"])
    assert not hostile.other and hostile.tags == clean.tags
    for value in (INVENTED, TOOL, ERROR):
        assert hostile.text.count(value) >= clean.text.count(SAFE[value]) >= 1, value
    assert clean.text.count(SAFE[INVENTED]) >= 2 and clean.text.count(SAFE[TOOL]) >= 2  # a table, a bullet


def comparison_project(pytester: pytest.Pytester, server: ScriptedModelServer, names: Callable[[str], str],
                       after: bool) -> None:
    cases = "".join(f"  - {{id: c{i}, input: ask {i}, expect: [{{tool: list_x}}]}}\n" for i in range(8))
    make_project(pytester, server, {"bench.mcpeval.yaml": "server: {tools_file: tools.json}\ncases:\n" + cases},
                 tools=tools(names, after))
    for i in range(8):
        tool = names(INVENTED) if after and i < 6 else "list_x"
        server.script(f"ask {i}", {"tool_calls": [{"name": tool, "arguments": {}}]})


def test_comparison_end_to_end(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> None:
    """A changed description holding markup and ``` lines, a tool named with markup whose schema changed, a
    model that starts calling an invented tool: ``--mcp-compare`` renders all of it as text."""
    pages = {}
    for kind, names in (("clean", SAFE.__getitem__), ("hostile", str)):
        comparison_project(pytester, model_server, names, after=False)
        assert run(pytester, "--mcp-models=fake", "--mcp-save-baseline=base.json", "--mcp-record=off").ret == 0
        comparison_project(pytester, model_server, names, after=True)
        result = run(pytester, "--mcp-models=fake", "--mcp-compare=base.json", "--mcp-fail-on-drop=0.02",
                     "--mcp-markdown=pr.md", "--mcp-record=off")
        result.stdout.fnmatch_lines(["GATE FAILED model fake: accuracy dropped 1.000 -> 0.250 *"])
        pages[kind] = (pytester.path / "pr.md").read_text(encoding="utf-8")
    hostile, clean = Page(pages["hostile"]), Page(pages["clean"])
    assert not hostile.other and hostile.tags == clean.tags
    assert clean.tags["<details>"] == 2 and clean.tags["<summary>"] == 2
    assert hostile.text.count(INVENTED) >= clean.text.count(SAFE[INVENTED]) >= 7  # flipped rows, tool F1 row
    assert f"definition of {TOOL} changed" in hostile.text
    (diff,) = hostile.blocks  # the whole diff: no line of the description closed the fence
    assert diff == ("--- baseline\n+++ current\n@@ -1,7 +1,8 @@\n-Lists things.\n+Lists things (v2).\n "
                    + "\n ".join(DESCRIPTION.splitlines()[1:]) + "\n+new line\n")


# ------------------------------------------------------------------------------------------ the escapes


def test_code_spans_follow_commonmark() -> None:
    assert code("a`b") == "``a`b``"
    assert code("`x`") == "`` `x` ``"
    assert code(" a ") == "`  a  `"  # the renderer strips one space of each side
    assert code("a|b") == "`a|b`" and code("a|b", table=True) == "`a\\|b`"
    assert code("") == "` `"
    assert code("a\nb\r\nc") == "`a b c`"
    assert code("x" * 300) == "`" + "x" * MAX_INLINE + "… [truncated, 300 chars]`"


def test_text_escapes_what_starts_markup() -> None:
    assert text("<b> & | *x* _y_ [l](u) ![i](u) ~~s~~ $m$ \\") == (
        "&lt;b&gt; &amp; \\| \\*x\\* \\_y\\_ \\[l\\](u) \\!\\[i\\](u) \\~\\~s\\~\\~ \\$m\\$ \\\\")
    assert [text(s) for s in ("# h", "- d", "+ p", "= e", "12. o", "3) o")] == [
        "\\# h", "\\- d", "\\+ p", "\\= e", "12\\. o", "3\\) o"]
    assert text("a\n\n  b") == "a b"
    assert text("list_issues a__b _c d_") == "list_issues a__b \\_c d\\_"  # intraword underscores are inert
    assert html_text('<a href="x">&') == "&lt;a href=&quot;x&quot;&gt;&amp;"
    assert truncate("abc", 2) == "ab… [truncated, 3 chars]" and truncate("abc", 3) == "abc"


def test_fences_are_longer_than_any_run_that_starts_a_line() -> None:
    assert fenced("a\n ```\n````x", "diff") == ["`````diff", "a", " ```", "````x", "`````"]
    assert fenced("~~~\na ``` b") == ["```", "~~~", "a ``` b", "```"]
    assert fenced("x" * 10, limit=4) == ["```", "xxxx", "… [truncated, 10 chars]", "```"]


ALPHABET = "`*_[]()!<>&|#-+=~$\\/:. \n\taZ1é"


@pytest.mark.parametrize("seed", range(4))
def test_random_markup_round_trips_in_every_context(seed: int) -> None:
    """Seeded random strings of markup characters: each context renders them as the same text."""
    rng = random.Random(seed)
    for _ in range(100):
        value = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 24)))
        folded = " ".join(value.splitlines())
        words = " ".join(value.split())
        page = Page(f"| a |\n| --- |\n| {code(value, table=True)} |\n")
        assert page.tags["<code>"] == 1 and page.text.count(folded.strip(" ") or " ") >= 1, value
        for markdown in (f"- {code(value)}", f"### {code(value)}"):
            page = Page(markdown)
            assert page.tags["<code>"] == 1 and folded in page.text, value
        for markdown in (f"- {text(value)}", f"| a |\n| --- |\n| {text(value)} |\n", f"x {text(value)}"):
            page = Page(markdown)
            assert set(page.tags) <= {"<ul>", "</ul>", "<li>", "</li>", "<p>", "</p>", "<table>", "</table>",
                                      "<thead>", "</thead>", "<tbody>", "</tbody>", "<tr>", "</tr>", "<th>",
                                      "</th>", "<td>", "</td>"}, (value, markdown)
            assert not page.other and words in page.text, (value, markdown)
        page = Page(f"<details><summary>{html_text(value)}</summary>\n\n</details>\n")
        assert page.tags == Counter({"<details>": 1, "<summary>": 1, "</summary>": 1, "</details>": 1})
        assert words in page.text, value
        page = Page("\n".join(fenced(value)))
        assert page.tags["<pre>"] == 1 and page.blocks == ["\n".join(value.splitlines()) + "\n"], value
