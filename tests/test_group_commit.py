"""Group commit of hook events, the inbox's batch insert, and the pipeline giving way to capture."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from worker import pipeline as pipeline_module
from worker.group_commit import GroupCommit
from worker.inbox import Arrival, Inbox
from worker.pipeline import Pipeline
from worker.store.db import Database


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
        assert inbox.counts() == {"pending": 3}
    finally:
        db.close()


@pytest.fixture
def quick_pipeline(monkeypatch):
    monkeypatch.setattr(pipeline_module, "CAPTURE_QUIET", 0.05)
    monkeypatch.setattr(pipeline_module, "CAPTURE_MAX_DEFER", 0.6)
    return Pipeline(SimpleNamespace(inbox=None))


def wait_during_stream(pipeline: Pipeline, stream_seconds: float) -> float:
    """How long the pipeline holds back while hook events arrive every 10 ms for `stream_seconds`."""

    async def post_events():
        end = time.monotonic() + stream_seconds
        while time.monotonic() < end:
            pipeline.captured()
            await asyncio.sleep(0.01)

    async def scenario():
        stream = asyncio.ensure_future(post_events())
        await asyncio.sleep(0.02)
        start = time.monotonic()
        await pipeline._yield_to_capture()
        waited = time.monotonic() - start
        stream.cancel()
        return waited

    return asyncio.run(scenario())


def test_the_pipeline_waits_for_a_pause_in_captured_events(quick_pipeline):
    assert 0.2 <= wait_during_stream(quick_pipeline, 0.25) < 0.55  # the pause, not the whole deferral


def test_a_steady_stream_still_lets_the_pipeline_run(quick_pipeline):
    assert 0.55 <= wait_during_stream(quick_pipeline, 1.5) < 1.0  # CAPTURE_MAX_DEFER, then it runs anyway
