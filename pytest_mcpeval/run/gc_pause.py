"""A large collection and the garbage collector: no cyclic collection while benchmark files are collected.

Collecting builds long-lived objects (items, parsed cases) by the ten thousand, and each of the collector's
full passes traverses all of them again: measured, 0.9 s of the 2.5 s that collecting 10,000 cases took.
:func:`pause_gc` turns the collector off at the first benchmark file, :func:`collection_done` turns it back
on (and, for a run that makes no call here, freezes what was collected), :func:`resume_gc` at the end of the
run should a collection end without finishing.
"""

from __future__ import annotations

import gc

import pytest

from pytest_mcpeval.keys import SETTINGS_KEY

_GC_PAUSED_KEY = pytest.StashKey[bool]()
FREEZE_FROM = 500  # case items: below, the collector's passes cost little


def pause_gc(config: pytest.Config) -> None:
    """When the first benchmark file is collected: no cyclic garbage collection until the collection is done."""
    if _GC_PAUSED_KEY not in config.stash:
        config.stash[_GC_PAUSED_KEY] = gc.isenabled()  # a process that had it off keeps it off
        gc.disable()


def collection_done(session: pytest.Session, cases: int) -> None:
    """The collector back on (:func:`resume_gc` does it too, should a collection end without finishing).

    After a large collection in a run that makes no model call (``--collect-only``, a replay with
    ``--mcp-record=none``), its garbage is collected once and the rest moved out of the collector's reach
    (``gc.freeze``): the items live until the process exits, and are no longer traversed by the collector's
    full pass at exit (measured: 1 s of the 3.8 s of ``--collect-only`` of 10,000 cases).  Not in runs that
    call models in this process: with the collection frozen, one call in a few runs of 2000 never got its
    answer until the timeout (httpx's pool, in litellm; not seen without the freeze)."""
    config = session.config
    resume_gc(config)
    if cases >= FREEZE_FROM and (config.option.collectonly or config.stash[SETTINGS_KEY].record == "none"):
        gc.collect()
        gc.freeze()


def resume_gc(config: pytest.Config) -> None:
    """The collector back on, if :func:`pause_gc` turned it off and nothing has turned it back on yet."""
    if config.stash.get(_GC_PAUSED_KEY, False):
        config.stash[_GC_PAUSED_KEY] = False
        gc.enable()
