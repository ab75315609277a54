"""`from memory_anchor import Memory, AsyncMemory`: mem0's interface over a real worker."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from memory_anchor import AsyncMemory, Memory
from memory_anchor.client.worker_client import WorkerError
from tests.conftest import ROOT
from memory_anchor.core import lifecycle

pytestmark = pytest.mark.both_backends


def test_memory_starts_the_worker_and_speaks_mem0(tmp_path, monkeypatch):
    for key in [k for k in os.environ if k.startswith(("ANTHROPIC_", "CLAUDE_"))]:
        monkeypatch.delenv(key)
    data = tmp_path / "data"
    assert lifecycle.running_worker(data) is None
    memory = Memory(data)
    try:
        added = memory.add("Ina deploys with ops/deploy.sh", user_id="ina", metadata={"topic": "ops"}, infer=False)
        assert lifecycle.running_worker(data) is not None, "the first call starts the worker"
        memory_id = added["results"][0]["id"]
        memory.add([{"role": "user", "content": "Ina's editor is Helix"}], user_id="ina", infer=False)
        memory.add("Jon's editor is Emacs", user_id="jon", infer=False)

        hits = memory.search("which editor?", filters={"user_id": "ina"})["results"]
        assert hits[0]["memory"] == "Ina's editor is Helix"
        assert {h["user_id"] for h in hits} == {"ina"}
        assert memory.search("which editor?", user_id="jon")["results"][0]["memory"] == "Jon's editor is Emacs"
        ops = memory.get_all(filters={"user_id": "ina", "topic": {"in": ["ops"]}})["results"]
        assert [m["id"] for m in ops] == [memory_id]

        assert memory.get(memory_id)["metadata"]["topic"] == "ops"
        assert memory.get("no-such-id") is None
        memory.update(memory_id, text="Ina deploys with make deploy")
        assert [h["event"] for h in memory.history(memory_id)] == ["ADD", "UPDATE"]
        assert memory.get(memory_id)["memory"] == "Ina deploys with make deploy"

        memory.delete(memory_id)
        assert memory.get(memory_id) is None
        with pytest.raises(WorkerError) as missing:
            memory.delete(memory_id)
        assert missing.value.status == 404

        with pytest.raises(ValueError):
            memory.delete_all()
        memory.delete_all(user_id="ina")
        assert memory.get_all(filters={"user_id": "ina"})["results"] == []
        assert len(memory.get_all(filters={"user_id": "jon"})["results"]) == 1

        memory.reset()
        assert memory.get_all()["results"] == []
    finally:
        lifecycle.stop(data)


def test_bad_filters_raise_with_the_workers_message(shared_worker):
    memory = Memory(shared_worker.data_dir, autostart=False)
    with pytest.raises(WorkerError) as bad:
        memory.search("x", filters={"user_id": {"like": "a%"}})
    assert bad.value.status == 400 and "'like' is not a filter operator" in str(bad.value)


def test_async_memory(shared_worker):
    async def scenario():
        async with AsyncMemory(shared_worker.data_dir, autostart=False, branch="main") as memory:
            added = await memory.add("Kai prefers dark mode", user_id="kai", infer=False)
            memory_id = added["results"][0]["id"]
            assert (await memory.search("which theme?", filters={"user_id": "kai"}))["results"][0]["id"] == memory_id
            await memory.update(memory_id, metadata={"checked": True})
            assert (await memory.get(memory_id))["metadata"]["checked"] is True
            assert (await memory.get("no-such-id")) is None
            assert len(await memory.history(memory_id)) == 2
            assert [m["id"] for m in (await memory.get_all(user_id="kai"))["results"]] == [memory_id]
            await memory.delete(memory_id)
            await memory.add("Kai uses fish", user_id="kai", infer=False)
            await memory.delete_all(user_id="kai")
            assert (await memory.get_all(user_id="kai"))["results"] == []

    asyncio.run(scenario())


def test_hooks_do_not_pay_for_the_sdk():
    """Hooks import memory_anchor with `python3 -S`; the SDK (and the client) load only when used."""
    code = "import sys, memory_anchor.hookkit; print(sorted(m for m in sys.modules if m.startswith('memory_anchor')))"
    out = subprocess.run([sys.executable, "-S", "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "memory_anchor.client.sdk" not in out and "memory_anchor.client.worker_client" not in out
