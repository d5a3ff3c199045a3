"""Control characters in what the plugin renders (issue 30, item 3).  A tool name a model invents holding ESC and
BEL (an ANSI colour and an OSC title sequence) was escaped in the terminal but written raw to ``--mcp-markdown``
(6 ESC and 2 BEL bytes), which GitHub step summaries and pull request comments show, and to the HTML page.  Every
rendering (terminal, Markdown, HTML and its data block, junit XML, ``tune.md``) now writes each control character
as its escape through one function, :func:`pytest_mcpeval.text.printable`; the JSON report keeps the text as it was.
"""

from __future__ import annotations

import json
import re

import pytest
from conftest import GITHUB_TOOLS, get_me_cases, read_report, run

from pytest_mcpeval.report import escape, html_escape
from pytest_mcpeval.testing import ScriptedModelServer
from pytest_mcpeval.text import printable
from pytest_mcpeval.tune.candidates import Candidate
from pytest_mcpeval.tune.loop import Trial
from pytest_mcpeval.tune.write import markdown

COLOUR = "\x1b[31m"  # red
OSC_TITLE = "\x1b]0;pwned\x07"  # sets the terminal's title
CLEAR = "\x1b[2J\x1b[H"  # clears the screen
BIDI = "\u202e"  # right-to-left override
INVENTED = f"get{COLOUR}me{OSC_TITLE}{CLEAR}{BIDI}x\x9b1m\x7f"
# every character printable() escapes: C0 but tab and newline, DEL, C1, the bidirectional controls
CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
ALL_CONTROLS = "".join(chr(c) for c in [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0),
                                        0x61C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)])


def controls_in(text: str) -> list[str]:
    return sorted({f"U+{ord(m.group()):04X}" for m in CONTROLS.finditer(text)})


def test_an_invented_tool_name_is_escaped_in_every_rendering(pytester: pytest.Pytester,
                                                             model_server: ScriptedModelServer) -> None:
    tools = json.loads(GITHUB_TOOLS.read_text())
    tools[0]["description"] = f"Lists{OSC_TITLE} things{BIDI}"
    params = json.dumps({"api_base": model_server.api_base, "api_key": "not-a-key"})
    (pytester.path / "pytest.ini").write_text(
        f"[pytest]\nmcp_model_aliases = fake = openai/fake\nmcp_model_params = fake = {params}\n")
    (pytester.path / "tools.json").write_text(json.dumps(tools))
    (pytester.path / "a.mcpeval.yaml").write_text(get_me_cases(3))
    model_server.script("*", {"tool_calls": [{"name": "get_me", "arguments": {}}]})
    model_server.script("q question 1", {"tool_calls": [{"name": INVENTED, "arguments": {"q": f"x{OSC_TITLE}"}}],
                                         "content": f"I think{CLEAR} so{BIDI}"})
    result = run(pytester, "--mcp-models=fake", "--mcp-record=off", "--mcp-report=report.json", "-v",
                 "--mcp-markdown=summary.md", "--mcp-html=report.html", "--junitxml=junit.xml", "-rA")
    outputs = {"terminal": result.stdout.str() + result.stderr.str()}
    for name in ("summary.md", "report.html", "junit.xml"):
        outputs[name] = (pytester.path / name).read_text(encoding="utf-8")
    found = {name: controls_in(text) for name, text in outputs.items()}
    assert found == {name: [] for name in outputs}, found  # Markdown had 6 ESC and 2 BEL; the page as many
    for name in ("terminal", "summary.md", "report.html"):  # shown, as the escape a person can read
        assert "x1b]0;pwned" in outputs[name], name
        assert "\\u202ex" in outputs[name].replace("\\\\", "\\"), name
    report = read_report(pytester)
    missed = next(c for c in report["cases"] if c["id"] == "q1")
    assert missed["hallucinated_tools"] == [INVENTED]  # the data keeps what the model sent


@pytest.mark.parametrize("render", [
    escape.code, lambda v: escape.code(v, table=True), escape.text, escape.html_text,
    lambda v: "\n".join(escape.fenced(v)), html_escape.text, html_escape.attr, html_escape.script_json,
    printable,
], ids=["md-code", "md-code-table", "md-text", "md-html-text", "md-fenced", "html-text", "html-attr",
        "html-script-json", "terminal"])
def test_every_escape_function_writes_control_characters_as_printable_does(render: object) -> None:
    assert callable(render)
    for character in ALL_CONTROLS:
        shown = str(render(f"a{character}b"))
        assert not controls_in(shown), (hex(ord(character)), shown)
        if character not in "\x0b\x0c\x0d\x1c\x1d\x1e\x1f\x85":  # line breaks: folded, or a new line, instead
            assert printable(character)[1:] in shown, (hex(ord(character)), shown)


def test_tune_md_escapes_what_the_proposer_and_the_catalog_wrote() -> None:
    candidate = Candidate(tool=f"search{OSC_TITLE}`|", description=f"Find{CLEAR} things | fast\n```\n# not a title",
                          source="proposer")
    trials = [Trial(candidate=candidate, verdict="rejected", reason=f"no gain{BIDI}", note=f"held{COLOUR} back",
                    before_description="Search things.")]
    data = {"model": f"m{OSC_TITLE}", "split": {"train": ["a"], "holdout": ["b"]}, "seed": 1, "level": 0.05,
            "max_token_growth": 0.1, "cost": {"evaluations": 1, "calls": 0, "proposer_calls": 1, "cost_usd": 0.0,
                                               "seconds": 1.0}}
    text = markdown(data, trials)
    assert not controls_in(text), controls_in(text)
    assert "x1b]0;pwned" in text
    table_row = next(line for line in text.splitlines() if line.startswith("| ``search"))
    assert table_row.count(" | ") == 4 and table_row.count("\\|") == 2  # the pipes of the name and description: escaped
    assert "\n# not a title" not in text.replace("\n+# not a title", "")  # inside the diff's fence only
