"""Replies to Claude's options that may hold beyond their task: which ones Claude asks the user about, once.

A reply that picked among Claude's options ("I like the names bootstrap, backfill and delta")
is no instruction: it usually settles the matter at hand, and is never briefed as one. But in
design work it is often a lasting decision, and kept only in Approvals it reaches nobody. So
the briefing lists the latest few for Claude to ask the user about (context/knowledge.py), and
the user's answer, carried by the record_user_answer tool, settles each (corrections.py).

Once: the first live session whose start lists a reply marks it asked in that session
(`mark_asked`, from the pipeline at SessionStart). Later sessions do not list it again, while
the session that asked keeps it through its compactions. Unanswered, it waits in Approvals.
"""

from __future__ import annotations

from typing import Any

from memory_anchor.schemas.memory_model import STANDING
from memory_anchor.worker.memory.facts import decorate, on_their_words
from memory_anchor.worker.memory.instructions import HEDGED
from memory_anchor.worker.store.records import Records, View

ASK_ONCE = 3  # a few questions at a session's start, the latest said first
ASK_DAYS = 14  # asked while the work is fresh: replies older than the newest by more wait in Approvals
DAY = 86_400


def a_reply_to_options(fact: dict[str, Any]) -> bool:
    """A pending fact on the user's words given in reply to Claude's options (less confidence than an
    instruction said once)."""
    return on_their_words(fact) and float(fact.get("confidence") or 0) < HEDGED


def said_at(fact: dict[str, Any]) -> float:
    return float((fact.get("data") or {}).get("verified_at") or 0)


def replies_to_ask(conn, view: View, project: str | None, session_id: str | None = None) -> list[dict[str, Any]]:
    """The replies to ask about at the start of `session_id`: those it asked already, or else the
    latest not yet asked in any session (said within ASK_DAYS of the newest of them)."""
    filters: dict[str, Any] = {"kind": "fact", "type": list(STANDING)}
    if project is not None:
        filters["project"] = project
    rows, _ = Records.query(conn, view, filters=filters, statuses=("pending",), limit=300)
    replies = [decorate(r) for r in rows if a_reply_to_options(r)]
    mine = [f for f in replies if session_id and (f.get("data") or {}).get("asked_in") == session_id]
    if mine:
        return sorted(mine, key=lambda f: -said_at(f))[:ASK_ONCE]
    waiting = [f for f in replies if not (f.get("data") or {}).get("asked_in")]
    if not waiting:
        return []
    newest = max(said_at(f) for f in waiting)
    fresh = [f for f in waiting if said_at(f) >= newest - ASK_DAYS * DAY]
    return sorted(fresh, key=lambda f: -said_at(f))[:ASK_ONCE]


def mark_asked(conn, view: View, project: str, session_id: str, *, branch: str, actor: str) -> list[str]:
    """Mark the replies this session's briefing lists as asked in it; the ids marked."""
    marked = []
    for fact in replies_to_ask(conn, view, project, session_id):
        if (fact.get("data") or {}).get("asked_in") == session_id:
            continue
        Records.update(conn, fact["id"], branch=branch, actor=actor, reason=f"ASKED (in session {session_id})",
                       data={**fact["data"], "asked_in": session_id})  # fmt: skip
        marked.append(fact["id"])
    return marked
