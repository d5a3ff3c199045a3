"""Which tools to draft for: the blind ones, then the confused and confusable pairs.

A tool is *blind* when fewer than :func:`pytest_mcpeval.gate.power.min_changed` (6 at level 0.05) single-call
cases expect it: the drop gate cannot call any fall of its F1 significant.  Tools with no case at all come first.
A pair is *confused* when a report (``--report``) shows a model calling one where the other was expected, and
*confusable* when the lint finds their names and descriptions alike (TF-IDF cosine >= :data:`PAIR_SIMILARITY`);
a pair is drafted both ways, contrastively: requests for A that read like B's cases, and the reverse.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pytest_mcpeval.benchmark.loader import Benchmark
from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.draft import DraftError

LEVEL = 0.05  # the drop gate's default level: blind means blind at this level
PAIR_SIMILARITY = 0.7  # the lint's similarity from which a pair is confusable enough to draft contrastively
KEYWORDS = ("blind", "confused")


@dataclass(frozen=True)
class Target:
    tool: str  # the tool every draft of this target expects
    like: str | None = None  # contrastive: the tool the requests should read like
    why: str = ""  # "blind (2 cases)", "confused 3x with B", "confusable with B (0.82)"


def support(files: Iterable[Benchmark]) -> Counter[str]:
    """Per tool, the single-call cases that expect it first (what the report's ``support`` counts); flows, drafts
    and skipped cases are not the drop gate's single-call cases."""
    counts: Counter[str] = Counter()
    for bench in files:
        for case in bench.spec.cases:
            if case.expect and not case.is_flow and not case.draft and case.skip is False:
                counts[case.expect[0].tool] += 1
    return counts


def blind_tools(catalog: Catalog, counts: Counter[str]) -> list[str]:
    """The catalog's blind tools: those with no case first, then by fewest cases, then by name."""
    from pytest_mcpeval.gate.power import min_changed

    needed = min_changed(LEVEL)
    return sorted((t for t in catalog.names if counts[t] < needed), key=lambda t: (counts[t] > 0, counts[t], t))


def report_confusions(path: Path) -> dict[tuple[str, str], int]:
    """How often each pair was confused in a JSON report (``--report``), most first."""
    from pytest_mcpeval.scoring.confusable import confusion_counts

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DraftError(f"--report={path}: no such file") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DraftError(f"--report={path}: not a JSON report ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        raise DraftError(f"--report={path}: not a pytest-mcpeval JSON report (expected `models`; written by "
                         "--mcp-report)")
    return confusion_counts(data)


def pair_targets(catalog: Catalog, confusions: dict[tuple[str, str], int]) -> list[Target]:
    """Each confused pair (most confused first), then each confusable one (most alike first), both ways."""
    from pytest_mcpeval.scoring.confusable import confusable_pairs

    names = set(catalog.names)
    out: list[Target] = []
    seen: set[tuple[str, str]] = set()
    for (a, b), count in confusions.items():
        if a in names and b in names and (a, b) not in seen:
            seen.add((a, b))
            out += [Target(a, b, f"confused {count}x with {b}"), Target(b, a, f"confused {count}x with {a}")]
    for a, b, similarity in confusable_pairs(catalog, PAIR_SIMILARITY):
        if (a, b) not in seen:
            seen.add((a, b))
            out += [Target(a, b, f"confusable with {b} ({similarity:.2f})"),
                    Target(b, a, f"confusable with {a} ({similarity:.2f})")]
    return out


def choose(spec: str, catalog: Catalog, counts: Counter[str], confusions: dict[tuple[str, str], int]) -> list[Target]:
    """The targets ``--tools`` names: ``blind``, ``confused`` and tool names, comma-separated, in that order."""
    from pytest_mcpeval.text import did_you_mean

    out: list[Target] = []
    for word in (w.strip() for w in spec.split(",")):
        if not word:
            continue
        if word == "blind" and word not in catalog.names:
            out += [Target(t, None, f"blind ({counts[t]} case{'s' * (counts[t] != 1)})")
                    for t in blind_tools(catalog, counts)]
        elif word == "confused" and word not in catalog.names:
            out += pair_targets(catalog, confusions)
        elif word in catalog.names:
            out.append(Target(word, None, f"named ({counts[word]} case{'s' * (counts[word] != 1)})"))
        else:
            raise DraftError(f"--tools: `{word}` is not a tool of the catalog nor one of {', '.join(KEYWORDS)}"
                             f"{did_you_mean(word, [*catalog.names, *KEYWORDS])}")
    unique: dict[tuple[str, str | None], Target] = {}
    for target in out:  # a target named twice (blind, and by name) is drafted once, for the first reason
        unique.setdefault((target.tool, target.like), target)
    return list(unique.values())


def blind_summary(catalog: Catalog, counts: Counter[str]) -> str:
    """``blind tools: 97 of 117 (fewer than 6 single-call cases each; 80 with none)``."""
    from pytest_mcpeval.gate.power import min_changed

    blind = blind_tools(catalog, counts)
    none = sum(1 for t in blind if not counts[t])
    return (f"blind tools: {len(blind)} of {len(catalog.names)} (fewer than {min_changed(LEVEL)} single-call cases "
            f"each, so the drop gate at level {LEVEL:g} cannot see them fall; {none} with none)")
