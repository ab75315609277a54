"""How tools reach the worker: one shared WorkerClient, errors turned into ToolError.

The MCP server never opens the stores; every tool is a thin call to the
worker's REST API (DESIGN.md), which is started on demand by the client.
Tools are plain functions: the SDK runs them on a worker thread, so the
blocking client does not stall the stdio loop.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError

from memory_anchor.client import WorkerClient, WorkerError
from memory_anchor.projects import project_for_cwd

ALL_PROJECTS = "*"


@functools.lru_cache(maxsize=1)
def client() -> WorkerClient:
    return WorkerClient(timeout=30.0, autostart=True)


def call(method: str, path: str, body: Any = None, **params: Any) -> Any:
    """One REST call; a worker error becomes a message the model can act on."""
    try:
        return client().request(method, path, body, params=params)
    except WorkerError as exc:
        raise ToolError(f"Memory Anchor worker: {exc}") from None
    except (OSError, RuntimeError, TimeoutError) as exc:  # the worker could not be started
        raise ToolError(f"Memory Anchor worker is not available: {exc}") from None


def current_project() -> str:
    """The project this Claude Code session works in (Claude Code starts us in it)."""
    return project_for_cwd(os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd())


def project_scope(project: str | None) -> str | None:
    """None → this project; "*" → every project (cross-project search is opt-in)."""
    if project == ALL_PROJECTS:
        return None
    return project or current_project()


# Set by `memory_branch_switch` (tools/branches.py): this server serves one
# Claude Code session, so a switch holds for the rest of its tool calls.
_switched_branch: str | None = None


def set_session_branch(branch: str | None) -> None:
    global _switched_branch
    _switched_branch = branch


def branch_scope(branch: str | None) -> str | None:
    """The memory branch to read/write: the argument, else a switch, else the session's (MEMORY_ANCHOR_BRANCH)."""
    return branch or _switched_branch or os.environ.get("MEMORY_ANCHOR_BRANCH") or None


def session_id() -> str | None:
    return os.environ.get("CLAUDE_CODE_SESSION_ID") or None
