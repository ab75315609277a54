"""mem0's own SDK (`mem0ai`, pinned in the test extras) against a real worker.

A mem0 user points `MemoryClient(api_key=..., host=...)` at the worker's URL and
token; nothing else changes in their code. Covered: ping (at construction), add,
get_all, search, get, update, history, delete, delete_all, users, delete_users,
reset, batch_update and batch_delete, sync and async, and the SDK's error classes.
"""

from __future__ import annotations

import asyncio
import os
import tempfile

import pytest

# mem0 writes ~/.mem0 and sends telemetry when imported; neither here.
os.environ["MEM0_TELEMETRY"] = "False"
os.environ.setdefault("MEM0_DIR", tempfile.mkdtemp(prefix="mem0-home-"))

from mem0 import AsyncMemoryClient, MemoryClient  # noqa: E402
from mem0.exceptions import MemoryNotFoundError, ValidationError  # noqa: E402

pytestmark = pytest.mark.both_backends


@pytest.fixture(scope="module")
def client(shared_worker):
    return MemoryClient(api_key=shared_worker.token, host=shared_worker.url)


def test_a_wrong_key_is_refused_at_construction(shared_worker):
    with pytest.raises(ValueError, match="token does not match"):
        MemoryClient(api_key="not-the-token", host=shared_worker.url)


def test_add_get_update_history_delete(client):
    added = client.add(
        [{"role": "user", "content": "I am vegetarian and allergic to nuts"}],
        user_id="mem0-alex", metadata={"topic": "food"}, infer=False,
    )  # fmt: skip
    assert [r["event"] for r in added["results"]] == ["ADD"]
    memory_id = added["results"][0]["id"]

    memory = client.get(memory_id)
    assert memory["memory"] == "I am vegetarian and allergic to nuts"
    assert memory["user_id"] == "mem0-alex"
    assert memory["metadata"]["topic"] == "food"
    assert memory["created_at"] and memory["updated_at"]

    updated = client.update(memory_id, text="Alex is vegan")
    assert updated["memory"] == "Alex is vegan"
    retagged = client.update(memory_id, metadata={"topic": "diet"})
    assert retagged["memory"] == "Alex is vegan" and retagged["metadata"]["topic"] == "diet"
    assert retagged["created_at"] == memory["created_at"]

    history = client.history(memory_id)
    assert [h["event"] for h in history] == ["ADD", "UPDATE", "UPDATE"]
    assert history[1]["old_memory"] == "I am vegetarian and allergic to nuts"
    assert history[1]["new_memory"] == "Alex is vegan"

    assert "deleted" in client.delete(memory_id)["message"].lower()
    with pytest.raises(MemoryNotFoundError):
        client.get(memory_id)
    assert client.history(memory_id)[-1]["event"] == "DELETE"


def test_search_is_scoped_by_filters(client):
    client.add("Bea's favourite database is PostgreSQL", user_id="mem0-bea", infer=False)
    client.add("Bea walks her dog every morning", user_id="mem0-bea", infer=False)
    client.add("Cem's favourite database is SQLite", user_id="mem0-cem", infer=False)
    hits = client.search("which database does she like?", filters={"user_id": "mem0-bea"}, top_k=5)["results"]
    assert hits[0]["memory"] == "Bea's favourite database is PostgreSQL"
    assert {h["user_id"] for h in hits} == {"mem0-bea"}
    assert all(0.0 <= h["score"] <= 1.0 for h in hits)


def test_filter_language_and_or_not_and_operators(client):
    for n, (topic, app) in enumerate([("perf", "cli"), ("db", "cli"), ("perf", "web"), ("ui", "web")]):
        client.add(f"note {n} about {topic}", user_id="mem0-dan", app_id=app, metadata={"topic": topic, "n": n}, infer=False)

    def texts(filters):
        return sorted(m["memory"] for m in client.get_all(filters=filters)["results"])

    assert texts({"AND": [{"user_id": "mem0-dan"}, {"app_id": "cli"}]}) == ["note 0 about perf", "note 1 about db"]
    assert texts({"user_id": "mem0-dan", "OR": [{"topic": "ui"}, {"n": {"lt": 1}}]}) == ["note 0 about perf", "note 3 about ui"]
    assert texts({"user_id": "mem0-dan", "NOT": [{"topic": {"in": ["perf", "db"]}}]}) == ["note 3 about ui"]
    assert texts({"user_id": "mem0-dan", "n": {"gte": 2}, "topic": {"ne": "ui"}}) == ["note 2 about perf"]
    assert texts({"user_id": "mem0-dan", "memory": {"icontains": "ABOUT DB"}}) == ["note 1 about db"]
    assert len(texts({"user_id": "mem0-dan", "app_id": "*", "created_at": {"gte": "2000-01-01"}})) == 4
    hits = client.search("perf", filters={"AND": [{"user_id": "mem0-dan"}, {"NOT": {"app_id": "cli"}}]})["results"]
    assert {h["app_id"] for h in hits} == {"web"}


