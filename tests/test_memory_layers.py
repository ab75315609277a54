"""The rules of each layer of the memory model, on each backend (real SQLite, real PostgreSQL as a member)."""

from __future__ import annotations

import time

import pytest

from memory_anchor.schemas.memory_model import (
    AddMemoryIn,
    ConflictResolve,
    Decision,
    EventIn,
    EventSearch,
    FactIn,
    GraphQuery,
    IdentityProposal,
    IdentityWrite,
    PromoteRequest,
    RelationIn,
)
from memory_anchor.worker.memory import MemoryModel
from memory_anchor.worker.memory.active_context import ActiveContext
from memory_anchor.worker.memory.common import DAY
from memory_anchor.worker.memory.facts import effective_confidence
from memory_anchor.worker.store.records import RecordError, Records, resolve_view

from tests.memory_clock import facts_verified_at

PROJECT = "/home/dev/demo"


@pytest.fixture
def db(store_db):
    """The memory model's store on each backend (tests/conftest.py: SQLite, and PostgreSQL as a member)."""
    return store_db


@pytest.fixture
def model(db):
    return MemoryModel(db, read_only_agents=["codex"])


def human(content=None, **kw):
    return IdentityWrite(content=content, confirmations=3, actor="alice", project=kw.pop("project", PROJECT), **kw)


# --- L0 identity -----------------------------------------------------------------------


def test_identity_needs_three_confirmations(model):
    with pytest.raises(RecordError) as err:
        model.identity.add(IdentityWrite(content="Goal: memory for agents", confirmations=2, project=PROJECT))
    assert err.value.code == "confirmation_required"
    assert model.identity.items(PROJECT) == []
    item = model.identity.add(human("Goal: memory for agents", priority=0))
    assert item["actor"] == "human:alice" and item["layer"] == "identity_schema"
    assert [i["text"] for i in model.identity.items(PROJECT)] == ["Goal: memory for agents"]


def test_identity_refuses_agent_actor(model):
    with pytest.raises(RecordError) as err:
        model.identity.add(IdentityWrite(content="x", confirmations=3, actor="agent:claude-code"))
    assert err.value.status == 403 and err.value.code == "identity_protected"
    assert "propose_identity_change" in str(err.value)


def test_identity_limit_counts_global_items(model):
    for i in range(15):
        model.identity.add(human(f"project item {i}"))
    for i in range(5):
        model.identity.add(human(f"global item {i}", project=""))
    with pytest.raises(RecordError) as err:
        model.identity.add(human("one too many"))
    assert err.value.code == "identity_full"
    with pytest.raises(RecordError):
        model.identity.add(human("global too many", project=""))
    # another project still has room for its own items
    model.identity.add(human("other project item", project="/other"))
    assert len(model.identity.items(PROJECT)) == 20


def test_identity_order_by_priority_and_edit_keeps_history(model):
    b = model.identity.add(human("Stack: Python", priority=1))
    a = model.identity.add(human("Goal: memory", priority=0))
    assert [i["id"] for i in model.identity.items(PROJECT)] == [a["id"], b["id"]]
    model.identity.edit(b["id"], human("Stack: Python + SQLite"))
    history = model.identity.history(b["id"])
    assert [v["text"] for v in history] == ["Stack: Python", "Stack: Python + SQLite"]
    assert all(v["actor"] == "human:alice" for v in history)


def test_identity_soft_delete_and_restore_window(model):
    item = model.identity.add(human("Rule: never push to main"))
    model.identity.remove(item["id"], human())
    assert model.identity.items(PROJECT) == []
    removed = model.identity.items(PROJECT, include_removed=True)
    assert removed[0]["status"] == "removed"
    assert removed[0]["data"]["restore_until"] == pytest.approx(time.time() + 7 * DAY, abs=60)
    model.identity.restore(item["id"], human())
    assert [i["text"] for i in model.identity.items(PROJECT)] == ["Rule: never push to main"]
    # past the window: the purge job tombstones it and restore is refused
    model.identity.remove(item["id"], human())
    assert model.identity.purge_expired(at=time.time() + 6 * DAY) == 0
    assert model.identity.purge_expired(at=time.time() + 8 * DAY) == 1
    assert model.identity.items(PROJECT, include_removed=True) == []
    versions = model.identity.history(item["id"])
    assert [v["reason"].split(" ")[0] for v in versions] == ["ADD", "REMOVE", "RESTORE", "REMOVE", "PURGE"]


