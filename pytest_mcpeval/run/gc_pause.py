"""A large collection and the garbage collector: off while benchmark files are collected (each full pass
traversed every item made so far: 0.9 s of the 2.5 s that collecting 10,000 cases took), back on after.

In a run that calls no model here (``--collect-only``, ``--mcp-record=none``), what the collection built is frozen
first (``gc.freeze``, public; its young garbage collected before), so that pytest's collections at its end and
Python's at exit do not traverse it again: a 1,000-case replay 1.46 -> 1.31 s (docs/performance.md).  Never in a
run that calls models (a freeze there once left one call in a few runs of 2,000 waiting until its timeout), nor in
a session started while a test runs (``PYTEST_CURRENT_TEST``: pytester, a test's subprocess), whose process goes
on and would keep each session's objects frozen.  Sessions run one after another in a process (``pytest.main`` in a
loop) unfreeze and collect the one before at their first benchmark file.
"""

from __future__ import annotations

import gc
import os

import pytest

_GC_PAUSED_KEY = pytest.StashKey[bool]()


_frozen = False  # this module froze a collection in this process (an earlier session's, if any)


def pause_gc(config: pytest.Config) -> None:
    """When the first benchmark file is collected: no cyclic garbage collection until the collection is done (and
    what an earlier session of this process froze back in the collector's reach)."""
    global _frozen
    if _GC_PAUSED_KEY not in config.stash:
        if _frozen:  # what died since is collected now, before this session's collection is frozen in turn
            gc.unfreeze()
            gc.collect()
            _frozen = False
        config.stash[_GC_PAUSED_KEY] = gc.isenabled()  # a process that had it off keeps it off
        gc.disable()


def collection_done(session: pytest.Session) -> None:
    """The collector back on (:func:`resume_gc` turns it on too, should a collection end without finishing); before,
    in a run that calls no model here and owns its process, the collection's garbage collected and the rest frozen."""
    global _frozen
    config = session.config
    if config.stash.get(_GC_PAUSED_KEY, False) and _makes_no_call(config) and "PYTEST_CURRENT_TEST" not in os.environ:
        gc.collect(1)  # everything made while the collector was off is still in the youngest generations
        gc.freeze()
        _frozen = True
    resume_gc(config)


def _makes_no_call(config: pytest.Config) -> bool:
    from pytest_mcpeval.keys import SETTINGS_KEY

    return bool(config.option.collectonly) or config.stash[SETTINGS_KEY].record == "none"


def resume_gc(config: pytest.Config) -> None:
    """The collector back on, if :func:`pause_gc` turned it off and nothing has turned it back on yet."""
    if config.stash.get(_GC_PAUSED_KEY, False):
        config.stash[_GC_PAUSED_KEY] = False
        gc.enable()
