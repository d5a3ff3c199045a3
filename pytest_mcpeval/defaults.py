"""Every default of the plugin in one place.

The options' defaults (plugin.py), the :class:`~pytest_mcpeval.settings.Settings` fields and the modules
that also run without a Settings object (the litellm client, the dispatcher, the comparison) read these.
Pure constants: importing this module costs nothing.
"""

DEFAULT_CONCURRENCY = 16  # model calls in flight per model
DEFAULT_TIMEOUT = 120.0  # seconds, one model call attempt
DEFAULT_RETRIES = 3  # after a rate limit or a transient error
DEFAULT_CONNECT_TIMEOUT = 60.0  # seconds to start an MCP server and list its tools
DEFAULT_DROP_LEVEL = 0.05  # significance level of the drop test
DEFAULT_DROP_MARGIN = 0.02  # classifies drops and improvements when --mcp-fail-on-drop is not given
DROP_CORRECTIONS = ("none", "holm")  # --mcp-drop-correction; the first is the default
PROMPT_CACHE_MODES = ("auto", "off")  # --mcp-prompt-cache / ini mcp_prompt_cache; the first is the default
DEFAULT_RESAMPLES = 10_000  # bootstrap resamples and Monte-Carlo swap patterns of the drop test
DEFAULT_MAX_TURNS = 8  # model calls a flow may make
DEFAULT_CLAIMS_THRESHOLD = 0.75  # coverage a flow with claims needs to pass (MCP-Atlas)
# Bounds on what comes from outside (docs/reliability.md "Untrusted data"): a model's arguments, a server's answers
# and schemas, benchmark and tools files.  Deeper data would overflow Python's stack in some walk or in json itself.
MAX_DEPTH = 100  # levels of nested lists / objects (`{}` is 1, `{"a": [1]}` is 2)
MAX_ALIAS_NODES = 100_000  # values YAML aliases may add to a file when expanded (a shared mock used in many cases)
MAX_FILE_BYTES = 20_000_000  # a benchmark or tools file read at collection
RECORD_MODES = ("new", "none", "all", "off")  # --mcp-record (run/cache.py); the first is the default
