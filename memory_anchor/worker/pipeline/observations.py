"""How an observation draft becomes the columns of an observation record."""

from __future__ import annotations

from typing import Any

from memory_anchor.schemas.observations import ObservationDraft, WriteObservationRequest
from memory_anchor.core.redact import sanitize
from memory_anchor.worker.store.records import MAIN, Records


def observation_values(draft: ObservationDraft, payload: dict[str, Any]) -> dict[str, Any]:
    """Record columns for a distilled tool use; `text` is what search indexes."""
    data = draft.model_dump()
    if not data.get("tool_name") and isinstance(payload.get("tool_name"), str):
        data["tool_name"] = payload["tool_name"]
    data.update(tool_origin(payload))
    parts = [draft.text()]
    files = list(dict.fromkeys([*draft.files_read, *draft.files_modified]))
    if files:
        parts.append("Files: " + ", ".join(files))
    if draft.command:
        parts.append(f"Command: {draft.command}")
    return {
        "text": "\n".join(parts),
        "title": draft.title,
        "type": draft.type,
        "layer": draft.layer,
        "data": data,
    }


def tool_origin(payload: dict[str, Any]) -> dict[str, Any]:
    """Who ran the tool, as Claude Code says: the subagent (`agent_id`, `agent_type`) whose
    work it was, and the MCP server (`mcp_server.name`) of an MCP tool. Empty for the main
    conversation's built-in tools."""
    out: dict[str, Any] = {}
    agent = payload.get("agent_id")
    if isinstance(agent, str) and agent:
        kind = payload.get("agent_type")
        out["subagent"] = {"id": agent, **({"type": kind} if isinstance(kind, str) and kind else {})}
    server = payload.get("mcp_server")
    if isinstance(server, dict) and isinstance(server.get("name"), str):
        out["mcp_server"] = server["name"]
    return out


def write_observation(db, request: WriteObservationRequest, *, actor: str) -> dict[str, Any]:
    """Store an observation an agent wrote deliberately (secrets redacted like any capture)."""
    clean = WriteObservationRequest.model_validate(sanitize(request.model_dump()))
    values = observation_values(clean.draft(), {})
    with db.transaction() as conn:
        return Records.put(
            conn, "observation", values.pop("text"), branch=clean.branch or MAIN, actor=actor,
            reason="written by agent", project=clean.project, session_id=clean.session_id,
            agent_id=None if actor == "api" else actor, **values,
        )  # fmt: skip
