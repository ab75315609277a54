"""Capture: hook events in, observations out; nothing acknowledged is ever lost."""

from __future__ import annotations

import json
import platform
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid

import pytest

from tests.conftest import ROOT, start_worker, tool_use_event, wait_for


def post_event(worker, payload, **headers):
    return worker.request("POST", "/api/v1/events", payload, headers=headers or None)


def session_events(session_id: str, cwd: str = "/tmp/capture-project") -> list[dict]:
    base = {"session_id": session_id, "transcript_path": f"/tmp/{session_id}.jsonl", "cwd": cwd}
    return [
        {**base, "hook_event_name": "SessionStart", "source": "startup"},
        {**base, "hook_event_name": "UserPromptSubmit", "prompt": "run the unit tests for the parser", "permission_mode": "default"},
        {**tool_use_event(session_id, 1, cwd=cwd, output="collected 12 items, 12 passed")},
        {**base, "hook_event_name": "Stop", "stop_hook_active": False, "last_assistant_message": "All 12 parser tests pass."},
        {**base, "hook_event_name": "SessionEnd", "reason": "other"},
    ]


def test_a_session_becomes_prompt_observation_and_summary(shared_worker):
    worker = shared_worker
    sid = f"s-{uuid.uuid4().hex[:8]}"
    for event in session_events(sid):
        status, body = post_event(worker, event)
        assert status == 202 and body["status"] == "accepted"
    worker.wait_idle()
    observations = worker.get(f"/api/v1/observations?session_id={sid}")
    assert observations["total"] == 1
    obs = observations["results"][0]
    assert obs["tool_use_id"] == f"toolu_{sid}_1"
    assert obs["session_id"] == sid and obs["type"] and obs["title"]
    assert obs["project"] == "/tmp/capture-project"
    prompts = worker.get(f"/api/v1/prompts?session_id={sid}")["results"]
    assert [p["memory"] for p in prompts] == ["run the unit tests for the parser"]
    summaries = worker.get(f"/api/v1/summaries?session_id={sid}")["results"]
    assert len(summaries) == 1 and summaries[0]["memory"]
    session = worker.get(f"/api/v1/sessions/{sid}")
    assert session["status"] == "ended" and session["end_reason"] == "other"
    timeline = worker.get(f"/api/v1/timeline?session_id={sid}")["results"]
    assert {r["kind"] for r in timeline} == {"prompt", "observation", "summary"}
    seqs = [r["seq"] for r in timeline]
    assert seqs == sorted(seqs, reverse=True), "timeline is newest first"


def test_the_same_tool_use_is_processed_once(shared_worker):
    worker = shared_worker
    event = tool_use_event("dup-session", 7)
    first = post_event(worker, event)[1]
    second = post_event(worker, event)[1]
    assert first["id"] == second["id"] and second["duplicate"] is True
    # A spool replay of a prompt carries the hook's event id: also stored once.
    prompt = {"session_id": "dup-session", "cwd": "/tmp/p", "hook_event_name": "UserPromptSubmit", "prompt": "hello there friend"}
    event_id = str(uuid.uuid4())
    assert post_event(worker, prompt, **{"X-Memory-Anchor-Event-Id": event_id})[1]["duplicate"] is False
    assert post_event(worker, prompt, **{"X-Memory-Anchor-Event-Id": event_id})[1]["duplicate"] is True
    worker.wait_idle()
    assert worker.get("/api/v1/observations?session_id=dup-session")["total"] == 1
    assert worker.get("/api/v1/prompts?session_id=dup-session")["total"] == 1


def test_a_5mb_tool_output_is_truncated_not_rejected(shared_worker):
    worker = shared_worker
    big = "x" * (5 * 1024 * 1024)
    event = tool_use_event("big-session", 1, output="HEAD-MARK " + big + " TAIL-MARK")
    status, body = post_event(worker, event)
    assert status == 202
    worker.wait_idle()
    conn = sqlite3.connect(worker.data_dir / "memory.sqlite3")
    stored = conn.execute("SELECT payload FROM inbox WHERE id = ?", (body["id"],)).fetchone()[0]
    assert len(stored) < 100_000, "the inbox must not hold the 5 MB output"
    stdout = json.loads(stored)["tool_response"]["stdout"]
    assert stdout.startswith("HEAD-MARK") and stdout.endswith("TAIL-MARK")
    assert "truncated" in stdout
    assert worker.get("/api/v1/observations?session_id=big-session")["total"] == 1


