"""L3 verified_fact: long-lived, de-contextualised facts with a confidence.

Tiers on write (what memory is sure of is briefed; what it is less sure of waits, or is said once):
- confidence >= 0.9: stored `active`;
- 0.7 <= confidence < 0.9: stored `pending` and queued for a human's approval
  (approving makes it active with confidence raised to at least 0.9);
- confidence < 0.7: not stored; logged in `fact_rejections`.

Decay: the effective confidence is `c × 0.95^days` since the fact was last
verified (`data.verified_at`: when it was written, approved, re-observed or
verified by hand), or since memory learned it (`data.learned_at`), whichever is
later. The two differ for a fact extracted from imported history: it was stated
years ago, which orders it against other statements (`conflicts.settle`), but
memory only just heard it, so it is not briefed as unverified on day one.
Below 0.6 a fact is shown with `needs_verification`. Decay is computed when
read, so it costs no writes and time travel shows it correctly.

A statement said again while it waits for approval (a person repeating
themselves, or Claude Code copying an earlier conversation into a resumed
session's transcript, so its prompts are imported twice) is not a second
pending fact: it reaffirms the pending one (`data.sessions` lists every
session that said it; its said time moves to the latest), so one approval or
rejection settles all of it. A standing instruction of the user's (a quoted
rule, decision or preference) said again in another session at another time
(not a copy: a copy keeps the time it was said) is confirmed by the user
themselves: it becomes active, and its approval is closed as theirs. A rejected statement said again stays rejected
(its session added to the rejected fact) unless it is said in a LATER session:
one that had not said it, after the last time it was said; then it is a new
pending fact, and a person is asked again.

`fact_key` holds the normalised subject of a fact (see `common.fact_key`): two
facts with the same key talk about the same thing, which is what the branch
merge and the extraction's conflict rules compare. Facts are shared by all agents.
"""

from __future__ import annotations

from typing import Any

from memory_anchor.schemas.memory_model import (
    FACT_ACCEPT,
    FACT_DECAY_PER_DAY,
    FACT_PENDING,
    FACT_REVERIFY,
    STANDING,
    VERIFIED_FACT,
    FactIn,
)
from memory_anchor.worker.memory.approvals import ApprovalQueue
from memory_anchor.worker.memory.common import (
    DAY,
    DEFAULT_AGENT,
    agent_actor,
    fact_key,
    human_actor,
    is_human,
    Wording,
    now,
    text_similarity,
    to_epoch,
)
from memory_anchor.worker.memory.finder import Finder
from memory_anchor.worker.memory.forgotten import Forgotten
from memory_anchor.worker.store.db import Database
from memory_anchor.worker.store.records import MAIN, NotFound, RecordError, Records, View, log_fact_rejection, resolve_view
from memory_anchor.worker.store.sessions import session_cwd

LIVE = ("active", "pending", "disputed")
# Said again this far apart (seconds), in another session: the user repeating it, not a transcript's copy.
SAID_AGAIN_APART = 60.0
# Two wordings this close say the same thing: extraction takes the candidate for a known fact (NONE),
# and a pending statement said again reaffirms the pending one.
NEAR_DUPLICATE = 0.85
# The freshness states that say a fact's file is no longer where it says, and the confidence such a
# fact falls to: below FACT_REVERIFY, so it is flagged for re-verification at once.
CODE_GONE = ("deleted", "moved")
CODE_GONE_CONFIDENCE = round(FACT_REVERIFY - 0.1, 2)
# The most active facts one pass of `reconcile_all_with_code` checks, newest first.
FACTS_CHECKED = 20_000


def tier(confidence: float) -> str:
    if confidence >= FACT_ACCEPT:
        return "active"
    if confidence >= FACT_PENDING:
        return "pending"
    return "rejected"


def effective_confidence(record: dict[str, Any], at: float | None = None) -> float:
    base = float(record.get("confidence") if record.get("confidence") is not None else 1.0)
    data = record.get("data") or {}
    verified = max(float(data.get("verified_at") or record.get("created_at") or now()), float(data.get("learned_at") or 0))
    days = max(0.0, ((at or now()) - float(verified)) / DAY)
    return base * (FACT_DECAY_PER_DAY**days)


