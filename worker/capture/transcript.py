"""Reading a Claude Code transcript (`transcript_path`, JSON Lines) into turns.

Used at PreCompact to extract what the conversation established before the
context is compacted away. The file is being written while we read it, and its
entry types change between Claude Code versions, so: a torn last line is
skipped, unknown entry types and block types are ignored, and nothing raises
on content (only an unreadable file is an error, `TranscriptError`).

Entries we understand (one JSON object per line):
- `{"type": "user", "message": {"role": "user", "content": str | [blocks]}}`;
  blocks are `text` or `tool_result` (a tool's answer, not a human prompt).
- `{"type": "assistant", "message": {"id", "content": [text | thinking | tool_use]}}`;
  Claude Code writes one entry per content block, so consecutive entries with
  the same message id are joined into one turn.
- `{"type": "summary", "summary": "..."}`: a summary of an earlier, compacted part.
- `isMeta` entries (command caveats and the like) are skipped.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worker.capture.redact import sanitize

DEFAULT_MAX_BYTES = 8 * 1024 * 1024  # read at most the last 8 MB of a long session
_REMINDER = re.compile(r"<system-reminder>.*?(</system-reminder>|\Z)", re.DOTALL)


class TranscriptError(Exception):
    """The transcript file cannot be read (missing, a directory, no permission)."""


@dataclass
class ToolUse:
    id: str
    name: str
    input: Any


@dataclass
class ToolResult:
    tool_use_id: str
    text: str
    is_error: bool = False


@dataclass
class Turn:
    role: str  # user | assistant | summary
    text: str = ""
    tool_uses: list[ToolUse] = field(default_factory=list)
    tool_results: list[ToolResult] = field(default_factory=list)
    timestamp: str | None = None
    uuid: str | None = None
    message_id: str | None = None

    @property
    def is_prompt(self) -> bool:
        """A human prompt (a user turn with text), not a tool result."""
        return self.role == "user" and bool(self.text)


def read_transcript(path: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES) -> list[Turn]:
    """The turns of a transcript, oldest first (the last `max_bytes` of the file)."""
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            start = max(0, size - max_bytes)
            handle.seek(start)
            raw = handle.read()
    except OSError as exc:
        raise TranscriptError(f"cannot read transcript {path}: {exc.strerror or exc}") from exc
    lines = raw.decode("utf-8", errors="replace").split("\n")
    if start > 0:
        lines = lines[1:]  # we started mid-line
    turns: list[Turn] = []
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a torn line (the file is being written) or garbage
        if isinstance(entry, dict):
            _add_entry(turns, entry)
    return turns


def _add_entry(turns: list[Turn], entry: dict[str, Any]) -> None:
    kind = entry.get("type")
    if entry.get("isMeta"):
        return
    if kind == "summary":
        text = entry.get("summary")
        if isinstance(text, str) and text.strip():
            turns.append(Turn(role="summary", text=text.strip(), uuid=_opt_str(entry.get("leafUuid"))))
        return
    if kind not in ("user", "assistant"):
        return
    message = entry.get("message")
    if not isinstance(message, dict):
        return
    texts, uses, results = _blocks(message.get("content"))
    if not (texts or uses or results):
        return
    message_id = _opt_str(message.get("id"))
    previous = turns[-1] if turns else None
    if kind == "assistant" and previous and previous.role == "assistant" and message_id and previous.message_id == message_id:
        previous.text = "\n".join(t for t in (previous.text, *texts) if t)
        previous.tool_uses += uses
        return
    turns.append(
        Turn(
            role=kind,
            text="\n".join(texts),
            tool_uses=uses,
            tool_results=results,
            timestamp=_opt_str(entry.get("timestamp")),
            uuid=_opt_str(entry.get("uuid")),
            message_id=message_id,
        )
    )


def _blocks(content: Any) -> tuple[list[str], list[ToolUse], list[ToolResult]]:
    if isinstance(content, str):
        text = _clean(content)
        return ([text] if text else []), [], []
    texts: list[str] = []
    uses: list[ToolUse] = []
    results: list[ToolResult] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            text = _clean(block.get("text"))
            if text:
                texts.append(text)
        elif kind == "tool_use":
            uses.append(ToolUse(id=_opt_str(block.get("id")) or "", name=_opt_str(block.get("name")) or "?",
                                input=block.get("input")))  # fmt: skip
        elif kind == "tool_result":
            results.append(
                ToolResult(
                    tool_use_id=_opt_str(block.get("tool_use_id")) or "",
                    text=_result_text(block.get("content")),
                    is_error=bool(block.get("is_error")),
                )
            )
        # thinking, image, redacted_thinking, unknown: not memory material
    return texts, uses, results


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def _clean(text: Any) -> str:
    return _REMINDER.sub("", text).strip() if isinstance(text, str) else ""


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def render_turns(turns: list[Turn], max_chars: int = 60_000, *, tool_result_chars: int = 500) -> str:
    """The conversation as plain text for a prompt, redacted, keeping its most recent part.

    Tool results are cut short: what the assistant concluded from them is in
    its next turn, and the observations already hold the details.
    """
    parts: list[str] = []
    for turn in turns:
        if turn.role == "summary":
            parts.append(f"[Earlier summary] {turn.text}")
            continue
        if turn.role == "user":
            if turn.text:
                parts.append(f"User: {turn.text}")
            for result in turn.tool_results:
                flag = " (error)" if result.is_error else ""
                parts.append(f"Tool result{flag}: {_cut(result.text, tool_result_chars)}")
            continue
        if turn.text:
            parts.append(f"Assistant: {turn.text}")
        for use in turn.tool_uses:
            args = json.dumps(use.input, ensure_ascii=False, default=str) if use.input is not None else ""
            parts.append(f"Assistant used {use.name}: {_cut(args, 300)}")
    text = sanitize("\n\n".join(parts))
    if len(text) > max_chars:
        text = "…[earlier conversation omitted]…\n" + text[-max_chars:]
    return text


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"…[{len(text) - limit} more chars]"


def transcript_text(path: str | os.PathLike[str], max_chars: int = 60_000) -> str:
    """The redacted text of a transcript for fact extraction ("" when unreadable)."""
    try:
        return render_turns(read_transcript(Path(path)), max_chars)
    except TranscriptError:
        return ""
