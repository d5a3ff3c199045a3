"""The benchmark file format: ``schema`` (the pydantic models, the contract with users) and ``loader``
(YAML with line numbers -> a validated :class:`~pytest_mcpeval.benchmark.loader.Benchmark`)."""
