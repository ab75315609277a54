"""Claude Code sessions in the store (memory_anchor/worker/pipeline/sessions.py) on each backend: the
session row a hook event creates and refreshes, its end, and its summary's versions."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from memory_anchor.core.projects import project_for_cwd
from memory_anchor.schemas.observations import SessionSummaryDraft
from memory_anchor.schemas.settings import Settings
from memory_anchor.worker.capture.inbox import InboxEvent
from memory_anchor.worker.codebase.service import Codebase
from memory_anchor.worker.pipeline.sessions import Sessions, summary_id
from memory_anchor.worker.store.records import Records, resolve_view


@pytest.fixture
def tracker():
    return Sessions(SimpleNamespace(settings=Settings(), shared_store=False, project_for_cwd=project_for_cwd,
                                    codebase=Codebase()))  # fmt: skip


def event(name: str, session_id: str = "s1", **payload) -> InboxEvent:
    return InboxEvent(1, name, session_id, payload, 0, None, "codex", 1_000.0)


def test_a_session_row_is_created_once_then_counts_prompts_and_tools(store_db, tracker, tmp_path):
    with store_db.transaction() as conn:
        first = tracker.touch(conn, event("SessionStart", cwd=str(tmp_path), source="startup"))
    assert (first["project"], first["branch"], first["agent_id"], first["source"]) == (
        str(tmp_path.resolve()), "main", "codex", "startup",
    )  # fmt: skip
    with store_db.transaction() as conn:
        for name in ("UserPromptSubmit", "PostToolUse", "PostToolUse", "Stop"):
            session = tracker.touch(conn, event(name))
    assert (session["prompt_count"], session["tool_count"], session["status"]) == (1, 2, "active")
    assert session["started_at"] == first["started_at"] and session["last_seen_at"] >= first["last_seen_at"]
    with store_db.transaction() as conn:
        tracker.end(conn, event("SessionEnd", reason="logout"))
    row = store_db.reader().execute("SELECT status, end_reason, ended_at FROM sessions WHERE session_id = 's1'").fetchone()
    assert (row["status"], row["end_reason"]) == ("ended", "logout") and row["ended_at"] is not None


def test_each_summary_of_a_session_is_the_next_version_of_one_record(store_db, tracker):
    with store_db.transaction() as conn:
        session = tracker.touch(conn, event("SessionStart"))
        tracker.write_summary(conn, event("Stop"), session, SessionSummaryDraft(request="fix the login test", text="first"))
    with store_db.transaction() as conn:
        latest = tracker.write_summary(conn, event("Stop"), session, SessionSummaryDraft(completed="fixed it", text="second"))
    assert latest["id"] == summary_id("s1") and latest["version"] == 2
    conn = store_db.reader()
    history = Records.history(conn, summary_id("s1"), resolve_view(conn, "main"))
    assert [v["text"] for v in history] == ["first", "second"]
