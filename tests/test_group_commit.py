"""Group commit of hook events, the inbox's batch insert, and the pipeline giving way to capture."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from memory_anchor.worker.capture.inbox import Arrival, Inbox
from memory_anchor.worker.pipeline import drain as pipeline_module
from memory_anchor.worker.pipeline.drain import Pipeline
from memory_anchor.worker.store.db import Database
from memory_anchor.worker.store.group_commit import GroupCommit


async def run_inline(func, *args):
    await asyncio.sleep(0.01)  # a commit takes a while: more requests arrive meanwhile
    return func(*args)


def test_requests_arriving_together_share_a_commit_and_each_gets_its_own_result():
    batches: list[list[int]] = []

    def commit(items: list[int]) -> list[int]:
        batches.append(list(items))
        return [item * 10 for item in items]

    async def scenario():
        commits = GroupCommit(commit, run_inline)
        first = await asyncio.gather(*(commits.submit(n) for n in range(5)))
        second = await asyncio.gather(*(commits.submit(n) for n in range(5, 7)))
        return first, second

    first, second = asyncio.run(scenario())
    assert first == [0, 10, 20, 30, 40] and second == [50, 60]
    assert batches == [[0, 1, 2, 3, 4], [5, 6]]


def test_requests_arriving_during_a_commit_go_in_the_next_one():
    batches: list[list[str]] = []

    async def scenario():
        commits = GroupCommit(lambda items: batches.append(list(items)) or items, run_inline)
        early = asyncio.ensure_future(commits.submit("a"))
        await asyncio.sleep(0.005)  # the commit of "a" is under way
        late = await asyncio.gather(commits.submit("b"), commits.submit("c"))
        return await early, late

    assert asyncio.run(scenario()) == ("a", ["b", "c"])
    assert batches == [["a"], ["b", "c"]]


def test_a_failed_commit_reaches_every_waiter_and_the_next_commit_works():
    calls = {"n": 0}

    def commit(items):
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError("disk full")
        return items

    async def scenario():
        commits = GroupCommit(commit, run_inline)
        failed = await asyncio.gather(*(commits.submit(n) for n in range(3)), return_exceptions=True)
        return failed, await commits.submit(9)

    failed, after = asyncio.run(scenario())
    assert all(isinstance(e, OSError) and "disk full" in str(e) for e in failed)
    assert after == 9


def test_accept_many_keeps_the_dedup_rules_within_one_batch(tmp_path: Path):
    db = Database(tmp_path / "memory.sqlite3")
    try:
        inbox = Inbox(db)
        tool = {"hook_event_name": "PostToolUse", "session_id": "s", "tool_use_id": "toolu_1"}
        prompt = {"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt": "hi"}
        results = inbox.accept_many(
            [
                Arrival(tool),
                Arrival({**tool, "tool_response": "retried"}),  # same tool_use_id
                Arrival(prompt, event_id="evt-1"),
                Arrival({**prompt, "prompt": "other"}, event_id="evt-1"),  # same hook event id
                Arrival(prompt),
                Arrival(dict(prompt)),  # same content hash
            ]
        )
        assert [dup for _, dup in results] == [False, True, False, True, False, True]
        assert results[1][0] == results[0][0] and results[3][0] == results[2][0] and results[5][0] == results[4][0]
        assert inbox.accept(tool) == (results[0][0], True)  # across batches too
        assert inbox.counts() == {"pending": 3, "quarantined": 0}
    finally:
        db.close()


class VirtualClock:
    """Time that moves only when the pipeline sleeps: the test cannot depend on how busy the machine is.

    Kept in whole milliseconds, so every sleep moves it forward.
    """

    def __init__(self):
        self.ms = 0
        self.on_tick = lambda: None

    def monotonic(self) -> float:
        return self.ms / 1000

    async def sleep(self, seconds: float) -> None:
        end = self.ms + max(1, math.ceil(seconds * 1000 - 1e-6))
        while self.ms < end:  # hook events keep arriving while the pipeline sleeps
            self.ms = min(end, self.ms + 10)
            self.on_tick()


@pytest.fixture
def quick_pipeline(monkeypatch):
    monkeypatch.setattr(pipeline_module, "CAPTURE_QUIET", 0.05)
    monkeypatch.setattr(pipeline_module, "CAPTURE_MAX_DEFER", 0.6)
    pipeline = Pipeline(SimpleNamespace(inbox=None, capture_db=None))
    clock = VirtualClock()
    monkeypatch.setattr(pipeline_module, "time", clock)
    monkeypatch.setattr(pipeline_module, "asyncio", SimpleNamespace(sleep=clock.sleep))
    pipeline.clock = clock
    return pipeline


def wait_during_stream(pipeline: Pipeline, stream_seconds: float) -> float:
    """How long the pipeline holds back while hook events arrive every 10 ms for `stream_seconds`."""
    clock = pipeline.clock
    stream_end = clock.ms + stream_seconds * 1000

    def tick():
        if clock.ms < stream_end:
            pipeline.captured()

    clock.on_tick = tick
    pipeline.captured()
    start = clock.ms
    asyncio.run(pipeline._yield_to_capture())
    return (clock.ms - start) / 1000


def test_the_pipeline_waits_for_a_pause_in_captured_events(quick_pipeline):
    # the last event (within 10 ms of the stream's end) plus one quiet period, not the whole deferral
    assert 0.25 - 0.01 + 0.05 <= wait_during_stream(quick_pipeline, 0.25) <= 0.25 + 0.05 + 0.002


def test_a_steady_stream_still_lets_the_pipeline_run(quick_pipeline):
    assert abs(wait_during_stream(quick_pipeline, 1.5) - 0.6) < 0.011  # CAPTURE_MAX_DEFER, then it runs anyway


def test_a_run_of_prompts_and_tool_uses_commits_once_and_a_failing_event_is_rolled_back_alone(tmp_path: Path, monkeypatch):
    from memory_anchor.schemas.settings import load_settings
    from memory_anchor.worker.services import Services

    services = Services(tmp_path / "data", load_settings(tmp_path / "data"), token="test")
    try:
        base = {"session_id": "s1", "cwd": str(tmp_path), "transcript_path": str(tmp_path / "s1.jsonl")}
        events = [{**base, "hook_event_name": "UserPromptSubmit", "prompt": "Why does the cart total drift?"}]
        events += [{**base, "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_use_id": f"toolu_{n}",
                    "tool_input": {"command": f"pytest tests/test_cart.py -k case{n}"},
                    "tool_response": {"stdout": f"case{n} passed", "stderr": "", "interrupted": False}}
                   for n in range(5)]  # fmt: skip
        events.append({**base, "hook_event_name": "Stop", "stop_hook_active": False})
        ids = [inbox_id for inbox_id, _ in services.inbox.accept_many([Arrival(e) for e in events])]
        pipeline = Pipeline(services)
        seen: list[str] = []
        pipeline.after_event.append(lambda name, event, written: seen.append(event.payload.get("tool_use_id") or name))
        write = Pipeline.on_tool_use

        def broken_for_one(self, conn, event, session, values):
            written = write(self, conn, event, session, values)  # its record is written, then it fails
            if event.payload["tool_use_id"] == "toolu_2":
                raise RuntimeError("a fault in this one event")
            return written

        monkeypatch.setitem(pipeline_module.HANDLERS, "PostToolUse", broken_for_one)
        pipeline.process(services.inbox.claim(64))

        conn = services.db.reader()
        observations = conn.execute("SELECT tool_use_id, created_at FROM records WHERE kind = 'observation'").fetchall()
        assert sorted(r["tool_use_id"] for r in observations) == ["toolu_0", "toolu_1", "toolu_3", "toolu_4"]
        prompt_time = conn.execute("SELECT created_at FROM records WHERE kind = 'prompt'").fetchone()[0]
        assert {r["created_at"] for r in observations} == {prompt_time}  # one transaction stamps one time
        summary_time = conn.execute("SELECT created_at FROM records WHERE kind = 'summary'").fetchone()[0]
        assert summary_time > prompt_time  # the Stop's summary reads them, committed, in a transaction of its own
        status = {r["id"]: (r["status"], r["attempts"]) for r in conn.execute("SELECT id, status, attempts FROM inbox")}
        assert status[ids[3]] == ("pending", 1)  # retried later, as an event failing alone always was
        assert all(status[i] == ("done", 0) for i in ids if i != ids[3])
        assert seen == ["UserPromptSubmit", "toolu_0", "toolu_1", "toolu_3", "toolu_4", "Stop"]  # hooks in order, after the commit
    finally:
        services.close()


def test_an_event_counts_as_pending_until_what_follows_from_it_is_written(tmp_path: Path):
    """A prompt is marked done with its record; the facts extracted from it are written after that
    commit. Until they are, the status still counts it pending: "nothing pending" (what `wait_idle`
    and `import-history --wait` wait for) means every event's work is written."""
    from memory_anchor.schemas.settings import load_settings
    from memory_anchor.worker.services import Services

    services = Services(tmp_path / "data", load_settings(tmp_path / "data"), token="test")
    try:
        base = {"session_id": "s1", "cwd": str(tmp_path), "transcript_path": str(tmp_path / "s1.jsonl")}
        services.inbox.accept_many([Arrival({**base, "hook_event_name": "UserPromptSubmit", "prompt": f"step {n}"})
                                    for n in range(3)])  # fmt: skip
        pipeline = Pipeline(services)
        during: list[dict[str, int]] = []
        pipeline.after_event.append(lambda name, event, written: during.append(services.inbox.counts()))
        pipeline.drain_once()

        assert [c.get("pending") for c in during] == [3, 3, 3]  # all three marked done, their hooks under way
        assert services.inbox.counts().get("pending", 0) == 0 and services.inbox.counts()["done"] == 3
    finally:
        services.close()


def test_with_alone_on_error_one_bad_item_fails_alone():
    batches: list[list[int]] = []

    def commit(items: list[int]) -> list[int]:
        batches.append(list(items))
        if 3 in items:
            raise ValueError("3 is refused")
        return [item * 10 for item in items]

    async def scenario():
        commits = GroupCommit(commit, run_inline, alone_on_error=True)
        return await asyncio.gather(*(commits.submit(n) for n in range(5)), return_exceptions=True)

    results = asyncio.run(scenario())
    assert results[:3] == [0, 10, 20] and results[4] == 40
    assert isinstance(results[3], ValueError)
    assert batches[0] == [0, 1, 2, 3, 4] and sorted(map(tuple, batches[1:])) == [(0,), (1,), (2,), (3,), (4,)]
