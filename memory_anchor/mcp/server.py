#!/usr/bin/env python3
"""The MCP server as Claude Code starts it from the plugin's .mcp.json (`python3 -S`, stdlib only).

It is a bridge (bridge.py): the tools themselves run in the worker
(endpoint.py, served by memory_anchor/worker/api/mcp_endpoint.py), which every session shares.
`python -m memory_anchor.mcp.server` runs the same bridge.
"""

import os
import sys

if __package__ in (None, ""):  # run as a file: make the plugin root importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from memory_anchor.mcp.bridge import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
