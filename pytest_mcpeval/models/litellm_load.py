"""Importing litellm, once per process: the offline switches set first, the collector off, its objects frozen.

Imported only when a case actually runs (litellm costs seconds to import).  Before the import the offline
switches are set (unless the user set them), so litellm reads its bundled cost map and fetches nothing on its
own.  Every module that needs litellm gets it from :func:`load_litellm`.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import threading
from typing import Any

from pytest_mcpeval.models.common import OFFLINE_ENV

for _name, _value in OFFLINE_ENV.items():
    os.environ.setdefault(_name, _value)

# litellm's import builds a few hundred thousand objects (its types, openai's, pydantic's), and the collection
# the interpreter runs as it exits traverses them all: 0.9 s of every run that made its calls in this process
# (measured: `import litellm` then exit, 3.26 s; with them frozen first, 2.35 s).  Frozen at exit, after the
# atexit handlers registered later (litellm's) ran: nothing of the run is left to collect by then.
atexit.register(gc.freeze)

_litellm: Any = None  # the module, once load_litellm imported it
_load_lock = threading.Lock()
_load_started = False  # load_litellm began its import (litellm is in sys.modules from that moment, half made)
_found_imported = False  # ... and litellm was in sys.modules already then: something else had imported it


def imported_elsewhere() -> bool:
    """Whether litellm is in this process because something other than :func:`load_litellm` imported it (a
    ``conftest.py``, a plugin, the tests): not while, nor after, the plugin's own import runs, unless litellm was
    there before it (used by :func:`pytest_mcpeval.models.processes.litellm_set_up_here`)."""
    if "litellm" not in sys.modules:
        return False
    return _found_imported if _load_started else True


def load_litellm() -> Any:
    """litellm, imported once per process with the garbage collector off, its objects then frozen.

    The import builds a few hundred thousand long-lived objects, and each of the collector's full passes
    during it traversed all those made so far: measured here, ``import litellm`` 2.23-2.35 s, 1.54-1.69 s with
    the collector off.  Frozen after (``gc.freeze``), they are not traversed again by any later pass, nor copied
    by a worker forked from the fork server that loaded them (:data:`pytest_mcpeval.models.processes.PRELOAD`).
    Any thread may call this; the ones that come while another imports wait for it."""
    global _litellm, _load_started, _found_imported
    if _litellm is None:
        with _load_lock:
            if _litellm is None:
                if not _load_started:
                    _found_imported = "litellm" in sys.modules
                    _load_started = True  # before the import puts litellm in sys.modules
                enabled = gc.isenabled()
                gc.disable()
                try:
                    import litellm
                finally:
                    if enabled:
                        gc.enable()
                gc.freeze()
                _litellm = litellm
    return _litellm
