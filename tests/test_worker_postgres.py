"""A real worker process on a team database (storage_url), and the database going away.

Capture stays local: while PostgreSQL is down hooks still get their 202, events
wait in the inbox (never quarantined for it), the status says why, reads answer
503 storage_unavailable; when it returns the pipeline catches up.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import psycopg
import pytest

from tests.conftest import ROOT, start_worker, wait_for, worker_env
from tests.postgres import free_port, init_team_database, member_url
from tests.test_hooks import hook_env, run_hook

SESSION = "9a7e2c41-team-outage"


@pytest.fixture
def team(postgres_cluster):
    """(owner URL, the member dev's URL) of a fresh team database; the URL carries a password (the test
    server trusts loopback and ignores it) so that status pages can be seen not to show it."""
    name = init_team_database(postgres_cluster)
    member_url(postgres_cluster, name, "dev")
    yield postgres_cluster.url(name), postgres_cluster.url(name, user="dev", password="s3cret")
    postgres_cluster.drop_database(name)


def _prompt(n: int) -> dict:
    return {
        "hook_event_name": "UserPromptSubmit", "session_id": SESSION, "cwd": "/tmp/project-team",
        "prompt": f"prompt number {n} while the team database is away",
    }  # fmt: skip


def _status(worker) -> dict:
    return worker.get("/api/v1/status")


def _cli_status(worker) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "memory_anchor.cli.main", "status"], cwd=ROOT, env=worker.env,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    return result.stdout + result.stderr


def test_worker_started_while_postgres_is_down_captures_and_catches_up(tmp_path, postgres_cluster, team):
    owner_url, dev_url = team
    postgres_cluster.pause()
    try:
        worker = start_worker(tmp_path, env=worker_env(tmp_path, MEMORY_ANCHOR_STORAGE_URL=dev_url))
        try:
            for n in range(4):
                worker.post("/api/v1/events", _prompt(n), expect=202)
            # The real hooks: a session starts (its context cannot be read) and a prompt is captured.
            env = hook_env(tmp_path)
            started = run_hook("SessionStart", {"hook_event_name": "SessionStart", "session_id": SESSION,
                                                "cwd": "/tmp/project-team", "source": "startup"}, env)  # fmt: skip
            assert started.returncode == 0 and b"Traceback" not in started.stderr
            assert run_hook("UserPromptSubmit", _prompt(4), env).returncode == 0
            status = _status(worker)
            assert status["store"]["backend"] == "postgresql" and status["store"]["reachable"] is False
            assert "s3cret" not in json.dumps(status) and ":***@" in status["store"]["url"]
            assert status["store"]["reason"]
            assert "team store unreachable:" in _cli_status(worker)

            code, body = worker.request("GET", "/api/v1/memories?user_id=someone")
            assert code == 503 and body["error"]["code"] == "storage_unavailable"
            assert "Traceback" not in body["error"]["message"]

            # The pipeline has met the outage (its log says so) and left every event pending, uncounted.
            log = tmp_path / "logs" / "worker.log"
            wait_for(lambda: log.exists() and "pipeline paused" in log.read_text(), what="the pipeline meeting the outage")
            inbox = worker.get("/api/v1/inbox")
            assert inbox["counts"].get("pending") == 6 and inbox["counts"]["quarantined"] == 0
            local = sqlite3.connect(tmp_path / "memory.sqlite3")
            try:  # not one attempt counted against them
                assert local.execute("SELECT max(attempts) FROM inbox").fetchone()[0] == 0
            finally:
                local.close()
        except BaseException:
            worker.stop()
            raise
    finally:
        postgres_cluster.resume()
    try:
        wait_for(lambda: _status(worker)["inbox"].get("done") == 6, what="the inbox caught up")
        assert _status(worker)["store"]["reachable"] is True
        assert _status(worker)["inbox"].get("pending", 0) == 0
        with psycopg.connect(owner_url) as conn:
            rows = conn.execute(
                "SELECT text, author FROM records WHERE session_id = %s AND kind = 'prompt' ORDER BY seq", (SESSION,)
            ).fetchall()
        assert [r[0] for r in rows] == [_prompt(n)["prompt"] for n in range(5)]
        assert {r[1] for r in rows} == {"dev"}
        assert "pipeline resumed" in (tmp_path / "logs" / "worker.log").read_text()
        assert "store: PostgreSQL" in _cli_status(worker)

        # Down again while the worker runs (its pooled connections break), and back.
        postgres_cluster.pause()
        try:
            for n in range(5, 8):
                worker.post("/api/v1/events", _prompt(n), expect=202)
            wait_for(lambda: not _status(worker)["store"]["reachable"], what="the second outage seen")
            code, body = worker.request("GET", f"/api/v1/timeline?session_id={SESSION}")
            assert code == 503 and body["error"]["code"] == "storage_unavailable"
        finally:
            postgres_cluster.resume()
        wait_for(lambda: _status(worker)["inbox"].get("done") == 9, what="the inbox caught up again")
        timeline = worker.get(f"/api/v1/timeline?session_id={SESSION}&limit=20")["results"]
        assert sorted(r["title"] for r in timeline) == sorted(_prompt(n)["prompt"] for n in range(8))
        assert _status(worker)["inbox"]["quarantined"] == 0
    finally:
        worker.stop()


def test_a_closed_port_is_an_outage_not_a_failure_to_start(tmp_path):
    url = f"postgresql://dev@127.0.0.1:{free_port()}/team"
    worker = start_worker(tmp_path, env=worker_env(tmp_path, MEMORY_ANCHOR_STORAGE_URL=url))
    try:
        worker.post("/api/v1/events", _prompt(0), expect=202)
        store = _status(worker)["store"]
        assert store["reachable"] is False and "cannot connect" in store["reason"]
        code, body = worker.request("POST", "/api/v1/memories", {"messages": [{"role": "user", "content": "x"}], "infer": False})
        assert code == 503 and body["error"]["code"] == "storage_unavailable"
        # Search says so too, in words a person (or the model, through the MCP tools) can act on.
        code, body = worker.request("POST", "/api/v1/memories/search", {"query": "what did we decide"})
        assert code == 503 and body["error"]["code"] == "storage_unavailable"
        assert body["error"]["message"].startswith("the team store is unreachable: ")
        assert worker.get("/api/v1/inbox")["counts"].get("pending") == 1
    finally:
        worker.stop()
    # Stopped cleanly, and what it accepted is still in the local inbox for the next start.
    assert worker.process.returncode == 0


def test_captured_memory_branches_and_time_travel_through_a_worker_on_postgres(tmp_path, team):
    """What runs on the team database through a real worker today: capture to records, reads by id,
    history, `as_of`, the timeline, sessions, branches, snapshots and the SessionStart context."""
    owner_url, dev_url = team
    worker = start_worker(tmp_path, env=worker_env(tmp_path, MEMORY_ANCHOR_STORAGE_URL=dev_url))
    try:
        for n in range(2):
            worker.post("/api/v1/events", _prompt(n), expect=202)
        wait_for(lambda: _status(worker)["inbox"].get("done") == 2, what="both prompts processed")
        timeline = worker.get(f"/api/v1/timeline?session_id={SESSION}&limit=10")["results"]
        assert [r["title"] for r in timeline] == [_prompt(1)["prompt"], _prompt(0)["prompt"]]
        first = timeline[-1]
        assert worker.get(f"/api/v1/memories/{first['id']}")["memory"] == _prompt(0)["prompt"]
        history = worker.get(f"/api/v1/memories/{first['id']}/history")["results"]
        assert [v["version"] for v in history] == [1]

        snapshot = worker.post("/api/v1/snapshots", {"label": "before-experiment"}, expect=201)
        assert snapshot["seq"] == timeline[0]["seq"]
        branch = worker.post("/api/v1/branches", {"name": "experiment"}, expect=201)
        assert branch["fork_seq"] == snapshot["seq"]
        assert {"main", "experiment"} <= {b["name"] for b in worker.get("/api/v1/branches")["results"]}
        # Time travel: as of the first prompt's seq the second did not exist yet.
        status, _ = worker.request("GET", f"/api/v1/memories/{timeline[0]['id']}?as_of={first['seq']}")
        assert status == 404
        assert worker.get(f"/api/v1/memories/{timeline[0]['id']}?as_of=before-experiment")["seq"] == timeline[0]["seq"]
        sessions = worker.get("/api/v1/sessions")["results"]
        assert [s["session_id"] for s in sessions] == [SESSION]
        context = worker.get("/api/v1/context?project=/tmp/project-team")["context"]
        assert "experiment" in context
        # Export and import are the data dir's: a team database is copied with `storage migrate`.
        code, body = worker.request("GET", "/api/v1/export")
        assert code == 409 and body["error"]["code"] == "team_storage" and "storage migrate" in body["error"]["message"]

        # All of it is in the team database, in the member's name; the local file holds capture only.
        with psycopg.connect(owner_url) as conn:
            authors = {r[0] for r in conn.execute("SELECT DISTINCT author FROM records WHERE session_id = %s", (SESSION,))}
            snapshots = [r[0] for r in conn.execute("SELECT name FROM snapshots")]
        assert authors == {"dev"} and snapshots == ["before-experiment"]
        local = sqlite3.connect(tmp_path / "memory.sqlite3")
        try:
            assert local.execute("SELECT count(*) FROM records").fetchone()[0] == 0
            assert local.execute("SELECT count(*) FROM inbox WHERE status = 'done'").fetchone()[0] == 2
        finally:
            local.close()
    finally:
        worker.stop()


def test_mem0_add_update_and_search_through_a_worker_on_postgres(tmp_path, team):
    _, dev_url = team
    worker = start_worker(tmp_path, env=worker_env(tmp_path, MEMORY_ANCHOR_STORAGE_URL=dev_url))
    try:
        added = worker.post(
            "/api/v1/memories",
            {"messages": [{"role": "user", "content": "the team deploys on Thursdays"}], "user_id": "alice",
             "infer": False},
        )["results"]  # fmt: skip
        memory_id = added[0]["id"]
        status, _ = worker.request("PUT", f"/api/v1/memories/{memory_id}", {"text": "the team deploys on Wednesdays"})
        assert status == 200
        history = worker.get(f"/api/v1/memories/{memory_id}/history")["results"]
        assert [v["memory"] for v in history] == ["the team deploys on Thursdays", "the team deploys on Wednesdays"]
        found = worker.post("/api/v1/memories/search", {"query": "when do we deploy", "filters": {"user_id": "alice"}})
        assert [m["id"] for m in found["results"]][:1] == [memory_id]
    finally:
        worker.stop()


def test_a_member_cannot_delete_what_another_member_made_through_the_api(tmp_path, postgres_cluster, team):
    """Two developers' workers on one team database: what differs from a worker alone on SQLite,
    where every branch and snapshot is one's own."""
    owner_url, _ = team
    name = owner_url.rsplit("/", 1)[1]
    workers = {
        who: start_worker(tmp_path / who, env=worker_env(
            tmp_path / who, MEMORY_ANCHOR_STORAGE_URL=member_url(postgres_cluster, name, who)))
        for who in ("alice", "bob")
    }  # fmt: skip
    alice, bob = workers["alice"], workers["bob"]
    try:
        alice.post("/api/v1/branches", {"name": "alice-idea"}, expect=201)
        alice.post("/api/v1/memories", {"content": "cache the parser tables", "infer": False, "branch": "alice-idea"})
        alice.post("/api/v1/snapshots", {"label": "alice-checkpoint"}, expect=201)
        # Bob sees both and may write on her branch, but deleting them is hers alone: a 403 that says whose.
        assert "alice-idea" in {b["name"] for b in bob.get("/api/v1/branches")["results"]}
        status, body = bob.request("DELETE", "/api/v1/branches/alice-idea")
        assert status == 403 and body["error"]["code"] == "not_branch_author" and "alice" in body["error"]["message"]
        status, body = bob.request("DELETE", "/api/v1/snapshots/alice-checkpoint")
        assert status == 403 and body["error"]["code"] == "not_snapshot_author"
        assert [m["memory"] for m in bob.get("/api/v1/memories?branch=alice-idea")["results"]] == ["cache the parser tables"]
        assert alice.request("DELETE", "/api/v1/branches/alice-idea")[0] == 200
        status, _ = bob.request("GET", "/api/v1/memories?branch=alice-idea")
        assert status == 404
    finally:
        for worker in workers.values():
            worker.stop()
