"""Validation at the door: every hook event kind has one wire model; the hooks check the same types.

A field the worker reads with the wrong type is refused with 400 naming the
event kind and the field; unknown fields are kept (Claude Code adds fields
between versions) and a missing optional field is fine. The hooks cannot import
pydantic, so memory_anchor/hookkit/fields.py holds the same checks as a plain
table; the first two tests prove the two cannot drift apart.
"""

from __future__ import annotations

import json
import sqlite3

from hypothesis import example, given, settings
from hypothesis import strategies as st

from memory_anchor.core import paths
from memory_anchor.hookkit import fields
from memory_anchor.schemas.events import EVENT_MODELS, HOOK_EVENTS, event_refusal, json_types
from tests.conftest import tool_use_event, wait_for
from tests.test_hooks import base_payload, crashed_worker_info, hook_env, run_hook, spool_lines


def test_the_hooks_table_is_the_wire_models_types():
    assert set(EVENT_MODELS) == set(fields.FIELD_TYPES) == set(HOOK_EVENTS)
    for kind, model in EVENT_MODELS.items():
        assert fields.FIELD_TYPES[kind] == json_types(model), kind


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=5,
)


@st.composite
def payloads(draw):
    kind = draw(st.sampled_from(HOOK_EVENTS))
    names = sorted(fields.FIELD_TYPES[kind].keys() - {"hook_event_name"}) + ["something_new"]
    chosen = draw(st.lists(st.sampled_from(names), unique=True))
    return {"hook_event_name": kind, **{name: draw(json_values) for name in chosen}}


@settings(max_examples=400, deadline=None)
@given(payloads())
@example({"hook_event_name": "Stop", "assistant_messages": [None]})  # found by a run: the two disagreed
def test_the_hooks_and_the_worker_refuse_the_same_payloads(payload):
    assert (fields.refusal(payload) is None) == (event_refusal(payload) is None), payload


WRONG_TYPES = [
    ("PostToolUse", "cwd", ["/tmp", "x"]),
    ("PostToolUse", "cwd", 42),
    ("PostToolUse", "tool_name", {"name": "Bash"}),
    ("PostToolUse", "tool_input", "echo hi"),
    ("PostToolUse", "session_id", 7),
    ("UserPromptSubmit", "prompt", ["hello"]),
    ("SessionStart", "source", {"kind": "startup"}),
    ("Stop", "stop_hook_active", "no"),
    ("SessionEnd", "reason", 3),
    ("PreCompact", "trigger", False),
]


def test_a_wrong_type_is_refused_naming_the_event_kind_and_the_field(shared_worker):
    for kind, field, value in WRONG_TYPES:
        payload = base_payload(kind, "door-bad", "/tmp/door")
        if kind == "PostToolUse":
            payload = tool_use_event("door-bad", 1, cwd="/tmp/door")
        payload[field] = value
        status, body = shared_worker.request("POST", "/api/v1/events", payload)
        assert status == 400, (kind, field, status, body)
        assert body["error"]["code"] == "invalid_event"
        assert kind in body["error"]["message"] and repr(field) in body["error"]["message"], body
    # The door stayed open: valid events sent afterwards all become observations.
    for n in range(10):
        shared_worker.post("/api/v1/events", tool_use_event("door-after", n, cwd="/tmp/door"), expect=202)
    wait_for(lambda: shared_worker.get("/api/v1/observations?session_id=door-after")["total"] == 10, what="10 observations")
    assert shared_worker.get("/api/v1/observations?session_id=door-bad")["total"] == 0


def test_unknown_fields_are_kept_and_missing_optional_fields_are_fine(shared_worker):
    event = {"hook_event_name": "PostToolUse", "session_id": "door-new", "tool_name": "Bash",
             "tool_input": {"command": "ls"}, "tool_response": {"stdout": "a"}, "tool_use_id": "toolu_door_new",
             "agent_team": {"lead": "x"}, "effort": 3}  # fmt: skip
    inbox_id = shared_worker.post("/api/v1/events", event, expect=202)["id"]
    with sqlite3.connect(f"file:{paths.database_path(shared_worker.data_dir)}?mode=ro", uri=True) as conn:
        stored = json.loads(conn.execute("SELECT payload FROM inbox WHERE id = ?", (inbox_id,)).fetchone()[0])
    assert stored["agent_team"] == {"lead": "x"} and stored["effort"] == 3
    mcp = tool_use_event("door-new", 2) | {"tool_response": [{"type": "text", "text": "ok"}], "duration_ms": 1.5}
    shared_worker.post("/api/v1/events", mcp, expect=202)
    status, body = shared_worker.request("POST", "/api/v1/events", {"hook_event_name": "Nope"})
    assert status == 400 and body["error"]["code"] == "unknown_event"


def test_a_hook_logs_and_drops_an_event_the_worker_refuses(shared_worker, tmp_path):
    data_dir = shared_worker.data_dir
    bad = tool_use_event("door-hook", 1) | {"cwd": ["not", "a", "path"]}
    result = run_hook("PostToolUse", bad, hook_env(data_dir))
    assert result.returncode == 0 and result.stdout == b"" and result.stderr == b""
    assert not spool_lines(data_dir), "a refused event is not spooled (it would clog the spool)"
    log = (data_dir / paths.LOGS / paths.HOOKS_LOG).read_text()
    assert "PostToolUse event refused: field 'cwd'" in log and "dropped" in log


def test_a_hook_does_not_spool_an_event_the_worker_would_refuse(tmp_path):
    crashed_worker_info(tmp_path)  # the worker is down
    bad = base_payload("Stop", "door-spool", "/tmp") | {"stop_hook_active": "sometimes"}
    assert run_hook("Stop", bad, hook_env(tmp_path)).returncode == 0
    good = base_payload("Stop", "door-spool", "/tmp") | {"stop_hook_active": False, "new_field": [1]}
    assert run_hook("Stop", good, hook_env(tmp_path)).returncode == 0
    (entry,) = spool_lines(tmp_path)
    assert entry["payload"] == good
    assert "field 'stop_hook_active'" in (tmp_path / paths.LOGS / paths.HOOKS_LOG).read_text()
