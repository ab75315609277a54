"""The Memory Anchor MCP server: tools served by the worker (endpoint.py), reached through a stdlib stdio bridge (bridge.py)."""