def _verification(stated_at: float | None) -> dict[str, float]:
    """A new statement's `verified_at` (when it was said) and, when that was not now, `learned_at`."""
    if stated_at is None:
        return {"verified_at": now()}
    return {"verified_at": stated_at, "learned_at": now()}


def last_said(record: dict[str, Any]) -> float:
    """When a fact was last said or verified (`data.verified_at`; an imported statement keeps the
    time it was said), else when it was stored."""
    return float((record.get("data") or {}).get("verified_at") or record.get("created_at") or 0)


def said_in(record: dict[str, Any]) -> list[str]:
    """The sessions that made a statement: `data.sessions` once it was said again, else its own."""
    listed = (record.get("data") or {}).get("sessions")
    return list(listed) if listed else [record["session_id"]] if record.get("session_id") else []


def on_their_words(fact: dict[str, Any]) -> bool:
    """It stands on the user's quoted words, and the source re-check did not send it back."""
    data = fact.get("data") or {}
    return bool(data.get("quote")) and not data.get("recheck")


def decorate(record: dict[str, Any], at: float | None = None) -> dict[str, Any]:
    """Add `effective_confidence` and `needs_verification` (computed, never stored)."""
    if record.get("kind") != "fact":
        return record
    eff = effective_confidence(record, at)
    return {**record, "effective_confidence": round(eff, 4), "needs_verification": eff < FACT_REVERIFY}


def as_the_code_shows(facts: list[dict[str, Any]], freshness: dict[str, Any]) -> list[dict[str, Any]]:
    """The facts as `FactStore.reconcile_with_code` would leave them, computed without writing:
    a fact whose file is gone shows demoted, a demoted one whose file is back shows restored.
    What a briefing or recall shows between a change to the code and the job that records it."""
    shown = []
    for fact in facts:
        found = freshness.get(fact["id"])
        data = fact.get("data") or {}
        if found is None or found.state == "unknown" or fact.get("status") != "active":
            shown.append(fact)
            continue
        gone, stale = found.state in CODE_GONE, data.get("code_stale")
        if gone and not stale:
            before = float(fact["confidence"] if fact["confidence"] is not None else 1.0)
            stale = {"state": found.state, "detail": found.detail, "confidence_before": before, "at": now()}
            fact = decorate({**fact, "confidence": min(before, CODE_GONE_CONFIDENCE), "data": {**data, "code_stale": stale}})
        elif not gone and stale:
            kept = {key: value for key, value in data.items() if key != "code_stale"}
            fact = decorate({**fact, "confidence": stale.get("confidence_before", fact["confidence"]),
                             "data": {**kept, "verified_at": now()}})  # fmt: skip
        shown.append(fact)
    return shown


