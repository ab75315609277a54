"""What the user said once reaches Claude, marked as such; a choice among Claude's options does not.

An instruction in a form that is usually, not always, a lasting one ("make sure …", "be sure to
also …") waits for confirmation. Kept in Approvals, it reaches nobody; shown as a plain rule, it
would claim more than memory knows. So the briefing shows it in the user's own words, with the day
they said it, under a heading that says it is not yet confirmed. The user saying it again in
another session, or a person approving it, makes it a standing rule.
"""

from __future__ import annotations

import re
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


def _post(worker, cwd: str, session: str, *events: dict) -> None:
    """Hook payloads of one session as Claude Code posts them, then the pipeline drained."""
    base = {"session_id": session, "transcript_path": f"/tmp/{session}.jsonl", "cwd": cwd}
    for event in events:
        status, _ = worker.request("POST", "/api/v1/events", {**base, **event})
        assert status == 202
    worker.wait_idle()


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


def test_many_instructions_said_once_are_briefed_freshest_first_as_far_as_their_share_holds(model):
    """A person states a dozen and more over a project's life; the oldest are as much theirs as the newest."""
    said = ["make sure that the release script updates the changelog", "be sure to also run the linter on migrations",
            "make sure that the deploy script warms the cache", "be sure to also keep the API docs in English",
            "make sure that the seed data stays small", "be sure to also tag images with the git sha",
            "be sure to also bump the chart version", "be sure to also log the request id",
            "make sure that feature flags default to off", "be sure to also pin the node version",
            "make sure that the CLI prints help on bad flags", "be sure to also document new env vars",
            "make sure that cache keys carry the schema version", "be sure to also add the ticket number to commit messages",
            "make sure that the backup job skips temp tables"]  # fmt: skip
    now = time.time()
    for n, prompt in enumerate(said):
        _say(model, prompt, session=f"s{n}", at=now - (len(said) - n) * DAY)
    text = _briefing(model)
    briefed = [line.split('"')[1] for line in _section(text, "Instructions the user gave once")]
    assert len(briefed) >= 13  # more than the freshest dozen
    assert briefed == said[::-1][: len(briefed)]
    assert len(text) <= 10_000


def test_a_reply_that_picks_an_option_is_no_instruction_but_claude_asks_the_user_about_it_once(model):
    said = time.time()
    _say(model, "lets use createdAt", session="s1", at=said, reply=True)
    text = _briefing(model)
    assert _section(text, "Instructions the user gave once") == [] and _section(text, "Standing rules") == []
    [ask] = _section(text, "Possible decisions to ask the user about once")
    assert ask.startswith('- "lets use createdAt" (their reply to your options, ' + time.strftime("%Y-%m-%d", time.gmtime(said)))
    [approval] = model.approvals.list()
    assert approval["payload"]["text"] == "lets use createdAt"


def test_only_the_latest_replies_within_two_weeks_of_the_newest_are_asked_about(model):
    from memory_anchor.worker.memory.ask_once import ASK_DAYS, ASK_ONCE

    now = time.time()
    _say(model, "lets keep the old importer for the archive", session="s0", at=now - (ASK_DAYS + 1) * DAY, reply=True)
    choices = ["lets use createdAt", "lets use postgres for the queue", "lets use ledger as the name", "lets use pnpm"]
    for n, choice in enumerate(choices):
        _say(model, choice, session=f"s{n + 1}", at=now - (len(choices) - n) * 60, reply=True)
    asked = _section(_briefing(model), "Possible decisions to ask the user about once")
    assert [line.split('"')[1] for line in asked] == choices[::-1][:ASK_ONCE]


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