def test_secrets_never_reach_storage(worker):
    secret = "sk-ant-api03-" + "A1b2C3d4" * 10
    event = tool_use_event("secret-session", 1, output=f"export ANTHROPIC_API_KEY={secret}\nok <private>my diary</private> done")
    event["tool_input"]["command"] = f"curl -H 'Authorization: Bearer {secret}' https://user:hunter2pass@example.com"
    post_event(worker, event)
    prompt = {"session_id": "secret-session", "cwd": "/tmp/p", "hook_event_name": "UserPromptSubmit",
              "prompt": f"use the key {secret} please"}  # fmt: skip
    post_event(worker, prompt)
    worker.wait_idle()
    worker.stop()
    raw = b""
    for path in worker.data_dir.rglob("*"):
        if path.is_file():
            raw += path.read_bytes()
    assert secret.encode() not in raw
    assert b"hunter2pass" not in raw
    assert b"my diary" not in raw


def test_a_block_malloc_hands_out_again_carries_no_earlier_bytes():
    """Why the test above once failed: Chroma writes its HNSW index's unused slots as malloc
    gave them, and they held an earlier request's body. The worker has glibc zero every block
    it hands out (memory_anchor/worker/index/heap.py); here a freed block full of a secret comes back zeroed."""
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc only: elsewhere the worker's malloc is left as it is")
    probe = """
import ctypes
from memory_anchor.worker.index import heap
heap.configure_malloc()
heap.clear_reused_memory()
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
size = 160_000  # a Chroma index of 100 slots, under the worker's 1 MB mmap threshold: from the heap
for _ in range(20):
    block = libc.malloc(size)
    ctypes.memset(block, ord("S"), size)
    libc.free(ctypes.c_void_p(block))
    again = libc.malloc(size)
    print(ctypes.string_at(again, size).count(b"S"), again == block)
    libc.free(ctypes.c_void_p(again))
"""
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    rounds = [line.split() for line in result.stdout.splitlines()]
    assert len(rounds) == 20 and all(left == "0" for left, _ in rounds), rounds
    assert any(same == "True" for _, same in rounds), "malloc never handed the freed block out again: nothing was tested"


@pytest.mark.parametrize(
    "raw, code",
    [
        (b"{not json", "invalid_json"),
        (b"[1, 2]", "invalid_json"),
        (b"", "invalid_json"),
        (json.dumps({"hook_event_name": "SomethingElse", "session_id": "x"}).encode(), "unknown_event"),
        (json.dumps({"session_id": "x"}).encode(), "unknown_event"),
        (json.dumps({"hook_event_name": "Stop", "session_id": 12}).encode(), "invalid_event"),
    ],
)
def test_bad_events_get_clear_errors_and_lose_nothing(shared_worker, raw, code):
    worker = shared_worker
    session = f"keep-me-{uuid.uuid4().hex[:6]}"
    kept = post_event(worker, tool_use_event(session, 1))[1]
    status, body = worker.request("POST", "/api/v1/events", raw=raw)
    assert 400 <= status < 500
    assert body["error"]["code"] == code and body["error"]["message"]
    worker.wait_idle()
    assert worker.get(f"/api/v1/observations?session_id={session}")["total"] == 1
    assert kept["id"] >= 1


