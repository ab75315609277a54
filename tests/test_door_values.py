"""Every value checked at the door of `POST /api/v1/events/history`, and reads that survive a bad row.

Against a real worker: a time no date can show (1e308, NaN, negative, before 2000, far in the
future), a session id that is an object or a list or 5,000 characters or holds a NUL, an event
id of the wrong type, each refuses its own event with a reason, and the rest of the batch is
taken. A row stored before the door checked (planted in SQLite here) must not break the
timeline, the prompts, the sessions or search. A seeded hypothesis fuzz over times, ids and
types finds no 500.
"""

from __future__ import annotations

import json
import sqlite3
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import start_worker

PROJECT = "/tmp/door-values"


def prompt_event(session_id, at, event_id, prompt="we deploy with the blue-green script", **payload) -> dict:
    return {"payload": {"hook_event_name": "UserPromptSubmit", "session_id": session_id, "cwd": PROJECT,
                        "prompt": prompt, **payload}, "event_id": event_id, "at": at}  # fmt: skip


def post_raw(worker, text: str) -> tuple[int, dict]:
    return worker.request("POST", "/api/v1/events/history", raw=text.encode())


def test_out_of_range_times_refuse_only_their_event(worker):
    now = time.time()
    bad = {"huge": 1e308, "negative": -5.0, "before 2000": 915148800.0, "next year": now + 366 * 86400}
    events = [prompt_event(f"times-{i}", at, f"times-{i}") for i, at in enumerate(bad.values())]
    events.append(prompt_event("times-good", now - 3600, "times-good"))
    body = json.dumps({"events": events})
    # NaN and Infinity: JSON tokens Python's parser (the worker's) reads as floats.
    body = body[:-2] + ', ' + json.dumps(prompt_event("times-nan", 1.0, "times-nan")).replace("1.0", "NaN") + \
        ', ' + json.dumps(prompt_event("times-inf", 1.0, "times-inf")).replace("1.0", "Infinity") + "]}"
    status, outcome = post_raw(worker, body)
    assert status == 200, outcome
    assert outcome["accepted"] == 1
    refused = {r["index"]: r["reason"] for r in outcome["refused"]}
    assert sorted(refused) == [0, 1, 2, 3, 5, 6], outcome
    assert all(reason.startswith("at:") for reason in refused.values()), refused
    worker.wait_idle()
    for path in ("/api/v1/timeline?limit=50", "/api/v1/prompts?limit=50", "/api/v1/sessions?limit=50"):
        results = worker.get(path)["results"]
        assert {r.get("session_id") for r in results} <= {"times-good"}, (path, results)


@pytest.mark.parametrize(
    "change, field",
    [
        ({"session_id": {"a": 1}}, "session_id"),
        ({"session_id": ["x", "y"]}, "session_id"),
        ({"session_id": "s" * 5000}, "session_id"),
        ({"session_id": "nul\x00id"}, "session_id"),
        ({"session_id": 12}, "session_id"),
        ({"prompt": {"text": "not a string"}}, "prompt"),
        ({"cwd": "relative/dir"}, "cwd"),
        ({"cwd": "/home/me/../../../etc"}, "cwd"),
    ],
)
def test_a_wrong_value_refuses_that_event_and_the_batch_goes_on(shared_worker, change, field):
    tag = str(abs(hash(json.dumps(change))))
    bad = prompt_event(f"bad-{tag}", time.time() - 60, f"bad-{tag}")
    bad["payload"].update(change)
    good = prompt_event(f"good-{tag}", time.time() - 60, f"good-{tag}")
    outcome = shared_worker.post("/api/v1/events/history", {"events": [bad, good]})
    assert outcome["accepted"] == 1, outcome
    [refused] = outcome["refused"]
    assert refused["index"] == 0 and field in refused["reason"], refused


