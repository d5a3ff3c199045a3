"""Importing litellm, once per process: the offline switches set first, the collector off during the import, what
it built then frozen.

Imported only when a case actually runs (litellm costs seconds to import).  Before the import the offline
switches are set (unless the user set them), so litellm reads its bundled cost map and fetches nothing on its
own.  Every module that needs litellm gets it from :func:`load_litellm`.

The one setting of litellm's the plugin makes is here: ``suppress_debug_info`` (litellm's documented switch),
so that litellm prints no "Give Feedback / Get Help" banner for an error the plugin reports in its own words (the
calls run on the event loop's thread: the banner would land in whichever test's output pytest was capturing, or
on the terminal between tests).  Nothing else of litellm's is changed.
"""

from __future__ import annotations

import gc
import os
import threading
from typing import Any

from pytest_mcpeval.models.common import OFFLINE_ENV

for _name, _value in OFFLINE_ENV.items():
    os.environ.setdefault(_name, _value)

_litellm: Any = None  # the module, once load_litellm imported it
_load_lock = threading.Lock()


def load_litellm() -> Any:
    """litellm, imported once per process with the garbage collector off during the import, its objects then frozen.

    The import builds a few hundred thousand long-lived objects, and each of the collector's full passes
    during it traversed all those made so far: measured here, ``import litellm`` 2.23-2.35 s, 1.54-1.69 s with
    the collector off.  Frozen after (``gc.freeze``, public), they are not traversed by any later pass either:
    without it the collector cost 1.9 ms of CPU a call against 0.25 ms for a bare async loop that freezes them
    (bench/profile_core.py, 1,000 calls at 0.2 s).  Any thread may call this; the ones that come while another
    imports wait for it."""
    global _litellm
    if _litellm is None:
        with _load_lock:
            if _litellm is None:
                enabled = gc.isenabled()
                gc.disable()
                try:
                    import litellm
                finally:
                    if enabled:
                        gc.enable()
                gc.freeze()
                litellm.suppress_debug_info = True
                _litellm = litellm
    return _litellm
