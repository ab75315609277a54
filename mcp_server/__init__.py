"""The Memory Anchor MCP server (stdio), forwarding to the worker's REST API."""