class FactStore:
    def __init__(self, db: Database, finder: Finder, approvals: ApprovalQueue, redact=None, forgotten=None, codebase=None):
        self.db = db
        self.finder = finder
        self.approvals = approvals
        self._redact = redact or (lambda text: text)
        self.forgotten = forgotten or Forgotten(db)
        # memory_anchor/worker/codebase's Codebase: the files a fact names, kept with it; None: not kept.
        self.codebase = codebase

    def _code_data(self, conn, *, project: str | None, session_id: str | None, text: str) -> dict[str, Any]:
        """{"code", "code_head"}: the files the fact's text names as they are now; {} without any."""
        if self.codebase is None:
            return {}
        return self.codebase.fact_data(conn, project=project, session_id=session_id, text=text)

    # --- writes ------------------------------------------------------------------------

    def add(self, fact: FactIn, *, actor: str | None = None, conn=None, reason: str = "ADD",
            stated_at: float | None = None) -> dict[str, Any]:  # fmt: skip
        """Store a fact by its confidence tier. Returns {"status", "record"?, "approval"?}.

        `stated_at`: when the statement was made, for a fact extracted from what a session said
        (an imported one may be years old); its decay counts from then. Default: now."""
        if conn is None:
            with self.db.transaction() as c:
                return self.add(fact, actor=actor, conn=c, reason=reason, stated_at=stated_at)
        agent_id = fact.agent_id or DEFAULT_AGENT
        actor = actor or agent_actor(agent_id)
        text = self._redact(fact.text.strip())
        if not is_human(actor) and (gone := self.forgotten.find(conn, fact.project, "fact", text, branch=fact.branch)):
            # A person said it is wrong: no agent, extraction or approval of theirs writes it again.
            return {"status": "forgotten", "record": None, "forgotten_id": gone["id"],
                    "reason": f"forgotten by {gone['actor']} ({gone['action']}): not stored"}  # fmt: skip
        status = tier(fact.confidence)
        if status == "rejected":
            self.log_rejection(conn, text, fact.confidence, project=fact.project, agent_id=agent_id,
                               source=fact.source, reason=f"confidence {fact.confidence:.2f} < {FACT_PENDING}")  # fmt: skip
            return {"status": "rejected", "record": None, "reason": f"confidence below {FACT_PENDING}: logged, not stored"}
        branch = fact.branch or MAIN
        resolve_view(conn, branch)
        if status == "pending" and (earlier := self._same_statement(conn, text, project=fact.project, branch=branch)):
            repeat = self._said_again(conn, earlier, fact, actor=actor, branch=branch, stated_at=stated_at)
            if repeat is not None:
                return repeat
        record = self._put(conn, fact, text, status=status, actor=actor, reason=reason, stated_at=stated_at)
        out: dict[str, Any] = {"status": status, "record": decorate(record)}
        if status == "pending":
            said = {"said_at": stated_at} if stated_at is not None else {}
            out["approval"] = self.approvals.create(
                conn, "fact", "add", {"text": text, "confidence": fact.confidence, **said}, project=fact.project,
                branch=branch, agent_id=agent_id, session_id=fact.session_id, record_id=record["id"],
                reason=f"confidence {fact.confidence:.2f} is between {FACT_PENDING} and {FACT_ACCEPT}",
            )  # fmt: skip
        return out

    def _put(self, conn, fact: FactIn, text: str, *, status: str, actor: str, reason: str, stated_at: float | None,
             **data: Any) -> dict[str, Any]:  # fmt: skip
        # When the words were said: an imported statement's transcript time, not the time of the import.
        happened = to_epoch(fact.when, "when") if fact.when is not None else stated_at
        return Records.put(
            conn, "fact", text, branch=fact.branch or MAIN, actor=actor, reason=reason, layer=VERIFIED_FACT,
            status=status, project=fact.project, agent_id=fact.agent_id or DEFAULT_AGENT, session_id=fact.session_id,
            type=fact.category or "fact", confidence=fact.confidence,
            fact_key=fact_key(self._redact(fact.subject) if fact.subject else None, text),  # keyed on what is stored
            source_id=fact.source_id, happened_at=happened,
            data={**_verification(stated_at), "subject": fact.subject, "source": fact.source, "tags": fact.tags,
                  **({"quote": fact.quote} if fact.quote else {}),
                  **self._code_data(conn, project=fact.project, session_id=fact.session_id, text=text), **data},
        )  # fmt: skip

    def keep_superseded(self, conn, fact: FactIn, by: dict[str, Any], *, actor: str, reason: str,
                        stated_at: float) -> dict[str, Any]:  # fmt: skip
        """A statement made before fact `by`, which replaces what it says (old history imported after
        the fact): kept in history as `superseded` by it, never briefed. Said again, it is kept once."""
        text = self._redact(fact.text.strip())
        branch = fact.branch or MAIN
        kept = self._same_statement(conn, text, project=fact.project, branch=branch, statuses=("superseded",))
        if kept is not None and (kept.get("data") or {}).get("superseded_by") == by["id"]:
            return kept
        return self._put(conn, fact, text, status="superseded", actor=actor, reason=reason, stated_at=stated_at,
                         superseded_by=by["id"])  # fmt: skip

    def _same_statement(self, conn, text: str, *, project: str | None, branch: str,
                     statuses: tuple[str, ...] = ("pending", "rejected")) -> dict[str, Any] | None:  # fmt: skip
        """The fact of `statuses` that already says `text` (a near-duplicate wording), of the first status
        first, else the closest; None when none does. Active ones are extraction's to compare."""
        filters: dict[str, Any] = {"kind": "fact"}
        if project is not None:
            filters["project"] = project
        rows, _ = Records.query(conn, resolve_view(conn, branch), filters=filters, statuses=statuses, limit=10_000)
        said = Wording(text)
        close = [(r["status"] == statuses[0], said.similarity(Wording(r["text"])), r) for r in rows]
        close = [c for c in close if c[1] >= NEAR_DUPLICATE]
        return max(close, key=lambda c: c[:2])[2] if close else None

    def _said_again(self, conn, earlier: dict[str, Any], fact: FactIn, *, actor: str, branch: str,
                    stated_at: float | None) -> dict[str, Any] | None:  # fmt: skip
        """A pending statement said again: `add`'s answer, or None when it is to be stored as new
        (a rejected one said in a later session, or a person adding what they rejected)."""
        data = earlier.get("data") or {}
        sessions = said_in(earlier)
        said = stated_at if stated_at is not None else now()
        said_last = last_said(earlier)
        new_session = fact.session_id is not None and fact.session_id not in sessions
        if earlier["status"] == "rejected":
            if is_human(actor) or (new_session and said > said_last):
                return None  # a person asks again, or the user says it again later: ask them again
            if new_session:
                Records.update(conn, earlier["id"], branch=branch, actor=actor, reason="SAID AGAIN (stays rejected)",
                               data={**data, "sessions": [*sessions, fact.session_id]})  # fmt: skip
            return {"status": "rejected", "record": None, "rejected_id": earlier["id"],
                    "reason": f"fact {earlier['id']} saying this was rejected; said again no later: not stored"}  # fmt: skip
        if new_session and abs(said - said_last) > SAID_AGAIN_APART and earlier.get("type") in STANDING \
                and on_their_words(earlier):
            return self._confirmed(conn, earlier, fact, actor=actor, branch=branch, said=max(said, said_last))
        record = earlier
        if new_session or said > said_last or fact.confidence > float(earlier.get("confidence") or 0):
            changes: dict[str, Any] = {"data": {**data, "sessions": [*sessions, *([fact.session_id] if new_session else [])],
                                                **({"verified_at": said} if said > said_last else {})}}  # fmt: skip
            if fact.confidence > float(earlier.get("confidence") or 0):
                changes["confidence"] = fact.confidence
            record = Records.update(conn, earlier["id"], branch=branch, actor=actor, reason="REAFFIRM (said again)",
                                    **changes)  # fmt: skip
        approval = next((a for a in self.approvals.for_record(conn, earlier["id"]) if a["status"] == "pending"), None)
        return {"status": "pending", "record": decorate(record), "reaffirmed": True,
                **({"approval": approval} if approval else {})}  # fmt: skip

    def _confirmed(self, conn, earlier: dict[str, Any], fact: FactIn, *, actor: str, branch: str,
                   said: float) -> dict[str, Any]:  # fmt: skip
        """A pending instruction the user said again, later, elsewhere: theirs, so a standing one now."""
        data = earlier.get("data") or {}
        record = Records.update(
            conn, earlier["id"], branch=branch, actor=actor, reason="CONFIRMED (the user said it again)", status="active",
            confidence=max(float(earlier.get("confidence") or 0), FACT_ACCEPT),
            data={**data, "sessions": [*said_in(earlier), fact.session_id], "verified_at": said,
                  "confirmed": f"said again in session {fact.session_id}"},
        )  # fmt: skip
        for approval in self.approvals.for_record(conn, earlier["id"]):
            if approval["status"] == "pending":
                self.approvals.decided_by_the_user(conn, approval["id"], status="approved", how="said-again",
                                                   note=f"said again in session {fact.session_id}", result_id=earlier["id"])  # fmt: skip
        return {"status": "active", "record": decorate(record), "reaffirmed": True, "confirmed": True}

    def supersede(self, conn, fact_id: str, text: str, *, confidence: float | None, actor: str, reason: str,
                  branch: str = MAIN, source_id: str | None = None, stated_at: float | None = None) -> dict[str, Any]:  # fmt: skip
        """UPDATE: a new version of the fact replaces the old one (history keeps both)."""
        current = self._current(conn, fact_id, branch)
        text = self._redact(text.strip())
        data = {k: v for k, v in current["data"].items() if k not in ("code", "code_head")}  # the new text names its own
        code = self._code_data(conn, project=current.get("project"), session_id=current.get("session_id"), text=text)
        changes: dict[str, Any] = {
            "text": text,
            "status": "active",
            "data": {**data, **_verification(stated_at), "previous_text": current["text"], **code},
        }
        if stated_at is not None:
            changes["happened_at"] = stated_at  # the new version was said then
        if confidence is not None:
            changes["confidence"] = confidence
        if source_id:
            changes["source_id"] = source_id
        return Records.update(conn, fact_id, branch=branch, actor=actor, reason=reason, **changes)

    def invalidate(self, conn, fact_id: str, *, actor: str, reason: str, branch: str = MAIN) -> dict[str, Any]:
        """DELETE: the fact stops being true; it stays in history with status `invalidated`."""
        current = self._current(conn, fact_id, branch)
        data = {**current["data"], "invalidated_at": now()}
        return Records.update(conn, fact_id, branch=branch, actor=actor, reason=reason, status="invalidated", data=data)

    def verify(self, fact_id: str, *, actor: str, branch: str = MAIN, confidence: float | None = None) -> dict[str, Any]:
        """Re-verify: the decay clock restarts (optionally with a new confidence)."""
        with self.db.transaction() as conn:
            current = self._current(conn, fact_id, branch)
            if current["status"] != "active":
                raise RecordError(f"only an active fact can be verified (this one is {current['status']})", code="conflict", status=409)
            data = dict(current["data"])
            stale = data.pop("code_stale", None)  # a person vouches for it again, whatever the code check said
            changes: dict[str, Any] = {"data": {**data, "verified_at": now()}}
            if confidence is not None:
                changes["confidence"] = confidence
            elif stale:
                changes["confidence"] = stale.get("confidence_before", current["confidence"])
            return decorate(Records.update(conn, fact_id, branch=branch, actor=actor, reason="VERIFY", **changes))

    # --- the code a fact names ---------------------------------------------------------------

    def reconcile_with_code(self, facts: list[dict[str, Any]], freshness: dict[str, Any], *,
                            branch: str = MAIN) -> dict[str, Any]:  # fmt: skip
        """Facts whose files are gone (deleted, or moved from the path they state) lose confidence
        below FACT_REVERIFY, so they show `needs_verification` and wait to be verified, corrected or
        invalidated like any decayed fact; a demoted fact whose file the current code has again (the
        same blob back, or its stated path present) regains the confidence it had, re-verified now.

        `freshness`: {fact id: Freshness} from memory_anchor/worker/codebase. Writes only when a fact's state flips.
        Returns {"demoted": n, "restored": n, "facts": {fact id: its new version, decorated}}."""
        changed: dict[str, dict[str, Any]] = {}
        demoted = restored = 0
        for fact in facts:
            found = freshness.get(fact["id"])
            if found is None or found.state == "unknown" or fact.get("status") != "active":
                continue
            gone = found.state in CODE_GONE
            stale = (fact.get("data") or {}).get("code_stale")
            record = None
            if gone and not stale:
                record = self._demote_for_code(fact["id"], found, branch)
                demoted += record is not None
            elif not gone and stale:
                record = self._restore_for_code(fact["id"], branch)
                restored += record is not None
            if record is not None:
                changed[fact["id"]] = decorate(record)
        return {"demoted": demoted, "restored": restored, "facts": changed}

    def reconcile_all_with_code(self, branch: str = MAIN) -> dict[str, int]:
        """Every active fact that names files, checked against its project's code now, then demoted
        or restored as `reconcile_with_code` does: the maintenance job and the git watch call this,
        so the briefing, which shows the same state computed (`as_the_code_shows`), never writes."""
        if self.codebase is None:
            return {"demoted": 0, "restored": 0}
        conn = self.db.reader()
        rows, _ = Records.query(conn, resolve_view(conn, branch), filters={"kind": "fact"}, limit=FACTS_CHECKED)
        by_project: dict[str | None, list[dict[str, Any]]] = {}
        for fact in rows:
            if (fact.get("data") or {}).get("code"):
                by_project.setdefault(fact.get("project"), []).append(fact)
        demoted = restored = 0
        for project, facts in by_project.items():
            cwd = None if (project or "").startswith("/") else session_cwd(conn, facts[0].get("session_id"))
            changed = self.reconcile_with_code(facts, self.codebase.check(facts, project=project, cwd=cwd), branch=branch)
            demoted, restored = demoted + changed["demoted"], restored + changed["restored"]
        return {"demoted": demoted, "restored": restored}

    def _demote_for_code(self, fact_id: str, found, branch: str) -> dict[str, Any] | None:
        with self.db.transaction() as conn:
            current = self._current(conn, fact_id, branch)
            data = current.get("data") or {}
            if current["status"] != "active" or data.get("code_stale"):
                return None
            before = float(current["confidence"] if current["confidence"] is not None else 1.0)
            stale = {"state": found.state, "detail": found.detail, "confidence_before": before, "at": now()}
            return Records.update(conn, fact_id, branch=branch, actor="system:code-check", reason=f"DECAY ({found.detail})",
                                  confidence=min(before, CODE_GONE_CONFIDENCE), data={**data, "code_stale": stale})  # fmt: skip

    def _restore_for_code(self, fact_id: str, branch: str) -> dict[str, Any] | None:
        with self.db.transaction() as conn:
            current = self._current(conn, fact_id, branch)
            data = dict(current.get("data") or {})
            stale = data.pop("code_stale", None)
            if current["status"] != "active" or not stale:
                return None
            return Records.update(conn, fact_id, branch=branch, actor="system:code-check",
                                  reason="VERIFY (the code confirms it again)",
                                  confidence=stale.get("confidence_before", current["confidence"]),
                                  data={**data, "verified_at": now()})  # fmt: skip

    def log_rejection(self, conn, text: str, confidence: float, *, project: str, agent_id: str | None, source: str | None, reason: str) -> None:
        log_fact_rejection(conn, project=project, agent_id=agent_id, text=text, confidence=confidence, source=source,
                           reason=reason, at=now())  # fmt: skip

    # --- approvals of pending facts -------------------------------------------------------

    def approve_pending(self, conn, approval: dict[str, Any], decision) -> str:
        branch = approval["branch"]
        current = self._current(conn, approval["record_id"], branch)
        if current["status"] != "pending":
            raise RecordError(f"fact {current['id']} is no longer pending ({current['status']})", code="conflict", status=409)
        Records.update(
            conn, current["id"], branch=branch, actor=human_actor(decision.actor), reason="APPROVE",
            status="active", confidence=max(float(current["confidence"] or 0), FACT_ACCEPT),
            data={**current["data"], "verified_at": now(), "approved_by": human_actor(decision.actor)},
        )  # fmt: skip
        return current["id"]

    def answered_by_the_user(self, conn, fact_id: str, *, holds: bool, reply: dict[str, Any], actor: str,
                             branch: str = MAIN) -> dict[str, Any]:  # fmt: skip
        """The user answered, in a session, whether a pending fact holds; `reply` is the prompt that says so.
        It holds: a standing fact now, verified when they said so. It does not: rejected, so the same
        words extracted again stay out."""
        current = self._current(conn, fact_id, branch)
        if current["status"] != "pending":
            raise RecordError(f"fact {current['id'][:8]} is {current['status']}: it does not wait for the user's answer",
                              code="conflict", status=409)  # fmt: skip
        note = f"the user answered in session {reply.get('session_id') or '?'}: {reply['text'][:300]}"
        if holds:
            record = Records.update(
                conn, current["id"], branch=branch, actor=actor, reason="CONFIRMED (the user answered)", status="active",
                confidence=max(float(current["confidence"] or 0), FACT_ACCEPT),
                data={**current["data"], "verified_at": reply["happened_at"], "confirmed": note},
            )  # fmt: skip
        else:
            record = Records.update(conn, current["id"], branch=branch, actor=actor, reason="REJECT (the user answered)",
                                    status="rejected")  # fmt: skip
        for approval in self.approvals.for_record(conn, current["id"]):
            if approval["status"] == "pending":
                self.approvals.decided_by_the_user(conn, approval["id"], status="approved" if holds else "rejected",
                                                   how="answered", note=note, result_id=current["id"] if holds else None)  # fmt: skip
        return decorate(record)

    def reject_pending(self, conn, approval: dict[str, Any], decision) -> None:
        current = self._current(conn, approval["record_id"], approval["branch"])
        Records.update(conn, current["id"], branch=approval["branch"], actor=human_actor(decision.actor), reason="REJECT",
                       status="rejected")  # fmt: skip

    # --- reads -----------------------------------------------------------------------------

    def get(self, fact_id: str, *, branch: str = MAIN, as_of: Any = None) -> dict[str, Any]:
        conn = self.db.reader()
        record = Records.get(conn, fact_id, resolve_view(conn, branch, as_of))
        if record is None or record["kind"] != "fact":
            raise NotFound(f"fact {fact_id} not found")
        return decorate(record)

    def history(self, fact_id: str, *, branch: str = MAIN) -> list[dict[str, Any]]:
        conn = self.db.reader()
        versions = Records.history(conn, fact_id, resolve_view(conn, branch))
        if not versions or versions[0]["kind"] != "fact":
            raise NotFound(f"fact {fact_id} not found")
        return versions

    def list(self, *, project: str | None = None, statuses: tuple[str, ...] = ("active",), branch: str = MAIN,
             as_of: Any = None, needs_verification: bool | None = None, limit: int = 100) -> list[dict[str, Any]]:  # fmt: skip
        conn = self.db.reader()
        filters: dict[str, Any] = {"kind": "fact"}
        if project is not None:
            filters["project"] = project
        rows, _ = Records.query(conn, resolve_view(conn, branch, as_of), filters=filters, statuses=statuses, limit=10_000)
        out = [decorate(r) for r in rows]
        if needs_verification is not None:
            out = [r for r in out if r["needs_verification"] == needs_verification]
        out.sort(key=lambda r: -r["effective_confidence"])
        return out[:limit]

    def similar(self, text: str, view: View, *, project: str | None, limit: int = 5, conn=None) -> list[dict[str, Any]]:
        """The live facts most like `text` (semantic/keyword), each with `similarity` 0..1."""
        filters: dict[str, Any] = {"kind": "fact"}
        if project is not None:
            filters["project"] = project
        hits = self.finder.find(text, view, filters=filters, limit=limit * 2, statuses=("active",),
                                recent_fallback=False, conn=conn)  # fmt: skip
        conn = conn or self.db.reader()
        out = []
        for hit in hits:
            record = Records.get(conn, hit["id"], view)  # hits from the engine are wire-shaped
            if record is None or record["status"] != "active":
                continue
            out.append({**decorate(record), "similarity": text_similarity(text, record["text"])})
        out.sort(key=lambda r: -r["similarity"])
        return out[:limit]

    def _current(self, conn, fact_id: str, branch: str) -> dict[str, Any]:
        record = Records.get(conn, fact_id, resolve_view(conn, branch))
        if record is None or record["kind"] != "fact":
            raise NotFound(f"fact {fact_id} not found")
        return record
