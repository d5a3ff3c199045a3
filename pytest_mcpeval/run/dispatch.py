"""Concurrent model calls: a :class:`Unit` is one call, the :class:`Dispatcher` makes it, once.

pytest runs items one after another; an evaluation is I/O bound.  So the calls of items that have not run
yet are started ahead (which ones, and when: :mod:`~pytest_mcpeval.run.prefetch`) on the process's event loop
(:mod:`~pytest_mcpeval.core`), at most ``--mcp-concurrency`` of a model in flight (per-model overrides in
``mcp_concurrency``), and each item then only waits for its own call.  On the loop, a flow or the judge awaits
:meth:`Dispatcher.fetch`; an item waits with :meth:`Dispatcher.get`.  The dispatcher replays recorded calls
(:mod:`~pytest_mcpeval.run.cache`) in the item's own thread (a replay starts no loop) and stops paying once the
budget is spent (``--mcp-max-cost``) or the run is interrupted.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import threading
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_mcpeval.catalog import Catalog
from pytest_mcpeval.core import Core
from pytest_mcpeval.models import ModelCallError, acall_model, call_model
from pytest_mcpeval.models.common import KeyRejected
from pytest_mcpeval.models.config import ModelSpec
from pytest_mcpeval.models.local import PREFIX as LOCAL_PREFIX
from pytest_mcpeval.models.reply import ModelReply
from pytest_mcpeval.run.cache import (
    CALLED_AGAIN,
    FAILED,
    REPLAYED_OLDER,
    BadEntry,
    ResponseCache,
    legacy_request_key,
    request_key,
)

if TYPE_CHECKING:
    from pytest_mcpeval.run.budget import Budget



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

    @functools.cached_property
    def legacy_key(self) -> str:
        """The key a cache recorded before version 2 of the keys holds this call under (read, never written)."""
        return legacy_request_key(self.model, self.messages, self.catalog.openai_tools, self.repeat)


@dataclass
class DispatchSettings:
    concurrency: int = 16
    per_model: dict[str, int] = field(default_factory=dict)
    retries: int = 3
    timeout: float = 120.0
    workers: int = 1  # processes that may make this run's calls at the same time, sharing the budget


class Dispatcher:
    def __init__(self, settings: DispatchSettings, cache: ResponseCache | None, core: Core | None = None,
                 budget: Budget | None = None, stopping: threading.Event | None = None) -> None:
        self.settings = settings
        self.cache = cache
        self.core = core if core is not None else Core()
        self.budget = budget  # --mcp-max-cost: checked before each call made, paid calls added after
        self.stopping = stopping  # set on SIGINT / SIGTERM (interrupts.py): no call starts after it
        # calls started ahead, by key: touched by the main thread and the loop with one atomic dict operation each,
        # never under a lock (a signal raised into the main thread between a lock's acquire and its release would
        # leave the loop waiting for it for good)
        self._futures: dict[str, concurrent.futures.Future[ModelReply]] = {}
        self._rejected: dict[str, str] = {}  # model name -> why its key was refused (no call of it starts after)

    # -- public ---------------------------------------------------------------------------------
    def submit(self, unit: Unit) -> None:
        """Start the call on the loop (no-op for retrievers, which are fast and local, and for replays)."""
        if not self._called(unit) or unit.key in self._futures:
            return
        self._futures[unit.key] = self.core.start(self._fetch, unit)  # one thread submits a unit

    def get(self, unit: Unit) -> ModelReply:
        """The unit's reply, for an item (the main thread); raises :class:`ModelCallError` for infrastructure
        failures."""
        if unit.model.target.startswith(LOCAL_PREFIX):  # a retriever: in this thread
            return self._local(unit)
        future = self._futures.pop(unit.key, None)
        if future is None:
            recorded = None if self._called(unit) else self._recorded(unit, [])  # a replay: in this thread
            if recorded is not None:
                return recorded
            # else the entry cannot be read: the call is made again (and the entry noted)
            future = self.core.start(self._fetch, unit)
        try:
            return self.core.wait(future)
        except concurrent.futures.CancelledError:
            raise ModelCallError(f"{unit.label}: not completed: the run was interrupted") from None

    async def fetch(self, unit: Unit) -> ModelReply:
        """The unit's reply, on the loop (a flow's turn, the judge): the call started ahead if it was."""
        future = self._futures.pop(unit.key, None)
        if future is not None:
            return await asyncio.wrap_future(future)
        if unit.model.target.startswith(LOCAL_PREFIX):
            return await acall_model(unit.model, unit.messages, unit.catalog)
        return await self._fetch(unit)

    def close(self) -> None:
        self.core.close()

    def pool_size(self, model: ModelSpec) -> int:
        """The calls of ``model`` this process has in flight at most (its share of the concurrency)."""
        total = self.settings.per_model.get(model.name, self.settings.concurrency)
        return max(1, -(-total // max(1, self.settings.workers)))  # ceil: this worker's part

    # -- internals ------------------------------------------------------------------------------
    def _note_bad(self, bad: list[BadEntry], outcome: str) -> None:
        if self.cache is not None:
            for entry in bad:
                self.cache.note_bad(entry, outcome)

    def _called(self, unit: Unit) -> bool:
        """Whether the unit's reply comes from a call (not a retriever, not a replay of the cache)."""
        if unit.model.target.startswith(LOCAL_PREFIX):
            return False
        return self.cache is None or not (self.cache.mode == "none" or (self.cache.mode == "new" and (
            self.cache.has(unit.model, unit.key) or self.cache.has(unit.model, unit.legacy_key))))

    def _local(self, unit: Unit) -> ModelReply:
        return call_model(unit.model, unit.messages, unit.catalog)

    def _replay(self, unit: Unit, bad: list[BadEntry]) -> ModelReply | None:
        """The recorded reply, or ``None``; an entry at the call's key that does not validate is added to ``bad``
        and counts as absent."""
        if self.cache is None:
            return None
        entry = self._read(unit, unit.key, bad)
        if entry is None and self.cache.mode in ("new", "none"):  # all, off: only this run's entries, all current
            entry = self._read(unit, unit.legacy_key, bad)
        if entry is None:
            return None
        reply = ModelReply.from_entry(entry["reply"])
        reply.cached = entry.get("run") != self.cache.run_id  # this run's calls are paid for once, here
        sent = entry.get("params_sent")
        reply.params_sent = sent if isinstance(sent, dict) else None  # None: written before they were kept
        return reply

    def _read(self, unit: Unit, key: str, bad: list[BadEntry]) -> dict[str, Any] | None:
        assert self.cache is not None
        try:
            return self.cache.get(unit.model, key)
        except BadEntry as exc:
            bad.append(exc)
            return None

    def _recorded(self, unit: Unit, bad: list[BadEntry]) -> ModelReply | None:
        """The recorded reply of ``unit``, or ``None`` (a :class:`ModelCallError` under ``--mcp-record=none``, where
        there is nothing else); an unreadable entry at its key is added to ``bad``."""
        reply = self._replay(unit, bad)
        if reply is not None:
            self._note_bad(bad, REPLAYED_OLDER)  # the entry of the current key was bad, the older key's answered
            return reply
        if self.cache is not None and self.cache.mode == "none":
            self._note_bad(bad, FAILED)
            if bad:
                raise ModelCallError(f"{unit.label}: the recorded response {bad[0].path} cannot be replayed: "
                                     f"{bad[0].reason} (--mcp-record=none replays only); record it again by running "
                                     "once with --mcp-record=new and a key for the model")
            raise ModelCallError(
                f"{unit.label}: no recorded response (--mcp-record=none replays only); record it by "
                "running once with --mcp-record=new and a key for the model"
            )
        return None

    def _may_call(self, unit: Unit) -> None:
        """Raise :class:`ModelCallError` when the call must not be made: the run is ending, the model's key was
        refused, or the budget is spent."""
        if self.stopping is not None and self.stopping.is_set():  # the run is ending: nothing more is paid for
            raise ModelCallError(f"{unit.label}: not called: the run was interrupted")
        rejected = self._rejected.get(unit.model.name)
        if rejected is not None:  # every call of the model would be refused alike: one line says why, not each
            raise ModelCallError(f"not called: {rejected}")
        if self.budget is not None:
            try:
                self.budget.check()
            except ModelCallError as exc:
                raise ModelCallError(f"{unit.label}: {exc}") from None

    async def _fetch(self, unit: Unit) -> ModelReply:
        """The call made, within the model's concurrency (or its recorded reply, read first)."""
        bad: list[BadEntry] = []
        recorded = self._recorded(unit, bad)
        if recorded is not None:
            return recorded
        try:
            async with self.core.limit(unit.model.name, self.pool_size(unit.model)):
                self._may_call(unit)  # asked once the call has its place: the run may have changed meanwhile
                self._note_bad(bad, CALLED_AGAIN)  # said before the call: it is made, whatever it answers
                reply = await acall_model(unit.model, unit.messages, unit.catalog, retries=self.settings.retries,
                                          timeout=self.settings.timeout, seed=zlib.crc32(unit.key.encode()))
        except KeyRejected:
            self._rejected.setdefault(unit.model.name, f"the key of model {unit.model.name} was rejected on the "
                                                       f"call of {unit.label} (its other calls are not made)")
            raise
        if self.budget is not None:
            self.budget.add(reply.cost_usd)
        # a reply the provider's safety filter withheld is an error, not the model's answer: not kept, as no error
        # is, so the next run asks again (scoring/stops.py)
        if self.cache is not None and reply.finish_reason != "content_filter":
            entry = {"model": unit.model.target, "case": unit.label, "repeat": unit.repeat, "reply": reply.to_entry()}
            if reply.params_sent is not None:  # a replay reports them without litellm
                entry["params_sent"] = reply.params_sent
            self.cache.put(unit.model, unit.key, entry)
        return reply
