"""Claude Code history: its transcripts turned into the events its hooks send.

A user who installs Memory Anchor already has months of sessions in
`~/.claude/projects/<project slug>/<session id>.jsonl` (a subagent's work in
`<session id>/subagents/agent-<id>.jsonl`). Each transcript, read by the one
transcript reader (transcript.py), becomes what the hooks would have posted:

- UserPromptSubmit with each prompt, in the user's words (command wrappers
  unwrapped, Claude Code's own text left out);
- PostToolUse with `tool_name`, `tool_input`, `tool_response` (the entry's
  `toolUseResult` when Claude Code kept it, else the tool result's text) and
  `tool_use_id`; a subagent's tool uses carry its `agent_id` and `agent_type`,
  as the hooks of Claude Code 2.1.197 and later do;
- Stop at the end of each turn, `last_assistant_message` Claude's last text of
  the turn (and `assistant_messages`, all its texts of the turn); SessionEnd after
  the last line.

Each event keeps the time of the transcript line it comes from (`at`), and an
id made of that line's uuid, so importing the same history again is a no-op in
the inbox (tool uses are deduplicated on their `tool_use_id`, as when a hook
retries). Pure reading: nothing here talks to the worker.
"""

from __future__ import annotations

import errno
import hashlib
import heapq
import io
import os
import re
import stat
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from memory_anchor.core.projects import is_clean_path, joined
from memory_anchor.core.safe_read import open_file
from memory_anchor.worker.capture.transcript import ToolUse, TranscriptError, Turn, parse_line, read_transcript

ID_PREFIX = "cc-history"
_SLUG = re.compile(r"[^A-Za-z0-9]")
_SLUG_MAX = 200  # Claude Code cuts longer slugs and adds a hash; we match on the cut part
_SNIFF_LINES = 200  # lines read to tell a transcript from another .jsonl (and to find its first time)
_PATH_KEYS = ("file_path", "notebook_path")  # tool inputs Claude Code makes absolute before its hooks see them


@dataclass
class HistoryEvent:
    """One hook event read from a transcript."""

    payload: dict[str, Any]
    event_id: str
    at: float | None  # when it happened: the transcript line's timestamp, epoch seconds (None: unknown)


def claude_projects_dir() -> Path:
    """Where Claude Code keeps its transcripts: `$CLAUDE_CONFIG_DIR/projects`, else `~/.claude/projects`."""
    base = os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(os.path.expanduser("~"), ".claude")
    return Path(base) / "projects"


def project_slug(path: str) -> str:
    """Claude Code's folder name for a project directory: every character but ASCII letters and digits
    becomes '-' (`/home/me/my.app_x` -> `-home-me-my-app-x`)."""
    return _SLUG.sub("-", path)


def history_dirs(directory: str, projects: Path | None = None) -> list[Path]:
    """The transcript folders of sessions started in `directory` (none when Claude Code has none)."""
    projects = projects or claude_projects_dir()
    slug = project_slug(os.path.abspath(directory))
    exact = projects / slug
    if exact.is_dir():
        return [exact]
    if len(slug) <= _SLUG_MAX or not projects.is_dir():
        return []
    return sorted(p for p in projects.iterdir() if p.is_dir() and p.name.startswith(slug[:_SLUG_MAX]))


@dataclass
class Sessions:
    """What a file or folder holds: session transcripts, oldest first, and the files that are none (why)."""

    files: list[Path]
    skipped: list[tuple[Path, str]]


def session_files(source: Path) -> Sessions:
    """The Claude Code session transcripts a file or folder holds, oldest first (by their first line's time).

    Any other .jsonl beside them (a tool's own log, a benchmark's probes) is skipped with its reason:
    its lines would otherwise become a session of nothing, or of someone else's data. So is what
    is no file to read: a directory, a FIFO, a dangling symbolic link or a loop of them.
    """
    candidates = sorted(source.glob("*.jsonl")) if source.is_dir() else [source]
    files, skipped = [], []
    for path in candidates:
        reason = not_a_file(path) or not_a_transcript(path)
        if reason is None:
            files.append(path)
        else:
            skipped.append((path, reason))
    return Sessions(sorted(files, key=lambda p: (_first_timestamp(p), p.name)), sorted(skipped))


