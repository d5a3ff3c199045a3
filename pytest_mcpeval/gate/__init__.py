"""The gate: what turns a run into an exit status.

``thresholds``: absolute thresholds (``accuracy >= 0.9``); ``baseline``: the baseline file (written on the
main branch, read on a pull request); ``significance``: the exact tests and intervals; ``compare``: a run
against a baseline, metric by metric.  Pure: no pytest; the session calls these and renders the result.
"""
