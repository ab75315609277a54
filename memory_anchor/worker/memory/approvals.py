"""The approvals queue: proposals that wait for a human.

Three kinds land here:
- `identity_change`: an agent's propose_identity_change (add/edit/remove an L0
  item); approving it needs the same three confirmations as a direct write;
- `fact`: a fact of medium confidence (0.7-0.9), stored with status `pending`;
- `agent_write`: any write of an agent configured read-only.

Approving runs the handler registered for the kind (see `MemoryModel`), inside
the same transaction that marks the approval, so a failure leaves it pending.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from memory_anchor.schemas.memory_model import Decision
from memory_anchor.worker.memory.common import human_actor, now
from memory_anchor.worker.store import approvals as store_approvals
from memory_anchor.worker.store.db import Database
from memory_anchor.worker.store.records import NotFound, RecordError

# handler(conn, approval, decision) -> id of the record the approval wrote (or None)
Handler = Callable[[Any, dict[str, Any], Decision], "str | None"]
RejectHandler = Callable[[Any, dict[str, Any], Decision], None]


def _row(row) -> dict[str, Any]:
    out = dict(row)
    out["payload"] = json.loads(out.get("payload") or "{}")
    return out


class ApprovalQueue:
    def __init__(self, db: Database):
        self.db = db
        self._on_approve: dict[str, Handler] = {}
        self._on_reject: dict[str, RejectHandler] = {}

    def register(self, kind: str, on_approve: Handler, on_reject: RejectHandler | None = None) -> None:
        self._on_approve[kind] = on_approve
        if on_reject is not None:
            self._on_reject[kind] = on_reject

    def create(
        self,
        conn,
        kind: str,
        action: str,
        payload: dict[str, Any],
        *,
        project: str = "",
        branch: str = "main",
        agent_id: str | None = None,
        session_id: str | None = None,
        record_id: str | None = None,
        reason: str | None = None,
    ) -> dict[str, Any]:
        """Queue a proposal (inside the caller's write transaction)."""
        row = store_approvals.add(conn, kind=kind, action=action, project=project or "", branch=branch or "main",
                                  agent_id=agent_id, session_id=session_id, record_id=record_id, payload=payload,
                                  reason=reason, at=now())  # fmt: skip
        return _row(row)

    def list(self, status: str | None = "pending", kind: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        return [_row(r) for r in store_approvals.approvals(self.db.reader(), status=status, kind=kind, limit=limit)]

    @staticmethod
    def for_record(conn, record_id: str) -> list[dict[str, Any]]:
        """The approvals about one record, oldest first."""
        return [_row(r) for r in store_approvals.of_record(conn, record_id)]

    def count_pending(self, project: str | None = None) -> int:
        return store_approvals.count_pending(self.db.reader(), project)

    def get(self, approval_id: int, conn=None) -> dict[str, Any]:
        row = store_approvals.approval(conn or self.db.reader(), approval_id)
        if row is None:
            raise NotFound(f"approval {approval_id} not found")
        return _row(row)

    def approve(self, approval_id: int, decision: Decision) -> dict[str, Any]:
        if (decision.actor or "").startswith("agent:"):
            raise RecordError("only a human can approve a proposal", code="forbidden", status=403)
        with self.db.transaction() as conn:
            approval = self._pending(conn, approval_id)
            handler = self._on_approve.get(approval["kind"])
            if handler is None:
                raise RecordError(f"no handler for approvals of kind {approval['kind']!r}", code="internal_error", status=500)
            result_id = handler(conn, approval, decision)
            self._decide(conn, approval_id, "approved", decision, result_id)
            return self.get(approval_id, conn)

    def reject(self, approval_id: int, decision: Decision) -> dict[str, Any]:
        if (decision.actor or "").startswith("agent:"):
            raise RecordError("only a human can reject a proposal", code="forbidden", status=403)
        with self.db.transaction() as conn:
            approval = self._pending(conn, approval_id)
            handler = self._on_reject.get(approval["kind"])
            if handler is not None:
                handler(conn, approval, decision)
            self._decide(conn, approval_id, "rejected", decision, None)
            return self.get(approval_id, conn)

    def _pending(self, conn, approval_id: int) -> dict[str, Any]:
        approval = self.get(approval_id, conn)
        if approval["status"] != "pending":
            raise RecordError(f"approval {approval_id} is already {approval['status']}", code="conflict", status=409)
        return approval

    @staticmethod
    def decided_by_the_user(conn, approval_id: int, *, status: str, how: str, note: str, result_id: str | None) -> None:
        """The user settled what the approval asked in their own words (`how`: said-again, when they said it
        again elsewhere; answered, when they answered Claude's question): no one needs to decide it now."""
        store_approvals.decide_if_pending(conn, approval_id, status=status, at=now(), by=f"user:{how}", note=note,
                                          result_id=result_id)  # fmt: skip

    @staticmethod
    def _decide(conn, approval_id: int, status: str, decision: Decision, result_id: str | None) -> None:
        store_approvals.decide(conn, approval_id, status=status, at=now(), by=human_actor(decision.actor),
                               note=decision.note, result_id=result_id)  # fmt: skip
