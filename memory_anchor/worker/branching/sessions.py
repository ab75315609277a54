"""Which branch a session writes to.

Precedence, highest first:
1. an explicit switch (`memory_branch_switch`, `memory-anchor branch switch`);
2. the writer's environment: `MEMORY_ANCHOR_BRANCH`, which the hook forwards as
   the `X-Memory-Anchor-Branch` header, so an orchestrator can start N agents on
   N branches without touching the hooks (a missing branch is created from the
   default branch);
3. a Claude Code session fork (`--fork-session`): a branch `fork/<session id>`
   from the parent session's branch, unless `auto_branch_on_fork` is off. No
   payload names a fork's parent (tests/fixtures/forks, 2.1.197 and 2.1.332),
   so the SessionStart hook tells the worker (`fork_session`, from the hook's
   environment, memory_anchor/hookkit/forks.py) before the fork's first event;
   a SessionStart with `source: "fork"` (2.1.214+) that came without it
   still gets its branch, from the default one;
4. `settings.default_branch`.

The choice is remembered in `session_branches` (with what chose it) and copied
to `sessions.branch`, which the pipeline reads when it writes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

from memory_anchor.core.safe_read import read_start
from memory_anchor.worker.store.branches import branch_exists, ensure_branch
from memory_anchor.worker.store.sessions import branch_choice, choose_branch, move_session
from memory_anchor.worker.store.records import MAIN, NotFound, RecordError, ensure_writable, validate_branch_name

log = logging.getLogger(__name__)

FORK_PREFIX = "fork/"
# A fork branch's name after its prefix: what a branch name allows (100) less the prefix, with room.
FORK_ID_CHARS = 90
FORK_HASH_CHARS = 12
# Read at most this much of a transcript to find the parent of a forked session.
TRANSCRIPT_SCAN_BYTES = 256 * 1024


def session_branch(conn: sqlite3.Connection, session_id: str) -> dict[str, Any] | None:
    return branch_choice(conn, session_id)


def branch_for_session(
    conn: sqlite3.Connection,
    session_id: str | None,
    payload: dict[str, Any] | None,
    header_branch: str | None,
    settings: Any,
) -> str:
    """The branch this session's writes go to (creating it when the rules call for it).

    Never raises for bad input: a hook event must always be stored somewhere, so
    an invalid name falls through to the next rule (and is logged).
    """
    session_id = session_id or "unknown"
    payload = payload if isinstance(payload, dict) else {}
    default = _default_branch(conn, settings)
    known = session_branch(conn, session_id)

    if known and known["chosen_by"] == "switch" and branch_exists(conn, known["branch"]):
        return _sync(conn, session_id, known["branch"])
    if header_branch:
        name = _valid(header_branch)
        if name:
            ensure_branch(conn, name, parent=default, actor="env",
                          description=f"created for session {session_id} (MEMORY_ANCHOR_BRANCH)")  # fmt: skip
            _remember(conn, session_id, name, "env")
            return _sync(conn, session_id, name)
    if known and branch_exists(conn, known["branch"]):
        return _sync(conn, session_id, known["branch"])
    if getattr(settings, "auto_branch_on_fork", True):
        parent_session = detect_fork(conn, session_id, payload)
        if parent_session or opens_fork(payload):
            return _sync(conn, session_id, _open_fork_branch(conn, session_id, parent_session, default))
    _remember(conn, session_id, default, "default")
    return _sync(conn, session_id, default)


def fork_session(conn: sqlite3.Connection, session_id: str, parent_session: str, settings: Any) -> dict[str, Any]:
    """Put a forked session on its own branch, made from its parent's, before its first event arrives.

    A session whose branch is already chosen (a switch, the environment, this
    fork told twice) keeps it; with `auto_branch_on_fork` off nothing is chosen here.
    """
    if not session_id or not parent_session:
        raise RecordError("a fork needs its own session id and its parent's")
    if session_id == parent_session:
        # well-formed, but the session it names is this one: a state the request contradicts (409)
        raise RecordError(f"session {session_id!r} cannot be a fork of itself; name the session it was forked from",
                          code="fork_of_itself", status=409)  # fmt: skip
    known = session_branch(conn, session_id)
    if known and branch_exists(conn, known["branch"]):
        return known
    if getattr(settings, "auto_branch_on_fork", True):
        _sync(conn, session_id, _open_fork_branch(conn, session_id, parent_session, _default_branch(conn, settings)))
    return session_branch(conn, session_id) or {"session_id": session_id, "branch": _default_branch(conn, settings),
                                                "chosen_by": "default"}  # fmt: skip


def _open_fork_branch(conn: sqlite3.Connection, session_id: str, parent_session: str | None, default: str) -> str:
    """`fork/<session id>`, from the parent session's branch (the default one when the parent is unknown)."""
    parent_known = session_branch(conn, parent_session) if parent_session else None
    parent = parent_known["branch"] if parent_known and branch_exists(conn, parent_known["branch"]) else default
    name = fork_branch_name(session_id)
    ensure_branch(conn, name, parent=parent, actor="claude-code",
                  description=f"fork of session {parent_session or '(unknown)'}")  # fmt: skip
    _remember(conn, session_id, name, "fork", parent_session=parent_session)
    return name


