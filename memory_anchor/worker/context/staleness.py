"""Memories checked against the code when they are shown (issue 27).

Every section that shows records about code (session lines, recent activity, facts,
rules) and per-prompt recall asks `marks` for their freshness and adds the short mark
to the line: nothing when the files are as they were, "(app/cart.py changed since,
3 commits)", "(config/settings.toml deleted since)", "(docs/guide.md moved to
handbook/guide.md)", or, when what a session's edit put in is no longer in the file,
"(superseded: the edit to app/cart.py is no longer in the file)". Facts whose files
are gone are also handed to the fact store, which demotes them for re-verification.
"""

from __future__ import annotations

from typing import Any, Iterable

from memory_anchor.schemas.codebase import Freshness
from memory_anchor.worker.codebase.freshness import mark

__all__ = ["fact_flag", "mark", "marks", "reconcile_facts"]


def marks(services, records: Iterable[dict[str, Any]], project: str | None, session_id: str | None = None) -> dict[str, Freshness]:
    """{record id: Freshness} for the records that keep code refs; {} outside a worker or outside git."""
    codebase = getattr(services, "codebase", None) if services is not None else None
    if codebase is None or not services.settings.code_checks:
        return {}
    records = [r for r in records if (r.get("data") or {}).get("code")]
    if not records:
        return {}
    return codebase.check(records, project=project, cwd=_session_cwd(services, session_id, project))


def _session_cwd(services, session_id: str | None, project: str | None) -> str | None:
    """The session's directory, when the project's name is not a path (a team names it by its remote)."""
    if not session_id or (project or "").startswith("/"):
        return None
    row = services.db.reader().execute("SELECT cwd FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    return row["cwd"] if row else None



def fact_flag(fact: dict[str, Any], found: Freshness | None) -> str:
    """' [needs verification]' for a fact that decayed, or whose file is gone (the demotion the
    fact store writes may land after this briefing was read)."""
    from memory_anchor.worker.memory.facts import CODE_GONE

    gone = found is not None and found.state in CODE_GONE
    return " [needs verification]" if fact.get("needs_verification") or gone else ""


def reconcile_facts(request, facts: list[dict[str, Any]], found: dict[str, Freshness]) -> list[dict[str, Any]]:
    """Hand the facts' freshness to the fact store (demote the gone, restore the confirmed) and
    return the facts as they now are, so the briefing shows what the store holds."""
    model = request.memory
    if model is None or not found:
        return facts
    changed = model.facts.reconcile_with_code(facts, found, branch=request.branch)["facts"]
    return [{**fact, **changed[fact["id"]]} if fact["id"] in changed else fact for fact in facts]
