"""SIGINT and SIGTERM during a session: the run stops as after Ctrl-C, and the report says so.

Python's own SIGTERM handling ends the process where it stands: no report, no junit XML, a gate that was
never evaluated, and the xdist workers of the run left calling the model.  CI runners and ``timeout``
send SIGTERM.  So for the session's duration (``pytest_sessionstart`` to ``pytest_unconfigure``), in the main
thread, :class:`Interrupts` handles both signals the same way:

- the signal is recorded first, so the end of the session knows the run was interrupted whatever pytest
  was doing when it arrived (a second Ctrl-C while pytest formats the first one used to reach
  ``pytest_sessionfinish`` with exit status 0: a report saying ``interrupted: false`` and a baseline);
- :attr:`stopping` is set: no model call starts after it (the dispatcher checks it on the event loop), the
  calls in flight are cancelled when the loop closes;
- the xdist workers of the run are sent the same signal (the controller stays alive to write the report;
  xdist would otherwise let them run for 5 s before it interrupts them);
- then ``KeyboardInterrupt`` (:class:`Terminated` for SIGTERM) is raised in the main thread, and pytest ends
  the session as after Ctrl-C: exit status 2, ``pytest_sessionfinish`` runs, the report is written.

A second signal ends the run at once and quietly, as the first one left it: one line on stderr
(:data:`SECOND_LINE`), the xdist workers killed, exit status 2.  Raising ``KeyboardInterrupt`` again into
whatever pytest was doing to end the first printed two tracebacks and exited with Python's own status.  The reports
are left as the first interrupt wrote them: a second signal while they are being written (:meth:`writing`) waits
for the writing to end (it takes well under a second, and an interruption must not leave half of the files);
before that, none is written (the older run's were removed when this one started: nothing at the paths claims a
pass).  A signal while the report is being written after only one signal is recorded, not raised.

A stopped run must end.  An exception raised into the main thread wherever it stands can, rarely, leave a lock
or a thread that nothing will release (seen once, in CI on a loaded machine: a SIGTERM'd process lived on), and a
CI job that waits for it hangs until its own limit.  So the first signal also
starts a watchdog (a daemon thread, in the controller): if the process is still alive :data:`EXIT_GRACE_S`
seconds later, not counting the time the report is being written, it prints every thread's stack to stderr
(what hung, for a bug report) and ends the process with exit status 2, as the interrupted run it is.  A run that
ends on its own, as every run does, never sees it fire.  A handler someone else set before
the session (a ``conftest.py``, another plugin, a program calling ``pytest.main``) is left in place, and the
signal is theirs; only Python's defaults are replaced, and restored at the end.

:func:`end_with_parent` makes a process (an xdist worker) receive a signal when
its parent ends, even by SIGKILL: ``PR_SET_PDEATHSIG`` on Linux, a thread watching ``getppid()`` elsewhere.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import weakref
from collections.abc import Iterator
from types import FrameType
from typing import Any

_HANDLED = (signal.SIGINT, signal.SIGTERM)
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
EXIT_GRACE_S = 12.0  # an interrupted run ends within a few seconds of its signal (tests/faults: under 15 s)
EXIT_STATUS = 2  # pytest.ExitCode.INTERRUPTED (pytest is not imported here)
SECOND_LINE = "pytest-mcpeval: second interrupt: stopping now"


class Terminated(KeyboardInterrupt):
    """Raised in the main thread on SIGTERM: pytest ends the session as after Ctrl-C (exit status 2)."""


class Interrupts:
    def __init__(self, worker: bool = False) -> None:
        self.worker = worker  # an xdist worker: only the first signal is raised (its controller ends it)
        self.received: list[str] = []  # names of the signals received, in order
        self.stopping = threading.Event()  # set at the first signal: no model call starts after it
        self.finishing = False  # the report is being written: a signal is recorded, not raised (see writing())
        self.second = False  # a second signal came: the run ends as soon as the report is not being written
        self.forward_to: set[int] = set()  # pids told of the signal (the xdist workers of this controller)
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        """Handle SIGINT and SIGTERM where Python's defaults are in place (only the main thread may)."""
        if threading.current_thread() is not threading.main_thread():
            return
        defaults = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
        for signum in _HANDLED:
            if signal.getsignal(signum) is defaults[signum]:  # a handler of someone else's (or SIG_IGN) stays
                self._previous[signum] = signal.signal(signum, self._handle)

    def restore(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum, previous in self._previous.items():
            if signal.getsignal(signum) == self._handle:  # not replaced meanwhile by someone else
                signal.signal(signum, previous)
        self._previous.clear()

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """While the report is being written: a signal is recorded and does not cut the writing short; a second
        one ends the run as soon as the writing is done."""
        self.finishing = True
        try:
            yield
        finally:
            self.finishing = False
            if self.second:
                self._stop_now()

    @property
    def signal_name(self) -> str | None:
        """The first signal received, as the report names it."""
        if not self.received:
            return None
        first = self.received[0]
        return f"{first} (Ctrl-C)" if first == "SIGINT" else first

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        self.received.append(name)
        first = not self.stopping.is_set()
        self.stopping.set()
        if first:
            for pid in sorted(self.forward_to):
                with contextlib.suppress(OSError):  # already gone
                    os.kill(pid, signum)
            if not self.worker:  # a worker is ended by its controller, or with it
                threading.Thread(target=self._watch_exit, args=(name,), name="mcpeval-exit-watchdog",
                                 daemon=True).start()
        elif not self.worker:  # a second signal: the run ends now, as the first left it
            self.second = True
            if not self.finishing:
                self._stop_now()
            return
        if self.finishing or not first:  # a worker's second signal: its controller ends it
            return
        if signum == signal.SIGTERM:
            raise Terminated(f"{name}: the run was stopped")
        raise KeyboardInterrupt

    def _stop_now(self) -> None:
        """End the process at once, quietly: the workers killed (they would print their own tracebacks as they
        died with it), one line, exit status 2."""
        for pid in sorted(self.forward_to):
            with contextlib.suppress(OSError):  # already gone
                os.kill(pid, signal.SIGKILL)
        for stream in (sys.stdout, sys.__stdout__, sys.__stderr__):  # what pytest printed so far, then the line
            with contextlib.suppress(Exception):  # closed, or being written by the code this signal interrupted
                if stream is not None:
                    stream.flush()
        with contextlib.suppress(Exception):
            assert sys.__stderr__ is not None
            sys.__stderr__.write(f"\n{SECOND_LINE}\n")
            sys.__stderr__.flush()
        os._exit(EXIT_STATUS)

    def _watch_exit(self, name: str) -> None:
        """Wait :data:`EXIT_GRACE_S` seconds of not writing the report; a process still alive then is hung: say
        where, end it."""
        import time

        left = EXIT_GRACE_S
        while left > 0:
            time.sleep(min(left, 0.5))
            if not self.finishing:
                left -= 0.5
        import faulthandler

        stream = sys.__stderr__
        with contextlib.suppress(Exception):  # stderr closed or gone: exit anyway
            assert stream is not None
            stream.write(f"\npytest-mcpeval: the run did not end within {EXIT_GRACE_S:g} s of {name}; ending it "
                         f"(exit status {EXIT_STATUS}). Where each thread was:\n")
            stream.flush()
            faulthandler.dump_traceback(file=stream, all_threads=True)
            stream.flush()
        os._exit(EXIT_STATUS)


def end_with_parent(signum: int, kernel: bool = True) -> None:
    """This process receives ``signum`` when its parent ends (killed outright too).  Call it early in the
    process; a parent gone already sends the signal at once.  ``kernel=False`` where the parent's thread that
    started this process may end before the parent does (the kernel's signal follows that thread)."""
    parent = os.getppid()
    if kernel and sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0:
                if os.getppid() != parent:  # it ended before the kernel was told
                    os.kill(os.getpid(), signum)
                return
        except (OSError, AttributeError):  # no libc to load, or no prctl in it: watch instead
            pass

    def watch() -> None:
        import time

        while os.getppid() == parent:
            time.sleep(0.2)
        os.kill(os.getpid(), signum)

    threading.Thread(target=watch, name="mcpeval-parent-watch", daemon=True).start()


_WORKER_PIDS: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()  # execnet gateway -> its pid


def ask_worker_pid(gateway: Any) -> None:
    """On the xdist controller, for each new gateway (``pytest_xdist_newgateway``, before xdist starts its worker
    in it): the pid of its process, asked with execnet's public ``remote_exec``, so that signals can be passed
    on to it.  Asked now because later the worker's main thread runs the tests, and xdist's gateways run remote
    code on the main thread only.  Only a process on this machine (``popen``, not through ``via=``); otherwise, or
    when the gateway does not answer within a few seconds, none is known and xdist alone stops the worker."""
    spec = gateway.spec
    if not spec.popen or spec.via:
        return
    import execnet

    try:
        channel = gateway.remote_exec("import os\nchannel.send(os.getpid())")
        pid = channel.receive(timeout=10)
        channel.waitclose(timeout=10)  # the worker's main thread is free again for xdist's own remote_exec
    except (OSError, EOFError, execnet.RemoteError, execnet.TimeoutError):
        return
    if isinstance(pid, int):
        _WORKER_PIDS[gateway] = pid


def worker_pid(gateway: Any) -> int | None:
    """The pid :func:`ask_worker_pid` learnt for ``gateway``, if any."""
    return _WORKER_PIDS.get(gateway)
