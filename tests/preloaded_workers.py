"""xdist workers of the tests' in-process runs, forked from a process that has already imported litellm and mcp.

Why: the suite runs a few hundred in-process pytest runs under ``-n 1`` or ``-n 2``; each of their workers is a
fresh interpreter, and the first model call in it imports litellm and mcp: about 3 s of CPU each time, most of the
suite's CPU.  Here one process (the zygote) imports them once; a worker is a fork of it, given the pipes, the
working directory and the environment of the process xdist started.  Under ``make test`` (``-n``) xdist's
controller starts the one zygote of the suite, and every test process adopts it (:class:`Zygote`); a test process
of its own (``pytest tests/...`` without ``-n``) starts one for itself.

How, with public means only:
- the tests' fixture (tests/conftest.py) starts the zygote and names this module in ``PYTEST_PLUGINS`` (pytest's
  documented variable); in an in-process run, :func:`pytest_configure` turns each ``popen`` gateway of
  ``-n``/``--tx`` into ``popen//python=WRAPPER`` (execnet's documented ``python=`` key).  A subprocess run imports
  this module afresh, finds no zygote started and changes nothing: its workers are fresh interpreters;
- the wrapper is a small interpreter that hands its stdin, stdout and stderr to the zygote over a Unix socket
  (``SCM_RIGHTS``), waits for the fork to end and ends with its status.  SIGTERM and SIGHUP sent to it are passed
  on; the fork joins the wrapper's process group, so a Ctrl-C sent to the group reaches it as it reaches a worker
  (a SIGINT sent to the wrapper's pid alone does not); a wrapper killed outright (execnet's kill) closes its
  connection, and the zygote kills the fork;
- a fork is made only where it stands for a fresh interpreter: the same interpreter, the same value of every
  environment variable the zygote's imports read (recorded while it imported: about 400 of them, ``PYTHON*``,
  ``LITELLM_*``, ``AIOHTTP_*``, the providers' settings...; ``HOME`` aside, which pytester sets for each test) and
  a process group it can join; otherwise the wrapper runs the interpreter itself (``exec``), as execnet would
  have.  What is read later (a proxy, an API key) the fork reads from the environment it was given.

What still differs from a fresh interpreter: every fork has the zygote's string-hash seed (that the collection
does not depend on it is checked with fresh interpreters: tests/test_shards.py), the warning filters the preloaded
libraries added at import are in place from the start, and tracebacks of the bootstrap show the zygote's frames.  Not
preloaded: pytest's plugins (pytest_mcpeval, xdist, syrupy), so that pytest rewrites them as in a fresh worker.
anyio (imported by mcp and httpx) is one: a fork filters its "already imported" warning through
``PYTEST_ADDOPTS``, which an xdist worker reads.

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
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, MutableMapping
from pathlib import Path
from typing import Any

_PRELOAD = ("mcp.client.stdio", "mcp.client.session", "jsonschema", "yaml", "numpy")  # after first_call's: serve()
# set by pytester for each test (its own home): read by the imports (``~`` in a default path), allowed to differ
_PER_TEST = ("HOME", "USERPROFILE")
_FDS = 3
_HEADER = struct.Struct("!I")  # the request's length, before it
_ANYIO = "-W " + shlex.quote(
    "ignore:Module already imported so cannot be rewritten; anyio:pytest.PytestAssertRewriteWarning")
_READY_S = 120.0
SHARED = "PRELOADED_WORKERS_SOCKET"  # the suite's zygote, started by xdist's controller (Zygote.start)


class _Recording(MutableMapping[str, str]):
    """``os.environ`` while the zygote imports: which variables the imports read (all, if one iterated it)."""

    def __init__(self, environ: MutableMapping[str, str]) -> None:
        self.environ = environ
        self.read: set[str] = set()
        self.everything = False

    def __getitem__(self, key: str) -> str:
        self.read.add(key)
        return self.environ[key]

    def __contains__(self, key: object) -> bool:
        self.read.add(str(key))
        return key in self.environ

    def __setitem__(self, key: str, value: str) -> None:
        self.environ[key] = value

    def __delitem__(self, key: str) -> None:
        del self.environ[key]

    def __iter__(self) -> Iterator[str]:
        self.everything = True
        return iter(self.environ)

    def __len__(self) -> int:
        return len(self.environ)

    def copy(self) -> dict[str, str]:
        self.everything = True
        return dict(self.environ)


# ---------------------------------------------------------------------------------------------------- the zygote


def serve(path: str) -> None:
    """Import what the workers would, then fork one worker per connection until the test process is gone (its
    end of our stdin closes)."""
    import gc

    # the zygote ignores a Ctrl-C (it is for the forks, in the runs' process groups) and ends its loop on SIGTERM;
    # a fork puts both back first thing (_become)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # listening before the imports: a wrapper that comes early waits for its fork in the queue, not for a socket
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    before = dict(os.environ)
    environ, recording = os.environ, _Recording(os.environ)
    os.environ = recording  # type: ignore[assignment]  # noqa: B003 (read through, not cleared; os.getenv too)
    gc.disable()
    try:
        import first_call  # imported with this module (Zygote.start's command)
        for name in ("litellm", *first_call.FIRST_CALL, *_PRELOAD):
            first_call.preload(name)
    finally:
        os.environ = environ  # noqa: B003
        gc.enable()
    gc.freeze()
    # what the imports read, as they found it (absent: None): a worker's environment must say the same
    mine = {key: before.get(key) for key in (before if recording.everything else recording.read)
            if key not in _PER_TEST}
    # what they set (litellm sets TIKTOKEN_CACHE_DIR): a fork sets it too, as its imports would have
    added = {k: v for k, v in os.environ.items() if k not in before}
    zygote = os.getpid()
    print("ready", flush=True)
    children: dict[int, tuple[int, socket.socket]] = {}  # a fork's pidfd -> (its pid, the wrapper's connection)
    try:
        while True:
            conns = {conn: fd for fd, (_, conn) in children.items()}
            readable, _, _ = select.select([sys.stdin, listener, *children, *conns], [], [])
            if sys.stdin in readable and not os.read(sys.stdin.fileno(), 1):
                return  # the test process is gone
            for ready in readable:
                if ready is listener:
                    conn, _ = listener.accept()
                    forked = _start(conn, mine, added, [listener, *conns], list(children))
                    if forked is not None:
                        children[forked[0]] = (forked[1], conn)
                elif isinstance(ready, int) and ready in children:  # a fork ended: its wrapper ends with its status
                    _reap(children, ready)
                elif ready in conns and conns[ready] in children:  # a wrapper gone before its fork: the fork too
                    _kill(children[conns[ready]][0])
                    _reap(children, conns[ready])
    finally:
        if os.getpid() == zygote:  # (a fork leaves through here too, at its end)
            for pid, _ in children.values():
                _kill(pid)
            with contextlib.suppress(OSError):  # the socket, then its folder if nothing else is in it
                os.unlink(path)
                os.rmdir(os.path.dirname(path))


def _start(conn: socket.socket, mine: dict[str, str | None], added: dict[str, str],
           inherited: list[socket.socket], pidfds: list[int]) -> tuple[int, int] | None:
    """Read a wrapper's request and fork for it: ``(the fork's pidfd, its pid)``, or ``None`` (told to exec)."""
    fds: list[int] = []
    try:
        request = _receive(conn, fds)
        same = (len(fds) == _FDS and request["python"] == sys.executable
                and all(request["env"].get(key) == value for key, value in mine.items()))
    except (OSError, ValueError, KeyError, TypeError):
        same = False
    if not same:
        for fd in fds:
            os.close(fd)
        with contextlib.suppress(OSError):
            conn.sendall(b"exec\n")
        conn.close()
        return None
    pid = os.fork()
    if pid == 0:
        _become(request, added, fds, conn, inherited, pidfds)  # never returns
    for fd in fds:
        os.close(fd)
    return os.pidfd_open(pid), pid


def _receive(conn: socket.socket, fds: list[int]) -> dict[str, Any]:
    """A length-prefixed JSON request; the descriptors that came with it are appended to ``fds``."""
    conn.settimeout(10)
    data = b""
    while len(data) < _HEADER.size or len(data) < _HEADER.size + _HEADER.unpack_from(data)[0]:
        chunk, ancillary, _, _ = conn.recvmsg(1 << 16, socket.CMSG_SPACE(_FDS * 4))
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.extend(array.array("i", payload[: len(payload) - len(payload) % 4]))
        if not chunk:
            raise ValueError("the wrapper closed its connection before its request ended")
        data += chunk
    conn.settimeout(None)
    request: dict[str, Any] = json.loads(data[_HEADER.size:])
    return request


def _become(request: dict[str, Any], added: dict[str, str], fds: list[int], conn: socket.socket,
            inherited: list[socket.socket], pidfds: list[int]) -> None:
    """In the fork: take the wrapper's place, then run execnet's bootstrap as ``python -u -c`` would."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        os.setpgid(0, request["pgid"])
    except OSError:
        conn.sendall(b"exec\n")
        os._exit(0)
    conn.sendall(f"pid {os.getpid()}\n".encode())
    for sock in (conn, *inherited):  # the zygote's own: its listener, the other wrappers' connections and forks
        sock.close()
    for pidfd in pidfds:
        os.close(pidfd)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.environ.update({k: v for k, v in added.items() if k not in request["env"]})
    os.environ["PYTEST_ADDOPTS"] = " ".join(filter(None, [os.environ.get("PYTEST_ADDOPTS"), _ANYIO]))
    import random

    random.seed()
    tempfile.tempdir = None  # found again from the environment, as a fresh interpreter does
    argv = request["argv"]
    sys.argv = ["-c"]
    sys.dont_write_bytecode = "-B" in argv or bool(sys.flags.dont_write_bytecode)
    # the process's own streams, as ``python -u`` makes them
    sys.stdin = sys.__stdin__ = open(0, closefd=False, errors="surrogateescape")  # noqa: SIM115
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), errors="surrogateescape",
                                                   write_through=True)
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), errors="backslashreplace",
                                                   write_through=True)
    main = sys.modules["__main__"].__dict__
    main.clear()
    main.update({"__name__": "__main__", "__builtins__": __builtins__, "__doc__": None})
    exec(compile(argv[argv.index("-c") + 1], "<string>", "exec"), main)
    # the interpreter ends from here as a fresh one ends: threads joined, atexit run, streams flushed
    raise SystemExit(0)


