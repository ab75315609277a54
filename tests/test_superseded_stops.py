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
