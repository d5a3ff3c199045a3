"""A tool's answer over a live MCP session, as the builtin data a flow sends the model.

:meth:`ServerPool.call_tool <pytest_mcpeval.servers.ServerPool.call_tool>` returns a :class:`ToolResult`;
:func:`tool_result_from_mcp` makes one of the SDK's ``CallToolResult``, keeping of each content part what a
chat message can carry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ToolResult:
    """A tool's answer over a live session, as builtin data.

    ``text`` is what a model is sent: the result's text parts joined by newlines (a text resource's text;
    ``[image: MIME]`` and the like for content a chat message cannot carry), or the structured content as
    compact JSON when there is no content.  ``structured`` is the structured content as the server sent it.
    """

    is_error: bool
    text: str
    structured: Any = None



def _content_text(part: Any) -> str:
    """What a chat message can carry of one content part of a tool result."""
    kind = getattr(part, "type", "")
    if kind == "text":
        return str(part.text)
    if kind == "resource":
        resource = part.resource
        text = getattr(resource, "text", None)
        return str(text) if text is not None else f"[resource: {resource.uri}]"
    if kind == "resource_link":
        return f"[resource link: {part.uri}]"
    mime = getattr(part, "mime_type", None) or getattr(part, "mimeType", None)
    return f"[{kind}: {mime}]" if mime else f"[{kind}]"


def tool_result_from_mcp(result: Any) -> ToolResult:
    """The :class:`ToolResult` of an MCP ``CallToolResult``."""
    from pytest_mcpeval.text import canonical_json

    structured = result.structured_content
    parts = [_content_text(part) for part in result.content or []]
    text = "\n".join(parts) if parts else (canonical_json(structured) if structured is not None else "")
    return ToolResult(bool(result.is_error), text, structured)
