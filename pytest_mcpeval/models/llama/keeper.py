"""``python -m pytest_mcpeval.models.llama.keeper LEASES PID STATE``: stops the server ``PID`` once no process
holding a lease in ``LEASES`` is alive (checked every second, twice in a row), then removes ``STATE``.

Started beside each local server (:mod:`.server`), in a session of its own, so that a run that dies without
giving its leases back (SIGKILL, a crashed worker) leaves no server running.  Exits as soon as the server has.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import time
from pathlib import Path

from pytest_mcpeval.models.llama.server import _alive, _stop, any_alive
from pytest_mcpeval.models.llama.weights import locked

POLL = 1.0


def main(argv: list[str]) -> int:
    leases, pid, state = Path(argv[0]), int(argv[1]), Path(argv[2])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    unheld = 0
    while _alive(pid):
        time.sleep(POLL)
        unheld = 0 if any_alive(leases) else unheld + 1
        if unheld >= 2:
            with locked(leases.with_suffix(".lock")):  # a process taking a lease now waits, then starts anew
                if any_alive(leases):
                    unheld = 0
                    continue
                _stop(pid)
                with contextlib.suppress(OSError):
                    state.unlink()
            break
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
