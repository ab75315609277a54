"""The Distiller with Claude: batching, merging, redaction, deferral and fallback.

Real ClaudeClient + anthropic SDK against the fake Messages API.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from memory_anchor.schemas.settings import Settings
from tests.fakes.anthropic_server import error_reply, json_reply, request_text, text_reply
from memory_anchor.worker.llm.client import ClaudeClient
from memory_anchor.worker.pipeline.compress import COOLDOWN_SECONDS, MAX_DEFERRALS, Distiller, local
from memory_anchor.worker.store.db import Database

SECRET = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"


def bash(n: int, command: str = "echo hi", stdout: str = "hi") -> dict:
    return {
        "session_id": "s1", "cwd": "/repo", "hook_event_name": "PostToolUse", "tool_name": "Bash",
        "tool_input": {"command": command, "description": f"step {n}"},
        "tool_response": {"stdout": stdout, "stderr": "", "interrupted": False},
        "tool_use_id": f"toolu_{n:03d}",
    }  # fmt: skip


def indexes_in(request: dict) -> list[int]:
    prompt = request["messages"][-1]["content"]
    return [int(i) for i in re.findall(r'<tool_use index="(\d+)"', prompt)]


def claude_observations(request: dict) -> dict:
    """A well-behaved model: one observation per tool use in the prompt."""
    return {
        "observations": [
            {"index": i, "type": "decision", "title": f"Claude title {i}", "summary": f"Claude summary {i}",
             "narrative": "Because reasons.", "facts": [f"fact {i}"], "concepts": ["Shell"],
             "files_read": ["/repo/extra.txt"], "files_modified": []}
            for i in indexes_in(request)
        ]
    }  # fmt: skip


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def db(tmp_path: Path):
    database = Database(tmp_path / "memory.sqlite3")
    yield database
    database.close()


def distiller(db, clock=None, **overrides) -> Distiller:
    settings = Settings(**{"llm_max_retries": 1, "llm_batch_size": 8, **overrides})
    client = ClaudeClient(settings, db, sleep=lambda s: None)
    return Distiller(settings, client, clock=clock or Clock())


def test_one_batched_call_merged_onto_local_drafts(fake_anthropic, db) -> None:
    fake_anthropic.responder = lambda request: json_reply(claude_observations(request))
    payloads = [bash(0, "pytest -q", "1 failed"), bash(1, "cat src/app.py"), bash(2)]
    result = distiller(db).observations(payloads)
    assert not result.deferred and result.source == "claude" and result.error is None
    assert len(fake_anthropic.messages()) == 1
    assert [d.title for d in result.drafts] == ["Claude title 0", "Claude title 1", "Claude title 2"]
    first, second = result.drafts[0], result.drafts[1]
    assert first.type == "decision" and first.distilled_by == "claude"
    assert first.facts == ["fact 0"] and first.concepts[0] == "shell"
    # what the payload states for certain comes from the local pass
    assert first.command == "pytest -q" and first.outcome == "error" and first.tool_use_id == "toolu_000"
    assert second.files_read == ["src/app.py", "/repo/extra.txt"]
    assert first.narrative.startswith("Because reasons.") and "$ pytest -q" in first.narrative


def test_a_file_claude_says_changed_is_kept_only_where_the_tool_use_names_it(fake_anthropic, db) -> None:
    """Claude knows what programs usually write; memory asserts only what the tool use says."""
    guesses = {0: ["out/report.csv"], 1: ["src/app.py"], 2: ["src/a.js"]}
    fake_anthropic.responder = lambda request: json_reply({"observations": [
        {"index": i, "type": "change", "title": f"Claude title {i}", "summary": "s", "files_modified": guesses[i]}
        for i in indexes_in(request)]})  # fmt: skip
    payloads = [bash(0, "python scripts/gen.py", "done"),  # what the script wrote is not said
                bash(1, "cat src/app.py", "x = 1"),  # it only shows the file
                bash(2, "npx prettier --write src/a.js", "src/a.js 35ms")]  # fmt: skip
    drafts = distiller(db).observations(payloads).drafts
    assert [d.distilled_by for d in drafts] == ["claude"] * 3
    assert [d.files_modified for d in drafts] == [[], [], ["src/a.js"]]


def test_an_edit_the_user_refused_is_no_change_whatever_claude_reads_into_it(fake_anthropic, db) -> None:
    fake_anthropic.responder = lambda request: json_reply({"observations": [
        {"index": i, "type": "feature", "title": "Added the mkSystem helper", "summary": "s",
         "files_modified": ["/repo/lib/mkSystem.nix"]} for i in indexes_in(request)]})  # fmt: skip
    refused = {"session_id": "s", "hook_event_name": "PostToolUse", "tool_name": "Write", "tool_use_id": "toolu_w",
               "tool_input": {"file_path": "/repo/lib/mkSystem.nix", "content": "{ inputs }:\n{}\n"},
               "tool_response": "Error: The user doesn't want to proceed with this tool use. The tool use was rejected."}  # fmt: skip
    [draft] = distiller(db).observations([refused]).drafts
    assert draft.distilled_by == "claude" and draft.files_modified == [] and draft.outcome == "error"


def test_batches_follow_llm_batch_size(fake_anthropic, db) -> None:
    fake_anthropic.responder = lambda request: json_reply(claude_observations(request))
    result = distiller(db, llm_batch_size=2).observations([bash(i) for i in range(5)])
    assert [len(indexes_in(r)) for r in fake_anthropic.messages()] == [2, 2, 1]
    assert [d.tool_use_id for d in result.drafts] == [f"toolu_{i:03d}" for i in range(5)]
    assert all(d.distilled_by == "claude" for d in result.drafts)


def test_input_to_claude_is_redacted_and_bounded(fake_anthropic, db) -> None:
    fake_anthropic.responder = lambda request: json_reply(claude_observations(request))
    payload = bash(0, f"git push https://{SECRET}@github.com/o/r", "x" * 100_000 + "\nexport DB_PASSWORD=hunter2")
    payload["tool_input"]["note"] = "<private>my home address</private>"
    result = distiller(db).observations([payload])
    (request,) = fake_anthropic.messages()
    sent = request_text(request)
    assert SECRET not in sent and "hunter2" not in sent and "my home address" not in sent
    assert "[REDACTED:github_token]" in sent
    assert len(sent) < 30_000
    assert SECRET not in json.dumps([d.model_dump() for d in result.drafts])


def test_transient_failure_defers_then_cooldown_then_success(fake_anthropic, db) -> None:
    clock = Clock()
    d = distiller(db, clock=clock, llm_max_retries=1)
    fake_anthropic.fail_next(429, times=2, retry_after=3)
    first = d.observations([bash(0)])
    assert first.deferred and first.drafts == [] and first.retry_after >= COOLDOWN_SECONDS
    assert "429" in first.error
    assert len(fake_anthropic.messages()) == 2  # the call and its one retry

    # during the cooldown nothing is sent: events are deferred at once
    clock.now += 5
    second = d.observations([bash(0), bash(1)])
    assert second.deferred and len(fake_anthropic.messages()) == 2

    clock.now += COOLDOWN_SECONDS
    fake_anthropic.responder = lambda request: json_reply(claude_observations(request))
    third = d.observations([bash(0), bash(1)])
    assert not third.deferred and third.source == "claude" and len(third.drafts) == 2


def test_after_max_deferrals_the_local_path_answers(fake_anthropic, db) -> None:
    clock = Clock()
    d = distiller(db, clock=clock, llm_max_retries=0)
    fake_anthropic.default = error_reply(500)
    for _ in range(MAX_DEFERRALS):
        assert d.observations([bash(7)]).deferred
        clock.now += COOLDOWN_SECONDS + 1
    result = d.observations([bash(7)])
    assert not result.deferred and result.source == "local" and "HTTP 500" in result.error
    assert result.drafts[0].tool_use_id == "toolu_007" and result.drafts[0].distilled_by == "local"


def test_final_attempt_falls_back_instead_of_deferring(fake_anthropic, db) -> None:
    fake_anthropic.default = error_reply(529)
    result = distiller(db, llm_max_retries=0).observations([bash(1)], final_attempt=True)
    assert not result.deferred and result.source == "local" and len(result.drafts) == 1


def test_chunks_done_before_a_deferral_are_not_paid_twice(fake_anthropic, db) -> None:
    clock = Clock()
    d = distiller(db, clock=clock, llm_batch_size=1, llm_max_retries=0)
    fake_anthropic.enqueue(json_reply({"observations": [{"index": 0, "title": "first by Claude", "summary": "s"}]}),
                           error_reply(500))  # fmt: skip
    assert d.observations([bash(1), bash(2)]).deferred
    clock.now += COOLDOWN_SECONDS + 1
    fake_anthropic.enqueue(json_reply({"observations": [{"index": 0, "title": "second by Claude", "summary": "s"}]}))
    result = d.observations([bash(1), bash(2)])
    assert [x.title for x in result.drafts] == ["first by Claude", "second by Claude"]
    assert len(fake_anthropic.messages()) == 3  # ok, 500, then only the missing one


def test_malformed_reply_falls_back_to_local(fake_anthropic, db) -> None:
    fake_anthropic.enqueue(text_reply("I compressed them all nicely!"))
    result = distiller(db).observations([bash(1, "ls src/")])
    assert not result.deferred and result.source == "local" and "not valid JSON" in result.error
    assert result.drafts[0].distilled_by == "local" and result.drafts[0].command == "ls src/"


def test_partial_or_odd_reply_keeps_local_drafts_for_the_rest(fake_anthropic, db) -> None:
    fake_anthropic.enqueue(json_reply({"observations": [
        {"index": 1, "type": "no-such-type", "title": "T" * 300, "summary": "S " * 200, "facts": "one fact"},
        {"index": 9, "title": "out of range", "summary": "x"},
        "not an object",
        {"index": 0, "title": "", "summary": ""},
    ]}))  # fmt: skip
    result = distiller(db).observations([bash(0), bash(1), bash(2)])
    assert result.source == "mixed" and "covered 1 of 3" in result.error
    local0, claude1, local2 = result.drafts
    assert local0.distilled_by == "local" and local2.distilled_by == "local"
    assert claude1.distilled_by == "claude"
    assert claude1.type == local.compress_tool_use(bash(1)).type  # an invalid type: the local one stands
    assert len(claude1.title) <= 120 and len(claude1.summary) <= 200 and claude1.facts == ["one fact"]


def test_no_key_means_local_without_any_request(fake_anthropic, db, monkeypatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    result = distiller(db).observations([bash(1)])
    assert result.source == "local" and not result.deferred and fake_anthropic.requests == []
    assert Distiller(Settings(), None).observations([bash(2)]).drafts[0].tool_use_id == "toolu_002"


def test_spent_budget_means_local(fake_anthropic, db) -> None:
    fake_anthropic.responder = lambda request: json_reply(claude_observations(request), input_tokens=4000, output_tokens=900)
    d = distiller(db, llm_daily_token_budget=5000)
    assert d.observations([bash(1)]).source == "claude"
    result = d.observations([bash(2)])
    assert result.source == "local" and not result.deferred
    assert len(fake_anthropic.messages()) == 1
    assert d.llm.usage_today() == {"input_tokens": 4000, "output_tokens": 900, "calls": 1}


def test_session_summary_with_claude(fake_anthropic, db) -> None:
    fake_anthropic.enqueue(json_reply({
        "request": "Fix the coupon bug", "investigated": "cart.py", "learned": "Coupons were counted twice",
        "completed": "Made apply_coupon idempotent", "next_steps": ["Release 1.2", "Update docs"], "files": ["app/cart.py"],
    }))  # fmt: skip
    d = distiller(db)
    stored = {"kind": "observation", "title": "Edited app/cart.py", "type": "bugfix",
              "data": {"summary": "made idempotent", "files_modified": ["app/cart.py"]}}  # fmt: skip
    summary = d.session_summary([f"fix the coupon bug, token {SECRET}"], [stored], "Done. Next: release.")
    assert summary.distilled_by == "claude"
    assert summary.learned == "Coupons were counted twice" and summary.next_steps == "Release 1.2; Update docs"
    assert summary.files == ["app/cart.py"]
    # What was asked stays in the user's words, never Claude's paraphrase.
    assert summary.text.startswith("Request: fix the coupon bug, token [REDACTED")
    assert "Learned: Coupons were counted twice" in summary.text
    sent = request_text(fake_anthropic.messages()[0])
    assert SECRET not in sent and "Edited app/cart.py" in sent and "Done. Next: release." in sent


def test_claude_summary_keeps_no_passing_plan_as_a_next_step_and_no_narration_as_a_cause(fake_anthropic, db) -> None:
    """The code holds Claude's summary to what the prompt asks, whatever the reply says."""
    fake_anthropic.enqueue(json_reply({
        "done": ["Fixed the serializer for nested class methods"],
        "root_causes": ["The Reproducer confirmed the error and the Debugger identified the function",
                        "FunctionTypeSerializer used __name__ instead of __qualname__ for class methods"],
        "next_steps": ["The next step is to have the Tester verify the fix", "I'll run the full suite next",
                       "Backport the fix to the 4.2 branch"],
    }))  # fmt: skip
    summary = distiller(db).session_summary(["fix the migration serializer"], [], "Fixed it.")
    assert summary.root_causes == ["FunctionTypeSerializer used __name__ instead of __qualname__ for class methods"]
    assert summary.next == ["Backport the fix to the 4.2 branch"]


def test_session_summary_failure_falls_back_to_local(fake_anthropic, db) -> None:
    fake_anthropic.default = error_reply(500)
    summary = distiller(db, llm_max_retries=0).session_summary(["add a README"], [], "Added README.md")
    assert summary.distilled_by == "local" and summary.request == "add a README"
    fake_anthropic.default = text_reply("not json")
    summary = distiller(db).session_summary(["add a README"], [], None)
    assert summary.distilled_by == "local"
