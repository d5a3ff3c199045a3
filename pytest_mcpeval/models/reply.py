"""What any model client returns: the calls it made, its text, usage, and (for retrievers) a ranking."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RawCall:
    """A tool call as the model made it: the API name and the argument text, unparsed."""

    name: str
    arguments: str


@dataclass
class ModelReply:
    calls: list[RawCall] = field(default_factory=list)
    content: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    latency_s: float = 0.0
    fills_arguments: bool = True  # False for retrievers: argument metrics do not apply
    ranking: list[tuple[str, float]] | None = None  # every tool, best first (retrievers only)
    top_k: int = 10  # how much of the ranking the report keeps
