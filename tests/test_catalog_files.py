"""A tools file's catalog is made once per process for each content (pytest_mcpeval/catalog_files.py), the schema
each tool is sent with is a copy of its own, and a JSON file of ours (a cache entry, a baseline) is refused beyond its
nesting bound, with or without the walk that finds where (pytest_mcpeval/json_file.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.servers import ServerError, load_tools_file


def tools(description: str) -> str:
    return json.dumps([{"name": "get_me", "description": description,
                        "inputSchema": {"type": "object", "properties": {"who": {"type": "string"}}}}])


def test_the_same_bytes_give_the_same_catalog_and_changed_bytes_a_new_one(tmp_path: Path) -> None:
    path = tmp_path / "tools.json"
    path.write_text(tools("Who am I"))
    first = load_tools_file(path)
    assert load_tools_file(path) is first
    copy = tmp_path / "elsewhere.json"  # the content decides, not the path
    copy.write_text(tools("Who am I"))
    assert load_tools_file(copy) is first
    path.write_text(tools("Who is I"))  # the same size, written at once: a new catalog all the same
    changed = load_tools_file(path)
    assert changed is not first and changed.by_name["get_me"]["description"] == "Who is I"


def test_a_broken_file_is_refused_each_time(tmp_path: Path) -> None:
    path = tmp_path / "tools.json"
    path.write_text("[{]")
    for _ in range(2):
        with pytest.raises(ServerError, match="not a valid tool list"):
            load_tools_file(path)
    path.write_text(tools("Who am I"))
    assert load_tools_file(path).names == ["get_me"]


def test_each_tool_is_sent_with_a_copy_of_its_schema() -> None:
    schema = {"type": "object", "properties": {"who": {"type": "string", "enum": ["me", "you"]}}, "x": (1, [2])}
    catalog = Catalog([{"name": "get_me", "inputSchema": schema}])
    sent = catalog.openai_tools[0]["function"]["parameters"]
    assert sent == schema
    sent["properties"]["who"]["enum"].append("them")
    sent["x"][1].append(3)
    assert schema == {"type": "object", "properties": {"who": {"type": "string", "enum": ["me", "you"]}},
                      "x": (1, [2])}


@pytest.mark.parametrize(("text", "deep"), [
    ("[" * 32 + "]" * 32, False),  # at the bound
    ("[" * 33 + "]" * 33, True),
    (json.dumps({"a": "[" * 40, "b": [[{"c": "{" * 40}]]}), False),  # brackets in strings: counted, then walked
    (json.dumps({"a": "x"}), False),
])
def test_a_json_file_is_refused_when_nested_beyond_the_bound(text: str, deep: bool) -> None:
    from pytest_mcpeval.json_file import JsonFileError, parse

    if deep:
        with pytest.raises(JsonFileError, match="nested too deep"):
            parse(text.encode())
    else:
        assert parse(text.encode()) == json.loads(text)


EDGES = [b'{"a":1,"a":2}', b"123456789012345678901234567890", b"1e400", b"-1e400", b"1e-400", b"5e-324", b"-0", b"-0.0",
         b"1.0000000000000002", b"2.2250738585072014e-308", b'"\\ud83d"', b'{"\\ud83d\\ude00": 1}', b'"\xc3\xa9"',
         b'"\\u00e9"', b'{"a": "\\u0000"}', b"\t1\r\n", b"true ", b"NaN", b"Infinity", b"-Infinity", b"[1,]", b"01",
         b"+1", b".5", b"1.", b"'a'", b"[1 2]", b"[1]x", b'"a\nb"', b'"a\x01b"', b"\xef\xbb\xbf{}", b'"\xed\xa0\xbd"',
         b"\xff", b"", b" ", b"[" * 250 + b"]" * 250]


@pytest.mark.parametrize("data", EDGES)
def test_parse_reads_what_json_loads_reads_and_refuses_the_rest(data: bytes) -> None:
    """parse() reads with pydantic-core's parser first and with json.loads what that refuses: the value is json.loads's
    on every text it reads (types too: 1 is not 1.0), and every text it refuses is a JsonFileError."""
    from pytest_mcpeval.json_file import JsonFileError, parse

    try:
        expected = json.loads(data.decode("utf-8"), parse_constant=lambda name: 1 / 0)
    except (ValueError, ZeroDivisionError, RecursionError):
        with pytest.raises(JsonFileError):
            parse(data)
        return
    if data.count(b"[") > 32:
        with pytest.raises(JsonFileError, match="nested too deep"):
            parse(data)
        return
    got = parse(data)
    assert json.dumps(got) == json.dumps(expected) and type(got) is type(expected)


def test_parse_agrees_with_json_loads_on_random_documents() -> None:
    """Seeded random JSON documents (nested, with escapes, non-ASCII, big and small numbers): the same values."""
    import random

    from pytest_mcpeval.json_file import parse

    rng = random.Random(20261206)
    pieces = ["a", "é", "\\n", "\\u00e9", "\\ud83d\\ude00", "\\\"", "\\\\", "\\t", " ", "中", "\\/"]

    def value(depth: int) -> str:
        kind = rng.randrange(8 if depth < 6 else 5)
        if kind == 0:
            return rng.choice(["true", "false", "null"])
        if kind == 1:
            return str(rng.randint(-10**30, 10**30))
        if kind == 2:
            exponent = rng.randint(-340, 340)
            return repr(rng.uniform(-1e6, 1e6)) if rng.random() < 0.5 else f"0.{rng.randrange(10**17)}e{exponent}"
        if kind in (3, 4):
            return '"' + "".join(rng.choice(pieces) for _ in range(rng.randint(0, 6))) + '"'
        if kind == 5:
            return "[" + ",".join(value(depth + 1) for _ in range(rng.randint(0, 4))) + "]"
        keys = [f'"k{rng.randint(0, 5)}"' for _ in range(rng.randint(0, 4))]  # duplicate keys too
        return "{" + ",".join(f"{k}: {value(depth + 1)}" for k in keys) + "}"

    for _ in range(2_000):
        text = value(0)
        got, expected = parse(text.encode()), json.loads(text)
        assert json.dumps(got) == json.dumps(expected), text


def test_parse_reads_with_pydantic_core_and_json_loads_only_what_it_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast parser is the one used (json.loads is not called for a text it reads); a lone surrogate, which it
    refuses, is read by json.loads as before."""
    from pytest_mcpeval import json_file

    calls: list[str] = []
    original = json_file.json.loads
    monkeypatch.setattr(json_file.json, "loads", lambda text, **kw: (calls.append(text), original(text, **kw))[1])
    assert json_file.parse(b'{"a": [1, 2.5, "x"]}') == {"a": [1, 2.5, "x"]} and calls == []
    assert json_file.parse(b'"\\ud83d"') == "\ud83d" and calls == ['"\\ud83d"']
