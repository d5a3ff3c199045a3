"""One llama.cpp server per machine and route, shared by every process of a run, ended when the last is done.

The first process that needs the route (a pytest process, an xdist worker) starts the
server under a file lock in :func:`~pytest_mcpeval.models.llama.weights.cache_dir` ``/servers``; the others find it
in the state file beside the lock and use it.  Each process using it holds a *lease* (a file named by its pid); a
process gives its lease back at the end of its pytest session (:func:`release`, from ``pytest_unconfigure``) or at
exit, and the last one to give it back stops the server.  A small keeper process (:mod:`.keeper`) also stops it once
no process holding a lease is alive (a run killed with SIGKILL leaves no server behind).

The server is llama.cpp's own HTTP server run through the pinned ``xllamacpp`` wheel (:mod:`.serve`, a process of
its own).  Bounded: the context of a slot sized from the catalog the run needs (:mod:`.sizing`; a running server
with less is started anew when no other process holds it), the threads the cores this process may use, the slots
:func:`slots` (one per four cores, at least one: on a small machine several slots only split the same cores, and
each slot pays the catalog's prompt again), the model's own chat template (which renders the tools), loopback
only.  Its output goes to ``<route>.log`` beside the state file (kept after the run, named in every error); the
facts the report records come from ``/props``.

A server that dies while starting is one :class:`LlamaError` naming the signal (SIGILL: a build for instructions
this processor lacks) and what to do, and this process does not try again: every later call of the route gets the
same error (the pre-flight check starts the route first, so a run stops there, before any case).  A template
without tool support makes llama.cpp drop the tools silently; the start fails instead.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_mcpeval.models.llama import RUNTIME_DIST, RUNTIME_VERSION, LlamaError, Route, gguf
from pytest_mcpeval.models.llama import sizing as sizing_mod
from pytest_mcpeval.models.llama import weights as weights_mod

START_TIMEOUT = 300.0  # seconds for the server to load the weights and answer /health
STOP_TIMEOUT = 10.0
FOUND_TRIES = 6  # /health requests (5 s each) before a running server that does not answer is replaced
LOG_TAIL = 5  # lines of the server's log quoted in a failed start
LOG_LIMIT = 8 << 20  # bytes: a longer log is started anew at the next start


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def slots() -> int:
    return max(1, min(4, cores() // 4))


def threads() -> int:
    """The server's threads: ``$PYTEST_MCPEVAL_CHAT_THREADS``, else the cores this process may use.  Fewer than the
    cores when other work shares them: llama.cpp's threads wait for each other at every step, so one that is not
    scheduled holds up the rest (a loaded two-core machine generated 0.4-1.5 tokens a second with two threads)."""
    given = os.environ.get("PYTEST_MCPEVAL_CHAT_THREADS", "").strip()
    if given.isdigit() and int(given) > 0:
        return int(given)
    return cores()


@dataclass(frozen=True)
class Running:
    """A started server, as the state file records it."""

    url: str  # http://127.0.0.1:PORT
    pid: int
    keeper: int
    log: str
    slots: int
    facts: dict[str, Any]  # for the report (route.serving_facts)
    ctx_per_slot: int = 0  # tokens


OWN_SERVER = "serve the model with a llama.cpp of your own and run against it (docs/chat-model.md, 'Your own server')"


def exit_reason(code: int) -> tuple[str, str]:
    """What a server's exit status says: how it ended (a signal by name; ``subprocess`` gives signal N as ``-N``),
    and what that means, if anything."""
    if code >= 0:
        return f"exited with status {code}", ""
    try:
        name = signal.Signals(-code).name
    except ValueError:
        return f"was killed by signal {-code}", ""
    if -code == signal.SIGILL:
        needs = " (its x86-64 CPU build needs AVX2)" if platform.machine() == "x86_64" else ""
        return f"died with {name}", f"this build uses CPU instructions this processor lacks{needs}"
    if -code == signal.SIGKILL:
        return f"was killed by {name}", "the kernel's out-of-memory killer does this when the model does not fit"
    if -code in (signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGFPE):
        return f"crashed with {name}", ""
    return f"was killed by {name}", ""


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (our own child, not reaped yet) is not alive
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _is_server(pid: int) -> bool:
    """Whether ``pid`` runs a server of this route (:mod:`.serve`)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return b"pytest_mcpeval.models.llama.serve" in handle.read()
    except OSError:
        return False


def _environment() -> dict[str, str]:
    """A copy of ``os.environ`` safe on any thread while pytest's main thread sets and deletes variables (the
    server starts on a worker thread of the event loop: :func:`pytest_mcpeval.models.llama.route.acomplete`)."""
    found: dict[str, str] = {}
    for name in list(os.environ):
        value = os.environ.get(name)
        if value is not None:
            found[name] = value
    return found


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str, timeout: float = 5.0) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, None
    except (OSError, ValueError):
        return 0, None


