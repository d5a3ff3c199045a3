"""xdist workers of the tests' in-process runs, forked from a process that has already imported litellm and mcp.

Why: the suite runs a few hundred in-process pytest runs under ``-n 1`` or ``-n 2``; each of their workers is a
fresh interpreter, and the first model call in it imports litellm and mcp: about 3 s of CPU each time, most of the
suite's CPU.  Here one process per test process (the zygote) imports them once; a worker is a fork of it, given
the pipes, the working directory and the environment of the process xdist started.

How, with public means only:
- the in-process runs get :class:`ForkedWorkers` through ``pytester.plugins`` (pytester's documented list of
  plugins for in-process runs; a subprocess run does not see it);
- it turns each ``popen`` gateway of ``-n``/``--tx`` into ``popen//python=WRAPPER`` (execnet's documented
  ``python=`` key): the wrapper is a small interpreter that hands its stdin, stdout and stderr to the zygote
  over a Unix socket (``SCM_RIGHTS``), waits for the fork to end and ends with its status; a signal sent to it
  (execnet's kill, SIGTERM) is passed on to the fork, which also joins the wrapper's process group so that a
  Ctrl-C sent to the group reaches it as it reaches a worker;
- a fork is made only when it would be the same as a fresh interpreter: the same interpreter, the same
  ``PYTHON*``/``LITELLM*`` environment and a process group it can join; otherwise the wrapper runs the
  interpreter itself (``exec``), as execnet would have.

Not preloaded: pytest's plugins (pytest_mcpeval, xdist, syrupy), so that pytest rewrites them as in a fresh
worker.  anyio (imported by mcp and httpx) is one: the runs filter its "already imported" warning.
A test whose point is a fresh interpreter (what a worker imports) is marked ``fresh_workers``.

PYTEST_DONT_REWRITE: the test process imports this module before any run loads it as a plugin.
"""

from __future__ import annotations

import array
import contextlib
import io
import json
import os
import select
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

# what a fork must share with the process it stands in for, to behave as a fresh interpreter started there
_SAME = ("PYTHON", "LITELLM", "SSL_", "REQUESTS_CA", "HTTP", "http", "NO_PROXY", "no_proxy", "AIOHTTP", "TMP")
_PRELOAD = ("litellm", "mcp.client.stdio", "mcp.client.session", "jsonschema", "yaml", "numpy")
_FDS = 3
# anyio is a pytest plugin that the zygote has imported (mcp and httpx need it): pytest cannot rewrite it in a fork,
# and says so in a warning, filtered there (an xdist worker reads PYTEST_ADDOPTS)
_ANYIO = "-W " + shlex.quote(
    "ignore:Module already imported so cannot be rewritten; anyio:pytest.PytestAssertRewriteWarning")
_MAX_MESSAGE = 1 << 20


def _relevant(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(_SAME)}


# ---------------------------------------------------------------------------------------------------- the zygote


def serve(path: str, parent: int) -> None:
    """Import what the workers would, then fork one worker per connection until the test process is gone."""
    import gc
    import importlib

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    gc.disable()
    for name in _PRELOAD:
        importlib.import_module(name)
    gc.enable()
    gc.freeze()
    mine = _relevant(dict(os.environ))
    zygote = os.getpid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is for the forks in the run's process group
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("ready", flush=True)
    children: dict[int, socket.socket] = {}  # a fork's pid -> the wrapper's connection
    waiting: list[socket.socket] = []
    try:
        while os.getppid() == parent:  # until the test process is gone
            readable, _, _ = select.select([listener, *waiting, *children.values()], [], [], 0.05)
            for sock in readable:
                if sock is listener:
                    conn, _ = listener.accept()
                    waiting.append(conn)
                elif sock in waiting:
                    waiting.remove(sock)
                    pid = _start(sock, mine, listener, [*waiting, *children.values()])
                    if pid:
                        children[pid] = sock
                else:  # a wrapper went away before its fork ended: the fork goes too
                    for pid, conn in list(children.items()):
                        if conn is sock:
                            _kill(pid, signal.SIGKILL)
            _reap(children)
    finally:
        if os.getpid() == zygote:  # (a fork leaves through here too, when its run ends)
            for pid in children:
                _kill(pid, signal.SIGKILL)


def _start(conn: socket.socket, mine: dict[str, str], listener: socket.socket, others: list[socket.socket]) -> int:
    fds = array.array("i")
    data, ancillary, _, _ = conn.recvmsg(_MAX_MESSAGE, socket.CMSG_LEN(_FDS * fds.itemsize))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - (len(payload) % fds.itemsize)])
    request = json.loads(data)
    if len(fds) != _FDS or request["python"] != sys.executable or _relevant(request["env"]) != mine:
        _close(conn, fds)
        return 0
    pid = os.fork()
    if pid == 0:
        _become(request, list(fds), conn, [listener, *others])  # never returns
    for fd in fds:
        os.close(fd)
    return pid


