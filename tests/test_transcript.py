"""Reading Claude Code transcripts (JSONL) into turns, robustly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_anchor.worker.capture.transcript import TranscriptError, read_transcript, render_turns, transcript_text

FIXTURE = Path(__file__).parent / "fixtures" / "transcript_session.jsonl"


def test_fixture_turns() -> None:
    turns = read_transcript(FIXTURE)
    roles = [t.role for t in turns]
    # summary, prompt, assistant(msg_01A joined), tool result, assistant, tool result,
    # assistant, tool result, prompt, assistant; meta, system, snapshot and torn line skipped
    assert roles == ["summary", "user", "assistant", "user", "assistant", "user", "assistant", "user", "user", "assistant"]
    summary, prompt, first = turns[0], turns[1], turns[2]
    assert summary.text.startswith("Set up the shop API")
    assert prompt.is_prompt and prompt.text.startswith("The cart total is wrong")
    # three transcript entries of one message make one turn; thinking is not kept
    assert first.message_id == "msg_01A"
    assert first.text == "I'll look at how coupons are applied in the cart."
    assert [(u.name, u.input["file_path"]) for u in first.tool_uses] == [("Read", "/home/dev/shop/app/cart.py")]
    result = turns[3]
    assert not result.is_prompt and result.tool_results[0].tool_use_id == "toolu_01Read"
    assert "def apply_coupon" in result.tool_results[0].text
    failed = turns[7].tool_results[0]
    assert failed.is_error and "1 failed" in failed.text
    # <system-reminder> blocks are not the user's words
    assert turns[8].text.startswith("Use a set called coupon_codes") and "todo list" not in turns[8].text
    assert turns[-1].text.startswith("Added `self.coupon_codes = set()`")


def test_render_is_redacted_and_readable() -> None:
    text = transcript_text(FIXTURE)
    assert "sk_live_abcdefghijklmnop1234" not in text and "[REDACTED:stripe_key]" in text
    assert "User: The cart total is wrong" in text
    assert "Assistant used Edit:" in text
    assert "Tool result (error):" in text
    assert text.index("[Earlier summary]") < text.index("User: The cart") < text.index("Assistant: Added")


def test_render_keeps_the_most_recent_part() -> None:
    text = render_turns(read_transcript(FIXTURE), max_chars=200)
    assert text.startswith("…[earlier conversation omitted]…")
    assert text.endswith("both cart tests pass now.")


def test_partial_and_garbage_lines_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    lines = [
        "not json at all",
        json.dumps([1, 2, 3]),
        json.dumps({"type": "user", "message": "not a dict"}),
        json.dumps({"type": "user", "message": {"role": "user", "content": 42}}),
        json.dumps({"type": "brand-new-entry", "payload": {}}),
        json.dumps({"type": "assistant", "message": {"content": [{"type": "tool_use", "name": None, "id": 5}, "str", None]}}),
        json.dumps({"type": "user", "message": {"role": "user", "content": [{"type": "image", "source": {}}, {"type": "text", "text": "hi"}]}}),
        '{"type": "user", "message": {"role": "user", "content": "torn',
    ]
    path.write_text("\n".join(lines), encoding="utf-8")
    turns = read_transcript(path)
    assert [(t.role, t.text) for t in turns] == [("assistant", ""), ("user", "hi")]
    assert turns[0].tool_uses[0].name == "?"


def test_reads_only_the_tail_of_a_huge_transcript(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    entry = {"type": "user", "message": {"role": "user", "content": "x" * 1000}}
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(2000):
            entry["message"]["content"] = f"prompt {i} " + "x" * 1000
            handle.write(json.dumps(entry) + "\n")
    turns = read_transcript(path, max_bytes=50_000)
    assert 40 <= len(turns) <= 50
    assert turns[-1].text.startswith("prompt 1999 ")


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match="cannot read transcript"):
        read_transcript(tmp_path / "nope.jsonl")
    assert transcript_text(tmp_path / "nope.jsonl") == ""
    with pytest.raises(TranscriptError):
        read_transcript(tmp_path)  # a directory
