"""The YAML reader's errors (issue 30, item 1): a character YAML refuses, bytes that are not UTF-8, a file in
UTF-16 or UTF-32.  A NUL in a benchmark file was a collection error whose body was a Python traceback through
``check_yaml_bounds`` (the bound check's parser let PyYAML's ``ReaderError`` escape, ending in ``unacceptable
character #x0000``); invalid UTF-8 and UTF-16 were ``cannot read the file: 'utf-8' codec can't decode ...``
with no line.  Each is now the loader's one line, ``FILE:LINE: invalid YAML: ...``, from one error path
(``benchmark/yaml_source.py``), for benchmark files, overlays and candidates files alike.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import make_project, read_report, run

from pytest_mcpeval.benchmark.problems import BenchmarkError
from pytest_mcpeval.benchmark.yaml_source import load_bounded_yaml
from pytest_mcpeval.overlay import OverlayError, load_overlay
from pytest_mcpeval.testing import ScriptedModelServer

TOOLS = [{"name": "get_me", "description": "Who am I", "inputSchema": {"type": "object", "properties": {}}}]
LINE = '    input: "a{}b"\n'  # the character at column 14 of line 4
BENCH = "server: {tools_file: tools.json}\ncases:\n  - id: a\n" + LINE + "    expect: [{tool: get_me}]\n"


def bench(character: str) -> str:
    return BENCH.replace("{}", character)


def refused(code: int, kind: str = "a control character") -> str:
    escape = f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    return (f"invalid YAML: U+{code:04X} ({kind}) at column 14 is not allowed in a YAML file; in a double-quoted "
            f'text write it as "{escape}"')


def utf8(character: str) -> bytes:
    return bench(character).encode("utf-8", "surrogatepass")


# file stem: (its bytes, its one line after "FILE:")
FILES: dict[str, tuple[bytes, str]] = {
    "nul": (utf8("\0"), "4: " + refused(0)),
    "bel": (utf8("\x07"), "4: " + refused(7)),
    "backspace": (utf8("\x08"), "4: " + refused(8)),
    "vertical-tab": (utf8("\x0b"), "4: " + refused(0x0B)),
    "escape": (utf8("\x1b"), "4: " + refused(0x1B)),
    "unit-separator": (utf8("\x1f"), "4: " + refused(0x1F)),
    "delete": (utf8("\x7f"), "4: " + refused(0x7F)),
    "c1-csi": (utf8("\x9b"), "4: " + refused(0x9B)),
    "c1-first": (utf8("\x80"), "4: " + refused(0x80)),
    "non-character-fffe": (utf8("\ufffe"), "4: " + refused(0xFFFE, "a non-character")),
    "non-character-ffff": (utf8("\uffff"), "4: " + refused(0xFFFF, "a non-character")),
    "nul-unquoted": (bench("").replace('"ab"', "a\0b").encode(), "4: " + refused(0).replace("14", "13")),
    "nul-after-wide-text": (utf8("é€😀\0"), "4: " + refused(0).replace("14", "17")),
    "invalid-utf8": (bench("\udcff").encode("utf-8", "surrogateescape"),
                     "4: invalid YAML: not UTF-8 (byte 0xff at column 14: invalid start byte); save the file as UTF-8"),
    "truncated-utf8": (bench("\udcc3").encode("utf-8", "surrogateescape"),
                       "4: invalid YAML: not UTF-8 (byte 0xc3 at column 14: invalid continuation byte); save the file "
                       "as UTF-8"),
    "utf16": (bench("x").encode("utf-16"),
              "1: invalid YAML: the file is UTF-16 (it starts with a UTF-16 byte order mark); save it as UTF-8"),
    "utf16-be": (b"\xfe\xff" + bench("x").encode("utf-16-be"),
                 "1: invalid YAML: the file is UTF-16 (it starts with a UTF-16 byte order mark); save it as UTF-8"),
    "utf32": (bench("x").encode("utf-32"),
              "1: invalid YAML: the file is UTF-32 (it starts with a UTF-32 byte order mark); save it as UTF-8"),
    "utf16-without-bom": (bench("x").encode("utf-16-le"),
                          "1: invalid YAML: the file looks like UTF-16 or UTF-32 without a byte order mark (a NUL "
                          "among its first two bytes); save it as UTF-8"),
}


def test_each_reader_error_is_the_loaders_one_line(pytester: pytest.Pytester,
                                                   model_server: ScriptedModelServer) -> None:
    files = {"good.mcpeval.yaml": bench("x"), "bom.mcpeval.yaml": "\ufeff" + bench("y"),
             "c1-next-line.mcpeval.yaml": bench("\x85"), "bidi.mcpeval.yaml": bench("\u202e")}
    make_project(pytester, model_server, files, tools=TOOLS)
    for stem, (data, _) in FILES.items():
        (pytester.path / f"{stem}.mcpeval.yaml").write_bytes(data)
    model_server.script("*", {"tool_calls": [{"name": "get_me", "arguments": {}}]})
    result = run(pytester, "--mcp-models=fake", "--mcp-report=report.json", "--continue-on-collection-errors")
    out = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in out and "ReaderError" not in out and "yaml_source.py" not in out, out[-4000:]
    lines = {line.split(":", 1)[0]: line for line in out.splitlines() if ".mcpeval.yaml:" in line
             and not line.startswith(("ERROR", "GATE"))}
    for stem, (_, expected) in FILES.items():
        assert lines.get(f"{stem}.mcpeval.yaml") == f"{stem}.mcpeval.yaml:{expected}", (stem, lines)
    # what YAML allows is read as before: a UTF-8 byte order mark, NEL (U+0085), a bidi control
    result.stdout.fnmatch_lines([f"*4 passed, {len(FILES)} errors*"])
    report = read_report(pytester)
    assert sorted(report["run"]["collect_errors"]) == sorted(f"{stem}.mcpeval.yaml" for stem in FILES)


def test_overlays_and_candidates_files_take_the_same_path(tmp_path: Path) -> None:
    overlay = tmp_path / "overlay.yaml"
    overlay.write_bytes(b"version: 1\ntools:\n  get_me: {description: \"a\0b\"}\n")
    with pytest.raises(OverlayError) as caught:
        load_overlay(overlay, "overlay.yaml")
    assert str(caught.value) == ('overlay.yaml:3: invalid YAML: U+0000 (a control character) at column 27 is not '
                                 'allowed in a YAML file; in a double-quoted text write it as "\\x00"')
    overlay.write_bytes("version: 1\n".encode("utf-16"))
    with pytest.raises(OverlayError) as caught:
        load_overlay(overlay, "overlay.yaml")
    assert str(caught.value) == ("overlay.yaml:1: invalid YAML: the file is UTF-16 (it starts with a UTF-16 byte "
                                 "order mark); save it as UTF-8")
    # an escape in a double-quoted text is how such a character is written, and it loads
    assert load_bounded_yaml("x.yaml", b'a: "\\x00\\x1b\\u009b"\n') == {"a": "\0\x1b\x9b"}
    with pytest.raises(BenchmarkError) as error:
        load_bounded_yaml("x.yaml", "a: [b\n")
    assert str(error.value) == ("x.yaml:1: invalid YAML at column 4: while parsing a flow sequence: did not find "
                                "expected ',' or ']'; the line reads `a: [b`")
