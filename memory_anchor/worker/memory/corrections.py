"""Correcting memory in one step: forget or edit a fact or an open next step.

A fact (rule, decision, preference, root cause, ...) is a versioned record: a
forget writes a new version with status `forgotten`, an edit a new version with
the user's text (status `active`, its category kept); `history(id)` shows who did
it, when and why. An open next step is a row of `open_items`: a forget closes it,
an edit closes it and opens the user's wording in its place (members of a team
database may close a step but not rewrite its text).

Either way the wording that goes is added to the forgotten list (forgotten.py),
which extraction and the open items consult before they write: the same prompt
again, a re-import of the same history, a later session restating the step or
Claude proposing the fact again do not bring it back. An edited fact carries a
person's actor, so an agent's later statement cannot replace it either (the
conflict rules of conflicts.py). Open conflicts and pending approvals that name
a corrected fact are settled with it, so its old text leaves the briefing's
conflict and approval lines too.

Identity items are not corrected here: they keep their own path with three
confirmations (`memory-anchor identity`).
"""

from __future__ import annotations

import re
from typing import Any

from memory_anchor.schemas.corrections import FACT_ID_PATTERN, item_ref
from memory_anchor.schemas.memory_model import FACT_ACCEPT
from memory_anchor.worker.memory.common import is_human, now
from memory_anchor.worker.memory.facts import FactStore
from memory_anchor.worker.memory.forgotten import Forgotten
from memory_anchor.worker.memory.steps_done import closed_by_commit
from memory_anchor.worker.store import approvals as store_approvals
from memory_anchor.worker.store import conflicts as store_conflicts
from memory_anchor.worker.store import open_items as store_steps
from memory_anchor.worker.store.purge import (
    HASHED_KEY,
    PURGED,
    compact_indexes,
    forgotten_row,
    purge_forgotten_row,
    purge_record_text,
    purge_step_text,
)
from memory_anchor.worker.store.records import MAIN, NotFound, RecordError, Records, ids_with_prefix, resolve_view

EDITABLE = ("active", "pending", "disputed")


