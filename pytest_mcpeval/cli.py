"""What the subcommands of ``python -m pytest_mcpeval`` share: usage errors as one line with exit status 4, and a
JSON-object option (``--model-params``, ``--proposer-params``)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, NoReturn


def one_line_usage(parser: argparse.ArgumentParser, command: str) -> None:
    """argparse's errors of ``command``: one line on stderr, exit status 4 (the commands' usage errors), not
    argparse's usage text and 2."""

    def error(message: str) -> NoReturn:
        print(f"python -m pytest_mcpeval {command}: {message}", file=sys.stderr)
        raise SystemExit(4)

    parser.error = error  # type: ignore[method-assign]


def json_object(text: str, option: str) -> dict[str, Any]:
    """The JSON object ``text`` of ``option``; a :class:`ValueError` whose message is the user's one line."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{option}: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{option}: expected a JSON object")
    return value