def _reap(children: dict[int, tuple[int, socket.socket]], pidfd: int) -> None:
    pid, conn = children.pop(pidfd)
    _, status = os.waitpid(pid, 0)
    os.close(pidfd)
    with contextlib.suppress(OSError):
        conn.sendall(f"status {status}\n".encode())
    conn.close()


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


# --------------------------------------------------------------------------------------------------- the wrapper


def wrapper(path: str, python: str, argv: list[str]) -> None:
    """What execnet starts as its ``python``: a fork of the zygote in this process's place, or ``python`` itself."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        request = json.dumps({"python": python, "env": dict(os.environ), "cwd": os.getcwd(), "argv": argv,
                              "pgid": os.getpgrp()}).encode()
        data = _HEADER.pack(len(request)) + request
        sent = conn.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", range(_FDS)))])
        conn.sendall(data[sent:])
        conn.settimeout(_READY_S)  # a zygote stuck in its imports: a fresh interpreter after all, as before
        reply = conn.makefile("rb")
        first = reply.readline().split()
        conn.settimeout(None)  # then the fork's whole life
    except OSError:
        first = []
    if first[:1] != [b"pid"]:
        conn.close()
        # this module is not on a fresh worker's sys.path (xdist gives it the controller's): not its plugin
        plugins = [p for p in os.environ.get("PYTEST_PLUGINS", "").split(",") if p.strip() != "preloaded_workers"]
        os.environ["PYTEST_PLUGINS"] = ",".join(plugins)
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
    zygote started, so its workers are fresh interpreters.

    Under ``make test`` (``-n``) one zygote serves the whole suite: xdist's controller starts it (tests/conftest.py)
    and names it in :data:`SHARED`, and each worker's fixture adopts it rather than start one of its own."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[str] | None = None
        self._dir = ""
        self._python = ""

    def start(self, env: dict[str, str]) -> None:
        """Start it (once) in the environment ``env``, without waiting for its imports; or adopt the suite's, when
        ``env`` names one whose socket is there."""
        if self._process is not None or self._python:
            return
        shared = env.get(SHARED)
        if shared and os.path.exists(shared):
            self._python = self._wrapper(shared)
            return
        self._dir = tempfile.mkdtemp(prefix="mcpeval-zygote-")
        path = os.path.join(self._dir, "socket")
        here = str(Path(__file__).parent)
        self._process = subprocess.Popen(
            [sys.executable, "-c", f"import sys; sys.path.insert(0, {here!r}); import preloaded_workers as z; "
             f"import first_call; del sys.path[0]; z.serve({path!r})"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self._python = self._wrapper(path)

    @staticmethod
    def _wrapper(path: str) -> str:
        return shlex.join([sys.executable, "-I", "-S", __file__, path, sys.executable])

    @property
    def started(self) -> bool:
        return bool(self._python)

    @property
    def socket(self) -> str:
        """The socket of the zygote this process started ("" for one adopted, or none)."""
        return os.path.join(self._dir, "socket") if self._process is not None else ""

    def python(self) -> str:
        """The ``python=`` value of a gateway forked from it, once it is ready."""
        assert self._python
        if self._process is not None and self._process.stdout is not None and not self._process.stdout.closed:
            ready, _, _ = select.select([self._process.stdout], [], [], _READY_S)
            if not ready or self._process.stdout.readline().strip() != "ready":
                raise RuntimeError(f"the zygote of the preloaded workers was not ready in {_READY_S:g} s")
            self._process.stdout.close()
        return self._python

    def stop(self) -> None:
        """End the zygote this process started (and its forks); forget one adopted."""
        self._python = ""
        if self._process is not None:
            self._process.terminate()
            self._process.wait()
            assert self._process.stdin is not None
            self._process.stdin.close()
            self._process = None
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = ""


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
