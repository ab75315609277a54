"""What the user said once reaches Claude, marked as such; a choice among Claude's options does not.

An instruction in a form that is usually, not always, a lasting one ("make sure …", "be sure to
also …") waits for confirmation. Kept in Approvals, it reaches nobody; shown as a plain rule, it
would claim more than memory knows. So the briefing shows it in the user's own words, with the day
they said it, under a heading that says it is not yet confirmed. The user saying it again in
another session, or a person approving it, makes it a standing rule.
"""

from __future__ import annotations

import time

import pytest

from memory_anchor.schemas.memory_model import Decision
from memory_anchor.worker.memory.extraction import Material

DAY = 86400


@pytest.fixture
def model(store_db):
    from memory_anchor.worker.memory import MemoryModel

    return MemoryModel(store_db)


def _briefing(model, project="/p") -> str:
    from memory_anchor.schemas.settings import Settings
    from memory_anchor.worker.context import ContextRequest, build_context
    from memory_anchor.worker.context.model import ContextServices

    services = ContextServices(settings=Settings(), reader=model.db.reader, memory=model)
    request = ContextRequest(project=project, services=services, budget=3000)
    return build_context(request, model.db.reader()).text


def _section(text: str, starts: str) -> list[str]:
    lines, inside = [], False
    for line in text.splitlines():
        if line.startswith("## "):
            inside = line[3:].startswith(starts)
        elif inside and line.startswith("- "):
            lines.append(line)
    return lines


def _say(model, prompt: str, *, session: str, at: float, reply: bool = False):
    return model.extract(Material(source="prompt", text=prompt, project="/p", session_id=session, source_id=f"{session}:{at}",
                                  observed_at=at, answers_a_question=reply, local_only=True))  # fmt: skip


def test_an_instruction_said_once_is_briefed_in_the_users_words_with_its_date(model):
    said = time.time() - 3 * DAY
    _say(model, "make sure that the release script updates the changelog if needed", session="s1", at=said)
    text = _briefing(model)
    [line] = _section(text, "Instructions the user gave once")
    day = time.strftime("%Y-%m-%d", time.gmtime(said))
    assert line.startswith('- "make sure that the release script updates the changelog if needed" (said ' + day)
    assert _section(text, "Standing rules") == []  # not a confirmed rule
    assert len(text) <= 10_000


def test_a_reply_that_picks_an_option_waits_in_approvals_and_is_not_briefed(model):
    _say(model, "lets use createdAt", session="s1", at=time.time(), reply=True)
    assert "createdAt" not in _briefing(model)
    [approval] = model.approvals.list()
    assert approval["payload"]["text"] == "lets use createdAt"


def test_said_again_in_a_later_session_it_is_a_standing_rule(model):
    first = time.time() - 2 * DAY
    _say(model, "be sure to also use the shared fixtures", session="s1", at=first)
    # Claude Code copies the conversation into a resumed session's file: same words, same time. Not a repeat.
    _say(model, "be sure to also use the shared fixtures", session="s1-resumed", at=first)
    assert _section(_briefing(model), "Standing rules") == []
    _say(model, "be sure to also use the shared fixtures", session="s2", at=first + DAY)
    text = _briefing(model)
    [rule] = _section(text, "Standing rules")
    assert "be sure to also use the shared fixtures" in rule
    assert _section(text, "Instructions the user gave once") == []
    [approval] = model.approvals.list(status=None)
    assert (approval["status"], approval["decided_by"]) == ("approved", "user:said-again")


def test_approved_it_is_a_standing_rule_and_rejected_it_is_gone(model):
    _say(model, "make sure the migration script backs up the database first", session="s1", at=time.time())
    _say(model, "be sure to keep the API docs in English", session="s1", at=time.time())
    keep, drop = model.approvals.list()
    model.approvals.approve(keep["id"], Decision(actor="alice"))
    model.approvals.reject(drop["id"], Decision(actor="alice"))
    text = _briefing(model)
    assert any("backs up the database" in line for line in _section(text, "Standing rules"))
    assert "API docs" not in text


def test_live_capture_briefs_the_users_instruction_and_nothing_else_they_did_not_say(shared_worker):
    """Hook payloads as Claude Code posts them: another plugin's text in tags, a one-off go-ahead, a
    heading-like fragment and an instruction, in one session; the next briefing shows only the last."""
    import uuid

    sid = f"s-{uuid.uuid4().hex[:8]}"
    cwd = f"/tmp/said-once-{sid}"
    base = {"session_id": sid, "transcript_path": f"/tmp/{sid}.jsonl", "cwd": cwd}
    prompts = [
        "<session-start-hook><EXTREMELY_IMPORTANT>\nYou have superpowers.\n\n**For all other skills, use the 'Skill' tool:**",
        "lets move to phase 4",
        "## Always keep the changelog",
        "make sure that the release script updates the changelog if needed",
    ]  # fmt: skip
    events = [{**base, "hook_event_name": "SessionStart", "source": "startup"}]
    events += [{**base, "hook_event_name": "UserPromptSubmit", "prompt": p, "permission_mode": "default"} for p in prompts]
    events += [{**base, "hook_event_name": "Stop", "stop_hook_active": False, "last_assistant_message": "Noted."},
               {**base, "hook_event_name": "SessionEnd", "reason": "other"}]  # fmt: skip
    for event in events:
        status, _ = shared_worker.request("POST", "/api/v1/events", event)
        assert status == 202
    shared_worker.wait_idle()
    text = shared_worker.get(f"/api/v1/context?cwd={cwd}&source=startup")["context"]
    shown = _section(text, "Instructions the user gave once") + _section(text, "Standing rules")
    assert len(shown) == 1 and "release script updates the changelog" in shown[0]
    assert "Skill" not in text and "superpowers" not in text
    # what the session asked is the user's first prompt, not the plugin's text (and not an instruction)
    assert "asked: lets move to phase 4" in _section_text(text, "Last sessions")


def _section_text(text: str, starts: str) -> str:
    return text[text.index(f"## {starts}"):]
