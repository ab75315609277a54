"""Memories checked against the code when they are shown.

Every section that shows records about code (session lines, recent activity, facts,
rules) and per-prompt recall asks `marks` for their freshness and adds the short mark
to the line: nothing when the files are as they were, "(app/cart.py changed since,
3 commits)", "(config/settings.toml deleted since)", "(docs/guide.md moved to
handbook/guide.md)", or, when what a session's edit put in is no longer in the file,
"(superseded: the edit to app/cart.py is no longer in the file)". Facts whose files
are gone show demoted, for re-verification; showing them writes nothing: the maintenance
job, the git watch and `verify --fix` record the demotion.
"""

from __future__ import annotations

from typing import Any, Iterable

from memory_anchor.schemas.codebase import Freshness
from memory_anchor.worker.codebase.freshness import mark
from memory_anchor.worker.context.model import ContextServices
from memory_anchor.worker.memory.facts import as_the_code_shows
from memory_anchor.worker.store.sessions import session_cwd

__all__ = ["fact_flag", "mark", "marks", "reconcile_facts"]


def marks(services: ContextServices | None, records: Iterable[dict[str, Any]], project: str | None, session_id: str | None = None) -> dict[str, Freshness]:
    """{record id: Freshness} for the records that keep code refs; {} outside a worker or outside git."""
    codebase = services.codebase if services is not None else None
    if codebase is None or not services.settings.code_checks:
        return {}
    records = [r for r in records if (r.get("data") or {}).get("code")]
    if not records:
        return {}
    return codebase.check(records, project=project, cwd=_session_cwd(services, session_id, project))


def _session_cwd(services: ContextServices, session_id: str | None, project: str | None) -> str | None:
    """The session's directory, when the project's name is not a path (a team names it by its remote)."""
    if not session_id or (project or "").startswith("/"):
        return None
    return session_cwd(services.reader(), session_id)



def fact_flag(fact: dict[str, Any], found: Freshness | None) -> str:
    """' [needs verification]' for a fact that decayed, or whose file is gone (the demotion the
    fact store writes may land after this briefing was read)."""
    from memory_anchor.worker.memory.facts import CODE_GONE

    gone = found is not None and found.state in CODE_GONE
    return " [needs verification]" if fact.get("needs_verification") or gone else ""


def reconcile_facts(request, facts: list[dict[str, Any]], found: dict[str, Freshness]) -> list[dict[str, Any]]:
    """The facts as their code shows them now (the gone demoted, the confirmed restored), as the
    fact store will record them: computed here, since a briefing only reads."""
    if not found:
        return facts
    return as_the_code_shows(facts, found)
