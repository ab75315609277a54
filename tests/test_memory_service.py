"""The mem0-shaped memory service (memory_anchor/worker/memory/memories.py, mem0_platform.py) over each backend.

Listing, paging, history, entities and deleting by filter read and write the
store directly; adding and updating also hand the new versions to the vector
index, which these tests leave out (they write memories with Records.put, as
MemoryService.add does).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from memory_anchor.worker.memory.mem0_platform import Mem0Platform
from memory_anchor.worker.memory.memories import MemoryService
from memory_anchor.worker.store.records import NotFound, Records


@pytest.fixture
def services(store_db):
    return SimpleNamespace(db=store_db)


def remember(db, text, **columns):
    with db.transaction() as conn:
        return Records.put(conn, "memory", text, **columns)


def test_list_and_page_take_mem0_filters_on_metadata(services):
    remember(services.db, "prefers dark mode", user_id="alice", metadata={"topic": "ui", "priority": 3})
    remember(services.db, "uses PostgreSQL 15", user_id="alice", metadata={"topic": "db", "priority": 10})
    remember(services.db, "likes tea", user_id="bob", metadata={"topic": "food"})
    service = MemoryService(services)
    rows, total = service.list({"user_id": "alice", "metadata": {"topic": "db"}})
    assert total == 1 and [r["text"] for r in rows] == ["uses PostgreSQL 15"]
    rows, total = service.list({"AND": [{"user_id": "alice"}, {"priority": {"gte": 3}}]})
    assert total == 2
    page, total = Mem0Platform(services).page({"user_id": "alice"}, page=2, page_size=1)
    assert total == 2 and len(page) == 1 and page[0]["user_id"] == "alice" and page[0]["created_at"]


def test_delete_all_by_a_metadata_filter_leaves_the_rest(services):
    remember(services.db, "ui note", user_id="alice", metadata={"topic": "ui"})
    keep = remember(services.db, "db note", user_id="alice", metadata={"topic": "db"})
    service = MemoryService(services)
    assert service.delete_all({"user_id": "alice", "topic": {"ne": "db"}}) == 1
    rows, total = service.list({"user_id": "alice"})
    assert total == 1 and rows[0]["id"] == keep["id"]


def test_history_and_entities_in_mem0_shape(services):
    first = remember(services.db, "the API port is 8080", agent_id="codex", metadata={"app_id": "billing"})
    remember(services.db, "standups are at ten", user_id="alice")
    with services.db.transaction() as conn:
        Records.update(conn, first["id"], text="the API port is 9090")
    platform = Mem0Platform(services)
    history = platform.history(first["id"])
    assert [(h["event"], h["old_memory"], h["new_memory"]) for h in history] == [
        ("ADD", None, "the API port is 8080"), ("UPDATE", "the API port is 8080", "the API port is 9090"),
    ]  # fmt: skip
    entities = {(e["type"], e["name"]): e["total_memories"] for e in platform.entities()}
    assert entities == {("agent", "codex"): 1, ("app", "billing"): 1, ("user", "alice"): 1}
    MemoryService(services).delete(first["id"])
    with pytest.raises(NotFound):
        MemoryService(services).get(first["id"])
