"""The branching engine in-process: diff, merge strategies, snapshots, sessions, deletion, judge,
on each storage backend (SQLite, and PostgreSQL as a team member)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_anchor.core.projects import project_for_cwd
from memory_anchor.schemas.settings import Settings
from tests.fakes.anthropic_server import json_reply
from memory_anchor.worker.store import branches as registry
from memory_anchor.worker.branching import sessions
from memory_anchor.worker.store import snapshots
from memory_anchor.worker.branching.diff import compute_diff
from memory_anchor.worker.branching.judge import ClaudeJudge
from memory_anchor.worker.branching.merge import MergeEngine
from memory_anchor.worker.context import ContextRequest
from memory_anchor.worker.context.branches import branch_section
from memory_anchor.worker.llm.client import ClaudeClient
from memory_anchor.worker.store.db import Database
from memory_anchor.worker.store.dialect import SQLITE, dialect_of
from memory_anchor.worker.store.records import NotFound, RecordError, Records, resolve_view, validate_branch_name


@pytest.fixture
def db(store_db):
    """Each test on SQLite and on PostgreSQL (tests/conftest.py)."""
    return store_db


@pytest.fixture
def local_db(tmp_path: Path):
    """The developer's own SQLite, where the Claude budget is kept whatever the memory's backend."""
    database = Database(tmp_path / "local.sqlite3")
    yield database
    database.close()


def put(db, text, branch="main", **values):
    with db.transaction() as conn:
        return Records.put(conn, values.pop("kind", "fact"), text, branch=branch, project="p", **values)


def update(db, record_id, branch, **changes):
    with db.transaction() as conn:
        return Records.update(conn, record_id, branch=branch, **changes)


def fork(db, name, parent="main", **kwargs):
    with db.transaction() as conn:
        return registry.create_branch(conn, name, parent=parent, **kwargs)


def visible(db, branch, record_id, as_of=None):
    conn = db.reader()
    return Records.get(conn, record_id, resolve_view(conn, branch, as_of))


# --- names and registry -----------------------------------------------------------------


@pytest.mark.parametrize("bad", ["", "-x", "a..b", "a b", "x/", "é", "a" * 101, "../etc"])
def test_bad_branch_names_are_refused_with_a_clear_error(db, bad):
    with pytest.raises(RecordError) as err, db.transaction() as conn:
        registry.create_branch(conn, bad)
    assert err.value.code == "invalid_branch" and "invalid branch name" in str(err.value)


def test_main_always_exists_and_cannot_be_deleted_or_archived(db):
    with db.transaction() as conn:
        assert registry.get_branch(conn, "main")["parent"] is None
        with pytest.raises(RecordError, match="cannot be deleted"):
            registry.delete_branch(conn, "main")
        with pytest.raises(RecordError, match="cannot be archived"):
            registry.set_status(conn, "main", "archived")


def test_duplicate_branch_and_missing_parent(db):
    fork(db, "exp")
    with pytest.raises(RecordError) as dup:
        fork(db, "exp")
    assert dup.value.status == 409
    with pytest.raises(NotFound):
        fork(db, "other", parent="nope")


def test_zero_copy_three_levels_deep(db):
    a = put(db, "on main before anything")
    fork(db, "l1")
    b = put(db, "l1 own", "l1")
    fork(db, "l1/l2", parent="l1")
    put(db, "main after the fork")
    c = put(db, "l2 own", "l1/l2")
    fork(db, "l1/l2/l3", parent="l1/l2")
    update(db, a["id"], "l1/l2/l3", text="changed three levels down")
    before = db.reader().execute("SELECT count(*) FROM records").fetchone()[0]
    assert before == 5  # nothing was copied by forking
    assert visible(db, "l1/l2/l3", a["id"])["text"] == "changed three levels down"
    assert visible(db, "main", a["id"])["text"] == "on main before anything"
    assert visible(db, "l1/l2/l3", b["id"]) and visible(db, "l1/l2/l3", c["id"])
    assert visible(db, "l1", c["id"]) is None
    listed = {b["name"]: b for b in registry.list_branches(db.reader())}
    assert listed["l1/l2/l3"]["depth"] == 3 and listed["l1"]["own_writes"] == 1


def test_branch_from_snapshot_and_time_travel_sees_superseded_and_deleted(db):
    fact = put(db, "the API returns 500 on bad input")
    with db.transaction() as conn:
        snap = snapshots.create_snapshot(conn, "before-fix", "main")
    update(db, fact["id"], "main", text="the API returns 400 on bad input")
    with db.transaction() as conn:
        Records.delete(conn, fact["id"], branch="main")
    assert visible(db, "main", fact["id"]) is None
    assert visible(db, "main", fact["id"], as_of="before-fix")["text"] == "the API returns 500 on bad input"
    assert visible(db, "main", fact["id"], as_of=snap["seq"])["text"].endswith("500 on bad input")
    fork(db, "retry", from_snapshot="before-fix")
    assert visible(db, "retry", fact["id"])["text"] == "the API returns 500 on bad input"
    with pytest.raises(RecordError, match="all digits"), db.transaction() as conn:
        snapshots.create_snapshot(conn, "123", "main")


# --- diff ------------------------------------------------------------------------------


def test_diff_reports_added_changed_invalidated_both_sides_and_conflicts(db):
    shared = put(db, "cache TTL is 60s", fact_key="cache ttl")
    doomed = put(db, "uses redis 6", fact_key="redis version")
    both = put(db, "retries: 3", fact_key="retries")
    fork(db, "agent-a")
    added = put(db, "timeouts are 5s", "agent-a", fact_key="timeouts")
    update(db, shared["id"], "agent-a", text="cache TTL is 120s")
    with db.transaction() as conn:
        Records.delete(conn, doomed["id"], branch="agent-a")
    update(db, both["id"], "agent-a", text="retries: 5")
    update(db, both["id"], "main", text="retries: 2")
    target_only = put(db, "timeouts are 30s", "main", fact_key="timeouts")
    diff = compute_diff(db.reader(), "agent-a", "main")
    src = {c.id: c.change for c in diff.source_changes}
    assert src == {added["id"]: "added", shared["id"]: "changed", doomed["id"]: "invalidated", both["id"]: "changed"}
    assert {c.id: c.change for c in diff.target_changes} == {both["id"]: "changed", target_only["id"]: "added"}
    kinds = sorted((c.type, c.source.id, c.target.id) for c in diff.conflicts)
    assert kinds == sorted([("record", both["id"], both["id"]), ("fact_key", added["id"], target_only["id"])])
    assert diff.base.startswith("main@")
    counts = diff.counts()
    assert counts["source_added"] == 1 and counts["source_invalidated"] == 1 and counts["conflicts"] == 2


def test_identical_changes_on_both_sides_are_not_conflicts(db):
    fact = put(db, "python 3.11", fact_key="python")
    fork(db, "b")
    update(db, fact["id"], "b", text="python 3.12")
    update(db, fact["id"], "main", text="python 3.12")
    diff = compute_diff(db.reader(), "b", "main")
    assert not diff.conflicts and not diff.source_changes


def test_repeated_merges_neither_reapply_nor_falsely_conflict(db):
    fact = put(db, "v1")
    fork(db, "b")
    update(db, fact["id"], "b", text="v2 from b")
    engine = MergeEngine(db)
    first = engine.merge("b", "main", "auto")
    assert [m["id"] for m in first["merged"]] == [fact["id"]]
    assert registry.get_branch(db.reader(), "b")["status"] == "merged"
    assert not compute_diff(db.reader(), "b", "main").source_changes
    update(db, fact["id"], "main", text="v3 on main")  # main moves on; b did not touch it since
    diff = compute_diff(db.reader(), "b", "main")
    assert not diff.conflicts and not diff.source_changes and len(diff.target_changes) == 1
    assert engine.merge("b", "main", "auto")["merged"] == []
    assert visible(db, "main", fact["id"])["text"] == "v3 on main"
    # and back the other way: main's change reaches b without a conflict
    back = engine.merge("main", "b", "auto")
    assert [m["id"] for m in back["merged"]] == [fact["id"]] and not back["conflicts"]
    assert visible(db, "b", fact["id"])["text"] == "v3 on main"


# --- merge strategies -------------------------------------------------------------------


def _conflicting(db):
    base = put(db, "status code for bad input is 500", fact_key="bad input status", confidence=0.8)
    fork(db, "a")
    update(db, base["id"], "a", text="status code for bad input is 400", confidence=0.85)
    update(db, base["id"], "main", text="status code for bad input is 422", confidence=0.8)
    clean = put(db, "validation lives in api/schemas.py", "a", fact_key="validation location")
    return base, clean


def test_auto_without_judge_applies_clean_changes_and_leaves_conflicts_open(db):
    base, clean = _conflicting(db)
    result = MergeEngine(db).merge("a", "main", "auto", actor="tester")
    assert [m["id"] for m in result["merged"]] == [clean["id"]]
    assert result["open_conflicts"] == 1 and result["conflicts"][0]["decided_by"] == "none"
    assert visible(db, "main", base["id"])["text"].endswith("422")
    assert not result["source_marked_merged"]  # an open conflict keeps the branch active
    history = MergeEngine(db).merge("a", "main", "auto", resolutions={base["id"]: "source"})
    assert history["conflicts"][0]["decided_by"] == "manual"
    assert visible(db, "main", base["id"])["text"].endswith("400")
    rows = db.reader().execute("SELECT strategy, actor, items_merged FROM merges ORDER BY created_at").fetchall()
    assert [r["strategy"] for r in rows] == ["auto", "auto"] and rows[0]["actor"] == "tester"
    assert json.loads(rows[0]["items_merged"])[0]["id"] == clean["id"]


def test_accept_and_skip(db):
    base, clean = _conflicting(db)
    fork(db, "a-copy", parent="a")
    skipped = MergeEngine(db).merge("a", "main", "skip")
    assert visible(db, "main", base["id"])["text"].endswith("422")
    assert {m["id"] for m in skipped["merged"]} == {clean["id"]}
    assert skipped["conflicts"][0]["resolution"] == "target"
    accepted = MergeEngine(db).merge("a-copy", "main", "accept")
    assert visible(db, "main", base["id"])["text"].endswith("400")
    assert accepted["conflicts"][0]["resolution"] == "source"


def test_rules_let_a_far_more_confident_fact_win(db):
    base = put(db, "deploys on fridays", fact_key="deploy day", confidence=0.6)
    fork(db, "a")
    update(db, base["id"], "a", text="never deploy on fridays", confidence=0.95)
    update(db, base["id"], "main", text="deploys on thursdays", confidence=0.65)
    result = MergeEngine(db).merge("a", "main", "auto")
    assert result["conflicts"][0]["decided_by"] == "rules" and result["conflicts"][0]["resolution"] == "source"
    assert visible(db, "main", base["id"])["text"] == "never deploy on fridays"


def test_fact_key_conflict_left_open_becomes_a_disputed_fact_and_an_open_conflict(db):
    fork(db, "a")
    theirs = put(db, "the bug is in the serializer", "a", fact_key="status bug cause")
    ours = put(db, "the bug is in the router", "main", fact_key="status bug cause")
    result = MergeEngine(db).merge("a", "main", "auto")
    assert result["open_conflicts"] == 1
    disputed = visible(db, "main", theirs["id"])
    assert disputed["status"] == "disputed"
    row = db.reader().execute("SELECT * FROM conflicts").fetchone()
    assert (row["existing_id"], row["candidate_id"], row["status"]) == (ours["id"], theirs["id"], "open")
    assert result["conflicts"][0]["conflict_id"] == str(row["id"])


def test_cherry_pick_brings_only_listed_ids_and_supersedes_a_conflicting_fact(db):
    fork(db, "a")
    pick = put(db, "the bug is in the serializer", "a", fact_key="status bug cause")
    leave = put(db, "tests are slow", "a", fact_key="test speed")
    ours = put(db, "the bug is in the router", "main", fact_key="status bug cause")
    with pytest.raises(RecordError, match="nothing to pick"):
        MergeEngine(db).merge("a", "main", "cherry_pick", items=[pick["id"], "nope"])
    result = MergeEngine(db).merge("a", "main", "cherry_pick", items=[pick["id"]])
    assert {m["id"]: m["action"] for m in result["merged"]} == {pick["id"]: "added", ours["id"]: "superseded"}
    assert result["rejected"] == [{"id": leave["id"], "kind": "fact", "reason": "not picked"}]
    assert visible(db, "main", pick["id"])["status"] == "active"
    assert visible(db, "main", ours["id"])["status"] == "superseded"
    assert visible(db, "main", leave["id"]) is None and visible(db, "a", leave["id"])


def test_squash_consolidates_facts_per_subject_and_leaves_other_kinds(db):
    fork(db, "a")
    f1 = put(db, "login uses JWT", "a", fact_key="auth", confidence=0.8)
    f2 = put(db, "login uses JWT with 15 minute expiry", "a", fact_key="auth", confidence=0.9)
    f3 = put(db, "db is postgres", "a", fact_key="database")
    obs = put(db, "ran pytest", "a", kind="observation")
    result = MergeEngine(db).merge("a", "main", "squash")
    squashed = [m for m in result["merged"] if m["action"] == "squashed"]
    assert len(squashed) == 1 and set(squashed[0]["squashed_from"]) == {f1["id"], f2["id"]}
    assert squashed[0]["text"] == "login uses JWT with 15 minute expiry"  # newest, without a judge
    live, _ = Records.query(db.reader(), resolve_view(db.reader(), "main"), filters={"kind": "fact"})
    assert sorted(r["text"] for r in live) == ["db is postgres", "login uses JWT with 15 minute expiry"]
    assert max(r["confidence"] or 0 for r in live) == 0.9
    assert {r["id"] for r in result["rejected"]} == {obs["id"]}
    assert visible(db, "main", f3["id"])


def test_merge_is_atomic(db, monkeypatch):
    fork(db, "a")
    ids = [put(db, f"fact {i}", "a")["id"] for i in range(3)]
    calls = {"n": 0}
    original = Records.copy_version

    def failing(conn, source, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("disk full")
        return original(conn, source, **kwargs)

    monkeypatch.setattr(Records, "copy_version", staticmethod(failing))
    with pytest.raises(RuntimeError):
        MergeEngine(db).merge("a", "main", "accept")
    assert all(visible(db, "main", i) is None for i in ids)
    assert db.reader().execute("SELECT count(*) FROM merges").fetchone()[0] == 0
    assert registry.get_branch(db.reader(), "a")["status"] == "active"


def test_dry_run_writes_nothing(db):
    fork(db, "a")
    fact = put(db, "x", "a")
    plan = MergeEngine(db).merge("a", "main", "accept", dry_run=True)
    assert plan["dry_run"] and plan["merged"][0]["id"] == fact["id"] and plan["id"] is None
    assert visible(db, "main", fact["id"]) is None


def test_a_timestamp_never_lands_inside_a_merge(db):
    fork(db, "a")
    ids = [put(db, f"fact {i}", "a")["id"] for i in range(4)]
    before = Records.head_seq(db.reader())
    result = MergeEngine(db).merge("a", "main", "accept")
    seqs = sorted(m["target_seq"] for m in result["merged"])
    assert len(seqs) == 4
    rows = db.reader().execute(
        f"SELECT created_at FROM records WHERE seq IN ({','.join('?' * len(seqs))})", seqs
    ).fetchall()
    assert len({r[0] for r in rows}) == 1  # one transaction, one time
    written_at = rows[0][0]
    # the moment the merge wrote sees all of it; the instant before, none of it
    assert all(visible(db, "main", i, as_of=written_at) for i in ids)
    assert resolve_view(db.reader(), "main", written_at).as_of == seqs[-1]
    assert all(visible(db, "main", i, as_of=written_at - 1e-4) is None for i in ids)
    assert resolve_view(db.reader(), "main", written_at - 1e-4).as_of == before


# --- archived branches ------------------------------------------------------------------


def archive(db, name, status="archived"):
    with db.transaction() as conn:
        registry.set_status(conn, name, status)


def test_an_archived_branch_is_read_only_until_restored(db):
    fork(db, "exp")
    fact = put(db, "kept as it was", "exp")
    archive(db, "exp")
    def delete():
        with db.transaction() as conn:
            Records.delete(conn, fact["id"], branch="exp")

    for write in (lambda: put(db, "new", "exp"), lambda: update(db, fact["id"], "exp", text="changed"), delete):
        with pytest.raises(RecordError) as refused:
            write()
        assert (refused.value.code, refused.value.status) == ("branch_archived", 409)
        assert "restore" in str(refused.value)
    # still readable, and mergeable from, but not into
    assert visible(db, "exp", fact["id"])["text"] == "kept as it was"
    put(db, "on main", "main")
    for dry_run in (True, False):
        with pytest.raises(RecordError) as refused:
            MergeEngine(db).merge("main", "exp", "accept", dry_run=dry_run)
        assert refused.value.code == "branch_archived"
    assert MergeEngine(db).merge("exp", "main", "accept")["merged"][0]["id"] == fact["id"]
    with pytest.raises(RecordError, match="archived"), db.transaction() as conn:
        sessions.switch_session_branch(conn, "s1", "exp")
    archive(db, "exp", "active")
    assert update(db, fact["id"], "exp", text="changed")["text"] == "changed"
    with db.transaction() as conn:
        assert sessions.switch_session_branch(conn, "s1", "exp")["branch"] == "exp"


def test_captured_events_of_an_archived_branch_go_to_its_nearest_writable_ancestor(db, caplog):
    from types import SimpleNamespace

    from memory_anchor.worker.capture.inbox import InboxEvent
    from memory_anchor.worker.pipeline.sessions import Sessions

    fork(db, "a")
    fork(db, "a/b", parent="a")
    tracker = Sessions(SimpleNamespace(settings=Settings(), shared_store=False, project_for_cwd=project_for_cwd))

    def write_branch(session_id: str, header: str | None = None) -> str:
        event = InboxEvent(1, "PostToolUse", session_id, {"cwd": "/tmp/p"}, 0, header, None, 0.0)
        with db.transaction() as conn:
            return tracker.touch(conn, event)["branch"]

    assert write_branch("s1", "a/b") == "a/b"
    archive(db, "a/b")
    archive(db, "a")
    with caplog.at_level("WARNING", logger="memory_anchor.worker.pipeline.sessions"):
        assert write_branch("s1") == "main"  # a known session
        assert write_branch("s2", "a/b") == "main"  # a new one sent there by MEMORY_ANCHOR_BRANCH
    assert "archived" in caplog.text and "'main'" in caplog.text
    archive(db, "a", "active")
    assert write_branch("s1") == "a"
    archive(db, "a/b", "active")
    assert write_branch("s1") == "a/b"  # the session's own branch again once restored


# --- deletion ---------------------------------------------------------------------------


def test_deleting_a_branch_keeps_what_was_merged_from_it(db):
    fork(db, "a")
    kept = put(db, "merged fact", "a")
    MergeEngine(db).merge("a", "main", "accept")
    fork(db, "a/child", parent="a")
    gone = put(db, "unmerged fact", "a")
    with pytest.raises(RecordError, match="child branches"), db.transaction() as conn:
        registry.delete_branch(conn, "a")
    with db.transaction() as conn:
        registry.delete_branch(conn, "a/child")
        result = registry.delete_branch(conn, "a")
    assert result["deleted_versions"] == 2
    assert visible(db, "main", kept["id"])["text"] == "merged fact"
    assert db.reader().execute("SELECT count(*) FROM records WHERE id = ?", (gone["id"],)).fetchone()[0] == 0
    if dialect_of(db.reader()) == SQLITE:
        fts = db.reader().execute("SELECT rowid FROM records_fts WHERE records_fts MATCH 'unmerged'").fetchall()
    else:  # the keyword postings leave with their records (postgres/schema.py 0009)
        fts = db.reader().execute("SELECT seq FROM record_postings WHERE term = 'unmerg'").fetchall()
    assert fts == []
    fork(db, "a")  # the name can be used again, and starts empty
    assert visible(db, "a", gone["id"]) is None and visible(db, "a", kept["id"])


# --- which branch a session writes to ---------------------------------------------------


def test_session_branch_precedence(db, tmp_path):
    settings = Settings(default_branch="main")
    with db.transaction() as conn:
        assert sessions.branch_for_session(conn, "s1", {}, None, settings) == "main"
        # env header creates the branch and wins over the default
        assert sessions.branch_for_session(conn, "s2", {}, "agent-A", settings) == "agent-A"
        assert registry.get_branch(conn, "agent-A")["parent"] == "main"
        # an invalid header never loses the event: next rule
        assert sessions.branch_for_session(conn, "s3", {}, "bad name!", settings) == "main"
        # explicit switch beats the header
        sessions.switch_session_branch(conn, "s2", "exp", create=True)
        assert sessions.branch_for_session(conn, "s2", {}, "agent-A", settings) == "exp"
        with pytest.raises(NotFound):
            sessions.switch_session_branch(conn, "s2", "missing")
    # a forked session (resume under a new id whose transcript carries the parent's entries)
    transcript = tmp_path / "forked.jsonl"
    transcript.write_text(
        json.dumps({"type": "user", "sessionId": "s2"}) + "\n" + json.dumps({"type": "user", "sessionId": "s9"}) + "\n"
    )
    payload = {"hook_event_name": "SessionStart", "source": "resume", "transcript_path": str(transcript)}
    with db.transaction() as conn:
        name = sessions.branch_for_session(conn, "s9", payload, None, settings)
        assert name == "fork/s9" and registry.get_branch(conn, name)["parent"] == "exp"
        # a plain resume of a known session keeps its branch
        assert sessions.branch_for_session(conn, "s9", payload, None, settings) == "fork/s9"
        off = Settings(auto_branch_on_fork=False)
        assert sessions.branch_for_session(conn, "s10", {**payload, "parent_session_id": "s2"}, None, off) == "main"


@pytest.mark.parametrize("session_id", ["ú×üü𷙍", "a..b", "...", "x" * 300, "-lead", "日本"])
def test_any_session_id_forks_onto_a_valid_branch(db, session_id):
    with db.transaction() as conn:
        registry.ensure_branch(conn, "main")
        name = sessions.branch_for_session(conn, session_id, {"hook_event_name": "SessionStart", "source": "fork",
                                                              "parent_session_id": "parent"}, None, Settings())  # fmt: skip
        assert name.startswith("fork/") and validate_branch_name(name) == name
        assert registry.get_branch(conn, name)["parent"] == "main"


def test_context_section_names_the_active_branch_and_the_others(db):
    conn = db.reader()
    assert branch_section(ContextRequest(project="p"), conn, None) is None  # main only: say nothing
    fork(db, "agent-A", description="fix the status code bug")
    fork(db, "agent-B")
    section = branch_section(ContextRequest(project="p", branch="agent-A"), db.reader(), None)
    text = "\n".join(section.lines)
    assert "Active branch: agent-A" in text and "agent-B" in text and "fix the status code bug" in text
    on_main = "\n".join(branch_section(ContextRequest(project="p"), db.reader(), None).lines)
    assert "Active branch: main" in on_main and "agent-A" in on_main


# --- the Claude judge (fake Messages API) -----------------------------------------------


def test_claude_judge_decides_a_conflict(db, local_db, fake_anthropic):
    base = put(db, "bad input gives 500", fact_key="bad input status")
    fork(db, "a")
    update(db, base["id"], "a", text="bad input gives 400")
    update(db, base["id"], "main", text="bad input gives 422")
    fake_anthropic.enqueue(json_reply({"keep": "source", "reason": "400 is what the tests assert"}))
    judge = ClaudeJudge(ClaudeClient(Settings(), local_db))
    result = MergeEngine(db, judge).merge("a", "main", "auto")
    assert result["conflicts"][0]["decided_by"] == "llm_judge" and result["merged_by"] == "llm_judge"
    assert visible(db, "main", base["id"])["text"] == "bad input gives 400"
    sent = json.dumps(fake_anthropic.messages()[-1])
    assert "bad input gives 422" in sent and "bad input gives 400" in sent


def test_claude_judge_nonsense_reply_leaves_the_conflict_open(db, local_db, fake_anthropic):
    base = put(db, "x", fact_key="k")
    fork(db, "a")
    update(db, base["id"], "a", text="y")
    update(db, base["id"], "main", text="z")
    fake_anthropic.enqueue(json_reply({"verdict": "dunno"}))
    result = MergeEngine(db, ClaudeJudge(ClaudeClient(Settings(), local_db))).merge("a", "main", "auto")
    assert fake_anthropic.messages(), "the judge was not asked"
    assert result["open_conflicts"] == 1 and visible(db, "main", base["id"])["text"] == "z"
