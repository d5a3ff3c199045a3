"""A large collection and the garbage collector: no cyclic collection while benchmark files are collected, and,
in a run that calls no model here, what the collection built frozen once it is done.

Collecting builds long-lived objects (items, parsed cases, the file format's pydantic models) by the ten thousand,
and each of the collector's full passes traverses all of them again: measured, 0.9 s of the 2.5 s that collecting
10,000 cases took.  :func:`pause_gc` turns the collector off at the first benchmark file; :func:`collection_done`
turns it back on; :func:`resume_gc` turns it on at the end of the run should a collection end without finishing.

Where the process makes no model call (``--collect-only``, a replay under ``--mcp-record=none``),
:func:`collection_done` first collects the young garbage the collection left (cycles made while the collector was
off: 17,000 objects at 1,000 cases, 12 ms) and freezes the rest (``gc.freeze``, public: they live until the
session ends), so that neither the passes during the run nor the full ones after it traverse them again: pytest
collects several times at its end (to report unraisable exceptions) and Python once more at exit.  A replay of
1,000 cases took 1.46 s without the freeze and 1.31 s with it (best of ten each, in alternation), 1.55 and 1.47 as
medians; from its last hook to its exit, 59 ms and 9 ms.

Never in a run that calls models: a freeze after collection was in such runs once, and one call in a few runs of
2,000 then waited for its answer until the timeout (httpx's pool, in litellm; never seen without the freeze).  Nor
where the session does not own its process: one started while a test runs (pytester in process, or a test's
subprocess: pytest's documented ``PYTEST_CURRENT_TEST`` is set), after which the process goes on, and there each
session of 1,000 cases would keep 12 MB frozen for good.  A process that runs sessions one after another
(``pytest.main`` in a loop) unfreezes and collects at the next session's first benchmark file, so it keeps one
session's worth at most.
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
