# The two quick-start commands: `make demo` and `make test`.  Both create .venv and install what they
# need, so they work on a fresh machine; a rerun installs nothing.
PYTHON ?= python3
# The embedded model needs torch; a CPU build keeps the install small (a plain `torch` may pull a
# multi-GB CUDA build).  Override with e.g. TORCH='torch --index-url <your CPU wheel index>'.
TORCH ?= torch==2.13.0
VENV := .venv
BIN := $(VENV)/bin
LOCAL := $(VENV)/.installed-local
DEV := $(VENV)/.installed-dev

.PHONY: venv test lint typecheck demo schema clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(LOCAL): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet $(TORCH)
	$(BIN)/python -m pip install --quiet -e '.[local]'
	touch $(LOCAL)

$(DEV): $(LOCAL)
	$(BIN)/python -m pip install --quiet -e '.[local,dev]'
	touch $(DEV)

venv: $(DEV)

test: $(DEV)
	$(BIN)/python -m ruff check pytest_mcpeval tests examples
	$(BIN)/python -m mypy
	$(BIN)/python -m pytest -n 2 -q tests

lint: $(DEV)
	$(BIN)/python -m ruff check pytest_mcpeval tests examples

typecheck: $(DEV)
	$(BIN)/python -m mypy

demo: $(LOCAL)
	$(BIN)/python examples/demo.py

schema: $(LOCAL)
	$(BIN)/python -c "import json; from pytest_mcpeval.schema import json_schema; \
	open('docs/benchmark.schema.json', 'w').write(json.dumps(json_schema(), indent=2) + '\n')"

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
