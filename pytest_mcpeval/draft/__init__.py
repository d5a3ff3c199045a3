"""``python -m pytest_mcpeval draft``: propose cases for the tools the drop gate is blind to (docs/drafting.md).

:mod:`.source` reads the benchmark files of PATH and the server's live catalog, :mod:`.targets` picks the tools
to draft for (the blind ones, then the confused and confusable pairs), :mod:`.ask` asks a model for requests
through the response cache, :mod:`.keep` keeps only drafts that lint against the live schemas, are no
near-duplicate and do not name their tool, and :mod:`.command` writes them with ``draft: true``.  It never
imports :mod:`pytest_mcpeval.plugin`.
"""


class DraftError(Exception):
    """A mistake the command's user can fix (exit status 4), or with ``status=3`` a failure of the server or the
    drafter model: one line, no traceback."""

    def __init__(self, message: str, status: int = 4) -> None:
        super().__init__(message)
        self.status = status