def not_a_file(path: Path) -> str | None:
    """Why `path` is not a regular file one can read, or None (stat only: nothing is opened)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "a dangling symbolic link" if os.path.islink(path) else "missing"
    except OSError as exc:
        return "a symbolic link loop" if exc.errno == errno.ELOOP else f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if not stat.S_ISREG(mode):
        return "not a regular file"
    return None


def _lines(path: Path, count: int = _SNIFF_LINES) -> list[str]:
    """The first `count` lines of a regular file (OSError for anything else; a FIFO never blocks)."""
    with open_file(path) as raw:
        handle = io.TextIOWrapper(raw, encoding="utf-8", errors="replace")
        return [line for _, line in zip(range(count), handle)]


def not_a_transcript(path: Path) -> str | None:
    """Why `path` is not a Claude Code session transcript, or None when it is one.

    A transcript has, among its first lines, a conversation entry (`type` user or
    assistant) that names its session (`sessionId`); the lines before it may be
    anything Claude Code writes (queue operations, summaries, snapshots).
    """
    try:
        lines = _lines(path)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    entries = 0
    for line in lines:
        entry = parse_line(line)
        if not isinstance(entry, dict):
            continue
        entries += 1
        if entry.get("type") in ("user", "assistant") and isinstance(entry.get("sessionId"), str):
            return None
    if not lines:
        return "empty"
    if not entries:
        return "not JSON Lines of objects"
    return f"not a Claude Code transcript (no user or assistant entry with a sessionId in its first {len(lines)} lines)"


def session_id_of(path: Path) -> str:
    """The session a transcript's events are filed under: its first conversation entry's `sessionId`.

    Claude Code names the file by its session, but a resumed session's file begins with
    the conversation it continues, under that conversation's id; the file name is the
    answer only when no entry names one.
    """
    try:
        lines = _lines(path)
    except OSError:
        lines = []
    for line in lines:
        entry = parse_line(line)
        if isinstance(entry, dict) and entry.get("type") in ("user", "assistant") and isinstance(entry.get("sessionId"), str):
            return entry["sessionId"]
    return path.stem


class SessionRefused(TranscriptError):
    """A transcript whose session cannot be imported (its reason says why)."""


def session_events(path: Path, skipped: list[tuple[Path, str]] | None = None,
                   said_before: set[bytes] | None = None) -> list[HistoryEvent]:  # fmt: skip
    """The hook events of one session's transcript and its subagents' transcripts, in time order.

    `said_before` holds the prompts (`prompt_said`) of the transcripts read before this one, and
    gets this one's: a transcript that opens with one of them is a resumed conversation (see
    `continued_from`), and only what follows the copy becomes events.

    Raises TranscriptError when the transcript cannot be read, SessionRefused when its `cwd`
    is not an absolute, normalised path (a relative one would resolve against the worker's
    directory, `/a/../../etc` would become project /etc). A subagent file that cannot be
    read is left out and added to `skipped` with its reason; the session is imported without it.
    """
    turns = read_transcript(path, max_bytes=None)
    session = _Session(path, turns)
    if session.cwd is not None and not is_clean_path(session.cwd):
        raise SessionRefused(f"its cwd {session.cwd[:200]!r} is not an absolute, normalised path")
    if said_before is not None:
        start = continued_from(session.cwd, turns, said_before)
        said_before |= {prompt_said(session.cwd, turn) for turn in turns if turn.is_prompt}
        if start:
            session = _Session(path, turns[start:])
    main = list(session.events())
    agents = []
    for agent_path in subagent_files(path, skipped):
        try:
            agents.append(session.agent_events(agent_path))
        except TranscriptError as exc:
            if skipped is not None:
                skipped.append((agent_path, str(exc)))
    if not agents:
        return main
    # Each list keeps its own order; a subagent's tool uses slot in among the main session's by time.
    merged = heapq.merge(*[_keyed(events, i) for i, events in enumerate([main[:-1], *agents])])
    return [event for *_, event in merged] + main[-1:]  # SessionEnd stays last


def continued_from(cwd: str | None, turns: list[Turn], said_before: set[bytes]) -> int:
    """Where a transcript's own conversation starts: after the copy of another session it opens with.

    Some Claude Code versions start a resumed session's file with a copy of the conversation
    it resumes, each line with a new uuid and this session's id, at the time it was first said.
    A live session's hooks report only its new turns, and the copied ones were imported from
    the file they were said in: read again, each prompt and reply would count twice, and the
    session's first request would be the other one's. A transcript whose first prompt (where,
    when to the millisecond, and what) was read before is a copy up to its first prompt that
    was not (all of it, if none).
    """
    prompts = [n for n, turn in enumerate(turns) if turn.is_prompt]
    if not prompts or prompt_said(cwd, turns[prompts[0]]) not in said_before:
        return 0
    return next((n for n in prompts if prompt_said(cwd, turns[n]) not in said_before), len(turns))


def prompt_said(cwd: str | None, turn: Turn) -> bytes:
    """A prompt as the moment it was said, its directory, its time and its words, as a digest: an
    import keeps one for every prompt it reads, and a prompt may hold a pasted log."""
    said = "\0".join((cwd or "", turn.timestamp or "", turn.text))
    return hashlib.blake2b(said.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _keyed(events: list[HistoryEvent], source: int) -> list[tuple[float, int, int, HistoryEvent]]:
    """(time, source, position, event): sortable, an event without a time at the time of the one before it."""
    keyed, at = [], 0.0
    for position, event in enumerate(events):
        at = event.at if event.at is not None else at
        keyed.append((at, source, position, event))
    return keyed


def subagent_files(path: Path, skipped: list[tuple[Path, str]] | None = None) -> list[Path]:
    """A session's subagent transcripts that are regular files; the others go to `skipped` with why."""
    folder = path.with_suffix("") / "subagents"
    found = []
    for candidate in sorted(folder.glob("agent-*.jsonl")) if folder.is_dir() else []:
        reason = not_a_file(candidate)
        if reason is None:
            found.append(candidate)
        elif skipped is not None:
            skipped.append((candidate, reason))
    return found


