"""An imported session's Stops in one batch: the summary is written once, by the last of them, and
each Stop still counts (its next steps open, the prompt after it knows whether it asked)."""

from __future__ import annotations

import time
import uuid

START = time.time() - 3 * 86400


def _turns(sid: str, cwd: str, turns: list[tuple[str, str]]) -> list[dict]:
    """History events of one session: per turn a prompt and the Stop with Claude's last message."""
    base = {"session_id": sid, "transcript_path": f"/tmp/{sid}.jsonl", "cwd": cwd}
    events = [{"event_id": f"{sid}-start", "at": START, "payload": {**base, "hook_event_name": "SessionStart", "source": "startup"}}]
    for n, (prompt, reply) in enumerate(turns):
        at = START + 60 * (n + 1)
        events.append({"event_id": f"{sid}-p{n}", "at": at,
                       "payload": {**base, "hook_event_name": "UserPromptSubmit", "prompt": prompt}})  # fmt: skip
        events.append({"event_id": f"{sid}-s{n}", "at": at + 30,
                       "payload": {**base, "hook_event_name": "Stop", "stop_hook_active": False,
                                   "last_assistant_message": reply, "assistant_messages": [reply]}})  # fmt: skip
    return events


def test_an_imported_sessions_stops_write_one_summary_and_each_still_counts(worker):
    sid = f"s-{uuid.uuid4().hex[:8]}"
    cwd = f"/tmp/superseded-{sid}"
    turns = [
        ("the sidebar looks cramped on small screens", "I can use layout A (tabs) or layout B (a drawer). Which one do you want?"),
        ("lets use layout B", "Layout B is in place.\n\nNext steps:\n- Add a swipe gesture to open the drawer"),
        ("thanks, that's all for today", "Glad it helps. The drawer layout is done."),
    ]
    outcome = worker.post("/api/v1/events/history", {"events": _turns(sid, cwd, turns)})
    assert outcome["accepted"] == 7
    worker.wait_idle()

    [summary] = worker.get(f"/api/v1/summaries?limit=10&session_id={sid}")["results"]
    # One version, the last Stop's: it read all three prompts and the last message.
    assert [v["version"] for v in worker.get(f"/api/v1/memories/{summary['id']}/history")["results"]] == [1]
    assert summary["data"]["request"].endswith("| then: lets use layout B | thanks, that's all for today")
    assert summary["data"]["asks_user"] is False
    # The first Stop's version was never stored, yet the reply to its question is known as one.
    asked = {p["memory"]: bool(p["data"].get("answers_a_question"))
             for p in worker.get(f"/api/v1/prompts?limit=10&session_id={sid}")["results"]}  # fmt: skip
    assert asked == {turns[0][0]: False, turns[1][0]: True, turns[2][0]: False}


def test_a_versions_observation_draft_is_made_once_and_again_after_a_purge(tmp_path):
    """Every Stop re-reads the session's observations; each stored version's draft is kept, until a
    purge (the one write that changes a stored version) makes them all be read afresh, or the
    worker hands memory back after a burst."""
    from memory_anchor.worker.pipeline.compress.local import as_observation
    from memory_anchor.worker.pipeline.sessions import Sessions
    from memory_anchor.worker.store.db import Database
    from memory_anchor.worker.store.purge import purge_record_text
    from memory_anchor.worker.store.records import Records

    db = Database(tmp_path / "memory.sqlite3")
    try:
        with db.transaction() as conn:
            stored = [Records.put(conn, "observation", f"Edited app{n}.py", branch="main", actor="t", reason="captured",
                                  project="/p", session_id="s", data={"title": f"Edited app{n}.py", "type": "change",
                                  "files_modified": [f"app{n}.py"]}) for n in range(3)]  # fmt: skip
            fact = Records.put(conn, "fact", "The zebracornquartz cluster runs previews", branch="main", actor="t",
                               reason="ADD", project="/p")  # fmt: skip
        sessions = Sessions(services=None)
        first = sessions._observation_drafts(stored)
        assert first == [as_observation(r) for r in stored]
        assert all(a is b for a, b in zip(sessions._observation_drafts(stored), first))  # kept, not made again
        sessions.release_memory()  # once idle after a burst (Services.hand_back_memory): made again when next read
        again = sessions._observation_drafts(stored)
        assert again == first and not any(a is b for a, b in zip(again, first))
        with db.transaction() as conn:
            purge_record_text(conn, fact["id"], "zebracornquartz")
        renamed = [{**r, "data": {**r["data"], "title": "Edited [purged]"}} for r in stored]  # what a purge could leave
        assert [d.title for d in sessions._observation_drafts(renamed)] == ["Edited [purged]"] * 3
    finally:
        db.close()
