"""Importers of public benchmarks (``python -m pytest_mcpeval import ...``): one module per format.

Each module provides ``add_arguments(parser)`` and ``run(args) -> int`` and raises :class:`UserError` for a
mistake in its input, which the command reports as one line (exit status 2).  A new importer is its module and
one line of :data:`IMPORTERS`, which ``__main__`` reads to build its subcommands.
"""

#: importer name -> one-line help.  The module ``pytest_mcpeval.importers.<name>`` does the work.
IMPORTERS = {
    "bfcl": "convert BFCL (Berkeley Function Calling Leaderboard) question and answer files",
    "atlas": "convert MCP-Atlas tasks (CSV, JSON or Parquet) into offline flows",
}


class UserError(Exception):
    """A mistake in the command's input: reported as one line, exit status 2."""
