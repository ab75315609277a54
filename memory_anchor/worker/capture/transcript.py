"""Reading a Claude Code transcript (`transcript_path`, JSON Lines) into turns.

The one reader of transcripts: PreCompact extracts what the conversation
established before it is compacted away (`transcript_text`), and the history
importer (history.py) turns whole transcripts into the events the hooks send.
The file may be being written while we read it, and its entry types change
between Claude Code versions, so: a torn last line is skipped, unknown entry
types and block types are ignored, and nothing raises on content (only an
unreadable file is an error, `TranscriptError`).

Entries we read (one JSON object per line; 2.1.197 and 2.1.332 write them alike):
- `{"type": "user", "message": {"role": "user", "content": str | [blocks]}}`;
  blocks are `text` or `tool_result` (a tool's answer, not a human prompt; the
  entry's `toolUseResult` is the structured result the PostToolUse hook gets).
- `{"type": "assistant", "message": {"id", "content": [text | thinking | tool_use]}}`;
  Claude Code writes one entry per content block, so consecutive entries with
  the same message id are joined into one turn.
- `{"type": "summary", "summary": "..."}` and a user entry marked
  `isCompactSummary`: a summary of an earlier, compacted part.
- `isSidechain` entries (with `agentId`) are a subagent's work: kept as turns of
  that agent (`Turn.agent_id`), never as the user's prompt or Claude's answer.

What is Claude Code's own text, not the user's words, and so never a prompt:
- `isMeta` entries: command caveats, the body of a slash command or a skill;
- `<local-command-stdout>` and the like (a built-in command's output), the
  `<command-name>` entry of a built-in command (the one after a
  `<local-command-caveat>`: the hooks get no prompt for it), `<bash-input>` of
  the `!` shell mode, "[Request interrupted by user]";
- `<task-notification>` (a background agent finished) and a Stop hook's feedback
  ("Stop hook feedback: ..."): it starts a turn, as the hooks see it, but is a
  `notice`, not a prompt.
A custom command's entry (`<command-name>/greet</command-name>
<command-args>world</command-args>`) is what the user typed: "/greet world".
Every other line type (attachment, queue-operation, api-request*, cost-state,
last-prompt, tools-used, system, file-history-snapshot, ...) is skipped.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from memory_anchor.core.redact import sanitize
from memory_anchor.core.safe_read import open_file

DEFAULT_MAX_BYTES = 8 * 1024 * 1024  # read at most the last 8 MB of a long session
# Blocks Claude Code adds to what the user typed: reminders, and the IDE extension's note of the
# file open or the lines selected in the editor. The hooks get the prompt without them.
_ADDED_BLOCKS = re.compile(r"<(system-reminder|ide_opened_file|ide_selection|ide_diagnostics)>.*?(</\1>|\Z)", re.DOTALL)
_COMMAND_NAME = re.compile(r"<command-name>\s*(.*?)\s*</command-name>", re.DOTALL)
_COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.DOTALL)
# Text Claude Code writes into the conversation as if the user had said it.
_CLAUDE_CODE_TEXT = ("<local-command-stdout>", "<local-command-stderr>", "<local-command-caveat>", "<bash-input>",
                     "<bash-stdout>", "<bash-stderr>", "[Request interrupted by user")  # fmt: skip
# Claude Code's own text that starts a turn: a background agent finished, a hook's feedback that made
# Claude go on (a Stop hook that blocked). No hook gets it as a prompt.
_NOTICES = ("<task-notification>", "Stop hook feedback:", "SubagentStop hook feedback:")
# Any other block in tags that opens a line, whatever the tag's name (`<session-start-hook>`, another
# plugin's, one a later Claude Code invents): people type prose, not markup, so such a block is Claude
# Code's, a hook's or pasted. One that opens the prompt and never closes runs to its end (an older CLI
# cut a hook's output short); elsewhere an unclosed "<" is text ("<ipython-input-4> in <module>").
TAG_BLOCK = re.compile(r"(?m)^[ \t]*<([A-Za-z][\w.:-]*)(?:\s[^<>\n]*)?>.*?</\1\s*>", re.DOTALL)
_OPENING_TAG = re.compile(r"\A\s*<([A-Za-z][\w.:-]*)(?:\s[^<>\n]*)?>")
# What the user typed after `#`, Claude Code's shortcut that adds a line to a CLAUDE.md (before 2.0):
# a block in tags, but the user's own typing.
_MEMORY_INPUT = re.compile(r"^\s*<user-memory-input>\s*(.*?)\s*</user-memory-input>\s*$", re.DOTALL)
_NO_CONTENT = "(no content)"
_COMPACT_SUMMARY_OPENINGS = ("This session is being continued from a previous conversation",)
# A custom command's body is written the moment its command entry is: a person types later than that.
_BODY_SECONDS = 2.0


def without_tag_blocks(text: str) -> str:
    """The text without the blocks in tags that open a line (see TAG_BLOCK)."""
    return TAG_BLOCK.sub("", text).strip()


def memory_input(text: str) -> str | None:
    """What the user asked Claude Code to keep with its `#` shortcut, in their words, or None: a line
    they chose to add to the project's memory, so a lasting instruction whatever its grammar."""
    found = _MEMORY_INPUT.match(text or "")
    return found.group(1).strip() or None if found else None


