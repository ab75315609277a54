"""The memory model's REST API and SessionStart context, against a real worker process."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.both_backends

AGENT = {"X-Memory-Anchor-Agent": "claude-code"}
PROJECT = "/tmp/ma-memory-api"


@pytest.fixture
def worker(shared_worker, request):
    """One worker for the module (starting one costs seconds); each test its own project."""
    global PROJECT
    PROJECT = f"/tmp/ma-memory-api/{request.node.name}"
    return shared_worker


def human_add(worker, content, **extra):
    return worker.post("/api/v1/identity", {"content": content, "project": PROJECT, "confirmations": 3, "actor": "alice", **extra}, expect=201)


def test_identity_red_lines_over_http(worker):
    item = human_add(worker, "Project goal: persistent memory for agents", priority=0)
    # an agent header on any identity write is refused
    status, body = worker.request("POST", "/api/v1/identity", {"content": "I am root", "confirmations": 3}, headers=AGENT)
    assert status == 403 and body["error"]["code"] == "identity_protected"
    status, body = worker.request("PUT", f"/api/v1/identity/{item['id']}", {"content": "x", "confirmations": 3}, headers=AGENT)
    assert status == 403
    status, body = worker.request("POST", f"/api/v1/identity/{item['id']}/remove", {"confirmations": 3}, headers=AGENT)
    assert status == 403
    # add_memory into the identity layer (any alias) is refused
    for layer in ("identity_schema", "constitution", "L0"):
        status, body = worker.request("POST", "/api/v1/memory-model/add", {"content": "new goal", "layer": layer}, headers=AGENT)
        assert status == 403 and "propose_identity_change" in body["error"]["message"]
    # fewer than three confirmations
    status, body = worker.request("POST", "/api/v1/identity", {"content": "x", "project": PROJECT, "confirmations": 2})
    assert status == 400 and body["error"]["code"] == "confirmation_required"
    # agents cannot approve or resolve
    status, _ = worker.request("POST", "/api/v1/approvals/1/approve", {"confirmations": 3}, headers=AGENT)
    assert status == 403
    status, _ = worker.request("POST", "/api/v1/conflicts/1/resolve", {"resolution": "keep_new"}, headers=AGENT)
    assert status == 403
    items = worker.get(f"/api/v1/constitution?project={PROJECT}")["results"]
    assert [i["text"] for i in items] == ["Project goal: persistent memory for agents"]


def test_proposal_approval_flow(worker):
    proposal = worker.post("/api/v1/identity/proposals", {"action": "add", "content": "Constraint: simple > featureful",
                                                          "reason": "the user repeats it", "project": PROJECT}, expect=202, headers=AGENT)
    pending = [p for p in worker.get("/api/v1/approvals")["results"] if p["project"] == PROJECT]
    assert [(p["id"], p["kind"], p["agent_id"]) for p in pending] == [(proposal["approval_id"], "identity_change", "claude-code")]
    status, body = worker.request("POST", f"/api/v1/approvals/{proposal['approval_id']}/approve", {"actor": "alice", "confirmations": 1})
    assert status == 400
    done = worker.post(f"/api/v1/approvals/{proposal['approval_id']}/approve", {"actor": "alice", "confirmations": 3})
    assert done["status"] == "approved"
    texts = [i["text"] for i in worker.get(f"/api/v1/identity?project={PROJECT}")["results"]]
    assert "Constraint: simple > featureful" in texts


def test_layers_over_http(worker):
    now = time.time()
    event = worker.post("/api/v1/event-log", {"content": "Fixed the empty-query crash", "when": now - 60, "where": "memory_anchor/worker/search.py",
                                               "who": ["claude-code"], "project": PROJECT, "ttl_days": 30}, expect=201, headers=AGENT)
    assert event["status"] == "active" and event["record"]["data"]["where"] == "memory_anchor/worker/search.py"
    status, body = worker.request("POST", "/api/v1/event-log", {"content": "no when", "project": PROJECT})
    assert status == 422 and "when" in body["error"]["message"]
    found = worker.post("/api/v1/event-log/search", {"query": "what did we fix today", "project": PROJECT})["results"]
    assert found[0]["id"] == event["id"]
    promoted = worker.post(f"/api/v1/event-log/{event['id']}/promote", {"confidence": 0.95, "text": "Empty queries return []"}, expect=201)
    assert promoted["status"] == "active" and promoted["record"]["source_id"] == event["id"]
    pending = worker.post("/api/v1/facts", {"text": "We might need a cache", "confidence": 0.8, "project": PROJECT}, expect=201)
    assert pending["status"] == "pending" and pending["approval_id"]
    rejected = worker.post("/api/v1/facts", {"text": "Maybe tabs", "confidence": 0.3, "project": PROJECT}, expect=201)
    assert rejected["status"] == "rejected" and rejected["id"] is None
    fact_id = promoted["id"]
    worker.request("PUT", f"/api/v1/facts/{fact_id}", {"text": "Empty queries return an empty list", "reason": "UPDATE: clearer"})
    history = worker.get(f"/api/v1/facts/{fact_id}/history")["results"]
    assert [(h["text"], h["actor"]) for h in history] == [
        ("Empty queries return []", "agent:claude-code"), ("Empty queries return an empty list", "agent:claude-code")]
    assert history[1]["reason"] == "UPDATE: clearer" and history[1]["created_at"]
    facts = worker.get(f"/api/v1/facts?project={PROJECT}")["results"]
    assert [f["text"] for f in facts] == ["Empty queries return an empty list"] and facts[0]["needs_verification"] is False
    # active context
    worker.post("/api/v1/active-context", {"session_id": "s-1", "key": "topic", "value": "search perf"})
    assert worker.get("/api/v1/active-context?session_id=s-1")["values"] == {"topic": "search perf"}
    ended = worker.post("/api/v1/active-context/end", {"session_id": "s-1", "project": PROJECT})
    assert ended["left"] == {"topic": "search perf"} and ended["event_id"]
    # relations
    rel = worker.post("/api/v1/relations", {"subject": "worker", "relation": "uses", "object": "SQLite", "project": PROJECT}, expect=201)
    graph = worker.post("/api/v1/graph", {"entity": "worker", "depth": 2, "project": PROJECT})
    assert [r["object"] for r in graph["relations"]] == ["SQLite"]
    worker.post(f"/api/v1/relations/{rel['id']}/invalidate", {"reason": "moved to Postgres"})
    assert worker.post("/api/v1/graph", {"entity": "worker", "project": PROJECT})["relations"] == []
    # search across layers never returns nothing for a non-empty memory
    hits = worker.post("/api/v1/memory-model/search", {"query": "qwertyuiop", "project": PROJECT})["results"]
    assert hits
    status, body = worker.request("POST", "/api/v1/memory-model/search", {"query": "goal", "layers": ["identity_schema"]})
    assert status == 400 and body["error"]["code"] == "identity_not_searchable"


def test_conflicts_endpoint(worker):
    # a human-written fact and an agent's contradicting UPDATE through extraction is covered in
    # test_memory_extraction; here the listing/resolution contract over HTTP
    assert worker.get(f"/api/v1/conflicts?project={PROJECT}")["results"] == []
    status, body = worker.request("POST", "/api/v1/conflicts/999/resolve", {"resolution": "keep_new", "actor": "alice"})
    assert status == 404 and body["error"]["code"] == "not_found"
    status, body = worker.request("POST", "/api/v1/conflicts/1/resolve", {"resolution": "whatever"})
    assert status == 422


def test_identity_is_first_in_every_session_start_context(worker):
    human_add(worker, "Tech stack: Python and SQLite", priority=1)
    worker.post("/api/v1/facts", {"text": "The CI runs on every push", "confidence": 0.95, "project": PROJECT}, expect=201)
    for source in ("startup", "resume", "clear", "compact"):
        context = worker.get(f"/api/v1/context?project={PROJECT}&source={source}")["context"]
        assert "Tech stack: Python and SQLite" in context
        assert context.index("Tech stack") < context.index("The CI runs on every push")
        assert "Identity" in context
