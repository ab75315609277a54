"""The mem0-compatible REST API, against a real worker."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.both_backends


def add(worker, **body):
    return worker.post("/api/v1/memories", body)["results"]


def test_add_without_inference_stores_each_message_as_given(shared_worker):
    results = add(
        shared_worker,
        messages=[
            {"role": "user", "content": "Alice prefers tabs over spaces in Go code"},
            {"role": "assistant", "content": "Noted: the deploy script lives in ops/deploy.sh"},
        ],
        user_id="alice-1",
        infer=False,
        metadata={"source": "chat"},
    )
    assert [r["event"] for r in results] == ["ADD", "ADD"]
    stored = shared_worker.get(f"/api/v1/memories/{results[0]['id']}")
    assert stored["memory"] == "Alice prefers tabs over spaces in Go code"
    assert stored["user_id"] == "alice-1"
    assert stored["metadata"] == {"source": "chat", "role": "user"}
    assert stored["kind"] == "memory"


def test_infer_without_a_key_falls_back_to_storing_the_text(shared_worker):
    results = add(shared_worker, content="The CI runs on Tuesdays at noon", user_id="infer-user")
    assert len(results) == 1 and results[0]["event"] == "ADD"
    assert shared_worker.get(f"/api/v1/memories/{results[0]['id']}")["memory"] == "The CI runs on Tuesdays at noon"


def test_a_nul_character_is_stored_not_refused(shared_worker, worker_backend):
    # SQLite keeps U+0000; PostgreSQL's text and jsonb cannot hold it, so the team store keeps U+FFFD.
    kept = "\x00" if worker_backend == "sqlite" else "\ufffd"
    added = add(shared_worker, content="find -print0 gave a\x00b", metadata={"raw": "c\x00d", "code": "\\u0000"},
                user_id="nul-user", infer=False)  # fmt: skip
    stored = shared_worker.get(f"/api/v1/memories/{added[0]['id']}")
    assert stored["memory"] == f"find -print0 gave a{kept}b"
    assert stored["metadata"]["raw"] == f"c{kept}d"
    assert stored["metadata"]["code"] == "\\u0000", "a backslash and 'u0000' are not a NUL"
    status, body = shared_worker.request("GET", "/api/v1/memories?user_id=nul-user&as_of=snap%00shot")
    assert status == 404 and body["error"]["code"] == "not_found"


def test_reindex_rebuilds_the_local_index_and_is_refused_on_team_storage(shared_worker, worker_backend):
    add(shared_worker, content="the reindexed note about parsers", user_id="reindex-user", infer=False)
    status, body = shared_worker.request("POST", "/api/v1/admin/reindex", {})
    if worker_backend == "sqlite":
        assert status == 200 and body["indexed"] >= 1
    else:  # the vectors are the team database's, shared by every member's worker
        assert status == 409 and body["error"]["code"] == "team_storage"
    hits = shared_worker.post("/api/v1/memories/search", {"query": "reindexed parsers note",
                                                         "filters": {"user_id": "reindex-user"}})["results"]  # fmt: skip
    assert [h["memory"] for h in hits] == ["the reindexed note about parsers"]


def test_search_is_scoped_by_user_and_finds_by_meaning(shared_worker):
    add(shared_worker, content="Bob's favourite database is PostgreSQL", user_id="bob-2", infer=False)
    add(shared_worker, content="Bob walks his dog every morning", user_id="bob-2", infer=False)
    add(shared_worker, content="Carol's favourite database is SQLite", user_id="carol-2", infer=False)
    hits = shared_worker.post(
        "/api/v1/memories/search", {"query": "which database does he like?", "filters": {"user_id": "bob-2"}, "top_k": 5}
    )["results"]
    assert hits, "a non-empty scope must return something"
    assert hits[0]["memory"] == "Bob's favourite database is PostgreSQL"
    assert all(h["user_id"] == "bob-2" for h in hits)
    assert all(isinstance(h["score"], float) for h in hits)
    assert {"id", "memory", "score", "metadata", "created_at"} <= set(hits[0])


def test_search_threshold_and_top_k(shared_worker):
    for n in range(6):
        add(shared_worker, content=f"release note number {n} for the parser", user_id="topk-user", infer=False)
    hits = shared_worker.post(
        "/api/v1/memories/search", {"query": "release note parser", "filters": {"user_id": "topk-user"}, "top_k": 3}
    )["results"]
    assert len(hits) == 3
    none = shared_worker.post(
        "/api/v1/memories/search",
        {"query": "release note parser", "filters": {"user_id": "topk-user"}, "threshold": 1000.0},
    )["results"]
    assert none == []


def test_timestamp_records_when_it_happened_and_filters_by_time(shared_worker):
    old = add(shared_worker, content="Moved the office to Lisbon", user_id="time-user", timestamp="2023-05-08T13:56:00Z", infer=False)
    new = add(shared_worker, content="Moved the office to Porto", user_id="time-user", timestamp=1735689600, infer=False)
    record = shared_worker.get(f"/api/v1/memories/{old[0]['id']}")
    assert record["happened_at"].startswith("2023-05-08T13:56")
    assert record["created_at"] > record["happened_at"]
    hits = shared_worker.post(
        "/api/v1/memories/search",
        {"query": "office move", "filters": {"user_id": "time-user"}, "before": "2024-01-01T00:00:00Z"},
    )["results"]
    assert [h["id"] for h in hits] == [old[0]["id"]]
    assert new[0]["id"] not in [h["id"] for h in hits]


def test_update_writes_a_version_and_history_lists_them_all(shared_worker):
    memory_id = add(shared_worker, content="The API listens on port 8080", user_id="hist", infer=False)[0]["id"]
    updated = shared_worker.request("PUT", f"/api/v1/memories/{memory_id}", {"text": "The API listens on port 9090"})
    assert updated[0] == 200
    assert shared_worker.get(f"/api/v1/memories/{memory_id}")["memory"] == "The API listens on port 9090"
    history = shared_worker.get(f"/api/v1/memories/{memory_id}/history")["results"]
    assert [v["memory"] for v in history] == ["The API listens on port 8080", "The API listens on port 9090"]
    assert [v["version"] for v in history] == [1, 2]
    assert all(v["actor"] and v["created_at"] for v in history)


def test_metadata_private_on_a_later_version(shared_worker, worker_backend):
    memory_id = add(shared_worker, content="The staging host is db-2", user_id="privacy", infer=False)[0]["id"]
    status, body = shared_worker.request("PUT", f"/api/v1/memories/{memory_id}",
                                         {"text": "The staging password is hunter2", "metadata": {"private": True}})  # fmt: skip
    if worker_backend == "sqlite":  # one person's memory: `private` is just metadata
        assert status == 200 and body["metadata"]["private"] is True
    else:  # the team database fixes a record's privacy by its first version: shared stays shared
        assert status == 409 and body["error"]["code"] == "privacy_fixed" and "first version" in body["error"]["message"]
        assert shared_worker.get(f"/api/v1/memories/{memory_id}")["memory"] == "The staging host is db-2"


def test_delete_hides_the_memory_but_keeps_its_history(shared_worker):
    memory_id = add(shared_worker, content="Temporary note about flaky test", user_id="del", infer=False)[0]["id"]
    assert shared_worker.request("DELETE", f"/api/v1/memories/{memory_id}")[0] == 200
    status, body = shared_worker.request("GET", f"/api/v1/memories/{memory_id}")
    assert status == 404 and body["error"]["code"] == "not_found"
    history = shared_worker.get(f"/api/v1/memories/{memory_id}/history")["results"]
    assert history[-1]["deleted"] is True
    hits = shared_worker.post("/api/v1/memories/search", {"query": "flaky test note", "filters": {"user_id": "del"}})["results"]
    assert memory_id not in [h["id"] for h in hits]


def test_get_all_and_delete_all_by_scope(shared_worker):
    for n in range(3):
        add(shared_worker, content=f"scoped memory {n}", user_id="bulk", infer=False)
    add(shared_worker, content="someone else's memory", user_id="bulk-other", infer=False)
    listed = shared_worker.get("/api/v1/memories?user_id=bulk")
    assert listed["total"] == 3 and len(listed["results"]) == 3
    status, body = shared_worker.request("DELETE", "/api/v1/memories?user_id=bulk")
    assert status == 200 and body["deleted"] == 3
    assert shared_worker.get("/api/v1/memories?user_id=bulk")["total"] == 0
    assert shared_worker.get("/api/v1/memories?user_id=bulk-other")["total"] == 1


@pytest.mark.parametrize(
    "body, code",
    [
        ({}, "invalid_request"),
        ({"content": ""}, "invalid_request"),
        ({"content": 42}, "invalid_request"),
        ({"messages": "not a list"}, "invalid_request"),
        ({"content": "x", "timestamp": "yesterday-ish"}, "invalid_timestamp"),
        ({"content": "x", "unknown_field": 1}, "invalid_request"),
    ],
)
def test_bad_add_requests_get_clear_errors_and_store_nothing(shared_worker, body, code):
    before = shared_worker.get("/api/v1/status")["records"].get("memory", 0)
    status, answer = shared_worker.request("POST", "/api/v1/memories", body)
    assert 400 <= status < 500
    assert answer["error"]["code"] == code
    assert answer["error"]["message"]
    assert shared_worker.get("/api/v1/status")["records"].get("memory", 0) == before


def test_bad_search_and_unknown_ids(shared_worker):
    status, answer = shared_worker.request("POST", "/api/v1/memories/search", {"query": ""})
    assert status == 422 and answer["error"]["code"] == "invalid_request"
    status, answer = shared_worker.request("POST", "/api/v1/memories/search", {"query": "x", "top_k": 0})
    assert status == 422
    status, answer = shared_worker.request("GET", "/api/v1/memories/no-such-id")
    assert status == 404 and answer["error"]["code"] == "not_found"
    status, answer = shared_worker.request("PUT", "/api/v1/memories/no-such-id", {"text": "x"})
    assert status == 404
    status, answer = shared_worker.request("DELETE", "/api/v1/memories")
    assert status == 400 and "user_id" in answer["error"]["message"]
    status, answer = shared_worker.request("GET", "/api/v1/memories?branch=no-such-branch")
    assert status == 404


def test_openapi_describes_the_routes(shared_worker):
    doc = shared_worker.get("/api/v1/openapi.json")
    assert doc["openapi"].startswith("3.")
    assert "post" in doc["paths"]["/api/v1/memories"]
    body_ref = doc["paths"]["/api/v1/memories"]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert body_ref.endswith("AddMemoryRequest")
    assert "query" in doc["components"]["schemas"]["SearchRequest"]["properties"]


def test_a_password_written_straight_after_the_word_is_not_stored(shared_worker):
    """A mem0 add whose text gives "password <value>" (no "is", no ":") keeps the sentence, not the value."""
    secret = "CorrectHorse-Battery7"
    text = f"The staging database user is admin and password {secret}"
    added = add(shared_worker, content=text, user_id="bare-password", metadata={"note": f"and password {secret}"},
                infer=False)  # fmt: skip
    stored = shared_worker.get(f"/api/v1/memories/{added[0]['id']}")
    assert stored["memory"] == "The staging database user is admin and password [REDACTED:prose_password]"
    assert stored["metadata"]["note"] == "and password [REDACTED:prose_password]"
    history = shared_worker.get(f"/api/v1/memories/{added[0]['id']}/history")["results"]
    hits = shared_worker.post("/api/v1/memories/search", {"query": "staging database password",
                                                         "filters": {"user_id": "bare-password"}})["results"]  # fmt: skip
    assert [h["id"] for h in hits] == [added[0]["id"]]
    assert secret not in repr([stored, history, hits])


def test_concurrent_adds_each_answer_with_their_own_memories_and_are_found_by_meaning(shared_worker):
    """Adds arriving together share a commit and an embedding pass; a bad one among them fails alone,
    and each memory acknowledged is found by a vector-only search straight after its reply."""
    from concurrent.futures import ThreadPoolExecutor

    topics = ["the kiln cools over two days", "our sourdough starter is fed at dawn", "the canoe leaks at the stern",
              "the greenhouse vents open at 28 degrees", "the beehive was split in May", "the bicycle chain is waxed monthly"]  # fmt: skip
    bodies = [{"content": text, "user_id": "group-user", "infer": False} for text in topics]
    bodies.insert(3, {"content": "on a branch nobody made", "user_id": "group-user", "infer": False, "branch": "no-such-branch"})
    with ThreadPoolExecutor(len(bodies)) as pool:
        answers = list(pool.map(lambda body: shared_worker.request("POST", "/api/v1/memories", body), bodies))
    statuses = [status for status, _ in answers]
    assert statuses.count(200) == len(topics) and statuses[3] == 404
    for (status, body), sent in zip(answers, bodies):
        if status == 200:
            assert [r["memory"] for r in body["results"]] == [sent["content"]]
    hits = shared_worker.post("/api/v1/memories/search", {"query": "when does the hive get divided", "mode": "vector",
                                                         "filters": {"user_id": "group-user"}, "top_k": 1})["results"]  # fmt: skip
    assert hits and hits[0]["memory"] == "the beehive was split in May"


def test_sigkill_mid_stream_loses_no_acknowledged_add_and_restart_makes_them_searchable(tmp_path):
    """An add answers once committed, before its vector is made: a kill in between loses nothing
    acknowledged, and the next start embeds what was left (then a vector search finds it)."""
    import signal
    import threading

    from tests.conftest import start_worker, wait_for

    data_dir = tmp_path / "data"
    worker = start_worker(data_dir)
    acknowledged: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def fire(client_no: int) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            text = f"client {client_no} note {n} about the harbour ferry timetable"
            try:
                status, _ = worker.request("POST", "/api/v1/memories", {"content": text, "user_id": "kill", "infer": False})
            except OSError:
                return  # the worker is gone: never acknowledged
            if status == 200:
                with lock:
                    acknowledged.append(text)

    threads = [threading.Thread(target=fire, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    wait_for(lambda: len(acknowledged) > 30, timeout=120, what="adds acknowledged before the kill")
    worker.process.send_signal(signal.SIGKILL)
    worker.process.wait(10)
    stop.set()
    for t in threads:
        t.join(10)

    restarted = start_worker(data_dir)
    try:
        restarted.wait_idle(timeout=180)
        stored = {r["memory"] for r in restarted.get("/api/v1/memories?user_id=kill&limit=1000")["results"]}
        missing = set(acknowledged) - stored
        assert not missing, f"{len(missing)} acknowledged adds lost"
        hits = restarted.post("/api/v1/memories/search", {"query": "harbour ferry timetable", "mode": "vector",
                                                          "filters": {"user_id": "kill"}, "top_k": 5})["results"]  # fmt: skip
        assert hits and all(h["score"] > 0.3 for h in hits)
    finally:
        restarted.stop()
