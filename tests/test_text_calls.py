"""The parser of tool calls written as text (pytest_mcpeval.models.text_calls), over the formats open models use."""

from __future__ import annotations

import json

from pytest_mcpeval.models.text_calls import TextCall, find_text_calls

NAMES = {"get_issue", "get_user"}


def args(call: TextCall) -> object:
    return json.loads(call.arguments)


def test_a_whole_reply_that_is_a_call_object() -> None:
    [call] = find_text_calls('{"name": "get_issue", "arguments": {"issue_key": "WEB-12"}}', NAMES)
    assert (call.name, args(call), call.format) == ("get_issue", {"issue_key": "WEB-12"}, "json")


def test_llama_parameters_openai_function_objects_and_arguments_as_text() -> None:
    [llama] = find_text_calls('<|python_tag|>{"name": "get_user", "parameters": {"username": "carol"}}', NAMES)
    assert (llama.name, args(llama)) == ("get_user", {"username": "carol"})
    [openai] = find_text_calls('{"type": "function", "function": {"name": "get_issue", '
                               '"arguments": "{\\"issue_key\\": \\"W-1\\"}"}}', NAMES)
    assert (openai.name, openai.arguments) == ("get_issue", '{"issue_key": "W-1"}')
    [bare] = find_text_calls('{"name": "get_user"}', NAMES)
    assert bare.arguments == "{}"


def test_a_json_fence_as_qwen_coder_writes_it() -> None:
    text = ("I'll look that issue up.\n```json\n{\n  \"name\": \"get_issue\",\n  \"arguments\": {\"issue_key\": "
            "\"WEB-12\"}\n}\n```\nThen I will tell you who opened it.")
    [call] = find_text_calls(text, NAMES)
    assert (call.name, args(call), call.format) == ("get_issue", {"issue_key": "WEB-12"}, "fence")
    [plain] = find_text_calls('```\n{"name": "get_user", "arguments": {"username": "a"}}\n```', NAMES)
    assert plain.format == "fence"
    unclosed = find_text_calls('```json\n{"name": "get_user", "arguments": {"username": "a"}}', NAMES)
    assert [c.name for c in unclosed] == ["get_user"]  # cut off by the token limit after the object


def test_hermes_tool_call_tags_several_in_order() -> None:
    text = ('<tool_call>\n{"name": "get_issue", "arguments": {"issue_key": "WEB-12"}}\n</tool_call>\n'
            '<tool_call>\n{"name": "get_user", "arguments": {"username": "carol"}}\n</tool_call>')
    calls = find_text_calls(text, NAMES)
    assert [(c.name, c.format) for c in calls] == [("get_issue", "tag"), ("get_user", "tag")]
    assert args(calls[1]) == {"username": "carol"}


def test_a_list_of_calls_and_a_call_inside_prose() -> None:
    listed = find_text_calls('[{"name": "get_issue", "arguments": {"issue_key": "A"}}, '
                             '{"name": "get_user", "arguments": {"username": "b"}}]', NAMES)
    assert [c.name for c in listed] == ["get_issue", "get_user"]
    [inline] = find_text_calls('Calling {"name": "get_user", "arguments": {"username": "b"}} now.', NAMES)
    assert inline.name == "get_user" and inline.format == "json"


def test_no_false_positives_on_prose_with_json() -> None:
    assert find_text_calls("The issue is WEB-12, opened by Carol.", NAMES) == []
    assert find_text_calls('The API returned {"name": "Carol Diaz", "arguments": 3}.', NAMES) == []
    assert find_text_calls('```json\n{"issue_key": "WEB-12", "author": "carol"}\n```', NAMES) == []
    assert find_text_calls('```python\nprint({"name": "get_issue", "arguments": {}})\n```', NAMES) == []
    assert find_text_calls('{"name": "delete_repo", "arguments": {}}', NAMES) == []  # not a tool it was shown
    assert find_text_calls('{"name": "get_issue", "arguments": {"issue_key": ', NAMES) == []  # not JSON
    assert find_text_calls(None, NAMES) == [] and find_text_calls("{}", set()) == []


def test_a_fence_inside_a_tag_is_read_once() -> None:
    text = '<tool_call>{"name": "get_issue", "arguments": {"issue_key": "A"}}</tool_call> and {"name": "x"}'
    assert [c.format for c in find_text_calls(text, NAMES)] == ["tag"]