def test_identity_restore_refused_after_window(model, monkeypatch):
    item = model.identity.add(human("Rule"))
    model.identity.remove(item["id"], human())
    import memory_anchor.worker.memory.identity as identity_module

    monkeypatch.setattr(identity_module, "now", lambda: time.time() + 8 * DAY)
    with pytest.raises(RecordError) as err:
        model.identity.restore(item["id"], human())
    assert err.value.code == "restore_expired"


def test_agent_proposal_flow_needs_human_with_three_confirmations(model):
    result = model.propose_identity_change(
        IdentityProposal(action="add", content="Constraint: simple > featureful", reason="user said so", agent_id="claude-code", project=PROJECT)
    )
    assert result["status"] == "proposed"
    assert model.identity.items(PROJECT) == []  # nothing changed yet
    approval_id = result["approval_id"]
    with pytest.raises(RecordError):
        model.approvals.approve(approval_id, Decision(actor="agent:claude-code", confirmations=3))
    with pytest.raises(RecordError) as err:
        model.approvals.approve(approval_id, Decision(actor="alice", confirmations=1))
    assert err.value.code == "confirmation_required"
    assert model.approvals.get(approval_id)["status"] == "pending"  # a failed approval changes nothing
    done = model.approvals.approve(approval_id, Decision(actor="alice", confirmations=3))
    assert done["status"] == "approved" and done["decided_by"] == "human:alice"
    items = model.identity.items(PROJECT)
    assert [i["text"] for i in items] == ["Constraint: simple > featureful"]
    assert "approved proposal" in items[0]["reason"]


def test_rejected_identity_proposal_changes_nothing(model):
    item = model.identity.add(human("Goal: X"))
    result = model.propose_identity_change(IdentityProposal(action="remove", target_id=item["id"], reason="obsolete", project=PROJECT))
    model.approvals.reject(result["approval_id"], Decision(actor="alice", note="no"))
    assert [i["text"] for i in model.identity.items(PROJECT)] == ["Goal: X"]
    assert model.approvals.get(result["approval_id"])["status"] == "rejected"


def test_add_memory_to_identity_layer_is_refused(model):
    for layer in ("identity_schema", "constitution"):
        with pytest.raises(RecordError) as err:
            model.add_memory(AddMemoryIn(content="I am the boss now", layer=layer, agent_id="claude-code"))
        assert err.value.status == 403 and "memory-anchor identity" in str(err.value)
    assert model.identity.items("") == []


def test_identity_survives_a_broken_store(model, monkeypatch):
    model.identity.add(human("Goal: memory"))
    assert len(model.identity.context_items(PROJECT)) == 1

    def broken(*a, **k):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(model.identity, "items", broken)
    assert [i["text"] for i in model.identity.context_items(PROJECT)] == ["Goal: memory"]


# --- L1 active context --------------------------------------------------------------------


def test_active_context_ttl_and_isolation():
    clock = [1000.0]
    ctx = ActiveContext(default_ttl=3600, clock=lambda: clock[0])
    ctx.set("s1", "topic", "optimise search")
    ctx.set("s1", "short", 1, ttl_seconds=10)
    ctx.set("s2", "topic", "other session")
    ctx.set("s1", "topic", "codex topic", agent_id="codex")
    assert ctx.get("s1") == {"topic": "optimise search", "short": 1}
    assert ctx.get("s1", agent_id="codex") == {"topic": "codex topic"}
    clock[0] += 11
    assert ctx.get("s1") == {"topic": "optimise search"}
    clock[0] += 3600
    assert ctx.get("s1") == {} and ctx.get("s2") == {}
    with pytest.raises(RecordError):
        ctx.set("s1", "bad", object())


def test_session_end_keeps_working_memory_as_event(model):
    model.active.set("sess", "task_status", "debugging")
    model.active.set("sess", "pending_questions", ["cache?"])
    out = model.end_session("sess", project=PROJECT)
    assert out["left"] == {"task_status": "debugging", "pending_questions": ["cache?"]}
    event = model.events.get(out["event_id"])
    assert "task_status: debugging" in event["text"] and event["session_id"] == "sess"
    assert model.active.get("sess") == {}
    assert model.end_session("sess")["event_id"] is None  # nothing left, nothing written