def test_claude_asks_once_and_the_users_answer_settles_a_reply_to_its_options(shared_worker, tmp_path):
    """Live capture: a reply that picked among Claude's options is listed for Claude to ask about.
    The record_user_answer tool (the real MCP client) carries the user's answer: it holds, and it is
    a standing decision; an answer the user did not give is refused; "no" drops another one."""
    import asyncio
    import os
    import sys

    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from memory_anchor.core.projects import project_for_cwd
    from tests.conftest import ROOT

    root = tmp_path / "budget"
    root.mkdir()
    cwd, project = str(root), project_for_cwd(str(root))

    def asked(prompt: str, question: str) -> list[dict]:
        return [{"hook_event_name": "UserPromptSubmit", "prompt": prompt, "permission_mode": "default"},
                {"hook_event_name": "Stop", "stop_hook_active": False, "last_assistant_message": question}]  # fmt: skip

    _post(shared_worker, cwd, "s1", {"hook_event_name": "SessionStart", "source": "startup"},
         *asked("how should we name the three sync steps?",
                "Two options: (a) bootstrap, backfill and delta, or (b) initial, rest and catch-up. Which do you prefer?"),
         *asked("I like the names bootstrap, backfill and delta for the 3 steps",
                "Should the loading state be (a) a modal or (b) an inline spinner at the top of the list?"),
         *asked("lets use an inline spinner at the top of the list", "Done: the names and the spinner are in."))  # fmt: skip

    def briefing() -> str:
        return shared_worker.get(f"/api/v1/context?cwd={cwd}&source=startup")["context"]

    text = briefing()
    asks = _section(text, "Possible decisions to ask the user about once")
    assert [line.split('"')[1] for line in asks] == ["lets use an inline spinner at the top of the list",
                                                    "I like the names bootstrap, backfill and delta for the 3 steps"]  # fmt: skip
    assert _section(text, "Standing rules") == [] and _section(text, "Instructions the user gave once") == []
    names, spinner = (re.search(r"fact ([0-9a-f]{8})", line).group(1) for line in asks[::-1])

    # The next session: Claude asks, the user answers.
    _post(shared_worker, cwd, "s2", {"hook_event_name": "SessionStart", "source": "startup"},
         *asked("hi", "Before we start: do the sync step names bootstrap, backfill and delta hold from now on?"),
         {"hook_event_name": "UserPromptSubmit", "prompt": "yes, keep those names for good", "permission_mode": "default"})  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE", "MEMORY_ANCHOR_"))}
    env.update(MEMORY_ANCHOR_DATA_DIR=str(shared_worker.data_dir), CLAUDE_PROJECT_DIR=cwd, CLAUDE_CODE_SESSION_ID="s2",
               PYTHONPATH=str(ROOT))  # fmt: skip

    async def session():
        params = StdioServerParameters(command=sys.executable, args=["-m", "memory_anchor.mcp.server"], env=env, cwd=str(ROOT))
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as client:
                await client.initialize()
                made_up = await client.call_tool("record_user_answer", {"item": f"fact {names}", "holds": True,
                                                                        "user_reply": "always use these names"})  # fmt: skip
                answered = await client.call_tool("record_user_answer", {"item": f"(fact {names})", "holds": True,
                                                                         "user_reply": "Yes, keep those names for good."})  # fmt: skip
                return made_up, answered

    made_up, answered = asyncio.run(session())
    assert made_up.is_error and "not in the user's last 3 prompts of session s2" in made_up.content[0].text
    assert not answered.is_error and answered.content[0].text.startswith(f"fact {names} is active: I like the names")

    # "no" to the other one, given over REST as the tool gives it
    _post(shared_worker, cwd, "s2", {"hook_event_name": "UserPromptSubmit", "prompt": "no, the spinner was only for that screen",
                "permission_mode": "default"})  # fmt: skip
    status, out = shared_worker.request("POST", f"/api/v1/facts/{spinner}/answer",
                                        {"holds": False, "user_words": "the spinner was only for that screen",
                                         "session_id": "s2", "agent_id": "claude-code", "project": project})  # fmt: skip
    assert status == 200 and out["status"] == "rejected"

    text = briefing()
    [rule] = _section(text, "Standing rules")
    assert rule.startswith("- decision: I like the names bootstrap, backfill and delta")
    assert _section(text, "Possible decisions to ask the user about once") == [] and "spinner" not in text.split("## Last sessions")[0]
    decided = {a["record_id"][:8]: (a["status"], a["decided_by"]) for a in shared_worker.get("/api/v1/approvals?status=")["results"]}
    assert decided[names] == ("approved", "user:answered") and decided[spinner] == ("rejected", "user:answered")


def test_a_reply_is_asked_about_in_one_session_only(shared_worker, tmp_path):
    """The first live session whose start lists a reply asks about it; its own later briefings (after a
    compaction) keep it, the next session's does not list it again."""
    root = tmp_path / "atlas"
    root.mkdir()
    cwd = str(root)

    def asks(session: str, source: str = "startup") -> list[str]:
        text = shared_worker.get(f"/api/v1/context?cwd={cwd}&source={source}&session_id={session}")["context"]
        return [line.split('"')[1] for line in _section(text, "Possible decisions to ask the user about once")]

    _post(shared_worker, cwd, "a1", {"hook_event_name": "UserPromptSubmit", "prompt": "which queue should the importer use?", "permission_mode": "default"},
         {"hook_event_name": "Stop", "stop_hook_active": False,
          "last_assistant_message": "Two options: (a) postgres as the queue, or (b) redis streams. Which do you prefer?"},
         {"hook_event_name": "UserPromptSubmit", "prompt": "lets use postgres for the queue", "permission_mode": "default"},
         {"hook_event_name": "Stop", "stop_hook_active": False, "last_assistant_message": "Done: the importer queues in postgres."})  # fmt: skip
    assert asks("a2") == ["lets use postgres for the queue"]  # the briefing comes first, then the start is drained
    _post(shared_worker, cwd, "a2", {"hook_event_name": "SessionStart", "source": "startup"})
    assert asks("a2", "compact") == ["lets use postgres for the queue"]
    _post(shared_worker, cwd, "a3", {"hook_event_name": "SessionStart", "source": "startup"})
    assert asks("a3") == []
    [fact] = [f for f in shared_worker.get("/api/v1/facts?status=pending&limit=100")["results"] if "postgres for the queue" in f["memory"]]
    assert fact["data"]["asked_in"] == "a2"
