"""Claude Code sessions: which project and branch they write to, and their summaries."""

from __future__ import annotations

import json
import logging
import time
import uuid
from typing import Any

from memory_anchor.core.projects import is_excluded, project_for_cwd, relative_once
from memory_anchor.schemas.events import typed_by_person
from memory_anchor.worker.capture.inbox import HISTORY, InboxEvent
from memory_anchor.core.redact import redact_stored, sanitize
from memory_anchor.worker.capture.replies import passages
from memory_anchor.worker.capture.transcript import read_turn_texts
from memory_anchor.worker.memory.text import clip, names_a_subject
from memory_anchor.worker.pipeline.compress.local import as_observation
from memory_anchor.worker.store.purge import purges
from memory_anchor.worker.store.records import Records, resolve_view
from memory_anchor.worker.store.sessions import end_session, get_session, seen_session, session_branch, start_session

log = logging.getLogger(__name__)

REQUEST_TITLE_CHARS = 160  # of the request a reply passage is titled by: its subject, not a pasted log

SUMMARY_NAMESPACE = uuid.UUID("6f0b8a1e-3c1d-4b7e-9a52-1d2f3e4a5b6c")


def summary_id(session_id: str) -> str:
    """A session's summary keeps one id; each Stop writes its next version."""
    return str(uuid.uuid5(SUMMARY_NAMESPACE, session_id or "unknown"))


