"""Redaction in one place: every free-text value that is stored is redacted at the storage door.

Prompts and tool data were redacted before (tests/test_secrets_at_rest.py); this sends a secret
through every other field a client can fill, on a real worker: a forget's and an edit's reason
and actor, a fact's subject and tags, mem0 metadata keys and values, a branch's and a snapshot's
description and metadata, an identity proposal's content and reason, a relation's object and
properties, and a JSON object key inside a tool_response. Then no file of the data dir holds any
of them, while the worker runs (SQLite and its WAL) and after it stopped.
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import start_worker, worker_env
from tests.test_redact import SECRETS
from tests.test_secrets_at_rest import leaks

PROJECT = "/tmp/secrets-everywhere"
# Distinct, long enough that finding one in a file can only be the secret itself.
CORPUS = [(text, secret) for _, text, secret in SECRETS if len(secret) >= 10]


def test_every_free_text_field_is_redacted_before_it_is_stored(tmp_path: Path):
    data_dir = tmp_path / "data"
    texts = iter(CORPUS * 3)
    used: list[str] = []

    def text() -> str:
        value, secret = next(texts)
        used.append(secret)
        return value

    worker = start_worker(data_dir, env=worker_env(data_dir))
    try:
        agent = {"agent_id": "claude-code", "project": PROJECT}
        fact = worker.post("/api/v1/facts", {"text": "Deploy keys rotate every month", "confidence": 0.95,
                                             "subject": text(), "tags": [text(), "ops"], **agent}, expect=201)  # fmt: skip
        fact_id = (fact.get("record") or fact)["id"]
        worker.post(f"/api/v1/facts/{fact_id}/forget", {"reason": text(), "actor": text()})
        other = worker.post("/api/v1/facts", {"text": "Releases are cut on Tuesdays", "confidence": 0.95, **agent},
                            expect=201)  # fmt: skip
        worker.post(f"/api/v1/facts/{(other.get('record') or other)['id']}/edit",
                    {"text": "Releases are cut on Wednesdays", "reason": text()})  # fmt: skip
        worker.post("/api/v1/memories", {"content": "the staging bot's settings", "infer": False, "user_id": "sec",
                                         "metadata": {text(): "a key that is a secret", "note": text()}})  # fmt: skip
        worker.post("/api/v1/branches", {"name": "secret-branch", "description": text(),
                                         "metadata": {text(): 1, "why": text()}}, expect=201)  # fmt: skip
        worker.post("/api/v1/snapshots", {"label": "secret-snap", "description": text()}, expect=201)
        worker.post("/api/v1/identity/proposals", {"action": "add", "content": text(), "reason": text(), **agent},
                    expect=202)  # fmt: skip
        worker.post("/api/v1/relations", {"subject": "the staging bot", "relation": "uses", "object": text(),
                                          "properties": {text(): text()}, **agent}, expect=201)  # fmt: skip
        worker.post("/api/v1/events", {"hook_event_name": "PostToolUse", "session_id": "sec-keys", "cwd": PROJECT,
                                       "tool_name": "Bash", "tool_use_id": "toolu_sec_keys",
                                       "tool_input": {"command": "cat settings.json"},
                                       "tool_response": {"stdout": "ok", "parsed": {text(): "the bot's key"}}},
                    expect=202)  # fmt: skip
        worker.wait_idle(timeout=180)
        assert len(set(used)) >= 15
        # Stored, only without the secret: the forget's reason is there, redacted.
        [entry] = worker.get(f"/api/v1/forgotten?project={PROJECT}&kind=fact&limit=10")["results"][-1:]
        assert "[REDACTED:" in entry["reason"], entry
        assert leaks(data_dir, sorted(set(used))) == {}
    finally:
        worker.stop()
    assert leaks(data_dir, sorted(set(used))) == {}