def opens_fork(payload: dict[str, Any]) -> bool:
    """A SessionStart of a forked session, as Claude Code 2.1.214 and later say it."""
    return payload.get("hook_event_name") == "SessionStart" and payload.get("source") == "fork"


def switch_session_branch(
    conn: sqlite3.Connection,
    session_id: str,
    branch: str,
    *,
    create: bool = False,
    parent: str | None = None,
    actor: str | None = None,
) -> dict[str, Any]:
    """Send this session's later writes to `branch` (an explicit choice outranks every other rule)."""
    if not session_id:
        raise RecordError("session_id is required to switch a session's branch")
    validate_branch_name(branch)
    created = False
    if not branch_exists(conn, branch):
        if not create:
            raise NotFound(f"branch {branch!r} does not exist; create it first or pass create=true")
        ensure_branch(conn, branch, parent=parent or MAIN, actor=actor)
        created = True
    ensure_writable(conn, branch)  # the session's writes would have nowhere to go
    previous = session_branch(conn, session_id)
    _remember(conn, session_id, branch, "switch")
    _sync(conn, session_id, branch)
    return {
        "session_id": session_id,
        "branch": branch,
        "previous": previous["branch"] if previous else None,
        "created": created,
    }


def fork_branch_name(session_id: str) -> str:
    """`fork/<session id>` kept to what a branch name allows: ASCII letters and digits (str.isalnum
    also takes 'ü'), '.', '_' and '-', never '..' (schemathesis sent a fork of session 'ú×üü𷙍').

    When that changes the id (`col:1` and `col/1` both read `col-1`) or cuts it (two long ids that
    share their first FORK_ID_CHARS), a short hash of the whole id follows, so distinct sessions
    never share a fork branch. A Claude Code session id (a UUID) is kept as it is."""
    kept = "".join(ch if (ch.isascii() and ch.isalnum()) or ch in "._-" else "-" for ch in session_id)
    kept = kept.replace("..", "--")
    if kept == session_id and len(kept) <= FORK_ID_CHARS:
        return FORK_PREFIX + kept
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:FORK_HASH_CHARS]
    return f"{FORK_PREFIX}{kept[:FORK_ID_CHARS - FORK_HASH_CHARS - 1]}-{digest}"


def detect_fork(conn: sqlite3.Connection, session_id: str, payload: dict[str, Any]) -> str | None:
    """The parent session id if this SessionStart opens a fork of another session.

    A plain `--resume` keeps the session id, so we already know it; a fork
    (`--fork-session`) starts under a new id whose transcript carries the parent
    conversation's entries, stamped with the parent's `sessionId`.
    """
    if payload.get("hook_event_name") not in (None, "SessionStart") or payload.get("source") not in ("resume", "fork"):
        return None
    for key in ("parent_session_id", "forked_from_session_id"):
        if isinstance(payload.get(key), str) and payload[key] and payload[key] != session_id:
            return payload[key]
    if session_branch(conn, session_id) is not None:
        return None
    path = payload.get("transcript_path")
    if not isinstance(path, str) or not path:
        return None
    return _other_session_in_transcript(Path(path), session_id)


def _other_session_in_transcript(path: Path, session_id: str) -> str | None:
    head = read_start(str(path), TRANSCRIPT_SCAN_BYTES)  # a FIFO named as the transcript is not waited on
    if head is None:
        return None
    for line in head.splitlines():
        try:
            entry = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        other = entry.get("sessionId") if isinstance(entry, dict) else None
        if isinstance(other, str) and other and other != session_id:
            return other
    return None


def _default_branch(conn: sqlite3.Connection, settings: Any) -> str:
    name = _valid(getattr(settings, "default_branch", None) or MAIN) or MAIN
    if name != MAIN:
        ensure_branch(conn, name, parent=MAIN, actor="settings", description="settings.default_branch")
    return name


def _valid(name: str) -> str | None:
    try:
        return validate_branch_name(name.strip())
    except (RecordError, AttributeError):
        log.warning("ignoring invalid branch name %r", name)
        return None


def _remember(
    conn: sqlite3.Connection, session_id: str, branch: str, chosen_by: str, *, parent_session: str | None = None
) -> None:
    choose_branch(conn, session_id, branch, chosen_by, parent_session=parent_session)


def _sync(conn: sqlite3.Connection, session_id: str, branch: str) -> str:
    move_session(conn, session_id, branch)
    return branch
