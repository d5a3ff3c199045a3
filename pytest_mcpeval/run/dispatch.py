"""Concurrent model calls: the model work of the collected items runs ahead of pytest's item loop.

pytest runs items one after another; an evaluation is I/O bound.  So when the first item of a
directory runs, the model calls of every selected item of that directory (every repeat) are submitted
to a thread pool per model (``--mcp-concurrency``, per-model overrides in ``mcp_concurrency``), and
each item then only waits for its own call, in collection order.

Under xdist every worker submits the same calls; a claim file decides which worker makes each call
(the others skip it in the background), and the response travels to the worker that runs the item
through the response cache, which every call goes through anyway (record / replay, see ``cache``).
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.models import ModelCallError, call_model
from pytest_mcpeval.models.config import ModelSpec
from pytest_mcpeval.models.local import PREFIX as LOCAL_PREFIX
from pytest_mcpeval.models.reply import ModelReply
from pytest_mcpeval.run.cache import Claims, ResponseCache, request_key

POLL_S = 0.02


@dataclass(frozen=True)
class Unit:
    """One model call: a case, a model, a repeat."""

    model: ModelSpec
    messages: list[dict[str, Any]] = field(hash=False, compare=False)
    catalog: Catalog = field(hash=False, compare=False)
    repeat: int
    label: str  # file::case[model] for messages
    key: str

    @classmethod
    def make(cls, model: ModelSpec, messages: list[dict[str, Any]], catalog: Catalog, repeat: int,
             label: str) -> Unit:
        return cls(model, messages, catalog, repeat, label, request_key(model, messages, catalog.openai_tools, repeat))


@dataclass
class DispatchSettings:
    concurrency: int = 16
    per_model: dict[str, int] = field(default_factory=dict)
    retries: int = 3
    timeout: float = 120.0
    workers: int = 1  # xdist workers sharing the concurrency budget


class _ClaimedElsewhere(Exception):
    """Another worker makes this call; the item will read its response from the cache."""


class Dispatcher:
    def __init__(self, settings: DispatchSettings, cache: ResponseCache | None, claims: Claims) -> None:
        self.settings = settings
        self.cache = cache
        self.claims = claims
        self._futures: dict[str, concurrent.futures.Future[ModelReply]] = {}
        self._pools: dict[str, concurrent.futures.ThreadPoolExecutor] = {}
        self._lock = threading.Lock()

    # -- public ---------------------------------------------------------------------------------
    def submit(self, unit: Unit) -> None:
        """Start the call in the background (no-op for retrievers, which are fast and local)."""
        if unit.model.target.startswith(LOCAL_PREFIX):
            return
        if self.cache is not None and self.cache.mode in ("new", "none") and self.cache.has(unit.model, unit.key):
            return  # a replay: the item reads it itself, cheaper than a hand-off to a thread
        with self._lock:
            if unit.key in self._futures:
                return
            self._futures[unit.key] = self._pool(unit.model).submit(self._fetch, unit, True)

    def get(self, unit: Unit) -> ModelReply:
        """The unit's reply; raises :class:`ModelCallError` for infrastructure failures."""
        with self._lock:
            future = self._futures.pop(unit.key, None)
        if future is not None:
            try:
                return future.result()
            except _ClaimedElsewhere:
                pass
            except concurrent.futures.CancelledError:
                raise ModelCallError(f"{unit.label}: the call was cancelled") from None
        return self._fetch(unit, False)

    def close(self) -> None:
        for pool in self._pools.values():
            pool.shutdown(wait=False, cancel_futures=True)

    # -- internals ------------------------------------------------------------------------------
    def _pool(self, model: ModelSpec) -> concurrent.futures.ThreadPoolExecutor:
        if model.name not in self._pools:
            total = self.settings.per_model.get(model.name, self.settings.concurrency)
            share = max(1, -(-total // max(1, self.settings.workers)))  # ceil: this worker's part
            self._pools[model.name] = concurrent.futures.ThreadPoolExecutor(
                max_workers=share, thread_name_prefix=f"mcpeval-{model.name}"
            )
        return self._pools[model.name]

    def _replay(self, unit: Unit) -> ModelReply | None:
        if self.cache is None:
            return None
        entry = self.cache.get(unit.model, unit.key)
        if entry is None:
            return None
        reply = ModelReply.from_entry(entry["reply"])
        reply.cached = entry.get("run") != self.cache.run_id  # this run's calls are paid for once, here
        return reply

    def _fetch(self, unit: Unit, background: bool) -> ModelReply:
        if unit.model.target.startswith(LOCAL_PREFIX):
            return call_model(unit.model, unit.messages, unit.catalog)
        reply = self._replay(unit)
        if reply is not None:
            return reply
        if self.cache is not None and self.cache.mode == "none":
            raise ModelCallError(
                f"{unit.label}: no recorded response (--mcp-record=none replays only); record it by "
                "running once with --mcp-record=new and a key for the model"
            )
        if not self.claims.claim(unit.key):
            if background:
                raise _ClaimedElsewhere()
            waited = self._wait_for_other_worker(unit)
            if waited is not None:
                return waited
        seed = zlib.crc32(unit.key.encode())
        try:
            reply = call_model(unit.model, unit.messages, unit.catalog, retries=self.settings.retries,
                               timeout=self.settings.timeout, seed=seed)
        except ModelCallError as exc:
            self.claims.fail(unit.key, str(exc))
            raise
        if self.cache is not None:
            self.cache.put(unit.model, unit.key, {"model": unit.model.target, "case": unit.label,
                                                  "repeat": unit.repeat, "reply": reply.to_entry()})
        return reply

    def _wait_for_other_worker(self, unit: Unit) -> ModelReply | None:
        """Wait for the worker that claimed the call; ``None`` if it never answers (then call here)."""
        deadline = time.monotonic() + self.settings.timeout * (self.settings.retries + 1) + 60
        while time.monotonic() < deadline:
            reply = self._replay(unit)
            if reply is not None:
                return reply
            failure = self.claims.failure(unit.key)
            if failure is not None:
                raise ModelCallError(failure)
            time.sleep(POLL_S)
        return None
