"""The Memory Anchor MCP server (stdio), as Claude Code starts it from the plugin's .mcp.json.

Layout, FastMCP style: `app.py` holds the one `mcp` instance; each module in
`tools/` is an area whose typed, docstring-described functions register
themselves with `@mcp.tool()` when the module is imported; every tool talks to
the worker through `worker_gateway.call()` (never to the stores).

Adding an area (e.g. issue 4's memory model, issue 5's branches):
  1. write `mcp_server/tools/<area>.py`:
         from mcp_server.app import mcp
         from mcp_server.worker_gateway import call
         @mcp.tool(structured_output=False)  # text for the model; drop for JSON results
         def my_tool(arg: str) -> str:
             \"\"\"When the model should use it (the docstring is its description).\"\"\"
             return call("GET", "/api/v1/...", arg=arg)
  2. add ONE import line below. That is all.
"""

from __future__ import annotations

from mcp_server.app import mcp
from mcp_server.tools import memories  # noqa: F401  seed 004 §3.1: memory_write_*, memory_search, memory_timeline
from mcp_server.tools import search  # noqa: F401  progressive disclosure: search, timeline, get_observations
from mcp_server.tools import branches  # noqa: F401  issue 5: memory_branch_*, memory_snapshot*, memory_time_travel
from mcp_server.tools import memory_model  # noqa: F401  issue 4: seed 002 §6 memory model tools


def main() -> None:
    mcp.run("stdio")


if __name__ == "__main__":
    main()
