"""The published JSON Schema of the report, generated from the TypedDicts (``make schema``)."""

from __future__ import annotations

import functools
from typing import Any

from pytest_mcpeval.results.report import REPORT_VERSION, Report


def report_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of the report of this version (``REPORT_VERSION``), generated from
    :class:`Report`."""
    from pydantic import TypeAdapter

    schema: dict[str, Any] = TypeAdapter(Report).json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"pytest-mcpeval report (version {REPORT_VERSION})"
    return schema


def validate_report(data: Any) -> None:
    """Raise ``jsonschema.ValidationError`` when ``data`` is not a report of this version."""
    _validator().validate(data)


@functools.cache
def _validator() -> Any:
    """The report's validator, built once per process: the schema generated and checked against its metaschema once
    (``jsonschema.validate`` does both on every call: 0.6 s of the 0.85 s a report took to validate)."""
    import jsonschema

    schema = report_schema()
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    return validator_class(schema)


def report_problem(data: Any) -> str | None:
    """The first way ``data`` (JSON read back) is not a report of this version, as ``PATH: expected X, found Y``;
    ``None`` when it is one.  Checked strictly, as JSON (arrays where the TypedDicts say tuples)."""
    import json

    from pydantic import TypeAdapter, ValidationError

    from pytest_mcpeval.json_file import first_problem

    try:
        TypeAdapter(Report).validate_json(json.dumps(data), strict=True)
    except ValidationError as exc:
        return first_problem(exc, data)
    return None
