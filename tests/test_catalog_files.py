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
