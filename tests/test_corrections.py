"""Correcting memory in one step (issue 25 item 4): forget or edit a rule, decision, fact or open
next step through the REST API, the CLI and the MCP tools, on a real worker and both backends.

What is forgotten is gone from the briefing, recall and search at once, and stays gone when the
same words are extracted again: the hook events that stated it are posted again through the
event door, as a re-import of the same history does, and on the local path extraction reads
them again.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import os
import re
import subprocess
import sys

import pytest

from memory_anchor.schemas.corrections import ItemRefError, parse_item_ref
from tests.conftest import ROOT
from memory_anchor.worker.memory.forgotten import Forgotten

pytestmark = pytest.mark.both_backends

OWNER = f"human:{getpass.getuser()}"  # the viewer's and the API's default actor: the worker's owner


def event(project: str, session: str, name: str, **fields) -> dict:
    """A hook payload as Claude Code sends it (docs: ../shared/docs/claude-code-e2e.md)."""
    return {"session_id": session, "transcript_path": f"/tmp/.claude/projects/x/{session}.jsonl", "cwd": project,
            "hook_event_name": name, **fields}  # fmt: skip


def prompt(project: str, session: str, text: str) -> dict:
    return event(project, session, "UserPromptSubmit", prompt=text, permission_mode="default")


def stop(project: str, session: str, message: str) -> dict:
    return event(project, session, "Stop", stop_hook_active=False, last_assistant_message=message)


def post_events(worker, *events: dict) -> None:
    for payload in events:
        worker.post("/api/v1/events", payload, expect=202)
    worker.wait_idle()


def briefing(worker, project: str) -> str:
    return worker.get(f"/api/v1/context?project={project}")["context"]


def briefing_id(text: str, words: str, kind: str = "fact") -> str:
    """The id the briefing prints on the line that holds `words`: `fact 1a2b3c4d` or `step 12`."""
    line = next(line for line in text.splitlines() if words in line)
    return re.search(r"\(fact ([0-9a-f]{8})" if kind == "fact" else r"\(step (\d+)", line).group(1)


def facts(worker, project: str, status: str = "active") -> list[dict]:
    return worker.get(f"/api/v1/facts?project={project}&status={status}")["results"]


def searched_facts(worker, project: str, query: str) -> list[str]:
    """The facts a search finds (the prompt that stated one is history, and stays searchable)."""
    hits = worker.post("/api/v1/memories/search", {"query": query, "filters": {"project": project, "kind": "fact"}})
    return [h["memory"] for h in hits["results"]]


# --- the forgotten list, in process on both backends ------------------------------------------------


def test_the_forgotten_list_knows_a_wording_again_and_nothing_else(store_db):
    forgotten = Forgotten(store_db)
    with store_db.transaction() as conn:
        forgotten.record(conn, project="/p", kind="fact", item_id="f1", text="We do not deploy on Fridays",
                         action="forget", actor="human:alice", reason="we do now")  # fmt: skip
        forgotten.record(conn, project="/p", kind="next_step", item_id="3", text="migrate the billing tables to postgres",
                         action="forget", actor="human:alice", reason=None)  # fmt: skip
    conn = store_db.reader()
    assert forgotten.find(conn, "/p", "fact", "we do not deploy on fridays.")["item_id"] == "f1"  # the same words
    assert forgotten.find(conn, "/p", "fact", "We deploy on Fridays") is None  # says the opposite
    assert forgotten.find(conn, "/p", "fact", "We do not deploy on Mondays") is None
    assert forgotten.find(conn, "/other", "fact", "We do not deploy on Fridays") is None  # another project's
    assert forgotten.find(conn, "/p", "next_step", "Migrate the billing tables to PostgreSQL")["item_id"] == "3"
    assert forgotten.find(conn, "/p", "next_step", "add tests for the billing tables") is None
    summary = {"data": {"next": ["Migrate the billing tables to Postgres", "update the changelog"],
                        "root_causes": ["the cache was never cleared"]}}  # fmt: skip
    assert forgotten.scrub_outcome(conn, "/p", summary)["data"] == {"next": ["update the changelog"],
                                                                   "root_causes": ["the cache was never cleared"]}  # fmt: skip
    [last, first] = forgotten.list("/p")
    assert (first["actor"], first["reason"], last["kind"]) == ("human:alice", "we do now", "next_step")


@pytest.mark.parametrize("ref, parsed", [
    ("fact 1a2b3c4d", ("fact", "1a2b3c4d")), ("1A2B3C4D", ("fact", "1a2b3c4d")),
    ("(fact 1a2b3c4d, confidence 0.93)", ("fact", "1a2b3c4d")), ("step 12", ("next_step", "12")),
    ("(step 12, open since 2030-01-02 10:00)", ("next_step", "12")), ("next step:7", ("next_step", "7")),
])  # fmt: skip
def test_ids_are_read_as_the_briefing_prints_them(ref, parsed):
    assert parse_item_ref(ref) == parsed


@pytest.mark.parametrize("ref", ["12", "step abc", "rule 1a2b3c4d", "fact 1a2", ""])
def test_what_is_not_an_id_is_refused_with_the_forms_that_are(ref):
    with pytest.raises(ItemRefError, match="fact 1a2b3c4d|step 12"):
        parse_item_ref(ref)


# --- facts through a real worker ---------------------------------------------------------------------


def test_a_forgotten_rule_leaves_briefing_recall_and_search_and_stays_forgotten(shared_worker):
    project = "/tmp/corrections/forget-rule"
    said = "From now on always run the e2e suite with --slow before every release."
    post_events(shared_worker, prompt(project, "fr-1", said))
    assert searched_facts(shared_worker, project, "run the e2e suite slow release")  # found before
    before = briefing(shared_worker, project)
    assert "always run the e2e suite" in before
    short = briefing_id(before, "always run the e2e suite")

    out = shared_worker.post(f"/api/v1/facts/{short}/forget", {"reason": "a one-off, not a rule"})
    assert (out["kind"], out["ref"], out["status"], out["actor"]) == ("fact", f"fact {short}", "forgotten", OWNER)
    assert "e2e suite" not in briefing(shared_worker, project)
    assert searched_facts(shared_worker, project, "run the e2e suite slow release") == []
    recall = shared_worker.post("/api/v1/recall", {"prompt": "how do we run the e2e suite before a release?",
                                                   "project": project})  # fmt: skip
    assert "always run the e2e suite" not in recall["context"]
    history = shared_worker.get(f"/api/v1/facts/{out['id']}/history")["results"]
    assert [(v["status"], v["actor"], v["reason"]) for v in history][-1] == (
        "forgotten", OWNER, "FORGET: a one-off, not a rule")
    assert history[0]["status"] == "active" and history[-1]["type"] == history[0]["type"] == "rule"

    # The same prompt again, in the same session and in a later one: extraction finds it forgotten.
    post_events(shared_worker, prompt(project, "fr-1", said), prompt(project, "fr-2", said))
    assert "e2e suite" not in briefing(shared_worker, project)
    assert not [f for f in facts(shared_worker, project, "active,pending") if "e2e suite" in f["text"]]
    [entry] = shared_worker.get(f"/api/v1/forgotten?project={project}")["results"]
    assert (entry["item_id"], entry["action"], entry["actor"], entry["reason"]) == (
        out["id"], "forget", OWNER, "a one-off, not a rule")
    status, again = shared_worker.request("POST", f"/api/v1/facts/{short}/forget", {})
    assert status == 409 and "already forgotten" in again["error"]["message"]


def test_an_agent_cannot_write_a_forgotten_fact_back(shared_worker):
    project = "/tmp/corrections/agent-writes"
    stored = shared_worker.post("/api/v1/facts", {"text": "The cache layer uses memcached", "confidence": 0.95,
                                                  "category": "decision", "project": project}, expect=201)  # fmt: skip
    shared_worker.post(f"/api/v1/facts/{stored['id']}/forget", {"actor": "alice"})
    for text in ("The cache layer uses memcached", "the cache layer uses Memcached."):
        again = shared_worker.post("/api/v1/facts", {"text": text, "confidence": 0.95, "project": project}, expect=201)
        assert again["status"] == "forgotten" and again["id"] is None and "human:alice" in again["reason"]
    assert facts(shared_worker, project) == []
    # A person's own write is theirs to make.
    different = shared_worker.post("/api/v1/facts", {"text": "The cache layer uses Redis", "confidence": 0.95,
                                                     "project": project}, expect=201)  # fmt: skip
    assert different["status"] == "active"


def test_an_edit_keeps_the_category_and_the_old_wording_does_not_come_back(shared_worker):
    project = "/tmp/corrections/edit-decision"
    said = "Decision: we deploy the shop with fly.io."
    post_events(shared_worker, prompt(project, "ed-1", said))
    [fact] = facts(shared_worker, project)
    assert fact["type"] == "decision"

    out = shared_worker.post(f"/api/v1/facts/{fact['id'][:8]}/edit",
                             {"text": "We deploy the shop with render.com", "reason": "moved in May", "actor": "alice"})  # fmt: skip
    assert (out["status"], out["text"], out["actor"]) == ("active", "We deploy the shop with render.com", "human:alice")
    assert "fly.io" in out["previous_text"]
    post_events(shared_worker, prompt(project, "ed-2", said))  # the old wording stated again
    [now] = facts(shared_worker, project)
    assert (now["id"], now["text"], now["type"], now["actor"]) == (
        fact["id"], "We deploy the shop with render.com", "decision", "human:alice")
    text = briefing(shared_worker, project)
    assert "decision: We deploy the shop with render.com" in text and "fly.io" not in text
    history = shared_worker.get(f"/api/v1/facts/{fact['id']}/history")["results"]
    assert history[-1]["reason"] == "EDIT: moved in May" and history[-1]["data"]["previous_text"] == fact["text"]


def test_a_pending_or_disputed_fact_is_settled_by_a_person_not_by_an_agent(shared_worker):
    project = "/tmp/corrections/pending"
    pending = shared_worker.post("/api/v1/facts", {"text": "We might move CI to GitHub Actions", "confidence": 0.8,
                                                   "project": project}, expect=201)  # fmt: skip
    status, body = shared_worker.request("POST", f"/api/v1/facts/{pending['id']}/forget", {"agent_id": "claude-code"})
    assert status == 403 and body["error"]["code"] == "human_decision"
    out = shared_worker.post(f"/api/v1/facts/{pending['id']}/edit", {"text": "We move CI to GitHub Actions in June"})
    assert out["status"] == "active"  # a person's edit is their decision
    [approval] = [a for a in shared_worker.get("/api/v1/approvals?status=approved")["results"]
                  if a["id"] == pending["approval_id"]]  # fmt: skip
    assert approval["decided_by"] == OWNER and approval["result_id"] == pending["id"]


def test_ids_that_are_not_facts_are_refused_clearly(shared_worker):
    project = "/tmp/corrections/refusals"
    identity = shared_worker.post("/api/v1/identity", {"content": "Goal: ship on Fridays", "project": project,
                                                       "confirmations": 3, "actor": "alice"}, expect=201)  # fmt: skip
    status, body = shared_worker.request("POST", f"/api/v1/facts/{identity['id'][:8]}/forget", {})
    assert status == 403 and "memory-anchor identity" in body["error"]["message"]
    for bad, code in (("xyz!", 400), ("00000000", 404)):
        status, body = shared_worker.request("POST", f"/api/v1/facts/{bad}/forget", {})
        assert status == code, body
    status, body = shared_worker.request("POST", "/api/v1/facts/00000000/edit", {"text": "   "})
    assert status == 422
    status, body = shared_worker.request("POST", "/api/v1/next-steps/999999/forget", {})
    assert status == 404


def test_a_read_only_agent_cannot_forget(tmp_path, worker_backend, request):
    from tests.conftest import _start_on

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "settings.json").write_text(json.dumps({"read_only_agents": ["reviewer"]}))
    worker = _start_on(request, worker_backend, tmp_path / "data")
    try:
        fact = worker.post("/api/v1/facts", {"text": "Releases are tagged vX.Y.Z", "project": "/tmp/ro"}, expect=201)
        status, body = worker.request("POST", f"/api/v1/facts/{fact['id']}/forget", {"agent_id": "reviewer"})
        assert status == 403 and body["error"]["code"] == "read_only_agent"
        assert worker.get(f"/api/v1/facts/{fact['id']}")["status"] == "active"
    finally:
        worker.stop()


# --- next steps -----------------------------------------------------------------------------------------


def test_a_forgotten_next_step_stays_closed_when_a_later_session_restates_it(shared_worker):
    project = "/tmp/corrections/next-steps"
    post_events(shared_worker, prompt(project, "ns-1", "please fix the rounding of coupon totals"),
                stop(project, "ns-1", "Fixed the coupon rounding.\n\nNext steps:\n- migrate the billing tables to "
                     "postgres\n- update the changelog for 2.3"))  # fmt: skip
    text = briefing(shared_worker, project)
    step = briefing_id(text, "migrate the billing tables", kind="step")
    assert "next: migrate the billing tables" in text  # the session's line says it too

    out = shared_worker.post(f"/api/v1/next-steps/{step}/forget", {"reason": "we stay on SQLite"})
    assert (out["ref"], out["status"], out["actor"]) == (f"step {step}", "forgotten", OWNER)
    text = briefing(shared_worker, project)
    assert "migrate the billing tables" not in text and "update the changelog for 2.3" in text

    post_events(shared_worker, prompt(project, "ns-2", "now look at the invoice export"),
                stop(project, "ns-2", "Looked at the invoice export. Next step: migrate the billing tables to Postgres."))
    assert "migrate the billing tables" not in briefing(shared_worker, project)
    open_texts = [s["text"] for s in shared_worker.get(f"/api/v1/next-steps?project={project}")["results"]]
    assert open_texts == ["update the changelog for 2.3"]
    closed = shared_worker.get(f"/api/v1/next-steps?project={project}&status=closed")["results"]
    assert [(c["id"], c["closed_by"], c["closed_because"]) for c in closed] == [
        (int(step), OWNER, "forgotten: we stay on SQLite")]


def test_an_edited_next_step_opens_the_users_wording_in_its_place(shared_worker):
    project = "/tmp/corrections/edit-step"
    post_events(shared_worker, prompt(project, "es-1", "finish the expression parser"),
                stop(project, "es-1", "Done with the parser.\n\nNext steps:\n- write docs for the parser"))
    step = briefing_id(briefing(shared_worker, project), "write docs for the parser", kind="step")
    out = shared_worker.post(f"/api/v1/next-steps/{step}/edit", {"text": "write the parser section of docs/syntax.md"})
    assert out["replaced_by"] != step and out["previous_text"] == "write docs for the parser"
    text = briefing(shared_worker, project)
    assert f"write the parser section of docs/syntax.md (step {out['replaced_by']}," in text
    assert "write docs for the parser" not in text
    # The same session stating its next steps again neither withdraws the edit nor reopens the old wording.
    post_events(shared_worker, stop(project, "es-1", "Done with the parser.\n\nNext steps:\n- write docs for the parser"))
    open_texts = [s["text"] for s in shared_worker.get(f"/api/v1/next-steps?project={project}")["results"]]
    assert open_texts == ["write the parser section of docs/syntax.md"]


# --- the CLI and the MCP tools ----------------------------------------------------------------------------


def cli(worker, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memory_anchor.cli.main", "--data-dir", str(worker.data_dir), *args],
                          cwd=ROOT, env=env or worker.env, capture_output=True, text=True, timeout=120)  # fmt: skip


def test_the_cli_forgets_and_edits_by_the_ids_the_briefing_prints(shared_worker):
    project = "/tmp/corrections/cli"
    post_events(shared_worker, prompt(project, "cli-1", "Never commit generated protobuf files."),
                prompt(project, "cli-1", "I prefer small pull requests over big ones."),
                stop(project, "cli-1", "Done.\n\nNext steps:\n- regenerate the protobuf stubs in CI"))  # fmt: skip
    text = briefing(shared_worker, project)
    rule, preference = briefing_id(text, "protobuf files"), briefing_id(text, "small pull requests")
    step = briefing_id(text, "regenerate the protobuf stubs", kind="step")

    done = cli(shared_worker, "forget", "fact", rule, f"step {step}", "--reason", "wrong")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"forgot fact {rule}: Never commit generated protobuf files",
                                        f"forgot step {step}: regenerate the protobuf stubs in CI"]  # fmt: skip
    edited = cli(shared_worker, "edit", f"(fact {preference})", "I prefer pull requests under 400 lines")
    assert edited.returncode == 0, edited.stderr
    assert edited.stdout.startswith(f"edited fact {preference}: I prefer pull requests under 400 lines")
    text = briefing(shared_worker, project)
    assert "protobuf" not in text and "preference: I prefer pull requests under 400 lines" in text

    listed = cli(shared_worker, "forgotten", "--project", project)
    assert listed.returncode == 0 and f"by {OWNER}" in listed.stdout and "wrong" in listed.stdout
    assert "regenerate the protobuf stubs in CI" in listed.stdout and "I prefer small pull requests" in listed.stdout

    wrong = cli(shared_worker, "forget", "12")
    assert wrong.returncode == 1 and "step 12" in wrong.stderr
    inside = cli(shared_worker, "forget", f"fact {preference}", env={**shared_worker.env, "CLAUDECODE": "1"})
    assert inside.returncode == 1 and "forget_memory" in inside.stderr
    assert "I prefer pull requests under 400 lines" in briefing(shared_worker, project)


def test_claude_forgets_and_edits_through_the_mcp_tools(shared_worker, tmp_path):
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from memory_anchor.core.projects import project_for_cwd

    root = tmp_path / "shop"
    root.mkdir()
    project = project_for_cwd(str(root))
    post_events(shared_worker, prompt(str(root), "mcp-1", "Always squash merge feature branches."),
                stop(str(root), "mcp-1", "Done.\n\nNext steps:\n- drop the legacy coupon table"))  # fmt: skip
    text = briefing(shared_worker, project)
    rule, step = briefing_id(text, "squash merge"), briefing_id(text, "legacy coupon table", kind="step")

    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE", "MEMORY_ANCHOR_"))}
    env.update(MEMORY_ANCHOR_DATA_DIR=str(shared_worker.data_dir), CLAUDE_PROJECT_DIR=str(root),
               CLAUDE_CODE_SESSION_ID="mcp-1", PYTHONPATH=str(ROOT))  # fmt: skip

    async def session():
        params = StdioServerParameters(command=sys.executable, args=["-m", "memory_anchor.mcp.server"], env=env, cwd=str(ROOT))
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as client:
                await client.initialize()
                tools = {t.name: t for t in (await client.list_tools()).tools}
                edited = await client.call_tool("edit_memory", {"item": f"(fact {rule})", "reason": "the user: we rebase",
                                                                "text": "Always rebase feature branches onto main"})  # fmt: skip
                forgot = await client.call_tool("forget_memory", {"item": f"step {step}", "reason": "the user: keep it"})
                wrong = await client.call_tool("forget_memory", {"item": "rule 12", "reason": "x"})
                return tools, edited, forgot, wrong

    tools, edited, forgot, wrong = asyncio.run(session())
    assert "only when the user asks" in tools["forget_memory"].description
    assert not edited.is_error and f"fact {rule} now reads: Always rebase feature branches onto main" in edited.content[0].text
    assert not forgot.is_error and forgot.content[0].text == f"forgot step {step}: drop the legacy coupon table"
    assert wrong.is_error and "step 12" in wrong.content[0].text
    text = briefing(shared_worker, project)
    assert "rule: Always rebase feature branches onto main" in text
    assert "squash" not in text and "legacy coupon table" not in text
    entries = shared_worker.get(f"/api/v1/forgotten?project={project}")["results"]
    assert [(e["action"], e["actor"], e["reason"]) for e in entries] == [
        ("forget", "agent:claude-code", "the user: keep it"), ("edit", "agent:claude-code", "the user: we rebase")]
