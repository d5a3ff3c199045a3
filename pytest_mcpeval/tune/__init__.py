"""``python -m pytest_mcpeval tune``: from a confusion to a better description (docs/tuning.md).

The loop evaluates the benchmark with pytest in a subprocess per evaluation (:mod:`.evaluate`, the user's ini,
aliases, params and response cache honoured), splits the cases into train and held-out parts (:mod:`.split`),
gathers candidate descriptions from a file or a proposer model (:mod:`.candidates`), compares them on train and
judges the best of each tool on the held-out part with the drop gate's exact paired tests (:mod:`.stats`,
:mod:`.loop`), and writes ``overlay.yaml``, ``tune.json``, ``tune.md`` and the final run's HTML page
(:mod:`.write`).  It never imports :mod:`pytest_mcpeval.plugin`.
"""


class TuneError(Exception):
    """A usage error of the tune command (exit status 4): one line, no traceback."""