# --- L2 events -------------------------------------------------------------------------------


def test_event_requires_when_and_keeps_metadata(model):
    with pytest.raises(Exception):
        EventIn(content="no time")
    with pytest.raises(RecordError) as err:
        model.log_event(EventIn(content="bad time", when="yesterday-ish"))
    assert err.value.code == "invalid_timestamp"
    rec = model.log_event(EventIn(content="Fixed empty query returning None", when="2025-12-15T14:30:00Z",
                                  where="backend/services/memory.py", who="claude-code", ttl_days=30, project=PROJECT))["record"]
    assert rec["happened_at"] == pytest.approx(1765809000.0)
    assert rec["data"]["where"] == "backend/services/memory.py" and rec["data"]["who"] == ["claude-code"]
    assert rec["data"]["expires_at"] == pytest.approx(rec["happened_at"] + 30 * DAY)
    assert rec["agent_id"] == "claude-code"


def test_search_events_by_time_range_and_meaning(model):
    base = time.time()
    model.log_event(EventIn(content="Fixed search crash on empty query", when=base - 3600, project=PROJECT))
    model.log_event(EventIn(content="Upgraded chromadb", when=base - 3 * DAY, project=PROJECT))
    model.log_event(EventIn(content="Fixed flaky hook test", when=base - 10 * DAY, project=PROJECT))
    recent = model.events.search(EventSearch(query="fixed", start=base - 2 * DAY, project=PROJECT))
    assert [h["text"] for h in recent] == ["Fixed search crash on empty query"]
    everything = model.events.search(EventSearch(start=base - 30 * DAY, end=base, project=PROJECT))
    assert len(everything) == 3
    assert everything[0]["text"] == "Fixed search crash on empty query"  # newest first


def test_events_are_per_agent_unless_asked(model):
    now_ = time.time()
    model.log_event(EventIn(content="codex ran migrations", when=now_, agent_id="gemini", project=PROJECT))
    model.log_event(EventIn(content="claude ran migrations", when=now_, project=PROJECT))
    mine = model.events.search(EventSearch(query="migrations", project=PROJECT))
    assert [h["text"] for h in mine] == ["claude ran migrations"]
    theirs = model.events.search(EventSearch(query="migrations", project=PROJECT, all_agents=True))
    assert {h["text"] for h in theirs} == {"codex ran migrations", "claude ran migrations"}


def test_expired_events_are_archived_and_restorable(model):
    old = time.time() - 40 * DAY
    keep = model.log_event(EventIn(content="Permanent event", when=old, project=PROJECT))["record"]
    gone = model.log_event(EventIn(content="Short-lived event", when=old, ttl_days=7, project=PROJECT))["record"]
    assert model.events.archive_expired() == 1
    assert model.events.archive_expired() == 0  # idempotent
    live = model.events.search(EventSearch(start=old - 1, project=PROJECT))
    assert [h["id"] for h in live] == [keep["id"]]
    archived = model.events.archived(PROJECT)
    assert [a["record_id"] for a in archived] == [gone["id"]] and archived[0]["text"] == "Short-lived event"
    restored = model.events.restore(archived[0]["id"], actor="human:alice")
    assert restored["status"] == "active" and restored["data"]["expires_at"] is None
    assert {h["id"] for h in model.events.search(EventSearch(start=old - 1, project=PROJECT))} == {keep["id"], gone["id"]}
    reasons = [v["reason"] for v in Records.history(model.db.reader(), gone["id"], resolve_view(model.db.reader()))]
    assert reasons == ["ADD", "ARCHIVE (ttl expired)", "RESTORE (from archive)"]


# --- L3 facts ------------------------------------------------------------------------------------


