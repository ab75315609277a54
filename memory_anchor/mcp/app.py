"""The one MCPServer instance every tool module registers on (see server.py)."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from memory_anchor.core.version import __version__

INSTRUCTIONS = """\
Memory Anchor is this project's long-term memory: what earlier sessions did, said, found and decided.
Ask it with `search` (a question in plain words works; each hit is an index line and the start of
its text), then `timeline` around an interesting id, then `get_observations` for the full details
of only the ids you need. Write a lasting truth about the project with `memory_write_fact`. When
the user says a remembered item is wrong, `forget_memory` or `edit_memory` it. When you asked the
user whether an item the briefing lists under "Possible decisions to ask the user about once" holds, `record_user_answer`.
"""

mcp = MCPServer(name="memory-anchor", version=__version__, instructions=INSTRUCTIONS)
