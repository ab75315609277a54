"""Keep an event the worker could not take, for the worker to ingest when it is up.

One JSON object per line in `<data dir>/spool.jsonl`:
`{"id", "received_at", "branch", "agent_id", "payload"}`; `id` is the event id the
hook also sent as `X-Memory-Anchor-Event-Id`, so an event that did reach the
worker before a timeout is stored once. Each line is written with a single
`write()` on an O_APPEND descriptor: concurrent hooks never interleave lines.
"""

from __future__ import annotations

import os
import time


def spool_entry(
    event_id: str, raw_payload: bytes, event_name: str, branch: str | None, agent_id: str | None
) -> bytes:
    """The spool line (with its newline) for one event as Claude Code sent it."""
    import json

    text = raw_payload.decode("utf-8", "replace")
    try:
        payload = json.loads(text)
        if not isinstance(payload, dict):
            raise ValueError("not an object")
    except ValueError:
        # Not what Claude Code normally sends: keep the text rather than lose it.
        payload = {"hook_event_name": event_name, "unparsed_payload": text}
    payload.setdefault("hook_event_name", event_name)
    entry = {
        "id": event_id,
        "received_at": time.time(),
        "branch": branch,
        "agent_id": agent_id,
        "payload": payload,
    }
    return (json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def append(spool_file: str, line: bytes) -> None:
    """Append one line atomically; raises OSError (disk full, read-only) for the caller to log."""
    directory = os.path.dirname(spool_file)
    if directory:
        os.makedirs(directory, exist_ok=True)
    fd = os.open(spool_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        written = os.write(fd, line)
    finally:
        os.close(fd)
    if written != len(line):
        raise OSError(f"short write to {spool_file}: {written} of {len(line)} bytes")
