"""The input files of ``import atlas`` as they are: a tasks file's rows (CSV, JSON, JSONL or Parquet, each with
how messages name it) and the ``--tools`` file's definitions by name; what a row means is
:mod:`~pytest_mcpeval.importers.atlas_read`'s."""

from __future__ import annotations

import csv
import importlib
import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_mcpeval.bounds import check_depth, loads
from pytest_mcpeval.importers import UserError
from pytest_mcpeval.text import json_kind

COLUMNS = ("TASK", "PROMPT", "ENABLED_TOOLS", "GTFA_CLAIMS", "TRAJECTORY")
FORMATS = (".csv", ".json", ".jsonl", ".parquet")


def read_rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """The rows of a tasks file, each with how messages name it (``row 3`` or ``row 3 (line 7)``)."""
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise UserError(f"{path}: unknown format `{path.suffix or '(no suffix)'}`: expected a file ending in "
                        f"{', '.join(FORMATS)}")
    if suffix == ".parquet":
        return _parquet_rows(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read the file: {exc}") from None
    if suffix == ".csv":
        return _csv_rows(path, text)
    if suffix == ".jsonl":
        rows: list[tuple[str, dict[str, Any]]] = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                rows.append((f"row {len(rows) + 1} (line {number})", _json_object(path, line, number)))
        return rows
    try:
        data = loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg} (column {exc.colno})") from None
    except ValueError as exc:  # nested too deep, NaN: strict, bounded JSON (bounds.py)
        raise UserError(f"{path}: {exc}") from None
    if isinstance(data, Mapping) and isinstance(data.get("tasks"), list):
        data = data["tasks"]
    if not isinstance(data, list):
        raise UserError(f"{path}: expected a JSON list of task objects (or {{\"tasks\": [...]}}), got "
                        f"{cell_kind(data)}")
    out: list[tuple[str, dict[str, Any]]] = []
    for i, row in enumerate(data):
        if not isinstance(row, Mapping):
            raise UserError(f"{path}: row {i + 1}: expected a task object with the columns {', '.join(COLUMNS)}, "
                            f"got {cell_kind(row)}")
        out.append((f"row {i + 1}", dict(row)))
    return out


def _json_object(path: Path, line: str, number: int) -> dict[str, Any]:
    try:
        row = loads(line)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}:{number}: not valid JSON: {exc.msg} (column {exc.colno})") from None
    except ValueError as exc:
        raise UserError(f"{path}:{number}: {exc}") from None
    if not isinstance(row, dict):
        raise UserError(f"{path}:{number}: expected a task object, got {cell_kind(row)}")
    return row


def _csv_rows(path: Path, text: str) -> list[tuple[str, dict[str, Any]]]:
    csv.field_size_limit(2**31 - 1)  # a trajectory cell holds every tool output: far above the 128 KiB default
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
    rows: list[tuple[str, dict[str, Any]]] = []
    start = 1
    try:
        if reader.fieldnames is None:
            raise UserError(f"{path}: the file is empty: expected a header row with {', '.join(COLUMNS)}")
        start = reader.line_num + 1
        for row in reader:
            if None in row:  # more cells than header columns
                raise UserError(f"{path}: row {len(rows) + 1} (line {start}): {len(row) - 1 + len(row[None])} "
                                f"cells for {len(row) - 1} columns (a quote not closed or not doubled?)")
            rows.append((f"row {len(rows) + 1} (line {start})", dict(row)))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise UserError(f"{path}:{start}: row {len(rows) + 1}: not valid CSV: {exc}") from None
    return rows


def _parquet_rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    try:
        pq = importlib.import_module("pyarrow.parquet")  # optional, and only for this format
    except ImportError:
        raise UserError(f"{path}: reading Parquet needs pyarrow, which is not installed: `pip install pyarrow` (it "
                        "is not a dependency of pytest-mcpeval), or convert the file to CSV or JSON") from None
    if not path.exists():
        raise UserError(f"{path}: no such file")
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for a file that is not Parquet
        raise UserError(f"{path}: cannot read it as Parquet: {exc}") from None
    rows = table.to_pylist()
    for i, row in enumerate(rows):
        try:
            check_depth(row)  # as the JSON formats are read (bounds.py)
        except ValueError as exc:
            raise UserError(f"{path}: row {i + 1}: {exc}") from None
    return [(f"row {i + 1}", dict(row)) for i, row in enumerate(rows)]


def cell_kind(value: Any) -> str:
    return "an empty string" if isinstance(value, str) and not value.strip() else json_kind(value)


def read_tool_definitions(path: Path) -> dict[str, dict[str, Any]]:
    """The tools of ``--tools FILE`` (a JSON list of MCP tools, or ``{"tools": [...]}``) by name."""
    from pytest_mcpeval.benchmark.problems import BenchmarkError
    from pytest_mcpeval.benchmark.tools_file import read_tools_file

    try:
        tools = read_tools_file(path)
    except FileNotFoundError:
        raise UserError(f"--tools {path}: no such file") from None
    except OSError as exc:
        raise UserError(f"--tools {path}: cannot read the file: {exc}") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"--tools {path}: not UTF-8 text: {exc}") from None
    except BenchmarkError as exc:
        raise UserError("--tools " + str(exc).splitlines()[0]) from None
    return {tool["name"]: tool for tool in tools}