@pytest.mark.parametrize(
    "event, field",
    [
        ({"payload": [], "event_id": "x", "at": None}, "payload"),
        ({"payload": {"hook_event_name": "Stop"}, "event_id": 7, "at": None}, "event_id"),
        ({"payload": {"hook_event_name": "Stop"}, "event_id": "x" * 301, "at": None}, "event_id"),
        ({"payload": {"hook_event_name": "Stop"}, "event_id": "a\nb", "at": None}, "event_id"),
        ({"payload": {"hook_event_name": "Stop"}, "event_id": "x", "at": "yesterday"}, "at"),
        ("not an object", "input"),
        (None, "input"),
    ],
)
def test_a_malformed_event_is_refused_with_its_field(shared_worker, event, field):
    good = prompt_event("good-envelope", time.time() - 60, f"good-envelope-{field}-{abs(hash(str(event)))}")
    outcome = shared_worker.post("/api/v1/events/history", {"events": [event, good]})
    assert outcome["accepted"] + outcome["duplicates"] == 1, outcome
    [refused] = outcome["refused"]
    assert refused["index"] == 0 and (field in refused["reason"] or field == "input"), refused


def test_a_malformed_batch_is_422_not_500(shared_worker):
    for body in ({"events": "nope"}, {"events": [], "claude": "yes"}, {"events": [], "extra": 1}):
        status, answer = shared_worker.request("POST", "/api/v1/events/history", body)
        assert status == 422, (body, status, answer)


def test_reads_survive_a_bad_time_already_stored(tmp_path):
    """A row written before the door checked times: the reads show it (its time unknown) and never 500."""
    data_dir = tmp_path / "data"
    worker = start_worker(data_dir)
    try:
        worker.post("/api/v1/events/history", {"events": [prompt_event("stored-bad", time.time() - 60, "stored-bad")]})
        worker.wait_idle()
    finally:
        worker.stop()
    with sqlite3.connect(data_dir / "memory.sqlite3") as db:
        assert db.execute("UPDATE records SET happened_at = 1e308 WHERE session_id = 'stored-bad'").rowcount
        db.execute("UPDATE sessions SET started_at = 1e308 WHERE session_id = 'stored-bad'")
    worker = start_worker(data_dir)
    try:
        for path in ("/api/v1/timeline?limit=50", "/api/v1/prompts?limit=50", "/api/v1/sessions?limit=50",
                     f"/api/v1/timeline?project={PROJECT}"):  # fmt: skip
            status, body = worker.request("GET", path)
            assert status == 200, (path, status, body)
            assert any(r.get("session_id") == "stored-bad" for r in body["results"]), (path, body)
        status, body = worker.request("POST", "/api/v1/memories/search", {"query": "blue-green", "mode": "keyword"})
        assert status == 200, body
    finally:
        worker.stop()


# --- the fuzz -----------------------------------------------------------------------------

_any_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
_times = st.one_of(
    st.none(), st.floats(allow_nan=False), st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([1e308, -1e308, 0, -1, 946684799.0, 1.7e9, 4e9]), _any_json,
)  # fmt: skip
_ids = st.one_of(st.text(max_size=40), st.text(min_size=190, max_size=320), st.integers(), _any_json)
_names = st.one_of(st.sampled_from(["UserPromptSubmit", "PostToolUse", "Stop", "SessionEnd", "SessionStart"]),
                   _any_json)  # fmt: skip


@st.composite
def _events(draw):
    payload = {"hook_event_name": draw(_names), "session_id": draw(_ids), "cwd": draw(st.one_of(st.just(PROJECT), _ids))}
    for key in draw(st.lists(st.sampled_from(["prompt", "tool_input", "tool_response", "reason", "source"]), max_size=3)):
        payload[key] = draw(_any_json)
    event = {"payload": payload, "event_id": draw(_ids), "at": draw(_times)}
    return draw(st.one_of(st.just(event), _any_json)) if draw(st.integers(0, 9)) == 0 else event


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(batch=st.lists(_events(), min_size=1, max_size=6))
def _fuzz_batch(worker, batch):
    status, answer = worker.request("POST", "/api/v1/events/history", {"events": batch})
    assert status in (200, 422), (status, answer, batch)
    if status == 200:
        assert answer["accepted"] + answer["duplicates"] + answer["skipped_events"] + len(answer["refused"]) == len(batch)


def test_a_fuzz_of_the_history_door_finds_no_server_error(shared_worker):
    _fuzz_batch(shared_worker)
    shared_worker.wait_idle()
    for path in ("/api/v1/timeline?limit=100", "/api/v1/prompts?limit=100", "/api/v1/sessions?limit=100",
                 "/api/v1/observations?limit=100", "/api/v1/summaries?limit=100", "/api/v1/inbox"):  # fmt: skip
        status, body = shared_worker.request("GET", path)
        assert status == 200, (path, status, body)
