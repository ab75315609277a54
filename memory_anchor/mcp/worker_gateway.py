"""How tools reach the worker's REST API, and which Claude Code session a call belongs to.

The tools run inside the worker (memory_anchor/mcp/endpoint.py serves them), one MCP
session per bridge connection. They still call the worker's REST API rather
than the stores, so a tool and a curl see the same answers (DESIGN.md); the
SDK runs these plain functions on a thread, so the blocking client does not
stall the worker's event loop.

What a per-session server process used to read from its own environment
(project dir, session id, branch, agent) now arrives in the bridge's hello and
lives in a `SessionContext`, bound to the connection's tasks by a context
variable (anyio copies it into the threads that run the tools).
"""

from __future__ import annotations

import contextvars
import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError

from memory_anchor.client.worker_client import WorkerClient, WorkerError

ALL_PROJECTS = "*"
AGENT_HEADER = "X-Memory-Anchor-Agent"


@dataclass
class SessionContext:
    """One Claude Code session as its bridge described it."""

    cwd: str = ""
    project_dir: str = ""
    session_id: str = ""
    branch: str = ""  # MEMORY_ANCHOR_BRANCH of the session
    agent_id: str = ""  # MEMORY_ANCHOR_AGENT_ID: the X-Memory-Anchor-Agent header
    agent: str = ""  # MEMORY_ANCHOR_AGENT: the memory model's agent id

    @classmethod
    def from_environment(cls) -> SessionContext:
        """The calling process's own session (a server run in-process, e.g. from a test)."""
        env = os.environ
        return cls(
            cwd=os.getcwd(),
            project_dir=env.get("CLAUDE_PROJECT_DIR", ""),
            session_id=env.get("CLAUDE_CODE_SESSION_ID", ""),
            branch=env.get("MEMORY_ANCHOR_BRANCH", ""),
            agent_id=env.get("MEMORY_ANCHOR_AGENT_ID", ""),
            agent=env.get("MEMORY_ANCHOR_AGENT", ""),
        )


_session: contextvars.ContextVar[SessionContext | None] = contextvars.ContextVar("mcp_session", default=None)


def enter_session(session: SessionContext) -> None:
    """Bind `session` to the current task and everything it starts."""
    _session.set(session)


def current_session() -> SessionContext:
    session = _session.get()
    if session is None:
        session = SessionContext.from_environment()
        _session.set(session)
    return session


_data_dir: Path | None = None


def configure(data_dir: Path) -> None:
    """Point the tools at the worker serving them (its data dir's worker.json)."""
    global _data_dir
    _data_dir = data_dir
    client.cache_clear()


@functools.lru_cache(maxsize=1)
def client() -> WorkerClient:
    return WorkerClient(_data_dir, timeout=30.0, autostart=_data_dir is None)


def call(method: str, path: str, body: Any = None, **params: Any) -> Any:
    """One REST call; a worker error becomes a message the model can act on."""
    agent_id = current_session().agent_id
    headers = {AGENT_HEADER: agent_id} if agent_id else None
    try:
        return client().request(method, path, body, params=params, headers=headers)
    except WorkerError as exc:
        raise ToolError(f"Memory Anchor worker: {exc}") from None
    except (OSError, RuntimeError, TimeoutError) as exc:  # the worker could not be started
        raise ToolError(f"Memory Anchor worker is not available: {exc}") from None


def current_project() -> str:
    """The project this Claude Code session works in (Claude Code starts the bridge in it)."""
    session = current_session()
    return client().project_for_cwd(session.project_dir or session.cwd or os.getcwd())


def project_scope(project: str | None) -> str | None:
    """None → this project; "*" → every project (cross-project search is opt-in)."""
    if project == ALL_PROJECTS:
        return None
    return project or current_project()


def branch_scope(branch: str | None) -> str | None:
    """The memory branch to read/write: the argument, else the session's (MEMORY_ANCHOR_BRANCH)."""
    return branch or current_session().branch or None


def session_id() -> str | None:
    return current_session().session_id or None


def agent() -> str | None:
    """The memory model's agent id for this session (MEMORY_ANCHOR_AGENT)."""
    return current_session().agent or None