class Sessions:
    def __init__(self, services):
        self.services = services
        # Whether Claude's last message asked the user something, for a session whose latest Stop
        # had its summary version left to a later Stop of the same batch (`unwritten_summary`):
        # the stored summary does not say it yet. Cleared when the session's summary is written.
        self._asked_unwritten: dict[str, bool] = {}
        # The observation drafts of stored versions, by seq: every Stop of a session re-reads all of
        # its records, and a version never changes but by a purge (`purges`, which empties this).
        self._drafts: dict[int, Any] = {}
        self._drafts_purges = purges()

    def touch(self, conn, event: InboxEvent) -> dict[str, Any]:
        """Create or refresh the session row for an event; returns it (plus `excluded`)."""
        payload = event.payload
        session_id = event.session_id or "unknown"
        now = happened_at(event)
        row = get_session(conn, session_id)
        if row is None:
            cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else None
            project = self.services.project_for_cwd(cwd)
            branch = self.choose_branch(conn, event)
            start_session(
                conn, session_id, project=project, cwd=cwd, branch=branch, agent_id=event.agent_id,
                transcript_path=payload.get("transcript_path") if isinstance(payload.get("transcript_path"), str) else None,
                source=payload.get("source") if isinstance(payload.get("source"), str) else event.origin, at=now,
            )  # fmt: skip
        else:
            seen_session(conn, session_id, event.event, now)
        session = get_session(conn, session_id)
        session["branch"] = self._write_branch(conn, session)
        patterns = self.services.settings.excluded_projects
        # Exclusions name directories on this machine (the project's name may be its git remote).
        session["excluded"] = bool(patterns) and is_excluded(project_for_cwd(session["cwd"]) or session["project"], patterns)
        return session

    @staticmethod
    def _write_branch(conn, session: dict[str, Any]) -> str:
        """The session's branch, or the ancestor it writes to while that branch is archived."""
        from memory_anchor.worker.store.branches import writable_branch

        branch = writable_branch(conn, session["branch"])
        if branch != session["branch"]:
            log.warning(
                "branch %r of session %s is archived (read-only); writing its captured events to %r",
                session["branch"], session["session_id"], branch,
            )  # fmt: skip
        return branch

    def choose_branch(self, conn, event: InboxEvent) -> str:
        """The branch a session writes to: switch > env header > fork auto-branch > default (memory_anchor.worker.branching.sessions)."""
        from memory_anchor.worker.branching.sessions import branch_for_session

        return branch_for_session(conn, event.session_id, event.payload, event.branch, self.services.settings)

    def last_message_asked(self, conn, event: InboxEvent, session: dict[str, Any]) -> bool:
        """Did Claude's last message in this session end with a question to the user (its summary says)?"""
        asked = self._asked_unwritten.get(event.session_id or "unknown")
        if asked is not None:
            return asked
        summary = Records.get(conn, summary_id(event.session_id or "unknown"), resolve_view(conn, session["branch"]))
        return bool(summary and (summary.get("data") or {}).get("asks_user"))

    def end(self, conn, event: InboxEvent) -> None:
        reason = event.payload.get("reason")
        end_session(conn, event.session_id or "unknown", at=happened_at(event), reason=reason if isinstance(reason, str) else None)

    def prepare_summary(self, event: InboxEvent):
        """A summary draft of the session so far, or None when nothing new happened (or the
        session only paused for its background work).

        Runs outside any transaction: it may call Claude.
        """
        if event.event == "Stop" and event.payload.get("background_tasks"):
            # Paused, not done: a background subagent still works and wakes the session (2.1.198+).
            # Its outcome waits for the Stop (or SessionEnd) after that work.
            return None
        conn = self.services.db.reader()
        session_id = event.session_id or "unknown"
        view = resolve_view(conn, session_branch(conn, session_id) or "main")
        activity = session_activity(conn, view, session_id)
        if not activity:
            return None
        existing = Records.get(conn, summary_id(session_id), view)
        if existing is not None and existing["seq"] > activity[-1]["seq"] and event.event != "SessionEnd":
            return None
        # What the user asked: only what a person typed (not a prompt the SDK or a schedule sent).
        prompts = [r["text"] for r in activity if r["kind"] == "prompt" and typed_by_person(r)]
        observations = self._observation_drafts([r for r in activity if r["kind"] == "observation"])
        last = event.payload.get("last_assistant_message")
        summary = self.services.distiller.session_summary(
            prompts, observations, last if isinstance(last, str) else None, local_only=event.local_only
        )
        if existing is not None and not (isinstance(last, str) and last.strip()):
            summary = keep_outcome(summary, existing.get("data") or {})
        return summary

    def _observation_drafts(self, records: list[dict[str, Any]]) -> list[Any]:
        """The records as the summary reads them (`as_observation`), each draft made once a version."""
        if self._drafts_purges != purges() or len(self._drafts) > DRAFTS_KEPT:
            self._drafts = {}
            self._drafts_purges = purges()
        kept = self._drafts  # `release_memory` may put a new dict in its place meanwhile
        drafts = []
        for record in records:
            seq = record.get("seq")
            if seq is None:  # not a stored version: nothing to keep it by
                draft = as_observation(record)
                drafts.extend([draft] if draft is not None else [])
                continue
            if seq not in kept:
                kept[seq] = as_observation(record)
            if kept[seq] is not None:
                drafts.append(kept[seq])
        return drafts

    def release_memory(self) -> None:
        """Drop the drafts kept between Stops, once a burst is over (Services.hand_back_memory): after
        the brain set's import they were 2,000 pydantic objects; the next Stop makes its own again."""
        self._drafts = {}

    def turn_replies(self, event: InboxEvent) -> list[str]:
        """The passages of Claude's texts in the turn a Stop ends worth keeping, redacted (capture/replies.py).

        The history importer hands the turn's texts over; a live Stop's are read from its transcript,
        here in the drain (never in the hook) and before the write lock is taken."""
        if event.event != "Stop":
            return []
        payload = event.payload
        last = payload.get("last_assistant_message") if isinstance(payload.get("last_assistant_message"), str) else None
        texts = payload.get("assistant_messages")
        if not isinstance(texts, list):
            path = payload.get("transcript_path")
            texts = read_turn_texts(path, last) if isinstance(path, str) and path else [last or ""]
        return [sanitize(passage) for passage in passages([t for t in texts if isinstance(t, str)])]

    def write_replies(self, conn, event: InboxEvent, session: dict[str, Any], replies: list[str]) -> list[dict[str, Any]]:
        """Claude's passages as records of kind `transcript` (type `reply`), each once a session."""
        session_id = event.session_id or "unknown"
        view = resolve_view(conn, session["branch"])
        earlier, _ = Records.query(conn, view, filters={"session_id": session_id, "kind": "transcript"}, limit=-1)
        said = {" ".join(r["text"].lower().split()) for r in earlier}
        title = self.turn_request(conn, view, session_id)
        written = []
        for text in replies:
            key = " ".join(text.lower().split())
            if key in said:
                continue
            said.add(key)
            written.append(Records.put(
                conn, "transcript", text, branch=session["branch"], actor=session.get("agent_id") or "claude-code",
                reason="captured", project=session["project"], session_id=session_id, agent_id=session.get("agent_id"),
                type="reply", title=title or clip(" ".join(text.split()), 120), happened_at=event.received_at,
                source_id=f"inbox:{event.id}", data={"speaker": "assistant"},
            ))  # fmt: skip
        return written

    @staticmethod
    def turn_request(conn, view, session_id: str) -> str:
        """What the user asked in the turn a Stop ends ("Re: " and its head), or '' when a person did not
        type it. A reply passage is titled by it: a question is often asked in the words of the request
        (the error pasted, the feature named) while the answer is in Claude's words; the title is
        found by keyword search and says what the passage answers."""
        latest, _ = Records.query(conn, view, filters={"session_id": session_id, "kind": "prompt"}, limit=1)
        if not latest or not typed_by_person(latest[0]) or not names_a_subject(latest[0]["text"]):
            return ""
        return "Re: " + clip(" ".join(latest[0]["text"].split()), REQUEST_TITLE_CHARS)

    def unwritten_summary(self, event: InboxEvent, session: dict[str, Any], summary) -> dict[str, Any]:
        """The summary a superseded Stop would have stored, as the after-event hooks read a stored one
        (its outcome opens and closes steps, its root causes become facts), and not stored: a later
        Stop of the batch writes the session's next version."""
        session_id = event.session_id or "unknown"
        self._asked_unwritten[session_id] = bool(summary.asks_user)
        # As the storage door would have kept it (memory_anchor/worker/store/db.py).
        data = json.loads(redact_stored(json.dumps(summary.model_dump(), ensure_ascii=False)))
        return {
            "id": summary_id(session_id), "kind": "summary", "text": redact_stored(summary.text), "data": data,
            "session_id": session_id, "project": session["project"], "branch": session["branch"],
            "happened_at": happened_at(event), "source_id": f"inbox:{event.id}", "stored": False,
        }  # fmt: skip

    def write_summary(self, conn, event: InboxEvent, session: dict[str, Any], summary) -> dict[str, Any]:
        session_id = event.session_id or "unknown"
        self._asked_unwritten.pop(session_id, None)
        if self.services.shared_store and summary.request:
            # On a team database a summary is shared while the prompts it quotes are their
            # author's alone: the team gets the outcome (done, root causes, next), not the asking.
            summary = summary.model_copy(update={"request": ""})
            summary.text = summary.rendered_text()
        text = summary.text
        data = summary.model_dump()
        record_id = summary_id(session_id)
        view = resolve_view(conn, session["branch"])
        data.update(self._code_data(conn, event, session, view, data))
        common = dict(
            branch=session["branch"], actor=session.get("agent_id") or "claude-code",
            title=summary_title(summary, session["project"]) or text.split("\n", 1)[0][:160], data=data,
            happened_at=event.received_at,
            source_id=f"inbox:{event.id}",
        )  # fmt: skip
        if Records.get(conn, record_id, view) is not None:
            return Records.update(conn, record_id, view=view, reason="summary updated", text=text, **common)
        return Records.put(
            conn, "summary", text, record_id=record_id, reason="summary", project=session["project"],
            session_id=session_id, agent_id=session.get("agent_id"), **common,
        )  # fmt: skip

    def _code_data(self, conn, event: InboxEvent, session: dict[str, Any], view, data: dict[str, Any]) -> dict[str, Any]:
        """The files the session changed as they are at its end, each with what its edits put in
        that is still there, and the HEAD then ({"code", "code_head"}); nothing for history
        imported from long ago."""
        if event.origin == HISTORY:
            return {}
        edits = []
        if data.get("files_changed"):
            edits, _ = Records.query(conn, view, filters={"session_id": session["session_id"], "kind": "observation"},
                                     order="seq ASC", limit=500)  # fmt: skip
        return self.services.codebase.summary_data({"kind": "summary", "data": data}, edits,
                                                   project=session.get("project"), cwd=session.get("cwd"))  # fmt: skip