class _Session:
    def __init__(self, path: Path, turns: list[Turn]):
        self.path = path
        self.turns = turns
        first = next((t for t in turns if t.session_id), None)
        self.session_id = first.session_id if first else path.stem
        self.cwd = next((t.cwd for t in turns if t.cwd), None)

    def payload(self, hook_event_name: str, **fields: Any) -> dict[str, Any]:
        base: dict[str, Any] = {"hook_event_name": hook_event_name, "session_id": self.session_id,
                                "transcript_path": os.path.abspath(self.path)}  # fmt: skip
        if self.cwd:
            base["cwd"] = self.cwd
        return {**base, **fields}

    def events(self) -> Iterator[HistoryEvent]:
        """The main conversation's events; the last is SessionEnd. None for a transcript of nothing
        but Claude Code's own lines (a session opened and left with `/exit`): no session happened,
        and its end alone would be one with no project, dated at the import."""
        if not self.turns:
            return
        uses: dict[str, ToolUse] = {}
        last: Turn | None = None  # Claude's last turn with text in the current turn of the conversation
        said: list[str] = []  # every text of Claude's in the current turn of the conversation
        in_turn = False
        latest: float | None = None  # the latest time a line gave that a date can show
        for turn in self.turns:
            latest = _epoch(turn.ended_at) or _epoch(turn.timestamp) or latest
            if turn.agent_id is not None:  # a sidechain kept in the main file (older Claude Code)
                yield from self._tool_events(turn, uses, agent_id=turn.agent_id)
                continue
            if turn.is_prompt or turn.role == "notice":
                if in_turn:
                    yield self._stop(last, turn, said, latest)
                in_turn, last, said = True, None, []
                if turn.is_prompt:
                    yield HistoryEvent(self.payload("UserPromptSubmit", prompt=turn.text),
                                       _event_id(turn.uuid, "prompt", self.session_id, turn.timestamp), _epoch(turn.timestamp))  # fmt: skip
            elif turn.role == "assistant":
                in_turn = True
                if turn.text:
                    last = turn
                    said.append(turn.text)
            yield from self._tool_events(turn, uses)
        if in_turn:
            yield self._stop(last, None, said, latest)
        # One SessionEnd per session, whatever the transcript holds when it is read: a transcript
        # still being written, imported again, must not end its session once more.
        yield HistoryEvent(self.payload("SessionEnd", reason="other"), f"{ID_PREFIX}:{self.session_id}:end", latest)

    def _stop(self, last: Turn | None, following: Turn | None, said: list[str], known: float | None) -> HistoryEvent:
        """Stop at the end of a turn: Claude's last text then, at its time (else just before the next
        turn; else the last time the transcript gave, never the import's own time).

        It also carries every text Claude wrote in that turn (`assistant_messages`), which a live Stop's
        worker reads from the transcript itself: here the reader has the turn at hand, and reading the
        whole file again at each Stop of an import would cost a read of it per turn."""
        stamp = (last.ended_at if last else None) or (following.timestamp if following else None)
        key = last.last_uuid if last else (following.uuid if following else None)
        return HistoryEvent(
            self.payload("Stop", stop_hook_active=False, last_assistant_message=last.text if last else "",
                         assistant_messages=list(said)),
            _event_id(key, "stop", self.session_id, stamp), _epoch(stamp) or known,
        )  # fmt: skip

    def _tool_events(self, turn: Turn, uses: dict[str, ToolUse], *, agent_id: str | None = None,
                     agent_type: str | None = None) -> Iterator[HistoryEvent]:  # fmt: skip
        for use in turn.tool_uses:
            if use.id:
                uses[use.id] = use
        for result in turn.tool_results:
            use = uses.pop(result.tool_use_id, None)
            if use is None:
                continue  # its call was cut off (a transcript read from the middle): nothing to say what ran
            fields: dict[str, Any] = {}
            if agent_id is not None:
                fields["agent_id"] = agent_id
                if agent_type:
                    fields["agent_type"] = agent_type
            response = result.response if isinstance(result.response, (dict, list, str)) else result.text
            payload = self.payload("PostToolUse", **fields, tool_name=use.name, tool_input=self._as_hooks_see(use.input),
                                   tool_response=response, tool_use_id=use.id)  # fmt: skip
            yield HistoryEvent(payload, f"{ID_PREFIX}:{use.id}", _epoch(turn.timestamp))

    def _as_hooks_see(self, tool_input: Any) -> dict[str, Any]:
        """The tool's input as Claude Code hands it to hooks: a file path the model gave relative to
        the working directory is made absolute (the transcript keeps what the model wrote)."""
        if not isinstance(tool_input, dict):
            return {}
        given = {k: tool_input[k] for k in _PATH_KEYS if isinstance(tool_input.get(k), str)}
        if not self.cwd or not given:
            return tool_input
        return {**tool_input, **{k: joined(self.cwd, v) for k, v in given.items() if v}}

    def agent_events(self, path: Path) -> list[HistoryEvent]:
        """A subagent's tool uses, as its hooks report them: the parent session's, with its agent id."""
        agent_id = path.stem.removeprefix("agent-")
        agent_type = _agent_type(path.with_name(f"{path.stem}.meta.json"))
        uses: dict[str, ToolUse] = {}
        events: list[HistoryEvent] = []
        for turn in read_transcript(path, max_bytes=None):
            events += self._tool_events(turn, uses, agent_id=turn.agent_id or agent_id, agent_type=agent_type)
        return events


