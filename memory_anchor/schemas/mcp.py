"""The MCP bridge's handshake with the worker's MCP endpoint (memory_anchor/mcp/bridge.py ↔ memory_anchor/worker/api/mcp_endpoint.py).

The bridge opens a loopback stream to the worker, sends one `BridgeHello` line,
reads one `BridgeWelcome` line, and from then on both sides exchange
newline-delimited JSON-RPC: the MCP session itself. The hello carries the
bearer token from worker.json and what the old per-session server read from
its own environment, since the worker serves every session from one process.
The bridge is stdlib-only and writes these with `json`; the worker validates them here.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

# Bumped when the handshake or the framing changes; the worker refuses others.
BRIDGE_PROTOCOL = 1


class BridgeHello(BaseModel):
    """First line from the bridge."""

    model_config = ConfigDict(extra="ignore")

    protocol: int = BRIDGE_PROTOCOL
    token: str = Field(min_length=1, description="The bearer token from worker.json")
    cwd: str = Field("", description="The bridge's working directory (Claude Code starts it in the project)")
    project_dir: str = Field("", description="$CLAUDE_PROJECT_DIR")
    session_id: str = Field("", description="$CLAUDE_CODE_SESSION_ID")
    branch: str = Field("", description="$MEMORY_ANCHOR_BRANCH")
    agent_id: str = Field("", description="$MEMORY_ANCHOR_AGENT_ID (sent as X-Memory-Anchor-Agent)")
    agent: str = Field("", description="$MEMORY_ANCHOR_AGENT (the memory model's agent id)")


class BridgeWelcome(BaseModel):
    """The worker's one-line answer: ok, or why the session is refused."""

    ok: bool
    error: str | None = None
