"""Fact extraction and ADD/UPDATE/DELETE/NONE decisions, against the fake Messages
API with scripted replies (the real `ClaudeClient` and `anthropic` SDK talk to it),
and the local path without a key."""

from __future__ import annotations

import time

import pytest

from memory_anchor.schemas.memories import AddMemoryRequest
from memory_anchor.schemas.memory_model import ConflictResolve, Decision, FactIn
from memory_anchor.schemas.settings import Settings
from memory_anchor.worker.llm.client import ClaudeClient
from memory_anchor.worker.memory import Material, MemoryModel
from memory_anchor.worker.store.db import Database
from memory_anchor.worker.store.records import Records, resolve_view

from tests.memory_clock import facts_verified_at

PROJECT = "/home/dev/demo"


@pytest.fixture
def db(store_db):
    """The memory model's store on each backend (tests/conftest.py)."""
    return store_db


@pytest.fixture
def local_db(tmp_path):
    """The developer's local SQLite, which keeps the LLM budget whichever backend holds the memory."""
    database = Database(tmp_path / "local.sqlite3")
    yield database
    database.close()


@pytest.fixture
def claude_model(db, local_db, fake_anthropic):
    client = ClaudeClient(Settings(llm_max_retries=0), local_db, sleep=lambda s: None)
    assert client.available
    return MemoryModel(db, llm=client, read_only_agents=["codex"])