def test_sigkill_mid_stream_loses_no_acknowledged_event(tmp_path):
    data_dir = tmp_path / "data"
    worker = start_worker(data_dir)
    acknowledged: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def fire(client_no: int) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            event = tool_use_event(f"kill-{client_no}", n)
            try:
                status, _ = worker.request("POST", "/api/v1/events", event)
            except OSError:
                return  # the worker is gone: this event was never acknowledged
            if status == 202:
                with lock:
                    acknowledged.append(event["tool_use_id"])

    threads = [threading.Thread(target=fire, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    # Kill it mid-stream, once many events are in (however slow the machine is).
    wait_for(lambda: len(acknowledged) > 60, timeout=120, what="events acknowledged before the kill")
    worker.process.send_signal(signal.SIGKILL)
    worker.process.wait(10)
    stop.set()
    for t in threads:
        t.join(10)
    assert len(acknowledged) > 50, "the clients should have got many events in"

    restarted = start_worker(data_dir)
    try:
        restarted.wait_idle(timeout=180)
        stored: set[str] = set()
        for client_no in range(4):
            offset = 0
            while True:
                page = restarted.get(f"/api/v1/observations?session_id=kill-{client_no}&limit=1000&offset={offset}")
                stored |= {r["tool_use_id"] for r in page["results"]}
                offset += len(page["results"])
                if not page["results"]:
                    break
        missing = set(acknowledged) - stored
        assert not missing, f"{len(missing)} acknowledged events lost"
    finally:
        restarted.stop()


def test_spooled_events_are_ingested_at_start_and_on_request(tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    spool = data_dir / "spool.jsonl"
    lines = [
        json.dumps({"id": str(uuid.uuid4()), "received_at": time.time(), "payload": tool_use_event("spooled", n)})
        for n in range(5)
    ]
    spool.write_text("\n".join(lines) + "\n{torn line without end\n")
    worker = start_worker(data_dir)
    try:
        worker.wait_idle()
        assert worker.get("/api/v1/observations?session_id=spooled")["total"] == 5
        assert not spool.exists()
        assert "torn line" in (data_dir / "spool.rejected.jsonl").read_text(), "a torn line is kept, not dropped"
        # A hook that spooled while the worker was running (e.g. it timed out). The
        # pipeline's own pass may take the line before the request does: either
        # way the user sees one more observation, and only one.
        spool.write_text(json.dumps({"id": "late", "payload": tool_use_event("spooled", 99)}) + "\n")
        assert worker.post("/api/v1/spool/ingest", {})["ingested"] in (0, 1)
        wait_for(lambda: worker.get("/api/v1/observations?session_id=spooled")["total"] == 6)
        worker.wait_idle()
        assert worker.get("/api/v1/observations?session_id=spooled")["total"] == 6
        assert not spool.exists()
    finally:
        worker.stop()


def test_a_spooled_line_is_cut_at_newlines_only(tmp_path):
    """A garbage line with a stray carriage return is kept aside whole, as one line, and the
    valid line after it is ingested (text-mode reading would have made it two rejects)."""
    from memory_anchor.core import paths
    from memory_anchor.worker.capture.inbox import Inbox
    from memory_anchor.worker.store.db import Database

    spool = tmp_path / "spool.jsonl"
    valid = json.dumps({"id": "after-cr", "payload": tool_use_event("cr", 1)})
    spool.write_bytes(b"\x00torn\rgarbage\n" + valid.encode() + b"\n")
    db = Database(paths.database_path(tmp_path))
    try:
        assert Inbox(db).ingest_spool(spool) == 1
    finally:
        db.close()
    rejected = [json.loads(line) for line in (tmp_path / "spool.rejected.jsonl").read_text().splitlines()]
    assert [r["line"] for r in rejected] == ["\x00torn\rgarbage"]


@pytest.mark.both_backends
def test_a_nul_in_a_captured_prompt_is_stored_not_quarantined(shared_worker, worker_backend):
    sid = f"s-nul-{uuid.uuid4().hex[:8]}"
    before = shared_worker.get("/api/v1/status")["inbox"].get("quarantined", 0)
    event = {"session_id": sid, "cwd": "/tmp/nul", "hook_event_name": "UserPromptSubmit", "prompt": "binary \x00 output"}
    shared_worker.post("/api/v1/events", event, expect=202)

    def timeline():
        return shared_worker.get(f"/api/v1/timeline?session_id={sid}")["results"]

    wait_for(lambda: timeline() or shared_worker.get("/api/v1/status")["inbox"].get("quarantined", 0) > before,
             what="the prompt stored or quarantined")  # fmt: skip
    kept = "\x00" if worker_backend == "sqlite" else "\ufffd"  # PostgreSQL's text cannot hold U+0000
    assert [r["title"] for r in timeline()] == [f"binary {kept} output"]
    assert shared_worker.get("/api/v1/status")["inbox"].get("quarantined", 0) == before


def test_an_agent_can_write_an_observation_on_purpose(shared_worker):
    answer = shared_worker.post(
        "/api/v1/observations",
        {"type": "decision", "summary": "Chose argon2 over bcrypt for password hashing: memory-hard",
         "project": "/tmp/deliberate", "session_id": "deliberate-1", "raw_output": "token=ghp_" + "a" * 36},
        expect=201, headers={"X-Memory-Anchor-Agent": "planner"},
    )  # fmt: skip
    stored = shared_worker.post("/api/v1/observations/batch", {"ids": [answer["id"]]})["results"][0]
    assert stored["type"] == "decision" and stored["layer"] == "verified_fact"
    assert stored["agent_id"] == "planner" and stored["actor"] == "planner"
    assert "ghp_" + "a" * 36 not in json.dumps(stored), "secrets are redacted on this path too"
    status, body = shared_worker.request("POST", "/api/v1/observations", {"type": "gossip", "summary": "x"})
    assert status == 422 and body["error"]["code"] == "invalid_request"
