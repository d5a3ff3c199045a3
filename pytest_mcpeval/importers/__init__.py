"""Importers of public benchmarks (``python -m pytest_mcpeval import ...``): one module per format."""
