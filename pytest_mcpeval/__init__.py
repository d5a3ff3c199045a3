"""pytest-mcpeval: measure how well models choose and call the tools of an MCP server.

This module is imported whenever pytest loads the plugin, so it imports nothing heavy.
"""

__version__ = "0.1.0"