@pytest.fixture
def local_model(db, local_db, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    client = ClaudeClient(Settings(), local_db)
    assert not client.available
    return MemoryModel(db, llm=client)


def facts_reply(*facts):
    return {"json": {"facts": [dict(text=t, confidence=c, subject=s) for t, c, s in facts]}}


def decisions_reply(*decisions):
    return {"json": {"decisions": [dict(zip(("candidate", "event", "target", "text", "reason"), d)) for d in decisions]}}


def summary(text="The session switched stores."):
    return Material(source="summary", text=text, project=PROJECT, session_id="s1")


def seed_fact(model, text, confidence=0.95, subject=None, actor=None, verified_days_ago=1.0):
    with facts_verified_at(time.time() - verified_days_ago * 86400):  # observed a while ago
        return model.facts.add(FactIn(text=text, confidence=confidence, subject=subject, project=PROJECT), actor=actor)["record"]


def live_records(model):
    return model.db.reader().execute("SELECT count(*) FROM records").fetchone()[0]


def test_claude_adds_new_facts_by_confidence_tier(claude_model, fake_anthropic):
    fake_anthropic.enqueue(facts_reply(
        ("Search returns an empty list for an empty query", 0.95, "empty query"),
        ("The project might need a result cache", 0.8, "result cache"),
        ("The user perhaps prefers tabs", 0.4, "indentation"),
    ))
    outcome = claude_model.extract(summary())
    assert outcome.mode == "claude" and outcome.errors == []
    assert [(r["event"], r.get("status")) for r in outcome.results] == [("ADD", "active"), ("ADD", "pending"), ("REJECTED", "rejected")]
    assert len(fake_anthropic.messages()) == 1  # no existing facts: no decision call
    body = fake_anthropic.messages()[0]
    assert "The session switched stores." in body["messages"][0]["content"]
    active = claude_model.facts.list(project=PROJECT)
    assert [f["text"] for f in active] == ["Search returns an empty list for an empty query"]
    assert active[0]["fact_key"] == "empty query" and active[0]["actor"] == "agent:claude-code"
    assert claude_model.approvals.count_pending() == 1


def test_claude_update_supersedes_with_a_new_version(claude_model, fake_anthropic):
    old = seed_fact(claude_model, "The vector database is Qdrant", subject="vector database")
    fake_anthropic.enqueue(
        facts_reply(("The vector database is Chroma", 0.95, "vector database")),
        decisions_reply((0, "UPDATE", 0, "The vector database is Chroma (replaced Qdrant)", "store switched")),
    )
    outcome = claude_model.extract(summary())
    assert [r["event"] for r in outcome.results] == ["UPDATE"]
    assert outcome.results[0]["previous_memory"] == "The vector database is Qdrant"
    decide = fake_anthropic.messages()[1]["messages"][0]["content"]
    assert "0. The vector database is Qdrant" in decide and old["id"] not in decide  # numbers, never ids
    history = claude_model.facts.history(old["id"])
    assert [v["text"] for v in history] == ["The vector database is Qdrant", "The vector database is Chroma (replaced Qdrant)"]
    assert history[-1]["actor"] == "agent:claude-code" and history[-1]["reason"].startswith("UPDATE (claude): store switched")
    assert [f["id"] for f in claude_model.facts.list(project=PROJECT)] == [old["id"]]


def test_claude_delete_invalidates_and_none_writes_nothing(claude_model, fake_anthropic):
    nose = seed_fact(claude_model, "Tests run with nose", subject="test runner")
    wal = seed_fact(claude_model, "SQLite runs in WAL mode", subject="sqlite mode")
    before = live_records(claude_model)
    fake_anthropic.enqueue(
        facts_reply(("nose was removed; tests run with pytest now", 0.95, "test runner"),
                    ("SQLite runs in WAL journal mode", 0.95, "sqlite mode")),
        decisions_reply((0, "DELETE", 0, None, "nose is gone"), (1, "NONE", None, None, "already known")),
    )
    outcome = claude_model.extract(summary())
    assert [r["event"] for r in outcome.results] == ["DELETE", "NONE"]
    assert claude_model.facts.get(nose["id"])["status"] == "invalidated"
    assert [v["status"] for v in claude_model.facts.history(nose["id"])] == ["active", "invalidated"]
    assert claude_model.facts.get(wal["id"])["version"] == 1
    assert live_records(claude_model) == before + 1  # only the invalidation version


def test_agent_cannot_overwrite_a_human_fact_conflict_is_opened(claude_model, fake_anthropic):
    human = seed_fact(claude_model, "Deploys happen on Fridays", subject="deploy day", actor="human:alice")
    fake_anthropic.enqueue(
        facts_reply(("Deploys happen on Mondays", 0.95, "deploy day")),
        decisions_reply((0, "UPDATE", 0, "Deploys happen on Mondays", "schedule changed")),
    )
    outcome = claude_model.extract(summary())
    assert [r["event"] for r in outcome.results] == ["CONFLICT"]
    assert claude_model.facts.get(human["id"])["text"] == "Deploys happen on Fridays"  # untouched
    conflict = claude_model.conflicts.list()[0]
    assert conflict["candidate"]["text"] == "Deploys happen on Mondays" and conflict["candidate"]["status"] == "disputed"
    assert "human" in conflict["reason"]
    claude_model.conflicts.resolve(conflict["id"], ConflictResolve(resolution="keep_existing", actor="alice"))
    assert claude_model.facts.get(conflict["candidate_id"])["status"] == "rejected"
    assert claude_model.facts.get(human["id"])["status"] == "active"


def test_less_confident_update_becomes_a_conflict(claude_model, fake_anthropic):
    old = seed_fact(claude_model, "The API port is 8080", subject="api port")
    fake_anthropic.enqueue(
        facts_reply(("The API port is 9090", 0.8, "api port")),
        decisions_reply((0, "UPDATE", 0, "The API port is 9090", "changed?")),
    )
    assert [r["event"] for r in claude_model.extract(summary()).results] == ["CONFLICT"]
    assert claude_model.facts.get(old["id"])["text"] == "The API port is 8080"
    assert claude_model.conflicts.count_open(PROJECT) == 1


@pytest.mark.parametrize("bad_reply", [
    {"text": "Sure! Here are the facts: the database is fast."},  # prose, no JSON
    {"json": {"facts": [{"text": 42}]}},  # wrong types
    {"json": {"facts": [{"text": "No confidence given"}]}},  # missing field
    {"json": {"facts": [{"text": "Way too confident", "confidence": 7}]}},  # out of range
    {"json": ["not", "facts"]},
    {"error": 500},
])
def test_malformed_extraction_reply_writes_nothing(claude_model, fake_anthropic, bad_reply):
    seed_fact(claude_model, "The vector database is Qdrant", subject="vector database")
    before = live_records(claude_model)
    fake_anthropic.enqueue(bad_reply)
    outcome = claude_model.extract(summary())
    assert outcome.mode == "local" and outcome.results == []
    assert outcome.errors and "unusable" in outcome.errors[0]
    assert live_records(claude_model) == before
    assert [f["text"] for f in claude_model.facts.list(project=PROJECT)] == ["The vector database is Qdrant"]


def test_malformed_extraction_reply_falls_back_to_local_for_observations(claude_model, fake_anthropic):
    fake_anthropic.enqueue({"text": "{not json"})
    material = Material(source="observation", project=PROJECT, observations=[
        {"type": "bugfix", "title": "Fix", "data": {"summary": "Empty query returns [] instead of None"}},
        {"type": "discovery", "title": "Read", "data": {"summary": "The search module is in memory_anchor/worker/search.py"}},
    ])
    outcome = claude_model.extract(material)
    assert outcome.mode == "local" and [r["event"] for r in outcome.results] == ["ADD"]
    assert [f["text"] for f in claude_model.facts.list(project=PROJECT)] == ["Empty query returns [] instead of None"]


@pytest.mark.parametrize("bad_decisions", [
    {"text": "I think you should update it"},
    decisions_reply((0, "UPDATE", 7, "out of range target", "?")),
    decisions_reply((0, "MERGE", 0, "unknown event", "?")),
    decisions_reply((0, "DELETE", None, None, "no target")),
    decisions_reply((0, "UPDATE", 0, "x", "a"), (0, "DELETE", 0, None, "b")),  # two answers for one candidate
    {"json": {"decisions": "all of them"}},
])
def test_malformed_decisions_never_touch_existing_facts(claude_model, fake_anthropic, bad_decisions):
    old = seed_fact(claude_model, "The cache TTL is one hour", subject="cache ttl")
    fake_anthropic.enqueue(facts_reply(("The cache TTL is ten minutes", 0.95, "cache ttl")), bad_decisions)
    outcome = claude_model.extract(summary())
    # decided locally: not a near-duplicate, so the candidate is added beside the old fact
    assert [r["event"] for r in outcome.results] == ["ADD"]
    current = claude_model.facts.get(old["id"])
    assert current["version"] == 1 and current["status"] == "active" and current["text"] == "The cache TTL is one hour"


def test_decision_may_only_target_facts_shown_for_that_candidate(claude_model, fake_anthropic):
    a = seed_fact(claude_model, "Logs rotate daily", subject="log rotation")
    b = seed_fact(claude_model, "The linter is ruff", subject="linter")
    fake_anthropic.enqueue(
        facts_reply(("Logs rotate weekly", 0.95, "log rotation"), ("The linter is ruff with default rules", 0.95, "linter")),
        # candidate 0 tries to delete the linter fact, which was never shown as similar to it
        decisions_reply((0, "DELETE", 1, None, "sneaky"), (1, "NONE", None, None, "known")),
    )
    outcome = claude_model.extract(summary())
    assert claude_model.facts.get(b["id"])["status"] == "active"
    assert claude_model.facts.get(a["id"])["status"] == "active"
    assert [r["event"] for r in outcome.results] == ["ADD", "NONE"]


def test_read_only_agent_extraction_becomes_proposals(claude_model, fake_anthropic):
    fake_anthropic.enqueue(facts_reply(("Codex found the build uses make", 0.95, "build tool")))
    material = Material(source="summary", text="...", project=PROJECT, agent_id="codex")
    outcome = claude_model.extract(material)
    assert [r["event"] for r in outcome.results] == ["PROPOSED"]
    assert claude_model.facts.list(project=PROJECT) == []
    from memory_anchor.schemas.memory_model import Decision

    claude_model.approvals.approve(outcome.results[0]["approval_id"], Decision(actor="alice"))
    facts = claude_model.facts.list(project=PROJECT)
    assert [f["text"] for f in facts] == ["Codex found the build uses make"] and facts[0]["agent_id"] == "codex"


def test_mem0_infer_path(claude_model, fake_anthropic):
    fake_anthropic.enqueue(facts_reply(("The user's name is Ada", 0.95, "user name")))
    request = AddMemoryRequest(messages=[{"role": "user", "content": "Hi, I'm Ada"}], user_id="ada", project=PROJECT)
    results = claude_model.add_from_messages(request)
    assert [(r["event"], r["memory"]) for r in results] == [("ADD", "The user's name is Ada")]
    fake_anthropic.enqueue({"text": "garbage"})
    assert claude_model.add_from_messages(request) is None  # the mem0 API then stores the message as given


def test_secrets_are_redacted_before_claude_sees_them(db, local_db, fake_anthropic):
    from memory_anchor.core.redact import redact_text

    model = MemoryModel(db, llm=ClaudeClient(Settings(llm_max_retries=0), local_db), redact=redact_text)
    fake_anthropic.enqueue(facts_reply())
    secret = "sk-ant-api03-" + "A" * 40
    model.extract(Material(source="transcript", text=f"export ANTHROPIC_API_KEY={secret}", project=PROJECT))
    assert secret not in fake_anthropic.messages()[0]["messages"][0]["content"]


# --- the local path (no key) ------------------------------------------------------------


def test_local_path_extracts_decisions_and_fixes_and_skips_duplicates(local_model):
    observations = [
        {"type": "decision", "title": "Pick Chroma", "data": {"summary": "Chose Chroma as the embedded vector store"}},
        {"type": "bugfix", "title": "Fix", "data": {"summary": "Fixed the hook timeout on slow disks"}},
        {"type": "discovery", "title": "Read", "data": {"summary": "Looked at the inbox module"}},
        {"type": "note", "title": "todo", "data": {"summary": "Remember to update the docs"}},
    ]
    outcome = local_model.extract(Material(source="observation", observations=observations, project=PROJECT))
    assert outcome.mode == "local"
    assert [r["event"] for r in outcome.results] == ["ADD", "ADD"]
    texts = {f["text"] for f in local_model.facts.list(project=PROJECT)}
    assert texts == {"Chose Chroma as the embedded vector store", "Fixed the hook timeout on slow disks"}
    # the same decision seen again (slightly reworded) is a near-duplicate: NONE
    again = local_model.extract(Material(source="observation", project=PROJECT, observations=[
        {"type": "decision", "title": "Pick Chroma", "data": {"summary": "Chose Chroma as the embedded vector store."}}]))
    assert [r["event"] for r in again.results] == ["NONE"]
    assert len(local_model.facts.list(project=PROJECT)) == 2


def test_pipeline_hook_runs_local_extraction_and_ends_active_context(local_model):
    class Event:
        id = 7
        session_id = "sess-1"

    session = {"project": PROJECT, "branch": "main", "agent_id": None}
    record = {"kind": "observation", "type": "bugfix", "title": "fix", "data": {"summary": "Fixed a race in the indexer"}}
    local_model.on_pipeline_event("PostToolUse", Event(), {"session": session, "record": record})
    facts = local_model.facts.list(project=PROJECT)
    assert [f["text"] for f in facts] == ["Fixed a race in the indexer"] and facts[0]["source_id"] == "inbox:7"
    local_model.active.set("sess-1", "current_topic", "indexer race")
    local_model.on_pipeline_event("SessionEnd", Event(), {"session": session})
    conn = local_model.db.reader()
    events, _ = Records.query(conn, resolve_view(conn), filters={"kind": "event", "session_id": "sess-1"})
    assert len(events) == 1 and "current_topic: indexer race" in events[0]["text"]


def test_a_change_of_mind_in_imported_history_supersedes_the_old_rule(local_model):
    """Statements keep the time they were made: a later one replaces an earlier one, however long ago both were
    said and whenever the pipeline writes them (imported history is processed years later, in one go)."""
    said = 1_600_000_000.0  # September 2020
    first = local_model.extract(Material(source="prompt", text="We use black for formatting.", project=PROJECT,
                                         observed_at=said))  # fmt: skip
    later = local_model.extract(Material(source="prompt", text="From now on we format with ruff format instead of black.",
                                         project=PROJECT, observed_at=said + 86_400))  # fmt: skip
    assert [r["event"] for r in first.results] == ["ADD"] and [r["event"] for r in later.results] == ["UPDATE"]
    [rule] = local_model.facts.list(project=PROJECT)
    assert rule["text"] == "From now on we format with ruff format instead of black"
    assert rule["data"]["verified_at"] == said + 86_400  # its decay counts from when it was said
    assert local_model.conflicts.list("open") == []


def test_claude_proposing_a_forgotten_or_edited_away_fact_again_writes_nothing(claude_model, fake_anthropic):
    """Issue 25: what a person forgot, or the wording their edit replaced, does not come back through Claude."""
    forgotten = seed_fact(claude_model, "Releases are cut from the develop branch", subject="release branch")
    edited = seed_fact(claude_model, "The staging database is MySQL 5.7", subject="staging database")
    claude_model.corrections.forget_fact(forgotten["id"], actor="human:alice", reason="we release from main")
    claude_model.corrections.edit_fact(edited["id"], "The staging database is PostgreSQL 16", actor="human:alice")
    fake_anthropic.enqueue(
        facts_reply(("Releases are cut from the develop branch.", 0.95, "release branch"),
                    ("The staging database is MySQL 5.7", 0.95, "staging database")),
        decisions_reply((0, "ADD", None, None, "new"),
                        (1, "UPDATE", 0, "The staging database is MySQL 5.7", "the session says so")),
    )  # fmt: skip
    outcome = claude_model.extract(summary())
    assert [(r["event"], r.get("status")) for r in outcome.results] == [("NONE", "forgotten"), ("NONE", "forgotten")]
    assert [f["text"] for f in claude_model.facts.list(project=PROJECT)] == ["The staging database is PostgreSQL 16"]
    assert claude_model.facts.get(forgotten["id"])["status"] == "forgotten"


@pytest.mark.parametrize("older", [
    "We use black for formatting.",  # what the newer rule says it replaced ("instead of black")
    "From now on we format with yapf instead of autopep8.",  # a change of mind of its own, on the same subject
])  # fmt: skip
def test_an_older_statement_imported_after_a_newer_contradicting_one_is_superseded_history(local_model, older):
    """Old history imported after months of live use: what the user said before the rule they gave later
    does not replace it and is not briefed; it is kept in history as superseded by the newer rule."""
    said = 1_600_000_000.0  # September 2020
    newer = local_model.extract(Material(source="prompt", text="From now on we format with ruff format instead of black.",
                                         project=PROJECT, observed_at=said + 86_400))  # fmt: skip
    [rule_id] = [r["id"] for r in newer.results]
    outcome = local_model.extract(Material(source="prompt", text=older, project=PROJECT, observed_at=said))
    [result] = outcome.results
    assert (result["event"], result["status"], result["superseded_by"]) == ("NONE", "superseded", rule_id)
    [rule] = local_model.facts.list(project=PROJECT, statuses=("active", "pending", "disputed"))
    assert rule["id"] == rule_id and rule["text"] == "From now on we format with ruff format instead of black"
    assert local_model.conflicts.list("open") == [] and local_model.approvals.count_pending() == 0
    [kept] = local_model.facts.list(project=PROJECT, statuses=("superseded",))
    assert kept["text"] == older.rstrip(".") and kept["data"]["superseded_by"] == rule_id
    assert kept["data"]["verified_at"] == said  # when it was said, which is what put it behind the rule


def test_claude_proposing_a_pending_fact_again_in_another_session_reaffirms_it(claude_model, fake_anthropic):
    """The decision step sees only active facts; the pending one the model proposes again (the same
    conversation read in a resumed session) is still one fact and one approval, said in both sessions."""
    for session in ("sess-1", "sess-2"):
        fake_anthropic.enqueue(facts_reply(("The project might need a result cache", 0.8, "result cache")))
        outcome = claude_model.extract(Material(source="summary", text="The session looked at search.", project=PROJECT,
                                                session_id=session))  # fmt: skip
        assert [(r["event"], r["status"]) for r in outcome.results] == [("ADD" if session == "sess-1" else "NONE", "pending")]
    [fact] = claude_model.facts.list(project=PROJECT, statuses=("pending",))
    assert fact["data"]["sessions"] == ["sess-1", "sess-2"]
    [approval] = claude_model.approvals.list()
    claude_model.approvals.approve(approval["id"], Decision(actor="alice"))
    assert [f["id"] for f in claude_model.facts.list(project=PROJECT)] == [fact["id"]]
    assert claude_model.facts.list(project=PROJECT, statuses=("pending",)) == []


def test_claudes_words_pasted_back_in_a_long_prompt_are_not_the_users_rule(local_model):
    """A user pastes another session's analysis into a new one ("here is what the review said: …"):
    the sentence Claude wrote there, in any markup, is no rule of the user's. A short reply that
    repeats Claude's words is the user agreeing, and stays theirs."""
    said_by_claude = ("Two blockers remain. **Never run the backfill** without a dry run first, "
                      "and keep the old table until the report matches.")  # fmt: skip
    with local_model.db.transaction() as conn:
        Records.put(conn, "transcript", said_by_claude, project=PROJECT, session_id="s-review")
    paste = ("ok so the other session reviewed the migration plan, this is its answer, read it and tell me what "
             "you think before we touch anything\n\n" + "The migration touches three tables and the report. " * 8
             + "\n\nNever run the backfill without a dry run first, and keep the old table until the report matches.")  # fmt: skip
    assert len(paste) > 600
    local_model.extract(Material(source="prompt", text=paste, project=PROJECT))
    assert local_model.facts.list(project=PROJECT, statuses=("active", "pending")) == []

    agreed = "yes. never run the backfill without a dry run first, and keep the old table until the report matches."
    local_model.extract(Material(source="prompt", text=agreed, project=PROJECT))
    [rule] = local_model.facts.list(project=PROJECT, statuses=("active", "pending"))
    assert rule["text"].startswith("yes. never run the backfill without a dry run first")


def test_a_ban_the_user_says_again_in_another_session_is_their_rule(local_model):
    """"commit all, do not add your signature" may be about this commit; the user saying it again in
    another session shows it lasts. A resumed session's copy of the same prompt is not saying it again."""

    def said(session: str, prompt: str) -> list[str]:
        with local_model.db.transaction() as conn:
            Records.put(conn, "prompt", prompt, project=PROJECT, session_id=session)
        local_model.extract(Material(source="prompt", text=prompt, project=PROJECT, session_id=session))
        return [f["text"] for f in local_model.facts.list(project=PROJECT, statuses=("active", "pending"))]

    assert said("s1", "Commit all, do not add your signature") == []
    assert said("s1-resumed", "Commit all, do not add your signature") == []  # the same prompt, copied
    assert said("s1", "ok and do not add your signature to the PR either") == []  # the same session
    assert said("s2", "The main feat is the swimlane view, and please do not add your signature") == [
        "do not add your signature"]
    [rule] = local_model.facts.list(project=PROJECT, statuses=("active",))
    assert rule["type"] == "rule" and rule["confidence"] == 0.9
    # A ban of something else, said in two sessions, stays what it was: nothing.
    assert said("s3", "do not touch the seeders") == said("s4", "do not add a migration") == ["do not add your signature"]


def test_a_line_kept_with_the_hash_shortcut_becomes_the_users_rule(local_model):
    """Claude Code 1.0's `#` shortcut: the user chose to keep the line, and it stands on their own words."""
    typed = "<user-memory-input> Review all the changes and update all the Claude.md files</user-memory-input>"
    local_model.extract(Material(source="prompt", text=typed, project=PROJECT, session_id="s1"))
    [rule] = local_model.facts.list(project=PROJECT, statuses=("active",))
    assert (rule["text"], rule["type"], rule["confidence"]) == ("Review all the changes and update all the Claude.md files", "rule", 0.95)

