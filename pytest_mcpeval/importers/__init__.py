"""Importers of public benchmarks (``python -m pytest_mcpeval import ...``): one module per format.

Each module provides ``add_arguments(parser)`` and ``run(args) -> int`` and raises :class:`UserError` for a
mistake in its input, which the command reports as one line (exit status 2).
"""


class UserError(Exception):
    """A mistake in the command's input: reported as one line, exit status 2."""
