"""What a reply's finish reason changes in a verdict (pytest_mcpeval.scoring.stops), rule by rule."""

from __future__ import annotations

import pytest

from pytest_mcpeval.report.case_notes import notes
from pytest_mcpeval.scoring.stops import blocked, refine


def test_only_content_filter_is_a_block() -> None:
    assert blocked("content_filter", None) == "content_filter"
    assert blocked("content_filter", "refusal") == "refusal"
    assert [blocked(r, None) for r in ("stop", "length", "tool_calls", None)] == [None] * 4


@pytest.mark.parametrize(("diagnosis", "finish", "native", "has_calls", "text", "expected"), [
    (None, "length", None, False, True, None),  # a pass stays a pass
    ("no_tool_use", "length", None, False, False, "truncated"),
    ("malformed_call", "length", None, True, False, "truncated"),  # arguments cut mid-way
    ("premature_stop", "length", None, True, False, "truncated"),
    ("wrong_tool", "length", None, True, False, "wrong_tool"),  # chosen before the cut
    ("tool_use_not_expected", "length", None, True, False, "tool_use_not_expected"),
    ("no_tool_use", "stop", "MALFORMED_FUNCTION_CALL", False, False, "malformed_call"),
    ("no_tool_use", "stop", None, False, True, "tool_call_in_text"),
    ("premature_stop", "stop", None, False, True, "tool_call_in_text"),  # a flow's last reply
    ("premature_stop", "stop", None, True, True, "premature_stop"),  # a single call that made calls
    ("wrong_argument_value", "stop", None, False, True, "wrong_argument_value"),
    ("no_tool_use", "stop", None, False, False, "no_tool_use"),
])
def test_refine(diagnosis: str | None, finish: str, native: str | None, has_calls: bool, text: bool,
                expected: str | None) -> None:
    assert refine(diagnosis, finish, native, has_calls, text) == expected


def test_notes_say_what_to_fix() -> None:
    truncated = {"passed": False, "diagnosis": "truncated", "finish_reason": "length",
                 "provider_finish_reason": "MAX_TOKENS"}
    assert notes(truncated) == ["the reply was cut off by the token limit (finish_reason length, MAX_TOKENS): "
                                "raise max_tokens in mcp_model_params"]
    written = {"passed": False, "diagnosis": "tool_call_in_text",
               "text_calls": [{"tool": "get_issue", "args": {"issue_key": "A"}},
                              {"tool": "get_user", "args": None, "raw": "{x", "malformed": "invalid JSON"}]}
    assert notes(written)[0].startswith('a tool call written as text, not as a call: get_issue {"issue_key":"A"}; '
                                        "get_user {x (")
    assert notes({**truncated, "passed": True}) == [] and notes({"passed": None, "error": "x"}) == []