class Corrections:
    def __init__(self, db, facts: FactStore, forgotten: Forgotten, redact=None):
        self.db = db
        self.facts = facts
        self.forgotten = forgotten
        self._redact = redact or (lambda text: text)

    # --- facts ---------------------------------------------------------------------------

    def forget_fact(self, ref: str, *, actor: str, reason: str | None = None, project: str | None = None,
                    branch: str = MAIN) -> dict[str, Any]:  # fmt: skip
        with self.db.transaction() as conn:
            fact = self.find_fact(conn, ref, project=project, branch=branch)
            if fact["status"] == "forgotten":
                raise RecordError(f"fact {fact['id'][:8]} is already forgotten", code="conflict", status=409)
            self._refuse_agent_decision(conn, fact, actor)
            Records.update(conn, fact["id"], branch=branch, actor=actor, reason=f"FORGET: {reason or 'forgotten'}",
                           status="forgotten", data={**fact["data"], "forgotten_at": now()})  # fmt: skip
            entry = self.forgotten.record(conn, project=fact["project"], kind="fact", item_id=fact["id"],
                                          text=fact["text"], action="forget", actor=actor, reason=reason,
                                          branch=branch)  # fmt: skip
            self._settle_decisions(conn, fact["id"], actor, "forgotten", reason)
        return _outcome("fact", fact["id"], "forget", "forgotten", fact["text"], entry)

    def edit_fact(self, ref: str, text: str, *, actor: str, reason: str | None = None, project: str | None = None,
                  branch: str = MAIN) -> dict[str, Any]:  # fmt: skip
        new_text = self._redact(text.strip())
        with self.db.transaction() as conn:
            fact = self.find_fact(conn, ref, project=project, branch=branch)
            if fact["status"] not in EDITABLE:
                raise RecordError(f"fact {fact['id'][:8]} is {fact['status']}: only a live fact can be edited",
                                  code="conflict", status=409)  # fmt: skip
            if new_text == fact["text"]:
                raise RecordError(f"fact {fact['id'][:8]} already says that", code="nothing_to_change")
            self._refuse_agent_decision(conn, fact, actor)
            # Made by a person: active whatever tier it waited in, its category and key kept.
            record = self.facts.supersede(conn, fact["id"], new_text, confidence=max(float(fact["confidence"] or 0), FACT_ACCEPT),
                                          actor=actor, reason=f"EDIT: {reason or 'edited'}", branch=branch)  # fmt: skip
            entry = self.forgotten.record(conn, project=fact["project"], kind="fact", item_id=fact["id"],
                                          text=fact["text"], action="edit", actor=actor, reason=reason,
                                          branch=branch)  # fmt: skip
            self._settle_decisions(conn, fact["id"], actor, "edited", reason)
        return {**_outcome("fact", fact["id"], "edit", record["status"], record["text"], entry),
                "previous_text": fact["text"]}  # fmt: skip

    def answer_fact(self, ref: str, *, holds: bool, words: str, actor: str, session_id: str | None = None,
                    project: str | None = None, branch: str = MAIN) -> dict[str, Any]:  # fmt: skip
        """Settle a fact that waits for the user (a reply to Claude's options, an instruction said once)
        with the answer they gave in a session. The agent only carries the answer: it counts when
        `words` are in one of the user's latest prompts, so an agent cannot settle it on its own."""
        with self.db.transaction() as conn:
            fact = self.find_fact(conn, ref, project=project, branch=branch)
            reply = users_reply(conn, resolve_view(conn, branch), words, project=fact["project"], session_id=session_id)
            if reply is None:
                where = f"session {session_id}" if session_id else f"project {fact['project']}"
                raise RecordError(f"{words!r} is not in the user's last {ANSWER_PROMPTS} prompts of {where}: ask the user, "
                                  "then quote their reply", code="not_the_users_words", status=403)  # fmt: skip
            record = self.facts.answered_by_the_user(conn, fact["id"], holds=holds, reply=reply, actor=actor, branch=branch)
        return {"id": record["id"], "ref": item_ref("fact", record["id"]), "status": record["status"],
                "text": record["text"], "answered_in": reply["id"]}  # fmt: skip

    def find_fact(self, conn, ref: str, *, project: str | None = None, branch: str = MAIN) -> dict[str, Any]:
        """The fact `ref` names: its whole id or its first characters (the briefing shows 8)."""
        prefix = (ref or "").strip().lower()
        if not re.fullmatch(FACT_ID_PATTERN, prefix):
            raise RecordError(f"{ref!r} is not a fact id: give the characters the briefing shows (`fact 1a2b3c4d`)",
                              code="invalid_id")  # fmt: skip
        view = resolve_view(conn, branch)
        found = [r for r in (Records.get(conn, i, view) for i in ids_with_prefix(conn, prefix)) if r is not None]
        if project is not None:
            found = [r for r in found if r["project"] == project]
        if any(r["kind"] == "identity" for r in found):
            raise RecordError("identity items change only with three confirmations: `memory-anchor identity edit|remove "
                              f"{prefix[:8]}`", code="identity_protected", status=403)  # fmt: skip
        facts = [r for r in found if r["kind"] == "fact"]
        if not facts:
            other = f" ({found[0]['kind']} {found[0]['id'][:8]} is not a fact)" if found else ""
            raise NotFound(f"no fact {prefix}{' in ' + project if project else ''}{other}")
        if len(facts) > 1:
            raise RecordError(f"{prefix} names {len(facts)} facts ({', '.join(f['id'] for f in facts[:5])}): give more "
                              "of the id", code="ambiguous_id", status=409)  # fmt: skip
        return facts[0]

    @staticmethod
    def _refuse_agent_decision(conn, fact: dict[str, Any], actor: str) -> None:
        """A correction settles a pending approval or an open conflict over the fact, which only a
        person decides: an agent is refused there, and told where the person decides."""
        if is_human(actor):
            return
        waiting = fact["status"] == "pending" or store_conflicts.is_open_over(conn, fact["id"])
        if waiting:
            raise RecordError(f"fact {fact['id'][:8]} waits for a person's decision (`memory-anchor approvals` or "
                              "`memory-anchor conflicts`, or the viewer); an agent cannot settle it",
                              code="human_decision", status=403)  # fmt: skip

    @staticmethod
    def _settle_decisions(conn, fact_id: str, actor: str, what: str, reason: str | None) -> None:
        """A pending approval or an open conflict over a corrected fact is decided by the correction."""
        note = f"fact {what} by {actor}" + (f": {reason}" if reason else "")
        store_approvals.decide_pending_fact(conn, fact_id, status="approved" if what == "edited" else "rejected", at=now(),
                                            by=actor, note=note, result_id=fact_id if what == "edited" else None)  # fmt: skip
        store_conflicts.resolve_over(conn, fact_id, at=now(), actor=actor, resolution=what, note=note)

    # --- next steps -----------------------------------------------------------------------

    def forget_step(self, ref: str | int, *, actor: str, reason: str | None = None,
                    project: str | None = None) -> dict[str, Any]:  # fmt: skip
        with self.db.transaction() as conn:
            step = self._open_step(conn, ref, project)
            self._close(conn, step["id"], actor, f"forgotten: {reason}" if reason else "forgotten")
            entry = self.forgotten.record(conn, project=step["project"], kind="next_step", item_id=step["id"],
                                          text=step["text"], action="forget", actor=actor, reason=reason,
                                          branch=step["branch"])  # fmt: skip
        return _outcome("next_step", step["id"], "forget", "forgotten", step["text"], entry)

    def edit_step(self, ref: str | int, text: str, *, actor: str, reason: str | None = None,
                  project: str | None = None) -> dict[str, Any]:  # fmt: skip
        new_text = self._redact(text.strip())
        with self.db.transaction() as conn:
            step = self._open_step(conn, ref, project)
            if new_text == step["text"]:
                raise RecordError(f"step {step['id']} already says that", code="nothing_to_change")
            # The new wording is left by the person who wrote it, not by the session: that
            # session stating its next steps again withdraws its own open ones, not this.
            replacement = store_steps.open_step(conn, project=step["project"], branch=step["branch"], session_id=actor,
                                                text=new_text, at=step["opened_at"])  # fmt: skip
            self._close(conn, step["id"], actor, f"edited into step {replacement}" + (f": {reason}" if reason else ""))
            entry = self.forgotten.record(conn, project=step["project"], kind="next_step", item_id=step["id"],
                                          text=step["text"], action="edit", actor=actor, reason=reason,
                                          branch=step["branch"])  # fmt: skip
        return {**_outcome("next_step", replacement, "edit", "open", new_text, entry), "previous_text": step["text"],
                "replaced_by": str(replacement)}  # fmt: skip

    # --- purge ---------------------------------------------------------------------------

    def purge(self, forgotten_id: int) -> dict[str, Any]:
        """Erase a forgotten wording for good: from every version of its item (a fact's) or its open
        items (a step's), the keyword indexes, and the forgotten list, which keeps a hash of it so
        the same words stay out. Other entries of the same wording go with it. Returns what was
        erased; the seqs' vectors are the caller's to delete (the index is not this layer's)."""
        with self.db.transaction() as conn:
            entry = forgotten_row(conn, forgotten_id)
            if entry is None:
                raise NotFound(f"no forgotten entry {forgotten_id}")
            if entry["key"].startswith(HASHED_KEY):
                raise RecordError(f"forgotten entry {forgotten_id} is already purged", code="conflict", status=409)
            text, seqs, steps, entries = entry["text"], [], 0, []
            for same in self.forgotten.list(entry["project"], entry["kind"], limit=10_000, conn=conn):
                if same["text"] != text:
                    continue
                if same["kind"] == "fact":
                    seqs += purge_record_text(conn, same["item_id"], text)
                entries.append(purge_forgotten_row(conn, same["id"], same["key"])["id"])
            if entry["kind"] == "next_step":
                steps = purge_step_text(conn, entry["project"], text)
            compact_indexes(conn)
        self.db.checkpoint()  # only SQLite gets here: a team database refused the purge above
        return {"forgotten_ids": sorted(entries), "kind": entry["kind"], "item_id": entry["item_id"],
                "versions": len(seqs), "seqs": seqs, "open_items": steps, "text": PURGED}  # fmt: skip

    def steps(self, project: str | None = None, *, closed: bool = False, limit: int = 100) -> list[dict[str, Any]]:
        """Open next steps, newest first (what the briefing lists), or closed ones, last closed first."""
        return [_step(r) for r in store_steps.steps(self.db.reader(), project, closed=closed, limit=limit)]

    @staticmethod
    def _open_step(conn, ref: str | int, project: str | None = None) -> dict[str, Any]:
        """The open step `ref` names; with `project`, only that project's: a session in one
        project (the MCP tools give theirs) must not close or rewrite another project's steps."""
        number = _step_number(ref)
        row = store_steps.step(conn, number)
        if row is None or (project is not None and row["project"] != project):
            raise NotFound(f"no next step {number}" + (f" in {project}" if project is not None else ""))
        step = _step(row)
        if step["closed_at"] is not None:
            why = f" ({step['closed_because']})" if step.get("closed_because") else ""
            raise RecordError(f"step {step['id']} is already closed{why}", code="conflict", status=409)
        return step

    @staticmethod
    def _close(conn, step_id: int, actor: str, because: str) -> None:
        store_steps.close_step(conn, step_id, at=now(), by=actor, because=because)


