"""The one MCPServer instance every tool module registers on (see server.py)."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from memory_anchor.core.version import __version__

INSTRUCTIONS = """\
Memory Anchor is this project's long-term memory: what earlier sessions did, found and decided.
Retrieve with progressive disclosure to save context: `search` (a compact index: id, time, type,
title, score), then `timeline` around an interesting id, then `get_observations` for the full
details of only the ids you need. Write with `memory_write_fact` (lasting truths about the
project) and `memory_write_observation` (something worth remembering that no tool use shows).
"""

mcp = MCPServer(name="memory-anchor", version=__version__, instructions=INSTRUCTIONS)
