"""MCP tools, one module per area; each registers its tools on `mcp_server.app.mcp` when imported."""