def _agent_type(meta: Path) -> str | None:
    try:
        with open_file(meta) as handle:
            value = parse_line(handle.read(1 << 20)).get("agentType")
    except (OSError, AttributeError):
        return None
    return value if isinstance(value, str) and value else None


def _event_id(uuid: str | None, kind: str, session_id: str, at: str | None) -> str:
    """A stable id for an event read from a transcript line: the line's uuid, else where and when it was."""
    return f"{ID_PREFIX}:{uuid}:{kind}" if uuid else f"{ID_PREFIX}:{session_id}:{at}:{kind}"


def _epoch(stamp: str | None) -> float | None:
    """Epoch seconds of a transcript timestamp ("2025-11-20T10:00:01.000Z"); None when it has none."""
    if not stamp:
        return None
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp() if moment.year >= 2000 else None  # 0001-01-01: a placeholder, not a time


def _first_timestamp(path: Path) -> str:
    """The first timestamp in a transcript (for ordering sessions), read from its first lines only."""
    try:
        lines = _lines(path)
    except OSError:
        lines = []
    for line in lines:
        match = re.search(r'"timestamp"\s*:\s*"([^"]+)"', line)
        if match:
            return _iso_utc(match.group(1))
    return "9999"


def _iso_utc(stamp: str) -> str:
    epoch = _epoch(stamp)
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat() if epoch is not None else stamp
