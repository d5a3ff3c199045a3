"""A thread pool whose calls are abandoned, not awaited, when the process exits.

``concurrent.futures.ThreadPoolExecutor`` joins its threads when the interpreter exits, so after a
Ctrl-C the process would wait for every model call in flight (up to ``--mcp-timeout`` x retries).  An
interrupted run must exit within seconds of the signal: its threads are daemons, and :meth:`shutdown`
cancels what has not started.  A call that completes before the process exits is still cached (the
worker thread stores it), so a rerun pays only for what was abandoned.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")
_STOP = object()


class DaemonPool:
    def __init__(self, max_workers: int, name: str) -> None:
        self.max_workers = max_workers
        self.name = name
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError(f"pool {self.name} is shut down")
            self._queue.put((future, fn, args))
            if len(self._threads) < self.max_workers:  # one thread per job until the budget is reached
                thread = threading.Thread(target=self._work, name=f"{self.name}_{len(self._threads)}", daemon=True)
                self._threads.append(thread)
                thread.start()
        return future

    def shutdown(self, cancel_futures: bool = True) -> None:
        """Stop taking work; cancel what has not started; never wait for what has."""
        with self._lock:
            self._closed = True
        if cancel_futures:
            while True:
                try:
                    job = self._queue.get_nowait()
                except queue.Empty:
                    break
                if job is not _STOP:
                    job[0].cancel()
        for _ in self._threads:
            self._queue.put(_STOP)

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            if job is _STOP:
                return
            future, fn, args = job
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:  # handed to the waiting item, which labels it
                    future.set_exception(exc)