def _tail(log: Path) -> str:
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-LOG_TAIL:])


class Servers:
    """The leases this process holds, by route (one lock per route guards its start, stop and state file)."""

    def __init__(self) -> None:
        self._held: dict[str, Running] = {}
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._children: list[subprocess.Popen[bytes]] = []
        self._failed: dict[str, str] = {}  # route -> why its server could not start (not tried again)

    def _paths(self, route: Route) -> tuple[Path, Path, Path, Path]:
        base = weights_mod.cache_dir() / "servers"
        return (base / f"{route.name}.lock", base / f"{route.name}.json", base / f"{route.name}.leases",
                base / f"{route.name}.log")

    def get(self, route: Route, tokens: int | None = 0, max_tokens: int = 512) -> Running:
        """The running server of ``route`` (started now if none is), with a lease of this process on it, whose slots
        hold a catalog of ``tokens`` and a reply of ``max_tokens`` (``tokens`` ``None``: a catalog nobody could
        count, such as an ``mcp_server`` fixture's, gets all the context the model and the memory allow).

        A server that could not start (it died while loading, or never answered) is not started again by this
        process: every later call gets the same error, until :meth:`release`."""
        if os.getpid() != self._pid:  # a forked child: the parent's leases are not its own
            self._held, self._pid, self._failed = {}, os.getpid(), {}
        need = sizing_mod.wanted(tokens or 0, max_tokens)
        with self._lock:
            held = self._held.get(route.name)
            if held is not None and _alive(held.pid) and held.ctx_per_slot >= need:
                return held
            if route.name in self._failed:
                raise LlamaError(self._failed[route.name])
            running = self._get(route, tokens, max_tokens, need)
            self._held[route.name] = running
            return running

    def _get(self, route: Route, tokens: int | None, max_tokens: int, need: int) -> Running:
        model = weights_mod.weights_file(route)
        weights_mod.runtime_library(route)
        lock, state, leases, log = self._paths(route)
        with weights_mod.locked(lock):
            running = self._found(state)
            if running is not None and running.ctx_per_slot < need:
                others = [pid for pid in _holders(leases) if pid != os.getpid()]
                if others:  # not this call's to stop: the request would not fit, so it is this case's error
                    raise LlamaError(f"this request needs about {need:,} tokens of context and the running server of "
                                     f"{route.label} holds {running.ctx_per_slot:,} a slot (it was sized for a "
                                     f"smaller catalog); other processes of the run use it, so it is not started "
                                     f"anew now: keep the pre-flight check on, which sizes it for every case")
                _stop(running.pid)
                with contextlib.suppress(OSError):
                    os.kill(running.keeper, signal.SIGTERM)
                running = None
            if running is None:
                shape = gguf.shape(model)
                if shape.template_has_tools is False:
                    raise LlamaError(f"the chat template of {model.name} does not render tools (llama.cpp would drop "
                                     "them silently): serve a model whose template supports tool calls")
                count = slots()
                size = sizing_mod.context(tokens, max_tokens, shape, count)
                try:
                    running = self._start(route, model, state, leases, log, count, size.per_slot)
                except LlamaError as exc:
                    self._failed[route.name] = str(exc)
                    raise
            leases.mkdir(parents=True, exist_ok=True)
            (leases / str(os.getpid())).touch()
        return running

    @staticmethod
    def _found(state: Path) -> Running | None:
        try:
            data = json.loads(state.read_text())
            running = Running(**data)
        except (OSError, ValueError, TypeError):
            return None
        for _ in range(FOUND_TRIES):  # a server busy on a loaded machine may be slow to answer /health
            if not _alive(running.pid):
                break
            if _get(running.url + "/health")[0] == 200:
                return running
        if _is_server(running.pid):  # not a process that took the pid of one long gone (after a reboot)
            with contextlib.suppress(OSError):
                os.kill(running.pid, signal.SIGKILL)
        return None

    def _start(self, route: Route, model: Path, state: Path, leases: Path, log: Path, count: int,
               per_slot: int) -> Running:
        count_threads = threads()
        port = _free_port()
        args = [sys.executable, "-m", "pytest_mcpeval.models.llama.serve", "--model", str(model), "--port", str(port),
                "--ctx-size", str(per_slot * count), "--parallel", str(count), "--threads", str(count_threads),
                "--threads-http", "2"]
        env = _environment()
        leases.mkdir(parents=True, exist_ok=True)
        for stale in leases.iterdir():
            stale.unlink(missing_ok=True)
        log.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            if log.stat().st_size > LOG_LIMIT:  # kept across starts (each is in it), not without end
                log.unlink()
        with open(log, "ab") as out:
            out.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} $ {' '.join(args)}\n".encode())
            out.flush()
            process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                       start_new_session=True)  # Ctrl-C reaches pytest, which stops it
        (leases / str(os.getpid())).touch()
        keeper = subprocess.Popen([sys.executable, "-m", "pytest_mcpeval.models.llama.keeper", str(leases),
                                   str(process.pid), str(state)], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self._children = [process, keeper]  # kept: a Popen collected while its process runs warns
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_TIMEOUT
        props: Any = None
        while True:
            code = process.poll()
            if code is not None:
                with contextlib.suppress(OSError):
                    os.kill(keeper.pid, signal.SIGTERM)
                how, meaning = exit_reason(code)
                # a signal's last lines are noise ("AMX is not ready to be used!"); an exit's say why
                said = f": {meaning}" if meaning else (f": {_tail(log)}" if code >= 0 and _tail(log) else "")
                todo = f"; {OWN_SERVER}" if code == -signal.SIGILL else ""
                raise LlamaError(f"llama.cpp's server ({RUNTIME_DIST} {RUNTIME_VERSION}) {how} while loading "
                                 f"{model.name}{said}{todo}; its log: {log}")
            if _get(url + "/health", timeout=2.0)[0] == 200:
                props = _get(url + "/props")[1]
                break
            if time.monotonic() > deadline:
                _stop(process.pid)
                raise LlamaError(f"llama.cpp's server did not answer /health within {START_TIMEOUT:g} s: "
                                 f"{_tail(log)}; its log: {log}")
            time.sleep(0.5)
        props = props if isinstance(props, dict) else {}
        caps = props.get("chat_template_caps") if isinstance(props.get("chat_template_caps"), dict) else {}
        if caps.get("supports_tools") is False or caps.get("supports_tool_calls") is False:
            _stop(process.pid)
            raise LlamaError(f"the chat template of {model.name} has no tool support (llama.cpp would drop the "
                             f"tools silently); its log: {log}")
        weights: dict[str, Any] = (
            {"file": model.name, "sha256": route.weights.sha256, "bytes": route.weights.size,
             "from": route.weights.origin} if route.weights is not None
            else {"file": str(model), "sha256": None, "bytes": model.stat().st_size, "from": "the user's file"})
        facts = {
            "runtime": f"llama.cpp server through {RUNTIME_DIST} {RUNTIME_VERSION}",
            "version": RUNTIME_VERSION, "build": props.get("build_info"),
            "weights": weights, "ctx_size": per_slot * count, "ctx_per_slot": per_slot, "parallel": count,
            "threads": count_threads, "chat_template_supports_tools": caps.get("supports_tools"), "log": str(log),
        }
        running = Running(url=url, pid=process.pid, keeper=keeper.pid, log=str(log), slots=count, facts=facts,
                          ctx_per_slot=per_slot)
        state.write_text(json.dumps(running.__dict__))
        return running

    def release(self) -> None:
        """Give back this process's leases; stop each server no live process holds a lease on any more."""
        with self._lock:
            held, self._held, self._failed = self._held, {}, {}
        if os.getpid() != self._pid:
            return
        for name, running in held.items():
            base = weights_mod.cache_dir() / "servers"
            leases = base / f"{name}.leases"
            with weights_mod.locked(base / f"{name}.lock"):
                (leases / str(os.getpid())).unlink(missing_ok=True)
                if not any_alive(leases):
                    _stop(running.pid)
                    with contextlib.suppress(OSError):
                        os.kill(running.keeper, signal.SIGTERM)
                    (base / f"{name}.json").unlink(missing_ok=True)


def _holders(leases: Path) -> list[int]:
    """The live processes holding a lease in ``leases`` (the leases of dead ones are removed)."""
    try:
        entries = list(leases.iterdir())
    except OSError:
        return []
    found = []
    for entry in entries:
        try:
            pid = int(entry.name)
        except ValueError:
            continue
        if _alive(pid):
            found.append(pid)
        else:
            entry.unlink(missing_ok=True)
    return found


def any_alive(leases: Path) -> bool:
    """Whether a live process holds a lease in ``leases`` (the leases of dead ones are removed)."""
    return bool(_holders(leases))


def _stop(pid: int) -> None:
    """SIGTERM, then SIGKILL after :data:`STOP_TIMEOUT`; reaps it when it is our child."""
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
        if not _alive(pid):
            return
        time.sleep(0.1)
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, 0)


SERVERS = Servers()
atexit.register(SERVERS.release)


def release() -> None:
    """End of a pytest session in this process (``pytest_unconfigure``): give back its leases."""
    SERVERS.release()
