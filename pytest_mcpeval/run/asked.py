"""One request to a model outside a run, its reply kept in the response cache: tune's proposer and draft's drafter.

The model is resolved as the plugin resolves it (``ModelRegistry``: a litellm string, ``local/...``), the request is
keyed as a run keys it (:func:`pytest_mcpeval.run.cache.request_key`, no tools), and a cached reply is replayed.  A
damaged entry is treated as absent, as a run treats it (asked again, then overwritten).  A fresh reply is kept only
when the caller says it was worth keeping (:meth:`Answer.keep`): one that held nothing usable is asked again on a
rerun.  Each attempt has ``timeout`` seconds and there is one retry, said before the request is made.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Answer:
    content: str | None
    fresh: bool  # asked now (not replayed from the cache)
    entry: dict[str, Any] | None = field(default=None, repr=False)  # the cache entry a fresh answer would be kept as
    _asker: CachedAsker | None = field(default=None, repr=False)
    _key: str = ""

    def keep(self) -> None:
        """Keep a fresh answer in the cache, for a rerun to replay (a replayed one is there already)."""
        if self.fresh and self._asker is not None and self.entry is not None:
            self._asker.cache.put(self._asker.model, self._key, self.entry)


class CachedAsker:
    RETRIES = 1

    def __init__(self, name: str, params: Mapping[str, Any], cache_dir: Path, run_id: str, timeout: float,
                 timeout_option: str) -> None:
        from pytest_mcpeval.models.config import ModelRegistry
        from pytest_mcpeval.run.cache import ResponseCache

        registry = ModelRegistry()
        registry.params[name] = dict(params)
        self.model = registry.resolve(name)
        self.cache = ResponseCache(cache_dir, "new", run_id)
        self.timeout = timeout
        self.timeout_option = timeout_option
        self.calls = 0  # requests made (not replayed)
        self.replayed = 0
        self.cost_usd = 0.0

    @property
    def longest(self) -> float:
        """The seconds one request may take: every attempt's timeout."""
        return self.timeout * (self.RETRIES + 1)

    def ask(self, messages: list[dict[str, Any]], repeat: int, case: str, announce: str,
            seed: int | None = None) -> Answer:
        """The reply to ``messages``: replayed from the cache, or asked (``announce`` printed first, on stderr).
        ``repeat`` is part of the key; ``case`` names the entry.  Raises :class:`ModelCallError` when every attempt
        failed."""
        from pytest_mcpeval.models.litellm_client import complete
        from pytest_mcpeval.run.cache import BadEntry, request_key

        key = request_key(self.model, messages, [], repeat)
        try:
            entry = self.cache.get(self.model, key)
        except BadEntry:  # a damaged entry is asked again, as a run does
            entry = None
        if entry is not None:
            self.replayed += 1
            return Answer(entry["reply"].get("content"), fresh=False)
        print(announce, file=sys.stderr, flush=True)
        reply = complete(self.model, messages, [], retries=self.RETRIES, timeout=self.timeout,
                         timeout_option=self.timeout_option, **({} if seed is None else {"seed": seed}))
        self.calls += 1
        self.cost_usd += reply.cost_usd or 0.0
        # the response cache's entry format (run/dispatch.py): a rerun reads it back
        fresh = {"model": self.model.target, "case": case, "repeat": repeat, "reply": reply.to_entry()}
        return Answer(reply.content, fresh=True, entry=fresh, _asker=self, _key=key)