def test_fact_confidence_tiers(model):
    high = model.add_fact(FactIn(text="We use SQLite WAL", confidence=0.95, project=PROJECT))
    mid = model.add_fact(FactIn(text="The project may need a cache", confidence=0.8, project=PROJECT))
    low = model.add_fact(FactIn(text="Maybe the user likes tabs", confidence=0.5, project=PROJECT))
    assert high["status"] == "active" and high["record"]["status"] == "active"
    assert mid["status"] == "pending" and mid["approval"]["kind"] == "fact"
    assert low["status"] == "rejected" and low["record"] is None
    logged = model.db.reader().execute("SELECT text, confidence FROM fact_rejections").fetchall()
    assert [(r["text"], r["confidence"]) for r in logged] == [("Maybe the user likes tabs", 0.5)]
    assert [f["text"] for f in model.facts.list(project=PROJECT)] == ["We use SQLite WAL"]
    # boundaries: 0.9 is active, 0.7 pending, 0.69 rejected
    assert model.add_fact(FactIn(text="b1", confidence=0.9))["status"] == "active"
    assert model.add_fact(FactIn(text="b2", confidence=0.7))["status"] == "pending"
    assert model.add_fact(FactIn(text="b3", confidence=0.69))["status"] == "rejected"


def test_pending_fact_approval_and_rejection(model):
    mid = model.add_fact(FactIn(text="Cache search results", confidence=0.8, project=PROJECT))
    other = model.add_fact(FactIn(text="Use Redis", confidence=0.75, project=PROJECT))
    model.approvals.approve(mid["approval"]["id"], Decision(actor="alice"))
    fact = model.facts.get(mid["record"]["id"])
    assert fact["status"] == "active" and fact["confidence"] == 0.9 and fact["data"]["approved_by"] == "human:alice"
    model.approvals.reject(other["approval"]["id"], Decision(actor="alice"))
    assert model.facts.get(other["record"]["id"])["status"] == "rejected"
    assert [f["text"] for f in model.facts.list(project=PROJECT)] == ["Cache search results"]
    assert model.approvals.count_pending() == 0


def test_confidence_decay_and_needs_verification(model):
    with facts_verified_at(time.time() - 10 * DAY):  # written ten days ago
        fact = model.add_fact(FactIn(text="Empty query returns an empty list", confidence=0.95, project=PROJECT))["record"]
    verified = fact["data"]["verified_at"]
    assert effective_confidence(fact, verified + 3 * DAY) == pytest.approx(0.95 * 0.95**3)
    # 0.95 * 0.95^d < 0.6  <=>  d > 8.96
    assert effective_confidence(fact, verified + 8 * DAY) > 0.6
    assert effective_confidence(fact, verified + 9 * DAY) < 0.6
    stale = model.facts.get(fact["id"])
    assert stale["needs_verification"] is True and stale["effective_confidence"] < 0.6
    assert [f["id"] for f in model.facts.list(project=PROJECT, needs_verification=True)] == [fact["id"]]
    fresh = model.facts.verify(fact["id"], actor="human:alice")
    assert fresh["needs_verification"] is False and fresh["effective_confidence"] == pytest.approx(0.95, abs=1e-3)


def test_promote_event_to_fact_keeps_source(model):
    event = model.log_event(EventIn(content="Switched vector store to Chroma", when=time.time(), project=PROJECT))["record"]
    out = model.promote_to_fact(event["id"], PromoteRequest(confidence=0.92, text="The vector store is Chroma"))
    fact = out["record"]
    assert fact["source_id"] == event["id"] and fact["text"] == "The vector store is Chroma"
    assert model.events.get(event["id"])["data"]["promoted_to"] == fact["id"]
    with pytest.raises(RecordError):
        model.promote_to_fact(event["id"], PromoteRequest())
    low = model.log_event(EventIn(content="Someone hinted at GraphQL", when=time.time(), project=PROJECT))["record"]
    assert model.promote_to_fact(low["id"], PromoteRequest(confidence=0.5))["status"] == "rejected"
    assert "promoted_to" not in model.events.get(low["id"])["data"]


# --- conflicts ---------------------------------------------------------------------------------------


