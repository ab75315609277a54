"""Rules an earlier version extracted are held to today's source rule: the doubtful ones wait for approval.

A memory upgraded from before the source rule holds "rules" that were a bug
report's sentences. The maintenance job sends those for approval (out of the
briefing, not deleted) and leaves the user's real rules, and anything a person
wrote or approved, as they are.
"""

from __future__ import annotations

from memory_anchor.schemas.memory_model import Decision
from memory_anchor.worker.memory import MemoryModel
from memory_anchor.worker.store.records import Records

PROJECT = "/home/dev/shop"


def _old_extraction(conn, prompt: str, rule: str, category: str = "rule") -> str:
    """What the cue-word extractor wrote before: a prompt, and a rule that names it as its source."""
    source = Records.put(conn, "prompt", prompt, project=PROJECT, session_id="s1", actor="claude-code", reason="captured")
    fact = Records.put(conn, "fact", rule, project=PROJECT, session_id="s1", actor="agent:claude-code", type=category,
                       status="active", confidence=0.95, layer="verified_fact", source_id=source["id"],
                       data={"source": "prompt", "verified_at": 0})  # fmt: skip
    return fact["id"]


def test_rules_from_a_pasted_report_wait_for_approval_and_the_users_stay(store_db):
    model = MemoryModel(store_db)
    report = ("We're solving the following issue. Here's the issue text:\nISSUE:\nURLField throws ValueError "
              "instead of ValidationError on clean.\nIt always seems to be /Users which is last.")  # fmt: skip
    with store_db.transaction() as conn:
        pasted = _old_extraction(conn, report, "URLField throws ValueError instead of ValidationError on clean", "decision")
        narrated = _old_extraction(conn, report, "It always seems to be /Users which is last")
        users = _old_extraction(conn, "Fix the cart total. Always run pytest -q before you commit.",
                                "Always run pytest -q before you commit")  # fmt: skip
    assert model.maintain()["rules_sent_for_approval"] == 2
    status = {f["id"]: f["status"] for f in model.facts.list(project=PROJECT, statuses=("active", "pending"))}
    assert status == {pasted: "pending", narrated: "pending", users: "active"}
    waiting = {a["record_id"]: a["reason"] for a in model.approvals.list("pending")}
    assert set(waiting) == {pasted, narrated} and all("source rule" in r for r in waiting.values())
    # A person approves one: it is theirs now, and later runs leave it alone.
    approval = next(a for a in model.approvals.list("pending") if a["record_id"] == narrated)
    model.approvals.approve(approval["id"], Decision(actor="alice"))
    assert model.maintain()["rules_sent_for_approval"] == 0
    assert model.facts.get(narrated)["status"] == "active"
