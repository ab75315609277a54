"""Standing rules written before the source rule: checked again, and the doubtful ones sent for approval.

Memories extracted by an earlier version hold "rules" that were bug reports,
narration or pasted text (`decision: instead of`, `rule: It always seems to be
/Users which is last`), and the briefing tells Claude to follow them. The
maintenance job holds every active rule, decision and preference that an
extractor wrote (from a prompt locally, or by Claude) to today's source rule
(`provenance.check` against the prompts it came from). One that fails is not
deleted: it becomes `pending` with an approval that says why, so it leaves the
briefing until a person approves it. Rules a person wrote or approved are
theirs, and are never touched.
"""

from __future__ import annotations

import logging
from typing import Any

from memory_anchor.schemas.events import typed_by_person
from memory_anchor.worker.memory.approvals import ApprovalQueue
from memory_anchor.schemas.memory_model import STANDING
from memory_anchor.worker.memory.provenance import Prompt, check
from memory_anchor.worker.store.records import Records, View, resolve_view

log = logging.getLogger(__name__)

EXTRACTED = ("prompt", "ai")  # data.source of facts an extractor wrote
ACTOR = "system:source-recheck"


def recheck_standing(db, approvals: ApprovalQueue, *, limit: int = 500) -> int:
    """Send the extracted standing facts that fail the source rule for approval; returns how many."""
    sent = 0
    with db.transaction() as conn:
        view = resolve_view(conn, "main")
        rows, _ = Records.query(conn, view, filters={"kind": "fact", "type": list(STANDING)}, statuses=("active",),
                                limit=limit)  # fmt: skip
        for fact in rows:
            data = fact.get("data") or {}
            if data.get("quote") or data.get("source") not in EXTRACTED or data.get("approved_by") \
                    or str(fact.get("actor") or "").startswith("human:"):
                continue  # held to the source rule when written, or a person's
            prompts = _source_prompts(conn, view, fact)
            verdict = check(fact["text"], fact.get("type"), float(fact.get("confidence") or 0), None, prompts)
            if verdict.allowed and verdict.confidence is None:
                continue
            reason = verdict.reason or "re-checked: not said as a lasting instruction"
            Records.update(conn, fact["id"], view=view, actor=ACTOR, reason=f"RECHECK: {reason}", status="pending",
                           data={**data, "recheck": reason})  # fmt: skip
            approvals.create(conn, "fact", "add", {"text": fact["text"], "confidence": fact.get("confidence")},
                             project=fact.get("project") or "", branch="main", agent_id=fact.get("agent_id"),
                             session_id=fact.get("session_id"), record_id=fact["id"],
                             reason=f"re-checked under the source rule: {reason}")  # fmt: skip
            sent += 1
    if sent:
        log.warning("%d standing rule(s) extracted by an earlier version failed the source rule; "
                    "they wait for approval and are out of the briefing", sent)  # fmt: skip
    return sent


def _source_prompts(conn, view: View, fact: dict[str, Any]) -> list[Prompt]:
    """The prompts a fact may stand on: its source prompt (local extraction), else its session's."""
    source = Records.get(conn, fact["source_id"], view) if fact.get("source_id") else None
    if source is not None and source.get("kind") == "prompt":
        rows = [source]
    elif fact.get("session_id"):
        rows, _ = Records.query(conn, view, filters={"kind": "prompt", "session_id": fact["session_id"]}, limit=200)
    else:
        rows = []
    return [Prompt(r["text"], bool((r.get("data") or {}).get("answers_a_question"))) for r in rows if typed_by_person(r)]