def only_tag_blocks(text: str) -> bool:
    """Nothing but blocks in tags (or one that opens the text and never closes): no one typed it,
    except a memory input (`memory_input`)."""
    if memory_input(text):
        return False
    rest = without_tag_blocks(text)
    return bool(text.strip()) and (not rest or bool(_OPENING_TAG.match(rest)))


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
    response: Any = None  # the entry's `toolUseResult` (what PostToolUse's tool_response holds), when kept


@dataclass
class Turn:
    role: str  # user | assistant | summary | notice (Claude Code's own text that starts a turn)
    text: str = ""
    tool_uses: list[ToolUse] = field(default_factory=list)
    tool_results: list[ToolResult] = field(default_factory=list)
    timestamp: str | None = None
    uuid: str | None = None
    message_id: str | None = None
    session_id: str | None = None
    cwd: str | None = None
    agent_id: str | None = None  # a subagent's turn (a sidechain)
    ended_at: str | None = None  # the timestamp of the last entry joined into this turn
    last_uuid: str | None = None  # the uuid of that entry

    @property
    def is_prompt(self) -> bool:
        """A human prompt (a user turn with text), not a tool result nor a subagent's task."""
        return self.role == "user" and bool(self.text) and self.agent_id is None


def parse_line(line: str | bytes) -> Any:
    """One JSON line, or None when it is not JSON: torn, garbage, or nested too deeply for the parser."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


def read_entries(path: str | os.PathLike[str], *, max_bytes: int | None = DEFAULT_MAX_BYTES) -> list[dict[str, Any]]:
    """The JSON objects of a transcript, in file order (the last `max_bytes`; None: all of it)."""
    try:
        # A FIFO or a device named as the transcript is refused, never waited on (safe_read.py).
        with open_file(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            start = 0 if max_bytes is None else max(0, size - max_bytes)
            handle.seek(start)
            raw = handle.read()
    except OSError as exc:
        raise TranscriptError(f"cannot read transcript {path}: {exc.strerror or exc}") from exc
    lines = raw.decode("utf-8", errors="replace").split("\n")
    if start > 0:
        lines = lines[1:]  # we started mid-line
    entries = []
    for line in lines:
        line = line.strip()
        if not line:
            continue
        entry = parse_line(line)  # None: a torn line (the file is being written) or garbage
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def read_transcript(path: str | os.PathLike[str], *, max_bytes: int | None = DEFAULT_MAX_BYTES) -> list[Turn]:
    """The turns of a transcript, oldest first (the last `max_bytes` of the file; None: all of it)."""
    return parse_entries(read_entries(path, max_bytes=max_bytes))


def parse_entries(entries: Iterable[dict[str, Any]]) -> list[Turn]:
    """Transcript entries as turns (see the module docstring for what is kept)."""
    reader = _Reader()
    for entry in entries:
        reader.add(entry)
    return reader.finish()


class _Reader:
    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.after_caveat = False  # a <local-command-caveat> came: a command entry now is a built-in one
        # A command entry waits for the next entry to say what it was: a custom command's body
        # (isMeta) follows it, a built-in command's output (<local-command-stdout>) follows that.
        self.command: Turn | None = None

    def add(self, entry: dict[str, Any]) -> None:
        kind = entry.get("type")
        if kind == "summary":
            text = entry.get("summary")
            if isinstance(text, str) and text.strip():
                self.turns.append(Turn(role="summary", text=text.strip(), uuid=_opt_str(entry.get("leafUuid"))))
            return
        if kind not in ("user", "assistant"):
            return
        message = entry.get("message")
        if not isinstance(message, dict):
            return
        content = message.get("content")
        if entry.get("isMeta"):
            self._settle_command(keep=True)
            self.after_caveat = "<local-command-caveat>" in (content if isinstance(content, str) else json.dumps(content, default=str))
            return
        texts, uses, results = _blocks(content)
        if self._is_command_body(entry, kind, texts, results):
            # The body of the custom command just typed, written without `isMeta` by some versions:
            # Claude Code's text, like the isMeta body above.
            self._settle_command(keep=True)
            return
        if len(results) == 1 and entry.get("toolUseResult") is not None:
            results[0].response = entry["toolUseResult"]
        turn = Turn(
            role=kind, tool_uses=uses, tool_results=results, timestamp=_opt_str(entry.get("timestamp")),
            uuid=_opt_str(entry.get("uuid")), message_id=_opt_str(message.get("id")),
            session_id=_opt_str(entry.get("sessionId")), cwd=_opt_str(entry.get("cwd")),
            agent_id=(_opt_str(entry.get("agentId")) or "sidechain") if entry.get("isSidechain") else None,
        )  # fmt: skip
        turn.ended_at, turn.last_uuid = turn.timestamp, turn.uuid
        text = "\n".join(texts)
        if kind == "user" and text and not results:  # text beside tool results is never a prompt
            if entry.get("isCompactSummary") or text.startswith(_COMPACT_SUMMARY_OPENINGS):
                turn.role = "summary"  # with or without its mark: older versions and converted exports lose it
            elif text.startswith(_CLAUDE_CODE_TEXT):
                self._settle_command(keep=not text.startswith(("<local-command-stdout>", "<local-command-stderr>")))
                return
            elif text.startswith(_NOTICES):
                turn.role = "notice"
            elif _COMMAND_NAME.search(text) and text.lstrip().startswith(("<command-name>", "<command-message>")):
                self._settle_command(keep=True)
                turn.text = _typed_command(text)
                if not self.after_caveat and turn.text:
                    self.command = turn
                return
            elif only_tag_blocks(text) or text.strip() == _NO_CONTENT:  # a hook's output or another tool's block,
                # or Claude Code 1.0's placeholder after a memory input, recorded as a user line
                self._settle_command(keep=True)
                return
        self._settle_command(keep=True)
        self.after_caveat = False
        if turn.role != "user" or not results:
            turn.text = text
        if not (turn.text or uses or results):
            return
        previous = self.turns[-1] if self.turns else None
        if (kind == "assistant" and previous and previous.role == "assistant" and turn.message_id
                and previous.message_id == turn.message_id and previous.agent_id == turn.agent_id):  # fmt: skip
            previous.text = "\n".join(t for t in (previous.text, turn.text) if t)
            previous.tool_uses += uses
            previous.ended_at, previous.last_uuid = turn.ended_at or previous.ended_at, turn.last_uuid or previous.last_uuid
            return
        self.turns.append(turn)

    def _is_command_body(self, entry: dict[str, Any], kind: Any, texts: list[str], results: list) -> bool:
        """A user text entry right after a custom command's entry, at its time: the command's body."""
        waiting = self.command
        if waiting is None or kind != "user" or results or not texts or entry.get("isCompactSummary"):
            return False
        text = "\n".join(texts)
        if text.startswith(_CLAUDE_CODE_TEXT + _NOTICES) or _COMMAND_NAME.search(text):
            return False  # a built-in command's output, or the next command: read as before
        gap = _seconds_between(waiting.timestamp, _opt_str(entry.get("timestamp")))
        return gap is not None and 0 <= gap <= _BODY_SECONDS

    def _settle_command(self, *, keep: bool) -> None:
        """The waiting command entry is the user's prompt (`keep`) or a built-in command's (dropped)."""
        if self.command is not None and keep:
            self.turns.append(self.command)
        self.command = None

    def finish(self) -> list[Turn]:
        self._settle_command(keep=True)
        return self.turns


def _seconds_between(first: str | None, then: str | None) -> float | None:
    from datetime import datetime

    try:
        start = datetime.fromisoformat(str(first).replace("Z", "+00:00"))
        end = datetime.fromisoformat(str(then).replace("Z", "+00:00"))
    except ValueError:
        return None
    if (start.tzinfo is None) != (end.tzinfo is None):
        return None
    return (end - start).total_seconds()


def _typed_command(text: str) -> str:
    """What the user typed for a command entry: "/greet world"."""
    name = _COMMAND_NAME.search(text)
    args = _COMMAND_ARGS.search(text)
    parts = (name.group(1).strip() if name else "", args.group(1).strip() if args else "")
    return " ".join(part for part in parts if part)


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
    return _ADDED_BLOCKS.sub("", text).strip() if isinstance(text, str) else ""


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def render_turns(turns: list[Turn], max_chars: int = 60_000, *, tool_result_chars: int = 500) -> str:
    """The conversation as plain text for a prompt, redacted, keeping its most recent part.

    Tool results are cut short: what the assistant concluded from them is in
    its next turn, and the observations already hold the details. A
    subagent's turns are left out: what it found comes back as its tool result.
    """
    parts: list[str] = []
    for turn in turns:
        if turn.agent_id is not None or turn.role == "notice":
            continue
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


TURN_BYTES = 2 * 1024 * 1024  # a turn just ended is at the end of its transcript


def turn_texts(turns: list[Turn], last_message: str | None = None) -> list[str]:
    """Claude's texts in the main conversation's turn that ended with `last_message` (else the
    latest turn), oldest first: what it said between the prompt and the end of its answer.

    The turn is found by its last text, from the end: by the time a Stop is processed the
    transcript may already hold the next prompt."""
    wanted = (last_message or "").strip()
    end = None
    for i in range(len(turns) - 1, -1, -1):
        turn = turns[i]
        if turn.role == "assistant" and turn.agent_id is None and turn.text:
            if not wanted or turn.text.strip() == wanted:
                end = i
                break
    if end is None:
        return [wanted] if wanted else []
    texts = []
    for turn in reversed(turns[: end + 1]):
        if turn.agent_id is not None:
            continue
        if turn.is_prompt or turn.role in ("notice", "summary"):
            break
        if turn.role == "assistant" and turn.text:
            texts.append(turn.text)
    return texts[::-1]


def read_turn_texts(path: str | os.PathLike[str], last_message: str | None = None) -> list[str]:
    """`turn_texts` of a live transcript (its last TURN_BYTES); the last message alone when unreadable."""
    try:
        return turn_texts(read_transcript(path, max_bytes=TURN_BYTES), last_message)
    except TranscriptError:
        return [last_message] if last_message and last_message.strip() else []


def transcript_text(path: str | os.PathLike[str], max_chars: int = 60_000) -> str:
    """The redacted text of a transcript for fact extraction ("" when unreadable)."""
    try:
        return render_turns(read_transcript(Path(path)), max_chars)
    except TranscriptError:
        return ""
