"""A large collection and the garbage collector: no cyclic collection while benchmark files are collected.

Collecting builds long-lived objects (items, parsed cases) by the ten thousand, and each of the collector's
full passes traverses all of them again: measured, 0.9 s of the 2.5 s that collecting 10,000 cases took.
:func:`pause_gc` turns the collector off at the first benchmark file, :func:`collection_done` turns it back
on, :func:`resume_gc` at the end of the run should a collection end without finishing.  Public means only
(``gc.disable``/``gc.enable``); nothing is frozen.
"""

from __future__ import annotations

import gc

import pytest

_GC_PAUSED_KEY = pytest.StashKey[bool]()


def pause_gc(config: pytest.Config) -> None:
    """When the first benchmark file is collected: no cyclic garbage collection until the collection is done."""
    if _GC_PAUSED_KEY not in config.stash:
        config.stash[_GC_PAUSED_KEY] = gc.isenabled()  # a process that had it off keeps it off
        gc.disable()


def collection_done(session: pytest.Session, cases: int) -> None:
    """The collector back on (:func:`resume_gc` does it too, should a collection end without finishing)."""
    resume_gc(session.config)


def resume_gc(config: pytest.Config) -> None:
    """The collector back on, if :func:`pause_gc` turned it off and nothing has turned it back on yet."""
    if config.stash.get(_GC_PAUSED_KEY, False):
        config.stash[_GC_PAUSED_KEY] = False
        gc.enable()