def test_conflict_keeps_both_and_resolves(model):
    old = model.add_fact(FactIn(text="The vector database is Qdrant", confidence=0.95, subject="vector database", project=PROJECT))["record"]
    with model.db.transaction() as conn:
        opened = model.conflicts.open(conn, Records.get(conn, old["id"], resolve_view(conn)), "The vector database is Chroma",
                                      confidence=0.8, reason="test", actor="agent:claude-code", agent_id="claude-code", branch="main")
    conflict = model.conflicts.list()[0]
    assert conflict["existing"]["text"] == "The vector database is Qdrant" and conflict["candidate"]["status"] == "disputed"
    assert model.facts.get(old["id"])["status"] == "active"
    with pytest.raises(RecordError):
        model.conflicts.resolve(conflict["id"], ConflictResolve(resolution="keep_new", actor="agent:x"))
    model.conflicts.resolve(conflict["id"], ConflictResolve(resolution="keep_new", actor="alice"))
    assert model.facts.get(old["id"])["text"] == "The vector database is Chroma"
    assert model.facts.get(opened["candidate"]["id"])["status"] == "merged"
    history = model.facts.history(old["id"])
    assert [v["text"] for v in history] == ["The vector database is Qdrant", "The vector database is Chroma"]
    assert history[-1]["actor"] == "human:alice" and "keep_new" in history[-1]["reason"]
    assert model.conflicts.list() == [] and model.conflicts.list("resolved")[0]["resolution"] == "keep_new"


# --- relations -------------------------------------------------------------------------------------------


def test_relations_graph_and_invalidation(model):
    r1 = model.write_relation(RelationIn(subject="worker", relation="uses", object="SQLite", properties={"mode": "WAL"}))["record"]
    model.write_relation(RelationIn(subject="SQLite", relation="stores", object="records"))
    model.write_relation(RelationIn(subject="records", relation="indexed_by", object="FTS5"))
    model.write_relation(RelationIn(subject="worker", relation="depends-on", object="aiohttp"))
    one = model.relations.graph(GraphQuery(entity="Worker", depth=1))
    assert {(e["subject"], e["relation"], e["object"]) for e in one["relations"]} == {
        ("worker", "uses", "SQLite"), ("worker", "depends_on", "aiohttp")}
    two = model.relations.graph(GraphQuery(entity="worker", depth=3))
    assert {e["object"] for e in two["relations"]} == {"SQLite", "records", "FTS5", "aiohttp"}
    only_uses = model.relations.graph(GraphQuery(entity="worker", relation_type="uses", depth=2))
    assert [e["object"] for e in only_uses["relations"]] == ["SQLite"]
    # writing the same triple again updates it (a new version), no duplicate
    again = model.write_relation(RelationIn(subject="worker", relation="uses", object="sqlite", properties={"mode": "WAL2"}))["record"]
    assert again["id"] == r1["id"] and again["version"] == 2
    before = time.time()
    model.relations.invalidate(r1["id"], actor="human:alice")
    assert "SQLite" not in {e["object"] for e in model.relations.graph(GraphQuery(entity="worker"))["relations"]}
    past = model.relations.graph(GraphQuery(entity="worker", at=r1["data"]["valid_from"] + 0.0001))
    assert "sqlite" in {e["object"] for e in past["relations"]}  # valid then: kept, never deleted
    latest = Records.get(model.db.reader(), r1["id"], resolve_view(model.db.reader()))
    assert latest["status"] == "invalidated" and latest["data"]["valid_to"] >= before


# --- L4 operations -----------------------------------------------------------------------------------------


def test_operations_index_follows_files(model, tmp_path):
    project = tmp_path / "proj"
    ops = project / ".ai" / "operations"
    (ops / "templates").mkdir(parents=True)
    (ops / "error_handling.md").write_text("# Error handling\nRetry transient HTTP 429 with backoff.\n")
    (ops / "memory_sop.yaml").write_text("steps:\n  - search memory before asking the user\n")
    (ops / "templates" / "notes.txt").write_text("not indexed")
    hits = model.operations.search("error handling", str(project))
    assert hits[0]["path"] == str(ops / "error_handling.md") and hits[0]["match"] == "file_name"
    assert model.operations.search("backoff", str(project))[0]["title"] == ".ai/operations/error_handling.md"
    assert model.operations.search("search memory before asking", str(project))[0]["title"].endswith("memory_sop.yaml")
    # changed file → new version; removed file → gone
    (ops / "error_handling.md").write_text("# Error handling\nGive up after five attempts.\n")
    (ops / "memory_sop.yaml").unlink()
    counts = model.operations.sync(str(project))
    assert counts["updated"] == 1 and counts["removed"] == 1
    assert model.operations.search("backoff", str(project)) == []  # the old content is no longer visible
    assert "five attempts" in model.operations.search("attempts", str(project))[0]["text"]
    assert model.operations.search("memory sop", str(project)) == []
    # files edited behind our back are picked up by the next search (no explicit sync)
    (ops / "release.md").write_text("# Release\nTag, build, publish.\n")
    assert model.operations.search("release", str(project))[0]["title"] == ".ai/operations/release.md"


