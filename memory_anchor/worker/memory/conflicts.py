"""Open conflicts: contradictions between facts that the rules could not settle.

The rules, applied by `settle` (a person's word outranks an agent's, a newer confident
statement a staler one, and what cannot be settled waits for a person):
1. the identity layer is never overwritten by an agent (agents cannot reach it);
2. a fact written or approved by a human is not replaced by an agent;
3. a newer, confident fact (>= 0.9, observed no earlier than the old one was
   verified) supersedes the old one: a new version of the same id;
   A statement made before the existing fact was last said or verified (old
   history imported after months of live use) never replaces it: extraction
   keeps it in history as `superseded` by that fact, never briefed;
4. anything else becomes an open conflict: the new statement is stored as a
   separate fact with status `disputed`, the old one stays active, and a human
   resolves it with keep_existing, keep_new or keep_both.
"""

from __future__ import annotations

from typing import Any

from memory_anchor.schemas.memory_model import FACT_ACCEPT, VERIFIED_FACT, ConflictResolve
from memory_anchor.worker.memory.common import human_actor, is_human, now
from memory_anchor.worker.memory.facts import FactStore, last_said
from memory_anchor.worker.store import conflicts as store_conflicts
from memory_anchor.worker.store.db import Database
from memory_anchor.worker.store.records import NotFound, RecordError, Records, resolve_view


def settle(existing: dict[str, Any], *, confidence: float, observed_at: float, actor: str) -> str | None:
    """None when the change may be applied; otherwise why it must become a conflict."""
    owner = existing.get("actor") or ""
    data = existing.get("data") or {}
    if (is_human(owner) or data.get("approved_by")) and not is_human(actor):
        return "the existing fact was written or approved by a human; an agent cannot replace it"
    if confidence < FACT_ACCEPT:
        return f"the new statement's confidence {confidence:.2f} is below {FACT_ACCEPT}"
    if said_before(existing, observed_at):
        return "the new statement is older than the last verification of the existing fact"
    return None


def said_before(existing: dict[str, Any], observed_at: float) -> bool:
    """The statement was made before the existing fact was last said or verified (`data.verified_at`):
    old history imported after the fact, which it cannot replace (the extraction keeps it as superseded)."""
    return observed_at < last_said(existing)


class ConflictService:
    def __init__(self, db: Database, facts: FactStore):
        self.db = db
        self.facts = facts

    def open(self, conn, existing: dict[str, Any], text: str, *, confidence: float, reason: str, actor: str,
             agent_id: str | None, branch: str, source_id: str | None = None) -> dict[str, Any]:  # fmt: skip
        """Keep both: the contradicting statement becomes a `disputed` fact.

        On team storage rows say whether they are `private`; a statement contradicting a
        private fact is private too (a shared one would publish what the fact is about).
        """
        privacy = {"metadata": {"private": True}} if existing.get("private") else {}
        candidate = Records.put(
            conn, "fact", text, branch=branch, actor=actor, reason="CONFLICT", layer=VERIFIED_FACT, status="disputed",
            project=existing["project"], agent_id=agent_id, type=existing.get("type") or "fact", confidence=confidence,
            fact_key=existing.get("fact_key"), source_id=source_id,
            data={"verified_at": now(), "disputes": existing["id"], "source": "ai"}, **privacy,
        )  # fmt: skip
        conflict_id = store_conflicts.open_conflict(
            conn, project=existing["project"], branch=branch, existing_id=existing["id"], candidate_id=candidate["id"],
            fact_key=existing.get("fact_key"), reason=reason, agent_id=agent_id, at=now(),
        )  # fmt: skip
        return {"conflict_id": conflict_id, "candidate": candidate}

    def list(self, status: str | None = "open", project: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        conn = self.db.reader()
        return [self._expand(conn, r) for r in store_conflicts.conflicts(conn, status=status, project=project, limit=limit)]

    def count_open(self, project: str | None = None) -> int:
        return store_conflicts.count_open(self.db.reader(), project)

    def get(self, conflict_id: int, conn=None) -> dict[str, Any]:
        conn = conn or self.db.reader()
        row = store_conflicts.conflict(conn, conflict_id)
        if row is None:
            raise NotFound(f"conflict {conflict_id} not found")
        return self._expand(conn, row)

    def resolve(self, conflict_id: int, request: ConflictResolve) -> dict[str, Any]:
        if (request.actor or "").startswith("agent:"):
            raise RecordError("only a human can resolve a conflict", code="forbidden", status=403)
        actor = human_actor(request.actor)
        with self.db.transaction() as conn:
            conflict = self.get(conflict_id, conn)
            if conflict["status"] != "open":
                raise RecordError(f"conflict {conflict_id} is already resolved", code="conflict", status=409)
            branch = conflict["branch"]
            view = resolve_view(conn, branch)
            candidate = Records.get(conn, conflict["candidate_id"], view)
            existing = Records.get(conn, conflict["existing_id"], view)
            if candidate is None or existing is None:
                raise RecordError("a fact of this conflict no longer exists", code="conflict", status=409)
            tag = f"conflict {conflict_id}: {request.resolution}"
            if request.resolution == "keep_existing":
                Records.update(conn, candidate["id"], branch=branch, actor=actor, reason=f"REJECT ({tag})", status="rejected")
                self._reverify(conn, existing, actor, branch, tag)
            elif request.resolution == "keep_new":
                self.facts.supersede(conn, existing["id"], candidate["text"], confidence=candidate["confidence"],
                                     actor=actor, reason=f"UPDATE ({tag})", branch=branch)  # fmt: skip
                Records.update(conn, candidate["id"], branch=branch, actor=actor, reason=f"MERGED ({tag})",
                               status="merged", data={**candidate["data"], "merged_into": existing["id"]})  # fmt: skip
            else:
                Records.update(conn, candidate["id"], branch=branch, actor=actor, reason=f"ACCEPT ({tag})", status="active",
                               data={**candidate["data"], "verified_at": now(), "approved_by": actor})  # fmt: skip
            store_conflicts.resolve(conn, conflict_id, at=now(), actor=actor, resolution=request.resolution, note=request.note)
            return self.get(conflict_id, conn)

    @staticmethod
    def _reverify(conn, existing, actor, branch, tag) -> None:
        Records.update(conn, existing["id"], branch=branch, actor=actor, reason=f"VERIFY ({tag})",
                       data={**existing["data"], "verified_at": now(), "approved_by": actor})  # fmt: skip

    @staticmethod
    def _expand(conn, row: dict[str, Any]) -> dict[str, Any]:
        view = resolve_view(conn, row["branch"])
        for side in ("existing", "candidate"):
            record = Records.get(conn, row[f"{side}_id"], view)
            row[side] = (
                {"id": record["id"], "text": record["text"], "status": record["status"],
                 "confidence": record["confidence"], "actor": record["actor"]}  # fmt: skip
                if record else None
            )
        return row
