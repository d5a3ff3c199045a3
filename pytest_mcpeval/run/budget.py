"""``--mcp-max-cost=USD``: the run stops making model calls once what it spent reaches the cap.

Where spend is known: a call's price (litellm's, :mod:`pytest_mcpeval.models.cost`) comes back to the process that
asked for it, the pytest process of the item (an xdist worker, or the only process).  Every such process is one
:class:`Budget` writer: it keeps its own total in its own file of a directory shared by the run (made by the process
that reports, handed to each xdist worker in its ``workerinput``), rewritten whole (written beside, then renamed)
after each paid call.  Before a new call, the process reads every file of the directory and adds them up: no lock is
needed (each file has one writer; a rename is atomic), and a cap is never shared out ahead of time, so one worker
may spend what another did not need.  A per-worker share of the budget would stop a worker with the cheap cases
early and let the costly ones' worker stop while money was left.

What is exact, and what is not: the cap stops new calls, not calls already in flight.  A call starts when the run's
spend is under the cap; up to ``--mcp-concurrency`` calls per model may be in flight when the cap is reached, and
they are paid for (and kept in the cache).  So the run may spend the cap plus the price of those calls: a bound the
user sets with ``--mcp-concurrency``.  Replays cost nothing and are never refused.

Unpriced calls (a model litellm has no price for) cannot be counted: they are made, counted apart
(:attr:`Budget.unpriced`) and a warning says the cap does not cover them.  The cases whose call was refused end as
errors (``budget reached: $S of $CAP spent``), the gate fails, and the cache keeps every answer paid for, so the
next run replays them for free and goes on from there.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import uuid
from pathlib import Path

from pytest_mcpeval.models import ModelCallError

REFUSED = "budget reached"  # the start of the error of a case whose call the cap refused
WORKERINPUT_KEY = "mcpeval_budget_dir"


def make_ledger() -> Path:
    """A new directory for a run's spend files (called once, by the process that reports)."""
    return Path(tempfile.mkdtemp(prefix="mcpeval-budget-"))


def remove_ledger(directory: Path) -> None:
    for path in directory.glob("*"):
        with contextlib.suppress(OSError):
            path.unlink()
    with contextlib.suppress(OSError):
        directory.rmdir()


class Budget:
    """One process's part of the run's spend, and the run's spend read from every process's file."""

    def __init__(self, cap: float, directory: Path) -> None:
        self.cap = cap
        self.directory = directory
        self._file = directory / f"{os.getpid()}-{uuid.uuid4().hex[:8]}.spent"
        self._lock = threading.Lock()
        self.mine = 0.0
        self.unpriced = 0  # calls made that litellm could not price: not counted against the cap
        self.refused = 0

    def spent(self) -> float:
        """USD spent by the run so far: the sum of every process's file (this one's own total, if newer)."""
        total = 0.0
        try:
            paths = list(self.directory.glob("*.spent"))
        except OSError:
            paths = []
        for path in paths:
            if path == self._file:
                continue
            try:
                total += float(path.read_text() or 0.0)
            except (OSError, ValueError):  # a file being replaced: its rename is atomic, so read it next time
                continue
        return total + self.mine

    def check(self) -> None:
        """Raise :class:`ModelCallError` when the run's spend has reached the cap: the call is not made."""
        spent = self.spent()
        if spent >= self.cap:
            with self._lock:
                self.refused += 1
            raise ModelCallError(f"{REFUSED}: ${spent:.4f} of ${self.cap:g} spent (--mcp-max-cost={self.cap:g}); "
                                 "the call was not made (the answers paid for are in the cache: the next run "
                                 "replays them for free)")

    def add(self, cost: float | None) -> None:
        """Count a call that was made (``None``: no price, counted apart)."""
        with self._lock:
            if cost is None:
                self.unpriced += 1
                return
            self.mine += cost
            text = repr(self.mine)
            temporary = self._file.with_suffix(".tmp")
            try:
                temporary.write_text(text)
                os.replace(temporary, self._file)
            except OSError:  # the directory is gone (the run is ending): this process's total still counts here
                pass
