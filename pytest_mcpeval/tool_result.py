"""A tool's answer over a live MCP session, as the builtin data a flow sends the model.

:meth:`ServerPool.call_tool <pytest_mcpeval.servers.ServerPool.call_tool>` returns a :class:`ToolResult`;
:func:`tool_result_from_mcp` makes one of the SDK's ``CallToolResult``, keeping of each content part what a
chat message can carry; :func:`tool_message` is the message a flow answers a call with (a mock's or the server's
answer), flagged as an error where the provider's format and litellm allow.
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


# litellm routes of Google's Gemini API: its functionResponse flags an error by an "error" key in `response`
GEMINI_ROUTES = ("gemini/", "vertex_ai/", "vertex_ai_beta/")


def tool_message(call_id: str, text: str | None, is_error: bool, target: str) -> dict[str, Any]:
    """The ``tool`` message (OpenAI's format, which litellm translates) that answers call ``call_id`` of
    ``target`` (the litellm model string), flagged as an error in the provider's own way where litellm can
    send that flag (docs/flows.md#error-results):

    * Gemini (``gemini/``, ``vertex_ai/``): ``{"error": TEXT}`` as the content.  litellm sends a tool message
      whose content is a JSON object as the ``functionResponse.response`` itself, and an ``error`` key there
      is how Gemini's FunctionResponse reports a failed call ("Use "output" key to specify function output
      and "error" key to specify error details").
    * Anthropic: its ``tool_result`` has ``is_error: true``, but litellm (1.110) builds the block from the
      tool message without it (its factory's ``convert_to_anthropic_tool_result``: "We can't determine from
      openai message format whether it's a successful or error call result"): the text alone.
    * OpenAI, Azure, vLLM, Ollama: the format has no flag; the text alone.
    """
    content = text or ""
    if is_error and target.startswith(GEMINI_ROUTES):
        from pytest_mcpeval.text import canonical_json

        content = canonical_json({"error": content})
    return {"role": "tool", "tool_call_id": call_id, "content": content}
