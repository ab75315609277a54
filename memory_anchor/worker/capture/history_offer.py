"""The first-run offer: "N earlier Claude Code sessions of this project can be imported".

A new user's project usually has history Claude Code kept before the plugin was
installed: the folder of the session's own transcript (`transcript_path`) holds
one `<session id>.jsonl` a session. Those whose session memory has never seen
(no event captured live, none imported) are the ones an import would add. The
briefing of a new session says how many, in one line, until they are imported
or the user dismisses the offer (`memory-anchor import-history --dismiss`,
kept in the data dir's `history-dismissed.json`, one entry per folder).

Cheap enough for every SessionStart: the folder's names are listed (not read),
and memory is asked which of those sessions it knows in one query per 500.
Importing is never started from here: a bulk import is the user's call (docs/guide.md).
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

from memory_anchor.core import paths
from memory_anchor.worker.capture.inbox import Inbox
from memory_anchor.worker.store.atomic_write import replaced_atomically

DISMISSED = "history-dismissed.json"
_SESSION_FILE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.jsonl$")


def offer_line(count: int) -> str:
    sessions = "session" if count == 1 else "sessions"
    return (f"Memory Anchor: {count} earlier Claude Code {sessions} of this project can be imported into memory "
            "(locally, no Claude tokens): run `memory-anchor import-history` in the project's folder, or "
            "`memory-anchor import-history --dismiss` to stop this note.")  # fmt: skip


def importable_sessions(inbox: Inbox, transcript_path: str, session_id: str | None, data_dir: Path) -> int:
    """How many sessions beside this one's transcript memory has never seen (0 once dismissed)."""
    folder = Path(transcript_path).parent
    try:
        if not transcript_path or not folder.is_dir() or is_dismissed(data_dir, folder):
            return 0
        names = [entry.name for entry in os.scandir(folder) if _SESSION_FILE.match(entry.name) and entry.is_file()]
    except (OSError, ValueError):  # unreadable, or no path at all ("a\0b"): nothing to offer
        return 0
    ids = [name[: -len(".jsonl")] for name in names if name[: -len(".jsonl")] != session_id]
    return len(ids) - len(inbox.known_sessions(ids)) if ids else 0


def _read(data_dir: Path) -> dict[str, float]:
    try:
        value = json.loads((data_dir / DISMISSED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def is_dismissed(data_dir: Path, folder: Path) -> bool:
    return str(folder.resolve()) in _read(data_dir)


def dismiss(data_dir: Path, folders: list[Path]) -> None:
    """Stop offering these transcript folders' sessions (the user said not now)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    dismissed = _read(data_dir)
    dismissed.update({str(folder.resolve()): time.time() for folder in folders})
    with replaced_atomically(Path(paths.data_file(DISMISSED, str(data_dir)))) as handle:
        handle.write(json.dumps(dismissed, indent=1).encode("utf-8"))
