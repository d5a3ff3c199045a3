"""Unreadable response-cache entries under ``--mcp-record=new`` (issue 30, item 4): an entry that is truncated,
empty, not UTF-8 or a directory is called again (right), and the summary says how many and where, as it does
for ``--mcp-record=none`` (there: the case is an error naming the file).  Before, some were called again without
a word."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import make_project, read_report, run

from pytest_mcpeval.testing import ScriptedModelServer

TOOLS = [{"name": "get_me", "description": "Who am I", "inputSchema": {"type": "object", "properties": {}}}]
IDS = ["a", "b", "c", "d", "e", "f"]
BENCH = "server: {tools_file: tools.json}\ncases:\n" + "".join(
    f"  - id: {i}\n    input: question {i}\n    expect: [{{tool: get_me}}]\n" for i in IDS)
OK = {"tool_calls": [{"name": "get_me", "arguments": {}}]}


def _truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:25])


def _cut_in_a_character(path: Path) -> None:  # a write cut short inside a multi-byte character
    path.write_bytes(b'{"reply": {"content": "caf\xc3')


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _not_utf8(path: Path) -> None:
    path.write_bytes(path.read_bytes().replace(b"{", b"{\xff", 1))


def _directory(path: Path) -> None:
    path.unlink()
    path.mkdir()
    (path / "x").write_text("{}")


# case id: (what is done to its entry, what the summary says is wrong with it)
UNREADABLE: dict[str, tuple[Callable[[Path], None], str]] = {
    "a": (_truncated, "not valid JSON: *"),
    "b": (_cut_in_a_character, "not UTF-8 text (byte 26)"),
    "c": (_empty, "not valid JSON: Expecting value (line 1 column 1)"),
    "d": (_not_utf8, "not UTF-8 text (byte 1)"),
    "e": (_directory, "not a regular file but a directory"),
}


@pytest.fixture
def recorded(pytester: pytest.Pytester, model_server: ScriptedModelServer) -> dict[str, Path]:
    make_project(pytester, model_server, {"bench.mcpeval.yaml": BENCH}, tools=TOOLS)
    model_server.script("*", OK)
    assert run(pytester, "--mcp-models=fake").ret == 0 and len(model_server.requests) == len(IDS)
    entries = {}
    for path in sorted((pytester.path / ".mcpeval" / "cache").rglob("*.json")):
        case = json.loads(path.read_text())["case"]
        entries[case.rsplit("::", 1)[1].split("[")[0]] = path
    for case, (spoil, _) in UNREADABLE.items():
        spoil(entries[case])
    return entries


def test_unreadable_entries_are_called_again_and_the_summary_says_which(
        pytester: pytest.Pytester, model_server: ScriptedModelServer, recorded: dict[str, Path],
        xdist_args: list[str]) -> None:
    result = run(pytester, "--mcp-models=fake", "--mcp-report=report.json", *xdist_args)
    out = result.stdout.str()
    assert result.ret == 0 and "Traceback" not in out and "internal error" not in out
    assert len(model_server.requests) == 2 * len(IDS) - 1  # each unreadable entry called again, f replayed
    lines = out.splitlines()
    start = lines.index(f"{len(UNREADABLE)} cache entries could not be used and were called again:")
    listed = sorted(lines[start + 1:start + 1 + len(UNREADABLE)])
    expected = sorted(f"  {recorded[case]}: {problem}" for case, (_, problem) in UNREADABLE.items())
    from fnmatch import fnmatchcase

    for line in listed:  # each entry once, with its path and what is wrong
        assert sum(fnmatchcase(line, pattern) for pattern in expected) >= 1, (line, expected)
    assert sorted(line.split(": ", 1)[0].strip() for line in listed) == sorted(str(recorded[c]) for c in UNREADABLE)
    # the directory cannot be replaced by the entry: said of the entry (it blamed the cache: "cache: Is a directory")
    assert f"  {recorded['e']}: a directory stands where this entry goes (remove it to record the entry)" in lines
    assert not any(line.endswith("cache: Is a directory") for line in lines), lines
    report = read_report(pytester)
    assert all(c["passed"] is True and c["error"] is None for c in report["cases"])  # not a miss, not an error
    for case in set(UNREADABLE) - {"e"}:  # overwritten with the answer, the next replay uses it
        assert json.loads(recorded[case].read_text())["reply"]["calls"][0]["name"] == "get_me"
    (recorded["e"] / "x").unlink()
    recorded["e"].rmdir()
    assert run(pytester, "--mcp-models=fake").ret == 0  # e recorded at last
    again = run(pytester, "--mcp-models=fake", "--mcp-record=none")
    assert again.ret == 0 and "cache entr" not in again.stdout.str()
    assert len(model_server.requests) == 2 * len(IDS)


def test_under_record_none_each_is_an_error_naming_it(pytester: pytest.Pytester, model_server: ScriptedModelServer,
                                                      recorded: dict[str, Path]) -> None:
    result = run(pytester, "--mcp-models=fake", "--mcp-record=none", "--mcp-report=report.json")
    out = result.stdout.str()
    assert result.ret == 1 and len(model_server.requests) == len(IDS) and "Traceback" not in out
    assert (f"{len(UNREADABLE)} cache entries could not be used, and their cases are errors (--mcp-record=none "
            "replays only):") in out
    cases = {c["id"]: c for c in read_report(pytester)["cases"]}
    for case in UNREADABLE:
        assert f"the recorded response {recorded[case]} cannot be replayed: " in (cases[case]["error"] or ""), case
    assert cases["f"]["passed"] is True
