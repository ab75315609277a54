"""Agents: who may write, and what each agent sees.

Every write carries an agent_id (default `claude-code`). Identity and facts are
shared by all agents; events, observations and active context belong to the
agent that wrote them, and a search sees other agents' only when it asks
(`all_agents`). An agent listed in the `read_only_agents` setting cannot write:
each of its writes becomes an `agent_write` proposal that a human approves
(which then performs the write as that agent) or rejects. Active context (L1) is
exempt: it is working memory that is never persisted.
"""

from __future__ import annotations

from typing import Any, Iterable

from memory_anchor.worker.memory.approvals import ApprovalQueue
from memory_anchor.worker.memory.common import DEFAULT_AGENT


def agent_scope(agent_id: str | None) -> list[str | None]:
    """The agent_id filter for per-agent records: the default agent also owns
    records captured without an agent id (the main Claude Code session)."""
    agent = agent_id or DEFAULT_AGENT
    return [agent, None] if agent == DEFAULT_AGENT else [agent]


class AgentPolicy:
    def __init__(self, approvals: ApprovalQueue, read_only: Iterable[str] = ()):
        self.approvals = approvals
        self.read_only = set(read_only)

    def is_read_only(self, agent_id: str | None) -> bool:
        return (agent_id or DEFAULT_AGENT) in self.read_only

    def propose(self, conn, operation: str, payload: dict[str, Any], *, agent_id: str | None, project: str = "",
                branch: str = "main", session_id: str | None = None) -> dict[str, Any]:  # fmt: skip
        """Queue a read-only agent's write; returns what the caller answers instead."""
        approval = self.approvals.create(
            conn, "agent_write", operation, payload, project=project, branch=branch or "main",
            agent_id=agent_id or DEFAULT_AGENT, session_id=session_id,
            reason=f"agent {agent_id or DEFAULT_AGENT!r} is read-only",
        )  # fmt: skip
        return {
            "status": "proposed",
            "event": "PROPOSED",
            "approval_id": approval["id"],
            "message": f"agent {agent_id or DEFAULT_AGENT!r} is read-only: this {operation} waits for a human's approval "
            f"(memory-anchor approvals approve {approval['id']})",
        }
