"""Per-prompt recall answers a question about the project's past from what was said, in other
words too, and stays quiet when memory holds nothing on the subject."""

from __future__ import annotations

import json
from pathlib import Path

REASON = ("We went with SiYuan rather than Obsidian or Logseq: it has a visual canvas, forms, "
          "bidirectional links and a full HTTP API, and it can be self-hosted.")  # fmt: skip
PHONE = ("For working from the phone we use the Happy app as the mobile client for Claude Code "
         "instead of an SSH terminal; it syncs sessions with end-to-end encryption.")  # fmt: skip


def _entry(kind: str, text: str, n: int) -> dict:
    content = text if kind == "user" else [{"type": "text", "text": text}]
    return {"type": kind, "uuid": f"u{n}", "sessionId": "s-past", "timestamp": f"2025-11-29T10:00:{n:02d}Z",
            "message": {"id": f"m{n}", "role": kind, "content": content}}  # fmt: skip


def test_recall_answers_from_earlier_replies_and_is_quiet_without_an_answer(worker, tmp_path: Path) -> None:
    project = tmp_path / "notes-app"
    project.mkdir()
    transcript = tmp_path / "past.jsonl"
    turns = [_entry("user", "which notes tool should we build on?", 1), _entry("assistant", REASON, 2),
             _entry("user", "and how do i use it away from my desk?", 3), _entry("assistant", PHONE, 4)]  # fmt: skip
    transcript.write_text("\n".join(json.dumps(t) for t in turns) + "\n")
    base = {"session_id": "s-past", "cwd": str(project), "transcript_path": str(transcript)}
    for n, prompt, last in ((1, "which notes tool should we build on?", REASON), (3, "and how do i use it away from my desk?", PHONE)):
        worker.post("/api/v1/events", {**base, "hook_event_name": "UserPromptSubmit", "prompt": prompt}, expect=202)
        worker.post("/api/v1/events", {**base, "hook_event_name": "Stop", "stop_hook_active": False,
                                       "last_assistant_message": last}, expect=202)  # fmt: skip
    worker.wait_idle()

    def recall(prompt: str) -> str:
        return worker.post("/api/v1/recall", {"prompt": prompt, "cwd": str(project), "session_id": "s-now"})["context"]

    assert "Logseq" in recall("why did we choose siyuan over logseq for the notes?")
    assert "Happy app" in recall("what do we use to work from a mobile device?")  # other words than were said
    assert recall("how did we configure the kubernetes ingress for the staging cluster?") == ""
    assert recall("which kafka topics does the billing consumer read from?") == ""
