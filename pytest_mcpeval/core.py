"""The execution core of a process: one event loop, on a thread of its own, that runs every model call, MCP
session and flow of the process.

pytest runs items one after another on its main thread; an evaluation waits on the network.  So the work of
items that have not run yet is started ahead on the loop (:mod:`~pytest_mcpeval.run.prefetch` says which), and
an item waits for its own part through :meth:`Core.wait`, the one place the main thread blocks on the loop.  On
the loop, concurrency is bounded per model (``--mcp-concurrency``: :meth:`Core.limit`), each call has a
deadline that cancels it whole (connect, headers, body), and retries sleep on the loop.  More cores come from
xdist (``-n``): one core per worker.

The loop is asyncio's (litellm's async API and the MCP SDK's anyio run on it); it starts with the first piece of
work that needs it, so a replay or a run of static checks starts no thread.  :meth:`Core.close` cancels what is
still running and waits for the loop to end, at most :data:`STOP_WAIT` seconds: after a Ctrl-C the run ends
within seconds, and every call that completed before is already in the response cache.  The thread is a daemon:
a loop held up by code that blocks it (an in-process tool that sleeps) never keeps the process from exiting.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
STOP_WAIT = 5.0  # seconds close() waits for the loop to end once its tasks are cancelled (then it is abandoned)


class Core:
    """One event loop per process, started on first use; the main thread hands it work and waits."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._limits: dict[str, Any] = {}  # name -> anyio.CapacityLimiter, made on the loop
        self._closed = False

    @property
    def started(self) -> bool:
        return self._loop is not None

    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop, running on its thread from now on if it was not yet."""
        if self._loop is None:
            with self._lock:
                if self._closed:
                    raise RuntimeError("the execution core is closed")
                if self._loop is None:
                    loop = asyncio.new_event_loop()
                    ready = threading.Event()
                    loop.call_soon(ready.set)
                    # a daemon: a loop held up by a blocking tool never keeps the process from exiting
                    self._thread = threading.Thread(target=loop.run_forever, name="mcpeval-core", daemon=True)
                    self._thread.start()
                    ready.wait()
                    self._loop = loop
        return self._loop

    def start(self, fn: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> concurrent.futures.Future[T]:
        """Run ``fn(*args)`` on the loop from now on; its outcome is the future's (cancelling the future cancels
        the task)."""
        return asyncio.run_coroutine_threadsafe(fn(*args), self.loop())

    def call(self, fn: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
        """``fn(*args)`` run on the loop, waited for."""
        return self.wait(self.start(fn, *args))

    @staticmethod
    def wait(future: concurrent.futures.Future[T]) -> T:
        """The one place an item waits for the loop: the outcome of ``future`` (a Ctrl-C interrupts the wait;
        ``concurrent.futures.CancelledError`` when the loop cancelled the work: the run is ending)."""
        return future.result()

    def limit(self, name: str, size: int) -> Any:
        """The capacity limiter named ``name`` (a model: its calls in flight), made on first use.  Called on the
        loop only."""
        limiter = self._limits.get(name)
        if limiter is None:
            import anyio

            limiter = self._limits[name] = anyio.CapacityLimiter(max(1, size))
        return limiter

    def close(self) -> None:
        """Cancel what still runs on the loop and stop it, waiting at most :data:`STOP_WAIT` s; never raises."""
        with self._lock:
            self._closed = True
            loop, thread, self._loop = self._loop, self._thread, None
        if loop is None or thread is None:
            return
        try:
            loop.call_soon_threadsafe(_cancel_all, loop)
        except RuntimeError:  # the loop is closed already
            return
        thread.join(STOP_WAIT)
        if not thread.is_alive():
            loop.close()


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    """On the loop: cancel every task, then stop once they have ended (each gets its cancellation delivered)."""
    tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in tasks:
        task.cancel()

    async def stop() -> None:
        if tasks:
            await asyncio.wait(tasks, timeout=STOP_WAIT)
        loop.stop()

    loop.create_task(stop())