def test_bad_filters_get_a_400_that_names_the_problem(client):
    with pytest.raises(ValidationError, match="'deep' is not a filter operator"):
        client.search("x", filters={"user_id": "u", "topic": {"deep": {"er": 1}}})
    with pytest.raises(ValidationError, match="OR needs a non-empty list"):
        client.get_all(filters={"OR": {"user_id": "u"}})
    with pytest.raises(ValidationError, match="not an ISO 8601"):
        client.get_all(filters={"created_at": {"gt": "last tuesday"}})


def test_get_all_pages_like_mem0(client):
    for n in range(5):
        client.add(f"paged memory {n}", user_id="mem0-pages", infer=False)
    first = client.get_all(filters={"user_id": "mem0-pages"}, page=1, page_size=2)
    assert first["count"] == 5 and len(first["results"]) == 2
    assert first["previous"] is None and "page=2" in first["next"]
    last = client.get_all(filters={"user_id": "mem0-pages"}, page=3, page_size=2)
    assert len(last["results"]) == 1 and last["next"] is None and "page=2" in last["previous"]
    seen = {m["id"] for p in (1, 2, 3) for m in client.get_all(filters={"user_id": "mem0-pages"}, page=p, page_size=2)["results"]}
    assert len(seen) == 5


def test_batch_update_and_delete(client):
    ids = [client.add(f"batch item {n}", user_id="mem0-batch", infer=False)["results"][0]["id"] for n in range(3)]
    client.batch_update([{"memory_id": ids[0], "text": "batch item zero"}, {"memory_id": ids[1], "metadata": {"k": 1}}])
    assert client.get(ids[0])["memory"] == "batch item zero"
    assert client.get(ids[1])["metadata"]["k"] == 1
    client.batch_delete([{"memory_id": ids[0]}, {"memory_id": ids[2]}])
    assert [m["id"] for m in client.get_all(filters={"user_id": "mem0-batch"})["results"]] == [ids[1]]
    with pytest.raises(MemoryNotFoundError):
        client.batch_delete([{"memory_id": ids[1]}, {"memory_id": "no-such-memory"}])
    assert client.get(ids[1])  # all or none: the valid half was not deleted


def test_delete_all_users_and_reset(client):
    client.add("erin likes tea", user_id="mem0-erin", infer=False)
    client.add("erin's agent summarises mail", agent_id="mem0-erin-agent", infer=False)
    client.add("frank likes coffee", user_id="mem0-frank", infer=False)
    entities = {(e["type"], e["name"]): e["total_memories"] for e in client.users()["results"]}
    assert entities[("user", "mem0-erin")] == 1 and entities[("agent", "mem0-erin-agent")] == 1

    client.delete_all(user_id="mem0-erin")
    assert client.get_all(filters={"user_id": "mem0-erin"})["count"] == 0
    client.delete_users(agent_id="mem0-erin-agent")
    assert client.get_all(filters={"agent_id": "mem0-erin-agent"})["count"] == 0
    assert client.get_all(filters={"user_id": "mem0-frank"})["count"] == 1

    client.reset()
    assert client.users()["results"] == []
    assert client.get_all(filters={})["count"] == 0


def test_the_async_client_does_the_same(shared_worker):
    async def scenario():
        async with AsyncMemoryClient(api_key=shared_worker.token, host=shared_worker.url) as client:
            added = await client.add("Gus prefers dark mode", user_id="mem0-gus", infer=False)
            memory_id = added["results"][0]["id"]
            hits = (await client.search("which theme?", filters={"user_id": "mem0-gus"}))["results"]
            assert hits[0]["id"] == memory_id
            assert (await client.get_all(filters={"user_id": "mem0-gus"}))["count"] == 1
            await client.update(memory_id, text="Gus prefers light mode")
            assert (await client.get(memory_id))["memory"] == "Gus prefers light mode"
            assert [h["event"] for h in await client.history(memory_id)] == ["ADD", "UPDATE"]
            assert any(e["name"] == "mem0-gus" for e in (await client.users())["results"])
            await client.delete(memory_id)
            await client.add("Gus uses vim", user_id="mem0-gus", infer=False)
            await client.delete_all(user_id="mem0-gus")
            assert (await client.get_all(filters={"user_id": "mem0-gus"}))["count"] == 0

    asyncio.run(scenario())
