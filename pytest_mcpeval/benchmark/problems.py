"""The mistakes found in a benchmark file: a :class:`Problem` per mistake (line, field, message) and the
:class:`BenchmarkError` that lists them all; the ground floor of :mod:`pytest_mcpeval.benchmark`, importing
nothing of ours, so the tools file and the catalog can raise it without importing the loader."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Loc = tuple[str | int, ...]

MAX_SHOWN = 10
"""Problems of one file listed in full; the rest are counted."""


@dataclass(frozen=True)
class Problem:
    """One mistake in a benchmark file: its line, the field (rendered path, may be empty), the message."""

    line: int | None
    where: str
    message: str

    def render(self, path: str) -> str:
        place = path if self.line is None else f"{path}:{self.line}"
        return f"{place}: {self.where}: {self.message}" if self.where else f"{place}: {self.message}"


class BenchmarkError(Exception):
    """The problems of a benchmark file, one ``file:line: field: message`` line each, ordered by line.

    ``line``, ``where`` and ``message`` describe the first problem; ``problems`` holds them all.
    ``path`` may be changed after the fact (collection shows it relative to the invocation directory):
    every rendered line uses its current value.
    """

    def __init__(self, path: Path | str, message: str, line: int | None = None, where: str = "") -> None:
        self.path = str(path)
        self.problems: list[Problem] = [Problem(line, where, message)]
        super().__init__(str(self))

    @classmethod
    def of(cls, path: Path | str, problems: Iterable[Problem]) -> BenchmarkError:
        """One error for several problems (at least one), sorted by line; same-line order is kept."""
        ordered = sorted(problems, key=lambda p: p.line or 0)
        error = cls(path, ordered[0].message, ordered[0].line, ordered[0].where)
        error.problems = ordered
        error.args = (str(error),)
        return error

    @property
    def line(self) -> int | None:
        return self.problems[0].line

    @property
    def where(self) -> str:
        return self.problems[0].where

    @property
    def message(self) -> str:
        return self.problems[0].message

    def __str__(self) -> str:
        lines = [problem.render(self.path) for problem in self.problems[:MAX_SHOWN]]
        more = len(self.problems) - MAX_SHOWN
        if more > 0:
            lines.append(f"... and {more} more problem{'s' if more > 1 else ''} in this file")
        return "\n".join(lines)


def render_loc(loc: Loc, spec_cases: Sequence[Any] | None = None) -> str:
    """``("cases", 2, "expect", 0, "tool")`` -> ``cases[2].expect[0].tool``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
