"""The published JSON Schema of the report, generated from the TypedDicts (``make schema``)."""

from __future__ import annotations

from typing import Any

from pytest_mcpeval.results.report import Report


def report_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of report version 1, generated from :class:`Report`."""
    from pydantic import TypeAdapter

    schema: dict[str, Any] = TypeAdapter(Report).json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "pytest-mcpeval report (version 1)"
    return schema


def validate_report(data: Any) -> None:
    """Raise ``jsonschema.ValidationError`` when ``data`` is not a version-1 report."""
    import jsonschema

    jsonschema.validate(data, report_schema())
