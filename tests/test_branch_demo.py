"""Seed 004 §6.3 as an integration test, against a real worker on a real port.

Three agents work on the same bug, each on its own branch chosen by the
environment (the hook's X-Memory-Anchor-Branch header, from MEMORY_ANCHOR_BRANCH),
and write conflicting facts. The diff shows the conflicts; a cherry-pick merge
brings the chosen fact to main; a fourth session on main gets it at
SessionStart; the rejected facts are not on main but still on their branches.
Then the same branching through the REST errors, the CLI and the MCP tools.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from memory_anchor.core import paths

pytestmark = pytest.mark.both_backends

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "/tmp/status-code-demo"
SUBJECT = "cause of the wrong status code on POST /orders"
FACTS = {
    "agent-A": "POST /orders returns 500 because OrderSchema raises ValueError instead of ValidationError",
    "agent-B": "POST /orders returns 500 because the router swallows the 422 from FastAPI",
    "agent-C": "POST /orders returns 500 because the database constraint fires before validation",
}


def _event(session_id: str, name: str, **extra) -> dict:
    return {"session_id": session_id, "transcript_path": f"/tmp/none/{session_id}.jsonl", "cwd": PROJECT,
            "hook_event_name": name, **extra}  # fmt: skip


def _agent_session(worker, agent: str) -> str:
    session = f"sess-{agent}"
    headers = {"X-Memory-Anchor-Branch": agent}
    worker.post("/api/v1/events", _event(session, "SessionStart", source="startup"), expect=202, headers=headers)
    tool_use = _event(
        session, "PostToolUse", tool_name="Bash", tool_use_id=f"toolu_{agent}",
        tool_input={"command": "pytest tests/test_orders.py", "description": "run the failing test"},
        tool_response={"stdout": f"{agent}: 1 failed (expected 422, got 500)", "stderr": "", "interrupted": False},
    )  # fmt: skip
    worker.post("/api/v1/events", tool_use, expect=202, headers=headers)
    return session


def _fact(worker, agent: str) -> str:
    body = {"text": FACTS[agent], "subject": SUBJECT, "confidence": 0.92, "project": PROJECT, "agent_id": agent}
    stored = worker.post("/api/v1/facts", body, expect=201, headers={"X-Memory-Anchor-Branch": agent})
    return stored.get("id") or stored["record"]["id"]


def _fact_status(worker, fact_id: str, branch: str) -> int:
    status, _ = worker.request("GET", f"/api/v1/facts/{fact_id}?branch={urllib.parse.quote(branch)}")
    return status


def test_three_agents_cherry_pick_and_a_fourth_session(worker):
    worker.post("/api/v1/facts", {"text": "The API is a FastAPI app in api/main.py", "subject": "api framework",
                                  "confidence": 0.95, "project": PROJECT}, expect=201)  # fmt: skip
    sessions = {agent: _agent_session(worker, agent) for agent in FACTS}
    worker.wait_idle()
    facts = {agent: _fact(worker, agent) for agent in FACTS}

    branches = {b["name"]: b for b in worker.get("/api/v1/branches")["results"]}
    assert {"agent-A", "agent-B", "agent-C"} <= set(branches)
    assert all(branches[a]["parent"] == "main" and branches[a]["own_writes"] >= 2 for a in FACTS)
    assert worker.get(f"/api/v1/sessions/{sessions['agent-B']}/branch") == {
        "session_id": sessions["agent-B"], "branch": "agent-B", "chosen_by": "env"}  # fmt: skip
    # nothing leaked onto main
    for agent, fact_id in facts.items():
        assert _fact_status(worker, fact_id, "main") == 404
        assert _fact_status(worker, fact_id, agent) == 200

    snap = worker.post("/api/v1/snapshots", {"label": "before-merge", "branch": "main"}, expect=201)

    # the diff between two agents shows the conflicting facts about one subject
    ab = worker.get("/api/v1/branches/agent-A/diff?target=agent-B")
    assert ab["counts"]["conflicts"] == 1
    conflict = ab["conflicts"][0]
    assert conflict["type"] == "fact_key"
    assert (conflict["source"]["id"], conflict["target"]["id"]) == (facts["agent-A"], facts["agent-B"])
    a_main = worker.get("/api/v1/branches/agent-A/diff?target=main")
    added = {c["id"] for c in a_main["source_changes"] if c["change"] == "added"}
    assert facts["agent-A"] in added and a_main["counts"]["conflicts"] == 0
    assert any(c["kind"] == "observation" for c in a_main["source_changes"])

    # cherry-pick agent A's fact (and only it) into main
    merged = worker.post("/api/v1/branches/agent-A/merge", {"target": "main", "strategy": "cherry_pick",
                                                             "items": [facts["agent-A"]]})  # fmt: skip
    assert [m["id"] for m in merged["merged"]] == [facts["agent-A"]]
    assert all(r["reason"] == "not picked" for r in merged["rejected"]) and merged["rejected"]
    assert merged["source_marked_merged"]

    # now B's fact conflicts with what main holds
    b_main = worker.get("/api/v1/branches/agent-B/diff?target=main")
    assert [(c["source"]["id"], c["target"]["id"]) for c in b_main["conflicts"]] == [(facts["agent-B"], facts["agent-A"])]

    # the fourth session, on main, gets the merged fact at SessionStart and not the rejected ones
    s4 = "sess-fourth"
    worker.post("/api/v1/events", _event(s4, "SessionStart", source="startup"), expect=202)
    worker.wait_idle()
    context = worker.get(f"/api/v1/context?project={urllib.parse.quote(PROJECT)}&session_id={s4}&source=startup")["context"]
    assert FACTS["agent-A"] in context
    assert FACTS["agent-B"] not in context and FACTS["agent-C"] not in context
    assert "agent-B" in context and "agent-C" in context  # listed as other active branches
    # an agent on its branch is told so
    b_context = worker.get(f"/api/v1/context?project={urllib.parse.quote(PROJECT)}&session_id={sessions['agent-B']}")["context"]
    assert "Active branch: agent-B" in b_context and FACTS["agent-B"] in b_context

    # rejected facts: not on main, still on their branches
    for agent in ("agent-B", "agent-C"):
        assert _fact_status(worker, facts[agent], "main") == 404
        assert _fact_status(worker, facts[agent], agent) == 200
    assert _fact_status(worker, facts["agent-A"], "main") == 200

    # the merge is in the history
    history = worker.get("/api/v1/merges?branch=main")["results"]
    assert history[0]["strategy"] == "cherry_pick" and history[0]["source"] == "agent-A"
    assert worker.get(f"/api/v1/merges/{history[0]['id']}")["merged"][0]["id"] == facts["agent-A"]

    # time travel: main before the merge did not know A's finding
    before = worker.post("/api/v1/time-travel", {"query": "OrderSchema ValueError", "as_of": "before-merge",
                                                 "branch": "main", "project": PROJECT})  # fmt: skip
    assert before["seq"] == snap["seq"]
    assert facts["agent-A"] not in {r["id"] for r in before["results"]}
    now = worker.post("/api/v1/time-travel", {"query": "OrderSchema ValueError", "as_of": 10**8 - 1,
                                              "branch": "main", "project": PROJECT})  # fmt: skip
    assert facts["agent-A"] in {r["id"] for r in now["results"]}

    # archiving and deleting the losers never touches main
    status, archived = worker.request("PATCH", "/api/v1/branches/agent-C", {"status": "archived"})
    assert status == 200 and archived["status"] == "archived"
    status, deleted = worker.request("DELETE", "/api/v1/branches/agent-C")
    assert status == 200 and deleted["deleted_versions"] >= 2
    assert _fact_status(worker, facts["agent-A"], "main") == 200


def test_rest_errors_are_clear(worker):
    status, body = worker.request("POST", "/api/v1/branches", {"name": "bad name!"})
    assert status == 400 and body["error"]["code"] == "invalid_branch"
    status, body = worker.request("GET", "/api/v1/branches/nope/diff")
    assert status == 404 and "nope" in body["error"]["message"]
    worker.post("/api/v1/branches", {"name": "exp/one", "description": "nested name"}, expect=201)
    assert worker.get("/api/v1/branches/exp/one")["description"] == "nested name"
    status, body = worker.request("POST", "/api/v1/branches/exp/one/merge", {"strategy": "cherry_pick"})
    assert status == 422 and "items" in body["error"]["message"]
    status, body = worker.request("POST", "/api/v1/branches", {"name": "exp/one"})
    assert status == 409
    status, body = worker.request("DELETE", "/api/v1/branches/main")
    assert status == 409
    status, body = worker.request("GET", "/api/v1/time-travel?query=x")
    assert status == 400 and "as_of" in body["error"]["message"]
    status, body = worker.request("POST", "/api/v1/snapshots", {"label": "42"})
    assert status == 400 and "digits" in body["error"]["message"]
    # A write to a branch that does not exist is refused, never kept on no branch (nor a 500 on PostgreSQL).
    status, body = worker.request("POST", "/api/v1/observations", {"summary": "lost", "branch": "no-such-branch"})
    assert status == 404 and "no-such-branch" in body["error"]["message"]
    status, body = worker.request("POST", "/api/v1/memories", {"content": "lost", "infer": False, "branch": "no-such-branch"})
    assert status == 404 and "no-such-branch" in body["error"]["message"]


def test_an_archived_branch_refuses_writes_and_its_session_writes_to_the_parent(worker):
    session = "sess-archived"
    headers = {"X-Memory-Anchor-Branch": "old-idea"}
    worker.post("/api/v1/events", _event(session, "SessionStart", source="startup"), expect=202, headers=headers)
    worker.wait_idle()
    added = worker.post("/api/v1/memories", {"content": "kept on the branch", "user_id": "u", "branch": "old-idea"})
    memory_id = added["results"][0]["id"] if isinstance(added, dict) else added[0]["id"]
    assert worker.request("PATCH", "/api/v1/branches/old-idea", {"status": "archived"})[0] == 200

    refused = [
        worker.request("POST", "/api/v1/memories", {"content": "new", "user_id": "u", "branch": "old-idea"}),
        worker.request("PUT", f"/api/v1/memories/{memory_id}?branch=old-idea", {"text": "changed"}),
        worker.request("DELETE", f"/api/v1/memories/{memory_id}?branch=old-idea"),
        worker.request("POST", "/api/v1/branches/main/merge", {"target": "old-idea", "strategy": "accept"}),
        worker.request("POST", "/api/v1/branches/switch", {"session_id": "other", "branch": "old-idea"}),
    ]
    for status, body in refused:
        assert status == 409 and body["error"]["code"] == "branch_archived", (status, body)
        assert "restore" in body["error"]["message"]
    assert worker.get(f"/api/v1/memories/{memory_id}?branch=old-idea")["memory"] == "kept on the branch"

    # the session's hook events are still accepted, and land on the parent
    tool_use = _event(
        session, "PostToolUse", tool_name="Bash", tool_use_id="toolu_archived",
        tool_input={"command": "make lint", "description": "lint after archiving"},
        tool_response={"stdout": "archived-branch lint ok", "stderr": "", "interrupted": False},
    )  # fmt: skip
    worker.post("/api/v1/events", tool_use, expect=202, headers=headers)
    worker.wait_idle()
    on_main = worker.get(f"/api/v1/observations?session_id={session}&branch=main")["results"]
    assert len(on_main) == 1 and on_main[0]["branch"] == "main"
    assert "is archived (read-only)" in paths.log_path(worker.data_dir).read_text()

    assert worker.request("PATCH", "/api/v1/branches/old-idea", {"status": "active"})[0] == 200
    status, _ = worker.request("PUT", f"/api/v1/memories/{memory_id}?branch=old-idea", {"text": "changed"})
    assert status == 200


def test_branches_are_the_clis_and_no_tool_of_the_model(worker, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE", "MEMORY_ANCHOR_"))}
    env.update(MEMORY_ANCHOR_DATA_DIR=str(worker.data_dir), PYTHONPATH=str(ROOT))

    def cli(*argv: str) -> str:
        done = subprocess.run([sys.executable, "-m", "memory_anchor.cli.main", *argv], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    cli("branch", "create", "cli-exp", "-d", "try a new cache")
    worker.post("/api/v1/facts", {"text": "cache keys include the tenant id", "subject": "cache keys",
                                  "project": PROJECT, "branch": "cli-exp"}, expect=201)  # fmt: skip
    assert "cli-exp" in cli("branch", "list")
    diff = json.loads(cli("--json", "branch", "diff", "cli-exp"))
    assert diff["counts"]["source_added"] == 1
    assert "snapshot s1" in cli("snapshot", "create", "s1")
    out = cli("branch", "merge", "cli-exp", "main", "--strategy", "accept")
    assert "cli-exp is now marked merged" in out
    assert "s1" in cli("snapshot", "list")

    mcp_env = {**env, "CLAUDE_PROJECT_DIR": PROJECT, "CLAUDE_CODE_SESSION_ID": "mcp-session"}

    async def tool_names():
        params = StdioServerParameters(command=sys.executable, args=["-m", "memory_anchor.mcp.server"], env=mcp_env, cwd=str(ROOT))
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return {t.name for t in (await session.list_tools()).tools}

    # Branches are a person's or an orchestrator's tool (the CLI above, MEMORY_ANCHOR_BRANCH, REST):
    # they cost a model's context in no session.
    assert not {name for name in asyncio.run(tool_names()) if "branch" in name or "snapshot" in name}