def _step(row) -> dict[str, Any]:
    out = dict(row)
    out.pop("author", None)  # the team database's bookkeeping
    out["closed_by_commit"] = closed_by_commit(out)
    return out


def _step_number(ref: str | int) -> int:
    text = str(ref).strip()
    if not text.isdigit() or int(text) >= 2**63:
        raise RecordError(f"{ref!r} is not a next step's number (`step 12`)", code="invalid_id")
    return int(text)


# Claude asks, the user answers: the answer is one of their latest prompts, not something said long ago.
ANSWER_PROMPTS = 3


def users_reply(conn, view, words: str, *, project: str, session_id: str | None) -> dict[str, Any] | None:
    """The latest of the user's last few prompts (of the session, else the project) that holds `words`."""
    wanted = _plain(words)
    if not wanted:
        return None
    filters: dict[str, Any] = {"kind": "prompt", "project": project, **({"session_id": session_id} if session_id else {})}
    prompts, _ = Records.query(conn, view, filters=filters, order="happened_at DESC", limit=ANSWER_PROMPTS)
    return next((p for p in prompts if wanted in _plain(p["text"])), None)


def _plain(text: str) -> str:
    """Lower case, one space between words, without the quotes and stops a quotation adds around them."""
    return " ".join(str(text or "").lower().split()).strip(" \"'“”‘’.!?")


def _outcome(kind: str, item_id: Any, action: str, status: str, text: str, entry: dict[str, Any]) -> dict[str, Any]:
    return {"kind": kind, "id": str(item_id), "ref": item_ref(kind, item_id), "action": action, "status": status,
            "text": text, "actor": entry["actor"], "reason": entry["reason"], "forgotten_id": entry["id"]}  # fmt: skip