ACTIVITY = 200  # the records a summary reads: a session's first ones (what it was asked and did)
DRAFTS_KEPT = 4096  # observation drafts kept between Stops: a few sessions' ACTIVITY


def session_activity(conn, view, session_id: str) -> list[dict[str, Any]]:
    """A session's first prompts and observations, oldest first, and its latest record last when that
    is not among them: a long session's latest turn still counts as new, so its summary reads the
    outcome Claude's last message gives (the files and the asking stay those of its first records)."""
    filters = {"session_id": session_id, "kind": ["prompt", "observation"]}
    head, total = Records.query(conn, view, filters=filters, order="seq ASC", limit=ACTIVITY)
    if total <= ACTIVITY:
        return head
    latest = Records.latest(conn, view, filters=filters, limit=1)
    return head + [r for r in latest if all(r["id"] != h["id"] for h in head)]


def summary_title(summary, project: str | None) -> str:
    """What a session was: what was asked and the files it changed, in one line of about 100 characters
    (a search hit's index line shows the title that long: "how did we fix X?" is answered by the files)."""
    files = relative_once(summary.files_changed, project)
    if not summary.request or not files:
        return ""
    changed = ", ".join(files[:2]) + (f" (+{len(files) - 2})" if len(files) > 2 else "")
    return f"{clip(summary.request, max(30, 89 - len(changed)))} → changed {changed}"[:160]


def happened_at(event: InboxEvent) -> float:
    """When the event happened: when it arrived, or an imported event's original time."""
    return event.received_at or time.time()


def keep_outcome(summary, earlier: dict[str, Any]):
    """A summary rewritten without Claude's last message (SessionEnd) keeps the outcome the Stop before it read."""
    carried = {k: earlier[k] for k in ("done", "root_causes", "next", "completed") if earlier.get(k) and not getattr(summary, k)}
    if not carried:
        return summary
    summary = summary.model_copy(update=carried)
    if carried.get("next") and not summary.next_steps:
        summary.next_steps = "; ".join(carried["next"])
    summary.text = summary.render()
    return summary
