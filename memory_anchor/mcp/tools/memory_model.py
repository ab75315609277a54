"""The memory model's tools under seed 002 §6's names (issue 4): identity (read and
propose only), event log, facts, active context, relations and cross-layer search.

Every tool forwards to the worker; the agent id comes from MEMORY_ANCHOR_AGENT
(default: the worker's `claude-code`). No tool can write the identity layer.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import Field

from memory_anchor.mcp.app import mcp
from memory_anchor.mcp.worker_gateway import agent, branch_scope, call, current_project, session_id

Layer = Literal["event_log", "verified_fact", "operational_knowledge"]


def _agent() -> str | None:
    return agent()


def _clean(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if v is not None}


def _lines(hits: list[dict[str, Any]]) -> str:
    out = []
    for hit in hits:
        when = (hit.get("happened_at") or "")[:16].replace("T", " ")
        flag = " [needs verification]" if hit.get("needs_verification") else ""
        where = f" ({hit['path']})" if hit.get("path") else ""
        text = " ".join((hit.get("text") or hit.get("memory") or "").split())[:300]
        out.append(f"- [{hit.get('layer') or hit.get('kind')}] {hit['id'][:8]} {when}{where}: {text}{flag}")
    return "\n".join(out)


@mcp.tool()
def get_constitution() -> str:
    """The identity layer (L0) of this project in full: goals, stack, core constraints.

    It is already in your context at session start; call this after a long
    session or compaction to re-read it. You cannot change it: use
    propose_constitution_change.
    """
    items = call("GET", "/api/v1/constitution", project=current_project()).get("results", [])
    if not items:
        return "The identity layer is empty."
    return "\n".join(f"- {i['text']}" for i in items)


@mcp.tool()
def search_memory(
    query: Annotated[str, Field(min_length=1, max_length=2000)],
    layers: Annotated[list[Layer] | None, Field(description="Default: facts, events and operations")] = None,
    all_agents: Annotated[bool, Field(description="Also other agents' events")] = False,
    limit: Annotated[int, Field(ge=1, le=50)] = 10,
    branch: str | None = None,
) -> str:
    """Search events (L2), verified facts (L3) and the project's operations docs (L4).

    Time phrases work ("what did we fix today", "last week"). Never empty when
    memory is not: it falls back to keywords, then to the most recent entries.
    """
    body = _clean({"query": query, "layers": layers, "all_agents": all_agents, "limit": limit,
                   "project": current_project(), "agent_id": _agent(), "branch": branch_scope(branch)})  # fmt: skip
    hits = call("POST", "/api/v1/memory-model/search", body).get("results", [])
    return _lines(hits) or f"No memories match {query!r}."


@mcp.tool()
def add_memory(
    content: Annotated[str, Field(min_length=1, max_length=10_000)],
    layer: Literal["event_log", "verified_fact"] = "verified_fact",
    confidence: Annotated[float, Field(ge=0.0, le=1.0)] = 0.9,
    when: Annotated[str | None, Field(description="ISO 8601; events default to now")] = None,
    where: str | None = None,
    branch: str | None = None,
) -> str:
    """Add a memory to the event log (something that happened) or the fact layer
    (something that stays true). Facts: >= 0.9 stored, 0.7-0.9 wait for a human,
    below 0.7 rejected. The identity layer cannot be written by an agent.
    """
    body = _clean({"content": content, "layer": layer, "confidence": confidence, "when": when, "where": where,
                   "project": current_project(), "agent_id": _agent(), "session_id": session_id(),
                   "branch": branch_scope(branch)})  # fmt: skip
    answer = call("POST", "/api/v1/memory-model/add", body)
    return answer.get("message") or f"{layer} {answer.get('id') or ''} {answer.get('status')}".strip()


def _propose(content: str | None, reason: str, action: str, target_id: str | None) -> str:
    body = _clean({"action": action, "content": content, "reason": reason, "target_id": target_id,
                   "project": current_project(), "agent_id": _agent(), "session_id": session_id()})  # fmt: skip
    return call("POST", "/api/v1/identity/proposals", body)["message"]


@mcp.tool()
def propose_constitution_change(
    reason: Annotated[str, Field(min_length=1, max_length=2000, description="Why the change is right")],
    content: Annotated[str | None, Field(max_length=1000, description="The new or edited item")] = None,
    action: Literal["add", "edit", "remove"] = "add",
    target_id: Annotated[str | None, Field(description="Item to edit or remove (from get_constitution)")] = None,
) -> str:
    """Propose a change to the identity layer (L0). Nothing changes until a human
    approves it with three confirmations; use it sparingly, for lasting truths
    about the project's goals, stack or core constraints.
    """
    return _propose(content, reason, action, target_id)


@mcp.tool()
def propose_identity_change(
    reason: Annotated[str, Field(min_length=1, max_length=2000)],
    content: Annotated[str | None, Field(max_length=1000)] = None,
    action: Literal["add", "edit", "remove"] = "add",
    target_id: str | None = None,
) -> str:
    """Same as propose_constitution_change (seed 002's name for the identity layer)."""
    return _propose(content, reason, action, target_id)


@mcp.tool()
def log_event(
    content: Annotated[str, Field(min_length=1, max_length=10_000)],
    when: Annotated[str, Field(description="When it happened: ISO 8601 (required)")],
    where: Annotated[str | None, Field(description="A file, module or place")] = None,
    who: list[str] | None = None,
    ttl_days: Annotated[int | None, Field(ge=1, description="Keep this many days (default: forever)")] = None,
    branch: str | None = None,
) -> str:
    """Record something that happened (L2 event log) with when/where/who."""
    body = _clean({"content": content, "when": when, "where": where, "who": who or [], "ttl_days": ttl_days,
                   "project": current_project(), "agent_id": _agent(), "session_id": session_id(),
                   "branch": branch_scope(branch)})  # fmt: skip
    answer = call("POST", "/api/v1/event-log", body)
    return answer.get("message") or f"event {answer.get('id')} logged"


@mcp.tool()
def search_events(
    query: str = "",
    start: Annotated[str | None, Field(description="ISO 8601: happened at or after")] = None,
    end: Annotated[str | None, Field(description="ISO 8601: happened before")] = None,
    all_agents: bool = False,
    limit: Annotated[int, Field(ge=1, le=100)] = 20,
) -> str:
    """Events in a time range (and matching a meaning). "today" / "last week" in the query work too."""
    body = _clean({"query": query, "start": start, "end": end, "all_agents": all_agents, "limit": limit,
                   "project": current_project(), "agent_id": _agent()})  # fmt: skip
    hits = call("POST", "/api/v1/event-log/search", body).get("results", [])
    return _lines(hits) or "No events in that range."


@mcp.tool()
def promote_to_fact(
    event_id: str,
    confidence: Annotated[float, Field(ge=0.0, le=1.0)] = 0.9,
    text: Annotated[str | None, Field(description="The generalised fact; default: the event's text")] = None,
) -> str:
    """Turn a verified event (L2) into a lasting fact (L3); the event stays as its source."""
    answer = call("POST", f"/api/v1/event-log/{event_id}/promote", _clean({"confidence": confidence, "text": text, "agent_id": _agent()}))
    return answer.get("message") or f"fact {answer.get('id')} {answer.get('status')}"


@mcp.tool()
def get_active_context(key: str | None = None) -> str:
    """Your working memory for this session (L1): key/values you set, each living an hour by default."""
    sid = session_id() or "default"
    values = call("GET", "/api/v1/active-context", **_clean({"session_id": sid, "key": key, "agent_id": _agent()}))["values"]
    return json.dumps(values, ensure_ascii=False, indent=1) if values else "Active context is empty."


@mcp.tool()
def set_active_context(
    key: Annotated[str, Field(min_length=1, max_length=200)],
    value: Any,
    ttl_seconds: Annotated[int | None, Field(ge=1, le=604800)] = None,
) -> str:
    """Keep a temporary note for this session (current topic, task status, open questions).
    It is not long-term memory: what is left at session end is kept as an event."""
    body = _clean({"session_id": session_id() or "default", "key": key, "value": value, "ttl_seconds": ttl_seconds,
                   "agent_id": _agent()})  # fmt: skip
    answer = call("POST", "/api/v1/active-context", body)
    return f"set {key} for {answer['ttl_seconds']}s"


@mcp.tool()
def memory_write_relation(
    subject: Annotated[str, Field(min_length=1, max_length=300)],
    relation: Annotated[str, Field(min_length=1, max_length=100, description="e.g. uses, depends_on, owns")],
    object: Annotated[str, Field(min_length=1, max_length=300)],
    properties: dict[str, Any] | None = None,
    confidence: Annotated[float, Field(ge=0.0, le=1.0)] = 0.9,
    branch: str | None = None,
) -> str:
    """Record that `subject` -relation-> `object` (e.g. worker uses SQLite). Re-stating it updates it."""
    body = _clean({"subject": subject, "relation": relation, "object": object, "properties": properties or {},
                   "confidence": confidence, "project": current_project(), "agent_id": _agent(),
                   "branch": branch_scope(branch)})  # fmt: skip
    answer = call("POST", "/api/v1/relations", body)
    return answer.get("message") or f"relation {answer.get('id')} stored"


@mcp.tool()
def memory_graph_query(
    entity: Annotated[str, Field(min_length=1, max_length=300)],
    relation_type: str | None = None,
    depth: Annotated[int, Field(ge=1, le=5)] = 1,
) -> str:
    """What is related to `entity`, up to `depth` hops (currently valid relations only)."""
    graph = call("POST", "/api/v1/graph", _clean({"entity": entity, "relation_type": relation_type, "depth": depth,
                                                  "project": current_project()}))  # fmt: skip
    edges = graph.get("relations", [])
    if not edges:
        return f"No relations of {entity!r}."
    return "\n".join(f"- {e['subject']} -{e['relation']}-> {e['object']} (depth {e['depth']}, confidence {e['confidence']})" for e in edges)
