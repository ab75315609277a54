"""The pipeline: drains the inbox into records and, on a thread beside it, indexes them.

Each hook event is handled by one function below (`on_<event>`). On one
machine an event's records and the inbox row's `done` mark are written in one
transaction. With a team database they are two databases: the records commit
there first, the done mark in the local inbox after. A crash between the two
leaves the event pending, and its replay finds the records already written
(they carry `source_id` "inbox:<id>" and the event's session) and writes
nothing twice: processed once either way.

While the team database is unreachable, events wait in the inbox: that is not
a failure of the event, so it is neither counted nor quarantined.

A batch's events are marked as this run's before they are processed (one commit),
so a worker killed, crashed or stopped by hand while stuck on an event counts a
try of it at its next start, and an event that was tried before is processed
alone: the one that stops the worker runs out of tries and is quarantined, the
others flow (memory_anchor/worker/store/quarantine.py, `Tries`).
Slow work (Claude calls, embedding) happens outside those transactions.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any, Awaitable, Callable, NamedTuple

from memory_anchor.core import paths
from memory_anchor.hookkit import origin
from memory_anchor.core.projects import is_excluded, project_for_cwd
from memory_anchor.worker.capture.inbox import HISTORY, InboxEvent
from memory_anchor.worker.index import heap
from memory_anchor.worker.memory.ask_once import mark_asked
from memory_anchor.worker.pipeline.sessions import Sessions
from memory_anchor.worker.store.db import savepoint
from memory_anchor.worker.store.errors import StorageUnavailable
from memory_anchor.worker.store.quarantine import Tries
from memory_anchor.worker.store.records import Records, resolve_view, written_for
from memory_anchor.worker.store.sessions import get_session

log = logging.getLogger(__name__)

BATCH = 64
# While hook events stream in, the pipeline holds back: a hook waits on every
# 202, nobody waits on distilling, and both compete for the same CPU and GIL.
# A pass waits for a pause of CAPTURE_QUIET (never longer than CAPTURE_MAX_DEFER,
# so a steady stream still gets processed); while events arrived within the last
# CAPTURE_RECENT seconds a pass is kept short: a small batch, and indexing stops
# as soon as events arrive again.
CAPTURE_QUIET = 0.05
CAPTURE_MAX_DEFER = 2.0
CAPTURE_RECENT = 1.0
BUSY_BATCH = 8
# Prompts and tool uses written in one transaction (one database only): the commit is shared,
# and a hook's event waits for the write lock at most this many events' writes (a few ms each).
GROUP_COMMIT = 16
GROUPED = frozenset({"SessionStart", "UserPromptSubmit", "PostToolUse"})
# A tool use whose distilling raised: already counted as a failure.
_FAILED = object()


class Pipeline:
    def __init__(self, services):
        self.services = services
        self.inbox = services.inbox
        self.sessions = Sessions(services)
        self._wake = asyncio.Event()  # events to process
        self._index_wake = asyncio.Event()  # records to index
        self._stopping = False
        self._last_capture = 0.0
        self._store_away = False
        self.tries = Tries(services.capture_db, f"{os.getpid()}@{time.time():.6f}")
        self._counted_interrupted = False
        # Extra work other modules hook in, run after an event's records are written.
        self.after_event: list[Callable[[str, InboxEvent, dict[str, Any]], None]] = []

    def wake(self) -> None:
        self._wake.set()
        self._index_wake.set()

    def captured(self) -> None:
        """A hook event was just accepted: process it soon, but not while more are arriving."""
        self._last_capture = time.monotonic()
        self._wake.set()

    def _quiet_for(self) -> float:
        """Seconds since the last hook event was accepted."""
        return time.monotonic() - self._last_capture

    async def _yield_to_capture(self) -> None:
        deadline = time.monotonic() + CAPTURE_MAX_DEFER
        while not self._stopping and time.monotonic() < deadline:
            quiet_for = self._quiet_for()
            if quiet_for >= CAPTURE_QUIET:
                return
            await asyncio.sleep(CAPTURE_QUIET - quiet_for)

    async def run(self) -> None:
        """Drain forever: process due events on the pipeline's thread and, beside it on a thread of
        its own, index the records they wrote.

        The two overlap: embedding (onnxruntime, which lets go of the GIL) fills both cores while
        the next batch of events is distilled and written, where one after the other left a core
        idle during every batch (the django import: 3,376 events, memory_anchor/worker/pipeline docs).
        """
        services = self.services
        indexing = asyncio.create_task(self._run_stage(services.run_indexing, self._index_wake, self._index_pending,
                                                       "indexing records"), name="indexing")  # fmt: skip
        try:
            await self._run_stage(services.run_background, self._wake, self._process_pending, "processing captured events",
                                  then=self._index_wake)  # fmt: skip
        finally:
            if not self._stopping:  # the processing stage ended some other way: indexing ends with it
                indexing.cancel()
            await asyncio.gather(indexing, return_exceptions=True)

    async def _run_stage(self, run: Callable[..., Awaitable[int]], wake: asyncio.Event, work: Callable[[], int], what: str,
                         then: asyncio.Event | None = None) -> None:  # fmt: skip
        """Pass after pass of `work` (on the thread `run` gives it) until one finds nothing to do, then
        sleep until `wake` (or a second); `then` is woken after each pass that did something."""
        busy = False
        while not self._stopping:
            await self._yield_to_capture()
            wake.clear()  # a wake from here on means another pass
            try:
                worked = await run(work)
            except Exception as exc:
                if self.services.disk.explains(exc):  # one line a minute, not a traceback a second
                    self.services.disk.report(exc, what)
                else:
                    log.exception("pipeline pass (%s) failed; retrying shortly", what)
                worked = 0
            if worked:
                busy = True
                if then is not None:
                    then.set()
                continue
            if busy:  # a burst just ended: hand its scratch memory back
                heap.release_free_memory()
                busy = False
            try:
                await asyncio.wait_for(wake.wait(), timeout=1.0)
            except asyncio.TimeoutError:
                pass

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        self._index_wake.set()

    def drain_once(self) -> int:
        """One pass, all on the calling thread: handle a batch of due events, then index what they wrote."""
        return self._process_pending() + self._index_pending()

    def _process_pending(self) -> int:
        """Handle a batch of due events (spooled ones first); returns how many."""
        spool = paths.spool_path(self.services.data_dir)
        if spool.exists():
            try:
                self.inbox.ingest_spool(spool)
            except Exception:  # the spool file stays (or is recovered at the next start): never lost
                log.exception("could not ingest the spool; the inbox goes on")
        reason = self.services.store_unreachable()
        if reason is not None:  # the events wait in the inbox; the next pass asks again
            if not self._store_away:
                log.warning("pipeline paused: the team store is unreachable (%s); captured events wait in the inbox", reason)
            self._store_away = True
            return 0
        if self._store_away:
            log.warning("pipeline resumed: the team store answers again")
            self._store_away = False
        if not self._counted_interrupted:  # what the last run was processing when it died
            self.tries.interrupted()
            self._counted_interrupted = True
        events = tried_alone(self.inbox.claim(BATCH if self._quiet_for() >= CAPTURE_RECENT else BUSY_BATCH))
        if events:
            self.tries.begin([e.id for e in events])
            with self.inbox.in_hand([e.id for e in events]):
                self.process(events)
        return len(events)

    def _index_pending(self) -> int:
        """Embed what is queued, batch by batch, until done or hook events arrive again."""
        indexed = 0
        while self._quiet_for() >= CAPTURE_QUIET and not self._stopping:
            done = self.services.indexer.drain_once()
            if not done:
                break
            indexed += done
        return indexed

    def process(self, events: list[InboxEvent]) -> None:
        """Handle each event on its own: one that raises is retried later (then quarantined), never the batch.

        On one database, a run of prompts and tool uses is written in one transaction, each event
        in a savepoint of its own (`_write_group`); a Stop or SessionEnd is written alone, as its
        summary reads what the events before it wrote and may call Claude, never under the write lock.
        """
        tool_uses = [e for e in events if e.event == "PostToolUse"]
        drafts = {**self._distil_tool_uses([e for e in tool_uses if not e.local_only]),
                  **self._distil_tool_uses([e for e in tool_uses if e.local_only], local_only=True)}  # fmt: skip
        superseded = superseded_stops(events)
        group: list[tuple[InboxEvent, Any]] = []
        for event in events:
            if event.id in drafts and drafts[event.id] in (None, _FAILED):
                continue  # deferred (the Claude call is retried later) or already counted as failed
            if event.event in GROUPED and not self.services.shared_store:
                group.append((event, drafts.get(event.id)))
                if len(group) >= GROUP_COMMIT:
                    self._write_group(group)
                    group = []
                continue
            self._write_group(group)  # a summary reads what the events before it wrote: committed first
            group = []
            try:
                draft = drafts.get(event.id)
                if event.event in ("Stop", "SessionEnd"):  # both read files or call Claude: before the write lock
                    draft = StopDraft(self.sessions.prepare_summary(event), self.sessions.turn_replies(event),
                                      superseded=event.id in superseded)  # fmt: skip
                    if draft.superseded and not self.services.shared_store:
                        # Nothing of it waits for Claude or reads files any more: it commits with the
                        # events after it, the prompt that answers it among them.
                        group.append((event, draft))
                        continue
                self._handle(event, draft)
            except StorageUnavailable as exc:
                # Not the event's fault: it and the rest of the batch stay pending, uncounted.
                log.warning("the team database went away (%s); the events wait in the inbox", exc)
                self.tries.release([e.id for e in events])
                return
            except Exception as exc:
                self._failed(event, exc)
        self._write_group(group)

    def _write_group(self, group: list[tuple[InboxEvent, Any]]) -> None:
        """Write these events' records and done marks in one transaction (one database only), each
        event in a savepoint: one that raises is rolled back alone and retried later, the others
        commit together. Committing once for the group instead of once an event took a sixth off
        an import's processing (the django import: 10.6 -> 8.9 s CPU); GROUP_COMMIT bounds how long
        a hook's event waits for the write lock meanwhile."""
        if len(group) <= 1:
            for event, draft in group:
                try:
                    self._handle(event, draft)
                except Exception as exc:
                    self._failed(event, exc)
            return
        ready: list[tuple[InboxEvent, Any]] = []
        for event, draft in group:
            try:
                ready.append((event, self._columns(event, draft)))  # files read before the write lock is taken
            except Exception as exc:
                self._failed(event, exc)
        written: list[tuple[InboxEvent, dict[str, Any], dict[str, Any]]] = []
        failed: list[tuple[InboxEvent, Exception]] = []
        try:
            with self.services.db.transaction() as conn:
                for event, columns in ready:
                    try:
                        with savepoint(conn, "event"):
                            session, records = self._write(conn, event, columns)
                            self.inbox.mark_done(conn, event.id)
                    except Exception as exc:
                        failed.append((event, exc))
                    else:
                        written.append((event, session, records))
        except Exception:  # the commit itself failed: nothing was written; each event alone tells whose fault
            log.warning("a group of %d events could not be committed; writing them one by one", len(ready), exc_info=True)
            for event, columns in ready:
                try:
                    self._handle(event, columns, prepared=True)
                except Exception as exc:
                    self._failed(event, exc)
            return
        for event, exc in failed:
            self._failed(event, exc)
        for event, session, records in written:
            self._after(event, session, records)

    def _failed(self, event: InboxEvent, exc: Exception) -> None:
        if event.attempts == 0:  # the traceback once; later tries and the quarantine say it in one line
            log.exception("event %s (%s) failed; it will be retried", event.id, event.event)
        else:
            log.warning("event %s (%s) failed again (attempt %d): %s", event.id, event.event, event.attempts + 1, exc)
        try:
            self.inbox.fail(event, f"{type(exc).__name__}: {exc}")
        except Exception:
            log.exception("could not record the failure of event %s", event.id)

    def _distil_tool_uses(self, events: list[InboxEvent], *, local_only: bool = False) -> dict[int, Any]:
        """Observation drafts for captured tool uses: {inbox id: draft | None (retry later) | _FAILED}."""
        drafts: dict[int, Any] = {}
        keep = []
        for event in events:
            try:
                if self._capturable(event):
                    keep.append(event)
            except Exception as exc:
                self._failed(event, exc)
                drafts[event.id] = _FAILED
        if not keep:
            return drafts
        try:
            # Inbox payloads were cleaned when they were accepted (Distiller.observations: `already_clean`).
            outcome = self.services.distiller.observations([e.payload for e in keep], local_only=local_only, already_clean=True)
        except Exception as exc:
            if len(keep) == 1:
                self._failed(keep[0], exc)
                drafts[keep[0].id] = _FAILED
                return drafts
            for event in keep:  # one bad payload must not cost the others their observations
                drafts.update(self._distil_tool_uses([event], local_only=local_only))
            return drafts
        if outcome.retry_after is not None:
            for event in keep:
                self.inbox.defer(event, outcome.error or "Claude unavailable", outcome.retry_after)
            return {**drafts, **{e.id: None for e in keep}}
        return {**drafts, **{e.id: draft for e, draft in zip(keep, outcome.drafts)}}

    def _capturable(self, event: InboxEvent) -> bool:
        # Our own memory tools answer with memory: kept as an observation it would come back
        # as new memory, and a search of it would find itself. What they write is stored already.
        if origin.is_own_memory_tool(event.payload.get("tool_name"), event.payload.get("mcp_server")):
            return False
        settings = self.services.settings
        project = project_for_cwd(event.payload.get("cwd"))
        if settings.excluded_projects and is_excluded(project, settings.excluded_projects):
            return False
        tool = str(event.payload.get("tool_name", ""))
        return not (settings.excluded_tools and is_excluded(tool, settings.excluded_tools))

    def _handle(self, event: InboxEvent, draft: Any, *, prepared: bool = False) -> None:
        """Write one event in a transaction of its own, then run the after-event hooks."""
        if not prepared:
            draft = self._columns(event, draft)  # files read before the write lock is taken
        with self.services.db.transaction() as conn:
            session, written = self._write(conn, event, draft)
            if not self.services.shared_store:  # one database: the records and the done mark commit together
                self.inbox.mark_done(conn, event.id)
        if self.services.shared_store:  # two: see the module docstring for a crash in between
            with self.services.capture_db.transaction() as local:
                self.inbox.mark_done(local, event.id)
        self._after(event, session, written)

    def _columns(self, event: InboxEvent, draft: Any) -> Any:
        """What `_write` takes for the event: a tool use's observation columns, else its draft as it is."""
        if event.event == "PostToolUse" and draft is not None:
            return self._observation_columns(event, draft)
        return draft

    def _after(self, event: InboxEvent, session: dict[str, Any], written: dict[str, Any]) -> None:
        """The after-event hooks, once the event's records are committed."""
        for hook in self.after_event:
            try:
                hook(event.event, event, {"session": session, **written})
            except Exception:
                log.exception("after-event hook %s failed", getattr(hook, "__name__", hook))

    def _write(self, conn, event: InboxEvent, draft: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """The event's session and records, written in `conn`'s transaction unless a run before
        already wrote them (then found, not written again). Only two databases can leave records
        written without their done mark: on one, nothing is looked up."""
        earlier = self._written_before(conn, event) if self.services.shared_store else None
        if earlier is not None:
            return earlier
        session = self.sessions.touch(conn, event)
        handler = HANDLERS.get(event.event)
        written: dict[str, Any] = {}
        if handler is not None and not session.get("excluded"):
            written = handler(self, conn, event, session, draft) or {}
        return session, written

    @staticmethod
    def _written_before(conn, event: InboxEvent) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """(session, {"record": ...}) when a record of this event is already stored, else None.

        The inbox id alone is this machine's inbox's; with the session (a Claude Code session runs
        on one machine) and the time the event arrived (every record of it happened then; a data
        dir started afresh numbers its inbox from 1 again) it names the event in a database every
        developer shares. An event without a session has no such name: it is written again rather
        than risk taking another event for it (a duplicate after a crash, never a loss).
        """
        if not event.session_id:
            return None
        session_id = event.session_id
        row = written_for(conn, session_id, f"inbox:{event.id}", event.received_at)
        if row is None:
            return None
        session = get_session(conn, session_id)
        log.info("event %s (%s) was written before its done mark; not writing it again", event.id, event.event)
        return (session or {}), {"record": row}

    # --- one function per hook event -----------------------------------------

    def on_prompt(self, conn, event: InboxEvent, session: dict, _draft) -> dict:
        prompt = str(event.payload.get("prompt", "")).strip()
        if not prompt:
            return {}
        # Whether it answers a question Claude's last message asked: a reply picks for the matter at
        # hand, so what it says becomes a standing rule only when it says so plainly (instructions.py).
        data = {"answers_a_question": True} if self.sessions.last_message_asked(conn, event, session) else {}
        # Who sent it (a person, `claude -p`, or Claude Code itself): only a person's ask becomes
        # their rule or the session's request (memory_anchor/hookkit/origin.py).
        source = origin.prompt_source(event.payload.get("source"), prompt)
        if source is not None:
            data["prompt_source"] = source
        record = Records.put(
            conn, "prompt", prompt, branch=session["branch"], actor=session.get("agent_id") or "claude-code",
            reason="captured", project=session["project"], session_id=event.session_id,
            agent_id=session.get("agent_id"), title=prompt[:120], happened_at=event.received_at,
            source_id=f"inbox:{event.id}", data=data,
        )  # fmt: skip
        return {"record": record}

    def on_tool_use(self, conn, event: InboxEvent, session: dict, values: dict | None) -> dict:
        """`values`: the observation's columns (`_observation_columns`), or None when nothing is kept."""
        if values is None:
            return {}
        values = dict(values)
        record = Records.put(
            conn, "observation", values.pop("text"), branch=session["branch"],
            actor=session.get("agent_id") or "claude-code", reason="captured",
            project=session["project"], session_id=event.session_id, agent_id=session.get("agent_id"),
            happened_at=event.received_at, source_id=f"inbox:{event.id}",
            tool_use_id=event.payload.get("tool_use_id") if isinstance(event.payload.get("tool_use_id"), str) else None,
            **values,
        )  # fmt: skip
        return {"record": record}

    def _observation_columns(self, event: InboxEvent, draft) -> dict[str, Any]:
        """A distilled tool use's record columns, with the files it is about as they are now
        ({"code", "code_head"} in `data`): read here in the drain, never in a hook, and before the
        transaction, so the write lock the hooks' inbox shares is not held while files are read.
        An imported event is from long ago: the work tree is not what it saw, so it keeps none."""
        from memory_anchor.worker.pipeline.observations import observation_values

        values = observation_values(draft, event.payload)
        cwd = event.payload.get("cwd")
        if event.origin != HISTORY and isinstance(cwd, str):
            record = {"kind": "observation", "data": values["data"]}
            values["data"].update(self.services.codebase.record_data(record, project=None, cwd=cwd, payload=event.payload))
        return values

    def on_stop(self, conn, event: InboxEvent, session: dict, draft: StopDraft) -> dict:
        """`draft`: the session's summary so far or None, the passages of Claude's replies in the
        turn, and whether a later Stop of the same batch rewrites that summary (`process`)."""
        if event.event == "SessionEnd":
            self.sessions.end(conn, event)
        written: dict[str, Any] = {}
        if draft.replies:
            written["replies"] = self.sessions.write_replies(conn, event, session, draft.replies)
        if draft.summary is not None and draft.superseded:
            written["record"] = self.sessions.unwritten_summary(event, session, draft.summary)
        elif draft.summary is not None:
            written["record"] = self.sessions.write_summary(conn, event, session, draft.summary)
        return written

    def on_session_start(self, conn, event: InboxEvent, session: dict, _draft) -> dict:
        """A live session's start lists the replies to Claude's options it is to ask the user about:
        they are marked asked in it, so the next sessions do not ask again (memory/ask_once.py)."""
        if event.origin == HISTORY or not event.session_id or not session.get("project"):
            return {}
        asked = mark_asked(conn, resolve_view(conn, session["branch"]), session["project"], event.session_id,
                           branch=session["branch"], actor=session.get("agent_id") or "claude-code")  # fmt: skip
        return {"asked": asked} if asked else {}

    def on_pre_compact(self, conn, event: InboxEvent, session: dict, _draft) -> dict:
        return {"transcript_path": event.payload.get("transcript_path")}


class StopDraft(NamedTuple):
    """What a Stop or SessionEnd writes, prepared before the write lock is taken."""

    summary: Any  # the session's summary draft, or None when it is not rewritten
    replies: list[str]
    # A later Stop of the same batch rewrites the summary from the same records and more
    # (`superseded_stops`): this one's version is not stored, only its outcome is counted.
    superseded: bool = False


def superseded_stops(events: list[InboxEvent]) -> set[int]:
    """The Stops of a batch whose summary version a later Stop of their session replaces.

    An imported session (or a worker catching up) brings many Stops a batch, and each rewrote the
    session's summary from all of its records: hundreds of versions nobody reads, each stored,
    keyword-indexed and embedded. A Stop is superseded when, later in the batch, its session has
    a prompt (a record newer than what this Stop read, so the later summary is written) and then
    a Stop that ends a turn with a message of its own (its summary reads that message, not the one
    before: `keep_outcome` only applies without one) and waits for no background work. The final
    summary is the one every Stop writing its version would have left. Live sessions, one Stop at
    a time, keep every version.
    """
    superseded: set[int] = set()
    waiting: dict[str, list[int]] = {}  # session -> its Stops not yet known to be superseded
    prompted: dict[str, list[int]] = {}  # session -> those of them a prompt came after
    for event in events:
        session_id = event.session_id
        if not session_id:
            continue
        payload = event.payload if isinstance(event.payload, dict) else {}
        if event.event == "UserPromptSubmit" and str(payload.get("prompt", "")).strip():
            prompted.setdefault(session_id, []).extend(waiting.pop(session_id, []))
        elif event.event == "Stop":
            last = payload.get("last_assistant_message")
            if isinstance(last, str) and last.strip() and not payload.get("background_tasks"):
                superseded.update(prompted.pop(session_id, []))
            waiting.setdefault(session_id, []).append(event.id)
        elif event.event == "SessionEnd":
            waiting.pop(session_id, None)
            prompted.pop(session_id, None)
    return superseded


def tried_alone(events: list[InboxEvent]) -> list[InboxEvent]:
    """The events to process in one batch: an event tried before (it raised, or the worker
    stopped while on it) alone, so what it does cannot cost the events beside it a try."""
    for index, event in enumerate(events):
        if event.attempts > 0:
            return events[:index] or [event]
    return events


HANDLERS: dict[str, Callable[..., Any]] = {
    "SessionStart": Pipeline.on_session_start,
    "UserPromptSubmit": Pipeline.on_prompt,
    "PostToolUse": Pipeline.on_tool_use,
    "PreCompact": Pipeline.on_pre_compact,
    "Stop": Pipeline.on_stop,
    "SessionEnd": Pipeline.on_stop,
}
