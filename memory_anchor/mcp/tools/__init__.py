"""MCP tools, one module per area; each registers its tools on `memory_anchor.mcp.app.mcp` when imported."""
