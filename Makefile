# The two quick-start commands: `make demo` and `make test`.  Both create .venv and install what
# they need, so they work on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev

.PHONY: venv test lint typecheck demo schema clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m ruff check pytest_mcpeval tests examples
	$(BIN)/python -m mypy
	$(BIN)/python -m pytest -n 2 -q tests

lint: $(STAMP)
	$(BIN)/python -m ruff check pytest_mcpeval tests examples

typecheck: $(STAMP)
	$(BIN)/python -m mypy

demo: $(STAMP)
	$(BIN)/python examples/demo.py

schema: $(STAMP)
	$(BIN)/python -c "import json; from pytest_mcpeval.schema import json_schema; \
	open('docs/benchmark.schema.json', 'w').write(json.dumps(json_schema(), indent=2) + '\n')"

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
