"""Importing Claude Code history into a worker (`memory-anchor import-history`, `bench replay`).

Reads transcripts (a file, a folder, or the current project's folder under
`~/.claude/projects/`) into the events the hooks send (memory_anchor/worker/capture/history.py),
posts them in batches to `POST /api/v1/events/history`, then follows the worker
while it processes them, saying how far it has got.

Distilled locally by default: a bulk import must not spend the user's Claude
allowance unasked (docs/guide.md says why); `claude=True` lets the worker's usual
route (and its daily token budget) decide.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from memory_anchor.schemas.history import HistoryImported

BATCH_EVENTS = 1000
BATCH_BYTES = 8 * 1024 * 1024


@dataclass
class ImportReport:
    sessions: int = 0
    events: int = 0
    accepted: int = 0
    duplicates: int = 0
    skipped_sessions: list[str] = field(default_factory=list)
    not_transcripts: list[tuple[str, str]] = field(default_factory=list)  # (file, why it is not a transcript)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (file, why its session was not imported)
    projects: dict[str, int] = field(default_factory=dict)  # sessions imported, by the project they were filed under
    other_projects: list[tuple[str, str]] = field(default_factory=list)  # (file, its project): left out
    # Files with no conversation of their own: a resumed session's copy of an earlier one, or a session
    # opened and left at once. No session is counted or filed for them.
    no_conversation: int = 0
    refused: list[str] = field(default_factory=list)
    sent_seconds: float = 0.0
    processed_seconds: float = 0.0
    indexed_seconds: float | None = None  # None: not waited for
    left_to_embed: int = 0  # records the worker was still embedding when the import returned


class Progress:
    """One line on stderr, rewritten in place on a terminal (a line every few seconds otherwise)."""

    def __init__(self, out=None, quiet: bool = False):
        self.out = out or sys.stderr
        self.quiet = quiet
        self.tty = hasattr(self.out, "isatty") and self.out.isatty()
        self._last = 0.0
        self._open = False

    def __call__(self, text: str, *, final: bool = False) -> None:
        if self.quiet:
            return
        now = time.monotonic()
        if self.tty:
            self.out.write("\r\033[K" + text + ("\n" if final else ""))
            self._open = not final
        elif final or now - self._last >= 5.0:
            self.out.write(text + "\n")
            self._last = now
        self.out.flush()


def default_sources(directory: str) -> list[Path]:
    """The current project's Claude Code transcript folders: of `directory` and of its git root."""
    from memory_anchor.core.projects import project_for_cwd
    from memory_anchor.worker.capture.history import history_dirs

    found: list[Path] = []
    for candidate in dict.fromkeys([os.path.abspath(directory), project_for_cwd(directory) or directory]):
        for folder in history_dirs(candidate):
            if folder not in found:
                found.append(folder)
    return found


def in_project(cwd: str | None, project: str) -> bool:
    """Was a session with this `cwd` started in `project` (its directory or one below it)?"""
    from memory_anchor.core.projects import project_for_cwd

    if not cwd:
        return True  # nothing says otherwise: the folder it was found in is the project's
    return cwd == project or cwd.startswith(project.rstrip("/") + "/") or project_for_cwd(cwd) == project


def import_history(client, sources: list[Path], *, claude: bool = False, wait_index: bool = False,
                   progress: Callable[..., None] | None = None, timeout: float = 3600,
                   project: str | None = None) -> ImportReport:  # fmt: skip
    """Send the sessions of `sources` (files or folders) to the worker and wait until it has processed them.

    Each session is filed under its own project (its `cwd`). With `project`, a session of another
    project is left out and reported instead. A file that cannot be read (a directory, a FIFO,
    a loop, deep nesting, a cwd that is not an absolute path) is reported with its reason, and the
    others are imported.
    """
    from memory_anchor.core.projects import project_for_cwd
    from memory_anchor.worker.capture.history import session_events, session_files
    from memory_anchor.worker.capture.transcript import TranscriptError

    say = progress or (lambda text, final=False: None)
    found = [session_files(Path(source)) for source in sources]
    files = [f for sessions in found for f in sessions.files]
    report = ImportReport()
    report.not_transcripts = [(str(path), why) for sessions in found for path, why in sessions.skipped]
    started = time.monotonic()
    batch: list[dict[str, Any]] = []
    size = 0
    said_before: set[bytes] = set()  # prompts of the files read so far: a resumed session's copy of them is left out

    def send() -> None:
        nonlocal batch, size
        if batch:
            _add(report, HistoryImported.model_validate(client.post("/api/v1/events/history", {"events": batch, "claude": claude})))
        batch, size = [], 0

    for number, path in enumerate(files, 1):
        skipped: list[tuple[Path, str]] = []
        try:
            events = session_events(path, skipped, said_before)
        except (TranscriptError, OSError, ValueError, RecursionError) as exc:
            report.failed.append((str(path), str(exc) or type(exc).__name__))
            continue
        finally:
            report.failed += [(str(p), why) for p, why in skipped]
        if not events:
            report.no_conversation += 1
            continue
        cwd = next((e.payload.get("cwd") for e in events if e.payload.get("cwd")), None)
        if project is not None and not in_project(cwd, project):
            report.other_projects.append((str(path), project_for_cwd(cwd) or cwd))
            continue
        filed = project_for_cwd(cwd) if cwd else "(no project)"
        report.projects[filed] = report.projects.get(filed, 0) + 1
        for event in events:
            item = {"payload": event.payload, "event_id": event.event_id, "at": event.at}
            batch.append(item)
            size += len(json.dumps(item, ensure_ascii=False, default=str))
            report.events += 1
            if len(batch) >= BATCH_EVENTS or size >= BATCH_BYTES:
                send()
        report.sessions += 1
        say(f"reading Claude Code history: {number}/{len(files)} sessions, {report.events:,} events")
    send()
    report.sent_seconds = time.monotonic() - started
    say(f"read {len(files)} sessions: {report.events:,} events ({report.accepted:,} new)", final=True)
    _wait(client, report, started, wait_index, say, timeout)
    return report


def _add(report: ImportReport, outcome: HistoryImported) -> None:
    report.accepted += outcome.accepted
    report.duplicates += outcome.duplicates
    report.skipped_sessions += [s for s in outcome.skipped_sessions if s not in report.skipped_sessions]
    report.refused += [r.reason for r in outcome.refused]


def _wait(client, report: ImportReport, started: float, wait_index: bool, say, timeout: float) -> None:
    """Follow the worker until the events are processed (and, with `wait_index`, embedded)."""
    from memory_anchor.client.worker_client import WorkerError

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = client.get("/api/v1/status")
        pending = int(status["inbox"].get("pending") or 0)
        vectors = int(status.get("pending_vectors") or 0)
        if not pending and report.processed_seconds == 0.0:
            report.processed_seconds = time.monotonic() - started
            say(f"processed {report.accepted:,} events in {report.processed_seconds:.1f}s", final=True)
            if not wait_index:
                report.left_to_embed = vectors
                return
        if not pending and not vectors:
            report.indexed_seconds = time.monotonic() - started
            return
        if pending:
            say(f"processing: {max(0, report.accepted - pending):,}/{report.accepted:,} events")
        else:
            say(f"embedding for search: {vectors:,} records left")
        time.sleep(0.25)
    raise WorkerError(f"the worker did not process the imported history within {timeout:.0f}s", code="timeout")
