"""Checks that need no model: ``lint`` (expected calls against the server's schemas), ``confusable``
(tools whose names and descriptions read alike), ``items`` (the ``lint`` and ``tool-catalog`` items) and
``listing`` (``--mcp-tools``)."""