# --- agents ---------------------------------------------------------------------------------------------------


def test_read_only_agent_writes_become_proposals(model):
    out = model.log_event(EventIn(content="codex deployed", when=time.time(), agent_id="codex", project=PROJECT))
    assert out["status"] == "proposed"
    assert model.events.search(EventSearch(project=PROJECT, all_agents=True, start=0)) == []
    fact = model.add_fact(FactIn(text="Codex thinks tabs are better", confidence=0.95, agent_id="codex"))
    assert fact["status"] == "proposed"
    pending = model.approvals.list(kind="agent_write")
    assert [p["action"] for p in pending] == ["log_event", "add_fact"]
    model.approvals.approve(out["approval_id"], Decision(actor="alice"))
    events = model.events.search(EventSearch(project=PROJECT, agent_id="codex", start=0))
    assert [e["text"] for e in events] == ["codex deployed"]
    assert events[0]["agent_id"] == "codex" and "approved by human:alice" in events[0]["actor"]
    # active context is working memory: a read-only agent may still use it
    model.active.set("s", "k", "v", agent_id="codex")
    assert model.active.get("s", agent_id="codex") == {"k": "v"}


# --- SessionStart context: the red line -------------------------------------------------------------


def _context(model, monkeypatch, budget=3000):
    from memory_anchor.worker import context as ctx
    from memory_anchor.schemas.settings import Settings

    services = ctx.ContextServices(settings=Settings(), reader=model.db.reader, memory=model)
    request = ctx.ContextRequest(project=PROJECT, services=services, budget=budget)
    return ctx.build_context(request, model.db.reader())


def test_context_puts_identity_first_with_flags(model, monkeypatch):
    model.identity.add(human("Goal: memory for agents", priority=0))
    with facts_verified_at(time.time() - 30 * DAY):
        model.add_fact(FactIn(text="The cache TTL is one hour", confidence=0.95, project=PROJECT))
    model.add_fact(FactIn(text="Releases happen on Fridays", confidence=0.95, project=PROJECT))
    model.log_event(EventIn(content="Fixed the flaky test", when=time.time(), project=PROJECT))
    model.add_fact(FactIn(text="Maybe add a cache", confidence=0.8, project=PROJECT))
    built = _context(model, monkeypatch)
    text = built.text
    assert built.sections[:3] == ["identity", "facts", "events"] and "approvals" in built.sections
    assert text.index("Goal: memory for agents") < text.index("Releases happen on Fridays") < text.index("Fixed the flaky test")
    assert "The cache TTL is one hour [needs verification]" in text
    assert "1 proposal(s) wait" in text
    # identity is outside the budget: a tiny budget drops the facts, never the identity
    tiny = _context(model, monkeypatch, budget=10)
    assert "Goal: memory for agents" in tiny.text and "Releases happen" not in tiny.text


def test_identity_in_context_even_when_every_search_and_read_fails(model, monkeypatch):
    model.identity.add(human("Goal: memory for agents"))
    model.add_fact(FactIn(text="Releases happen on Fridays", confidence=0.95, project=PROJECT))
    assert "Goal" in _context(model, monkeypatch).text  # a first good read

    def broken(*args, **kwargs):
        raise RuntimeError("store unavailable")

    for target, name in ((model.finder, "find"), (model.finder, "recent"), (model.facts, "list"), (model.events, "recent"),
                         (model.conflicts, "list"), (model.approvals, "count_pending"), (Records, "query")):
        monkeypatch.setattr(target, name, broken)
    built = _context(model, monkeypatch)
    assert "Goal: memory for agents" in built.text and "Releases" not in built.text
    assert built.sections == ["identity"]