def _become(request: dict[str, Any], fds: list[int], conn: socket.socket, inherited: list[socket.socket]) -> None:
    """In the fork: take the wrapper's place, then run execnet's bootstrap as ``python -c`` would."""
    try:
        os.setpgid(0, request["pgid"])
    except OSError:
        conn.sendall(b"exec\n")
        os._exit(0)
    conn.sendall(f"pid {os.getpid()}\n".encode())
    for sock in (conn, *inherited):
        sock.close()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.environ["PYTEST_ADDOPTS"] = " ".join(filter(None, [os.environ.get("PYTEST_ADDOPTS"), _ANYIO]))
    import random

    random.seed()
    tempfile.tempdir = None  # found again from the environment, as a fresh interpreter does
    sys.argv = ["-c"]
    sys.dont_write_bytecode = "-B" in request["argv"]
    # the process's own streams, as ``python -u`` makes them
    sys.stdin = open(0, closefd=False)  # noqa: SIM115
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True, errors="backslashreplace")
    source = request["argv"][request["argv"].index("-c") + 1]
    exec(compile(source, "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
    # the interpreter ends from here as a fresh one ends: threads joined, atexit run, streams flushed
    raise SystemExit(0)


def _reap(children: dict[int, socket.socket]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.sendall(f"status {status}\n".encode())
            conn.close()


def _kill(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _close(conn: socket.socket, fds: Any) -> None:
    for fd in fds:
        os.close(fd)
    conn.sendall(b"exec\n")
    conn.close()


# --------------------------------------------------------------------------------------------------- the wrapper


def wrapper(path: str, python: str, argv: list[str]) -> None:
    """What execnet starts as its ``python``: a fork of the zygote in this process's place, or ``python`` itself."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        request = {"python": python, "env": dict(os.environ), "cwd": os.getcwd(), "argv": argv,
                   "pgid": os.getpgrp()}
        conn.sendmsg([json.dumps(request).encode()],
                     [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", range(_FDS)))])
        reply = conn.makefile("rb")
        first = reply.readline().split()
    except OSError:
        first = []
    if first[:1] != [b"pid"]:
        conn.close()
        os.execv(python, [python, *argv])
    pid = int(first[1])
    null = os.open(os.devnull, os.O_RDWR)
    for fd in range(_FDS):  # the fork holds the pipes now: execnet sees them close when the fork ends
        os.dup2(null, fd)

    def forward(sig: int, _frame: Any) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGHUP, forward)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the fork is in this process group: it gets the Ctrl-C itself
    last = reply.readline().split()
    status = int(last[1]) if last[:1] == [b"status"] else 1 << 8
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig != signal.SIGKILL:
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


# ----------------------------------------------------------------------------------------- the plugin for the runs


class Zygote:
    """The zygote of a test process.  Started by the tests' fixture, in the environment the runs will have, and
    waited for by the first run that starts workers; a subprocess run imports this module afresh and finds no
    zygote started, so its workers are fresh interpreters."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[str] | None = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._python = ""

    def start(self) -> None:
        """Start it (once), without waiting for its imports."""
        if self._process is not None:
            return
        self._dir = tempfile.TemporaryDirectory(prefix="mcpeval-zygote-")
        path = os.path.join(self._dir.name, "socket")
        self._process = subprocess.Popen(
            [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
             f"import preloaded_workers as z; del sys.path[0]; z.serve({path!r}, {os.getpid()})"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
        self._python = f"{sys.executable} -I -S {__file__} {path} {sys.executable}"

    @property
    def started(self) -> bool:
        return self._process is not None

    def python(self) -> str:
        """The ``python=`` value of a gateway forked from it, once it is ready."""
        assert self._process is not None and self._process.stdout is not None
        if not self._process.stdout.closed:
            if self._process.stdout.readline().strip() != "ready":
                raise RuntimeError("the zygote of the preloaded workers did not start")
            self._process.stdout.close()
        return self._python

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait()
            self._process = None
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None


ZYGOTE = Zygote()


def pytest_configure(config: Any) -> None:
    """In a run with this module among its plugins (``PYTEST_PLUGINS``), in a process whose zygote was started:
    each ``popen`` gateway of ``-n``/``--tx`` becomes a fork of the zygote."""
    specs = config.getvalue("tx") if ZYGOTE.started and config.pluginmanager.hasplugin("xdist") else None
    if specs:
        config.option.tx = [_forked(spec, ZYGOTE.python) for spec in specs]


def _forked(spec: str, python: Callable[[], str]) -> str:
    count, star, rest = spec.rpartition("*") if "*" in spec else ("", "", spec)
    return f"{count}{star}popen//python={python()}" if rest == "popen" else spec


if __name__ == "__main__":
    wrapper(sys.argv[1], sys.argv[2], sys.argv[3:])
