"""ClaudeClient: the real anthropic SDK against the fake Messages API on 127.0.0.1."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from memory_anchor.schemas.settings import Settings
from tests.fakes.anthropic_server import Reply, error_reply, json_reply, text_reply
from tests.fakes.fixtures import FAKE_API_KEY
from memory_anchor.worker.llm.client import ClaudeClient, LLMError, LLMReplyError, LLMUnavailable, parse_json_reply
from memory_anchor.worker.store.db import Database


@pytest.fixture
def db(tmp_path: Path):
    database = Database(tmp_path / "memory.sqlite3")
    yield database
    database.close()


def make_client(db, **overrides) -> tuple[ClaudeClient, list[float]]:
    sleeps: list[float] = []
    settings = Settings(**{"llm_max_retries": 3, "llm_timeout_seconds": 10.0, **overrides})
    return ClaudeClient(settings, db, sleep=sleeps.append), sleeps


def test_success_sends_a_real_messages_request_and_records_usage(fake_anthropic, db) -> None:
    fake_anthropic.enqueue(json_reply({"observations": [{"index": 0}]}, input_tokens=120, output_tokens=30))
    client, sleeps = make_client(db, llm_model="claude-test-model")
    assert client.available
    assert client.complete_json("You compress.", "tool use here", max_tokens=500) == {"observations": [{"index": 0}]}
    (request,) = fake_anthropic.messages()
    assert request["model"] == "claude-test-model" and request["max_tokens"] == 500
    assert request["system"].startswith("You compress.") and "JSON" in request["system"]
    assert request["messages"] == [{"role": "user", "content": "tool use here"}]
    assert not request.get("stream")
    headers = {k.lower(): v for k, v in fake_anthropic.requests[-1].headers.items()}
    # the SDK sends the key as x-api-key or (newer versions) as a bearer token
    assert FAKE_API_KEY in (headers.get("x-api-key"), headers.get("authorization", "").removeprefix("Bearer "))
    assert client.usage_today() == {"input_tokens": 120, "output_tokens": 30, "calls": 1}
    assert sleeps == []


def test_429_with_retry_after_then_success(fake_anthropic, db) -> None:
    fake_anthropic.fail_next(429, retry_after=7)
    fake_anthropic.enqueue(json_reply([1, 2, 3]))
    client, sleeps = make_client(db)
    assert client.complete_json("s", "p") == [1, 2, 3]
    assert len(fake_anthropic.messages()) == 2
    assert len(sleeps) == 1 and sleeps[0] >= 7  # the server's retry-after wins over the shorter backoff


def test_overloaded_529_and_500_are_retried_with_growing_backoff(fake_anthropic, db) -> None:
    fake_anthropic.enqueue(error_reply(529), error_reply(500), error_reply(503), json_reply({"ok": True}))
    client, sleeps = make_client(db, llm_max_retries=3)
    assert client.complete_json("s", "p") == {"ok": True}
    assert len(sleeps) == 3 and sleeps[0] < sleeps[1] < sleeps[2]


def test_500s_exhausting_retries_fail_clearly(fake_anthropic, db) -> None:
    fake_anthropic.fail_next(500, times=3)
    client, sleeps = make_client(db, llm_max_retries=2)
    with pytest.raises(LLMError) as caught:
        client.complete("s", "p")
    assert caught.value.retryable
    assert "after 3 attempts" in str(caught.value) and "HTTP 500" in str(caught.value)
    assert len(fake_anthropic.messages()) == 3 and len(sleeps) == 2
    assert client.usage_today()["calls"] == 0  # nothing answered, nothing spent


def test_timeout_is_retried_then_reported(fake_anthropic, db) -> None:
    fake_anthropic.enqueue(Reply(content=[{"type": "text", "text": "{}"}], delay=1.5), Reply(content=[], delay=1.5))
    client, sleeps = make_client(db, llm_timeout_seconds=0.3, llm_max_retries=1)
    with pytest.raises(LLMError) as caught:
        client.complete("s", "p")
    assert caught.value.retryable and "timed out" in str(caught.value)
    assert len(fake_anthropic.messages()) == 2 and len(sleeps) == 1


def test_connection_refused_is_retryable(db, monkeypatch) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_API_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{port}")
    client, sleeps = make_client(db, llm_max_retries=1)
    with pytest.raises(LLMError) as caught:
        client.complete("s", "p")
    assert caught.value.retryable and "connection failed" in str(caught.value)


def test_rejected_request_is_not_retried(fake_anthropic, db) -> None:
    fake_anthropic.enqueue(error_reply(401, "invalid x-api-key"))
    client, sleeps = make_client(db)
    with pytest.raises(LLMError) as caught:
        client.complete("s", "p")
    assert not caught.value.retryable
    assert "HTTP 401" in str(caught.value) and "ANTHROPIC_API_KEY" in str(caught.value)
    assert len(fake_anthropic.messages()) == 1 and sleeps == []


def test_malformed_json_reply_is_a_clear_error_and_still_costs_tokens(fake_anthropic, db) -> None:
    fake_anthropic.enqueue(text_reply("Sure! The tool use was about fixing a bug.", input_tokens=50, output_tokens=12))
    client, _ = make_client(db)
    with pytest.raises(LLMReplyError) as caught:
        client.complete_json("s", "p")
    assert "not valid JSON" in str(caught.value) and not caught.value.retryable
    assert caught.value.reply == "Sure! The tool use was about fixing a bug."
    assert client.usage_today() == {"input_tokens": 50, "output_tokens": 12, "calls": 1}


def test_truncated_json_reply_says_so(fake_anthropic, db) -> None:
    fake_anthropic.enqueue(Reply(content=[{"type": "text", "text": '{"observations": [{"index": 0, "ti'}], stop_reason="max_tokens"))
    client, _ = make_client(db)
    with pytest.raises(LLMReplyError, match="max_tokens"):
        client.complete_json("s", "p")


def test_fenced_and_prose_wrapped_json_is_parsed(fake_anthropic, db) -> None:
    fake_anthropic.enqueue(text_reply('Here you go:\n```json\n{"a": [1, {"b": null}]}\n```\nAnything else?'))
    client, _ = make_client(db)
    assert client.complete_json("s", "p") == {"a": [1, {"b": None}]}


def test_budget_exhaustion_makes_the_client_unavailable(fake_anthropic, db) -> None:
    fake_anthropic.enqueue(json_reply({"n": 1}, input_tokens=1500, output_tokens=600))
    client, _ = make_client(db, llm_daily_token_budget=2000)
    assert client.complete_json("s", "p", max_tokens=100) == {"n": 1}
    assert client.usage_today() == {"input_tokens": 1500, "output_tokens": 600, "calls": 1}
    assert not client.available and "budget" in client.unavailable_reason()
    with pytest.raises(LLMUnavailable, match="budget"):
        client.complete("s", "p")
    assert len(fake_anthropic.messages()) == 1  # the refused call never went out


def test_call_that_could_overshoot_the_budget_is_refused(fake_anthropic, db) -> None:
    client, _ = make_client(db, llm_daily_token_budget=5000)
    assert client.available
    with pytest.raises(LLMUnavailable, match="only 5000"):
        client.complete("s", "x" * 30_000, max_tokens=1000)
    assert fake_anthropic.messages() == []


def test_budget_is_per_day(fake_anthropic, db) -> None:
    day = ["2025-11-20"]
    fake_anthropic.enqueue(json_reply({}, input_tokens=900, output_tokens=100), json_reply({}, input_tokens=10, output_tokens=5))
    settings = Settings(llm_daily_token_budget=1000)
    client = ClaudeClient(settings, db, sleep=lambda s: None, today=lambda: day[0])
    client.complete("s", "p", max_tokens=10)
    assert not client.available
    day[0] = "2025-11-21"
    assert client.available
    client.complete("s", "p", max_tokens=10)
    rows = db.reader().execute("SELECT day, input_tokens, output_tokens, calls FROM llm_usage ORDER BY day").fetchall()
    assert [tuple(r) for r in rows] == [("2025-11-20", 900, 100, 1), ("2025-11-21", 10, 5, 1)]


def test_without_a_key_claude_is_unavailable(db, monkeypatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    client, _ = make_client(db)
    assert not client.available and "ANTHROPIC_API_KEY" in client.unavailable_reason()
    with pytest.raises(LLMUnavailable):
        client.complete_json("s", "p")


@pytest.mark.parametrize(
    "text,expected",
    [
        ('{"a": 1}', {"a": 1}),
        ("  [1, 2]  ", [1, 2]),
        ('```\n{"a": 1}\n```', {"a": 1}),
        ('Note [1]: the answer is {"a": {"b": [1, 2]}} as requested.', {"a": {"b": [1, 2]}}),
        ('{"a": "brace } in string"} trailing', {"a": "brace } in string"}),
    ],
)
def test_parse_json_reply(text, expected) -> None:
    assert parse_json_reply(text) == expected


@pytest.mark.parametrize("text", ["", "   ", "no json here", "{broken: json", "[unclosed"])
def test_parse_json_reply_rejects_non_json(text) -> None:
    with pytest.raises(ValueError):
        parse_json_reply(text)
