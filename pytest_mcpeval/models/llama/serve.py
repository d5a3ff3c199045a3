"""``python -m pytest_mcpeval.models.llama.serve --model GGUF --port N --ctx-size C --parallel P --threads T``.

The local model's server process: llama.cpp's own HTTP server (the one ``llama-server`` runs: ``/health``,
``/props``, ``/v1/chat/completions``), started in-process through ``xllamacpp``, listening on loopback until it is
sent SIGTERM or SIGINT.  :mod:`.server` starts it, in a session of its own, and reads its facts from ``/props``.

A process of its own, not a thread of pytest's: the library loads ~100 MB of native code and the weights, and an
instruction this processor lacks must kill this process (SIGILL, which :mod:`.server` names), not the test run.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_mcpeval.models.llama.serve")
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ctx-size", type=int, required=True, help="tokens, for all slots together")
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--threads-http", type=int, default=2)
    args = parser.parse_args(argv)

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.n_ctx = args.ctx_size
    params.n_parallel = args.parallel
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.n_threads_http = args.threads_http
    params.use_jinja = True  # the model's own chat template renders the tools
    params.ui = False
    print(f"xllamacpp {xllamacpp.__version__} {xllamacpp.BUILD_INFO}", flush=True)
    server = xllamacpp.Server(params)
    print(f"listening on {server.listening_address}", flush=True)
    while not stop.wait(1.0):
        pass
    del server  # joins llama.cpp's loop
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
