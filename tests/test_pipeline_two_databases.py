"""The pipeline across two databases: records in the memory's store, the done mark in the local inbox.

A crash between the two commits (injected: the process "dies" as the done mark is
written) must leave every event pending, and the next worker must process it
without writing anything twice. On SQLite alone the two are one transaction and
the crash takes the records with it; on a team database the records committed
and the replay finds them.
"""

from __future__ import annotations

import time

import pytest

from memory_anchor.schemas.settings import load_settings
from memory_anchor.worker.pipeline.drain import Pipeline
from memory_anchor.worker.services import Services

SESSION = "5b1f3c2e-crash-between-commits"


class Crash(BaseException):
    """The process dying: not an Exception, so nothing in the pipeline catches or counts it."""


@pytest.fixture(params=["sqlite", "postgres"])
def storage_url(request, monkeypatch) -> str:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("MEMORY_ANCHOR_LLM_ROUTE", "api")  # no key: the local distiller, no Claude
    if request.param == "sqlite":
        monkeypatch.delenv("MEMORY_ANCHOR_STORAGE_URL", raising=False)
        return ""
    from tests.postgres import init_team_database, member_url

    cluster = request.getfixturevalue("postgres_cluster")
    name = init_team_database(cluster)
    request.addfinalizer(lambda: cluster.drop_database(name))
    url = member_url(cluster, name, "dev")
    monkeypatch.setenv("MEMORY_ANCHOR_STORAGE_URL", url)
    return url


def _services(data_dir) -> Services:
    return Services(data_dir, load_settings(data_dir), token="test")


def _events() -> list[dict]:
    base = {"session_id": SESSION, "cwd": "/tmp/project-crash", "transcript_path": "/tmp/none.jsonl"}
    return [
        {**base, "hook_event_name": "SessionStart", "source": "startup"},
        {**base, "hook_event_name": "UserPromptSubmit", "prompt": "always run the linter before committing"},
        {**base, "hook_event_name": "UserPromptSubmit", "prompt": "we decided to keep the inbox local"},
        {**base, "hook_event_name": "Stop", "last_assistant_message": "Done: the inbox stays local. Next: write docs."},
    ]


def _memory(services: Services) -> dict:
    conn = services.db.reader()
    rows = conn.execute(
        "SELECT kind, source_id, count(*) AS n FROM records WHERE session_id = ? GROUP BY kind, source_id",
        (SESSION,),
    ).fetchall()
    session = conn.execute("SELECT prompt_count FROM sessions WHERE session_id = ?", (SESSION,)).fetchone()
    return {
        "versions": {(r["kind"], r["source_id"]): r["n"] for r in rows},
        "prompt_count": session["prompt_count"] if session else None,
    }


def _drain_after_a_crash(pipeline: Pipeline, services: Services, events: int, timeout: float = 30.0) -> None:
    """Drain until `events` are done: those a crashed run held are tried again after their backoff."""
    deadline = time.monotonic() + timeout
    while services.inbox.counts().get("done", 0) < events and time.monotonic() < deadline:
        if not pipeline.drain_once():
            time.sleep(0.1)


def test_a_crash_between_the_two_commits_loses_and_duplicates_nothing(tmp_path, storage_url):
    services = _services(tmp_path)
    assert services.shared_store == bool(storage_url)
    ids = [services.inbox.accept(payload)[0] for payload in _events()]
    pipeline = Pipeline(services)

    crashed_on: list[int] = []

    def crash_after_the_records(conn, event_id):
        crashed_on.append(event_id)
        raise Crash()

    pipeline.inbox.mark_done = crash_after_the_records  # the instance's, this worker only
    with pytest.raises(Crash):
        pipeline.drain_once()
    assert crashed_on == [ids[0]]
    before = _memory(services)
    services.close()

    # What the crash left: on SQLite nothing (one transaction rolled back); on the team database the
    # first event's session row committed, and no event is marked done.
    if storage_url:
        assert before["prompt_count"] == 0
    else:
        assert before["prompt_count"] is None

    # The next worker processes everything, the crashed event included (the crash counted a try of
    # the events it held: they come back after the backoff, one at a time).
    services = _services(tmp_path)
    try:
        _drain_after_a_crash(Pipeline(services), services, len(ids))
        counts = services.inbox.counts()
        assert counts.get("done") == len(ids) and not counts.get("pending") and counts["quarantined"] == 0
        after = _memory(services)
        assert after["prompt_count"] == 2
        assert after["versions"] == {
            ("prompt", f"inbox:{ids[1]}"): 1,
            ("prompt", f"inbox:{ids[2]}"): 1,
            ("summary", f"inbox:{ids[3]}"): 1,
        }
    finally:
        services.close()


def test_a_crash_after_a_prompt_was_written_is_replayed_once(tmp_path, storage_url):
    """The crash on an event that wrote a record: the replay finds it by source and session."""
    services = _services(tmp_path)
    ids = [services.inbox.accept(payload)[0] for payload in _events()[:2]]
    pipeline = Pipeline(services)
    real_mark_done = pipeline.inbox.mark_done

    def crash_on_the_prompt(conn, event_id):
        if event_id == ids[1]:
            raise Crash()
        real_mark_done(conn, event_id)

    pipeline.inbox.mark_done = crash_on_the_prompt
    with pytest.raises(Crash):
        pipeline.drain_once()
    written = _memory(services)["versions"]
    services.close()
    assert written == ({("prompt", f"inbox:{ids[1]}"): 1} if storage_url else {})

    services = _services(tmp_path)
    try:
        _drain_after_a_crash(Pipeline(services), services, 2)
        assert services.inbox.counts().get("done") == 2
        after = _memory(services)
        assert after["versions"] == {("prompt", f"inbox:{ids[1]}"): 1}
        assert after["prompt_count"] == 1
    finally:
        services.close()


@pytest.mark.parametrize("storage_url", ["postgres"], indirect=True)  # on SQLite a new data dir starts empty
def test_a_data_dir_started_afresh_does_not_pass_for_the_old_one(tmp_path, storage_url):
    """A new data dir numbers its inbox from 1 again; on the team database its first event (same
    Claude session, resumed) must not be taken for the old inbox's event 1."""
    prompts = [e for e in _events() if e["hook_event_name"] == "UserPromptSubmit"]
    for n, data_dir in enumerate((tmp_path / "first", tmp_path / "afresh")):
        services = _services(data_dir)
        try:
            assert services.inbox.accept(prompts[n])[0] == 1
            pipeline = Pipeline(services)
            while pipeline.drain_once():
                pass
            assert services.inbox.counts().get("done") == 1
        finally:
            services.close()
    services = _services(tmp_path / "first")
    try:
        assert _memory(services)["versions"] == {("prompt", "inbox:1"): 2}
    finally:
        services.close()
