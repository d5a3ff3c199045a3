"""``python -m pytest_mcpeval merge REPORT...``: the shards of one run (``--mcp-shard=K/N``) as one report.

:mod:`~pytest_mcpeval.merge.shards` reads the shards' JSON reports and refuses what cannot be one run;
:mod:`~pytest_mcpeval.merge.replay` replays their case results into a pytest session of the plugin's own, so the
report, the gate, every output and the exit status come from the code a run uses (session.py); and
:mod:`~pytest_mcpeval.merge.command` is the subcommand (docs/scale.md).
"""
