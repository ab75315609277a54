"""The memory model's layers in the SessionStart context.

Identity first, in full, outside the budget (`always`), read without any search
and falling back to the last good read; then the verified facts that are not
standing rules or decisions (those have their own section, see knowledge.py),
with needs-verification flags; recent events; open conflicts; the count of
pending approvals. Facts get the larger share (2000 tokens, events 500 of a
4000-token request): what holds outlasts what happened; the settings `context_budget_facts` and
`context_budget_events` change them.
"""

from __future__ import annotations

from typing import Any

from memory_anchor.schemas.codebase import Freshness
from memory_anchor.schemas.memory_model import STANDING
from memory_anchor.worker.context.model import ContextRequest, Section
from memory_anchor.worker.context.staleness import fact_flag, mark, marks, reconcile_facts
from memory_anchor.worker.memory.common import DEFAULT_AGENT
from memory_anchor.worker.memory.text import clip
from memory_anchor.worker.store.records import iso



def share(request: ContextRequest, name: str) -> float:
    """The fraction of the context budget a layer may use (its settings value in tokens)."""
    tokens = getattr(request.settings, name)
    return min(1.0, tokens / max(request.budget, 1))


def when(value: Any) -> str:
    return (iso(value) or "")[:16].replace("T", " ")


def identity_lines(items: list[dict[str, Any]]) -> list[str]:
    return [f"- {item['text']}" for item in items]


def identity_section(request: ContextRequest, conn, view) -> Section | None:
    model = request.memory
    if model is None:
        return None
    items = model.identity.context_items(request.project or "")
    if not items:
        return None
    return Section("identity", "Identity (always loaded; change it only with `memory-anchor identity`)",
                   identity_lines(items), always=True)  # fmt: skip


def active_facts(request: ContextRequest, limit: int = 80) -> list[dict[str, Any]]:
    model = request.memory
    if model is None:
        return []
    facts = model.facts.list(project=request.project, branch=request.branch, statuses=("active",), limit=limit)
    facts.sort(key=lambda f: (f["needs_verification"], -f["effective_confidence"], -f["seq"]))
    return facts


def standing_facts(conn, view, project: str | None, limit: int = 300) -> list[dict[str, Any]]:
    """Active rules and decisions of a project, newest first (one indexed query, no search)."""
    return facts_of_types(conn, view, project, STANDING, limit)


def facts_of_types(conn, view, project: str | None, types, limit: int = 300,
                   statuses: tuple[str, ...] = ("active",)) -> list[dict[str, Any]]:  # fmt: skip
    """Facts of the given categories (active ones, unless `statuses` says), newest first."""
    from memory_anchor.worker.memory.facts import decorate
    from memory_anchor.worker.store.records import Records

    filters: dict[str, Any] = {"kind": "fact", "type": list(types)}
    if project is not None:
        filters["project"] = project
    rows, _ = Records.query(conn, view, filters=filters, statuses=statuses, limit=limit)
    return [decorate(r) for r in rows]


def fact_line(fact: dict[str, Any], limit: int = 300, found: Freshness | None = None) -> str:
    """A fact with its flag, id, source (when it was said, in which session) and confidence, and the
    mark of its files when they changed since."""
    said = f"said {when(fact['happened_at'])}" if fact.get("happened_at") else ""
    if fact.get("session_id"):
        said += f"{' ' if said else ''}in session {str(fact['session_id'])[:8]}"
    return (f"- {clip(fact['text'], limit)}{fact_flag(fact, found)} (fact {fact['id'][:8]}, "
            f"{said + ', ' if said else ''}confidence {fact['effective_confidence']:.2f}){mark(found)}")  # fmt: skip


def facts_section(request: ContextRequest, conn, view) -> Section | None:
    facts = [f for f in active_facts(request) if (f.get("type") or "fact") not in STANDING]
    if not facts:
        return None
    found = marks(request.services, facts, request.project, request.session_id)
    facts = reconcile_facts(request, facts, found)
    return Section("facts", "Verified facts", [fact_line(f, found=found.get(f["id"])) for f in facts],
                   share=share(request, "context_budget_facts"))  # fmt: skip


def events_section(request: ContextRequest, conn, view) -> Section | None:
    model = request.memory
    if model is None:
        return None
    events = model.events.recent(request.project, agent_id=request.agent_id or DEFAULT_AGENT, limit=10,
                                 branch=request.branch, all_agents=False)  # fmt: skip
    if not events:
        return None
    lines = [f"- {when(e['happened_at'])}: {clip(e['text'], 200)}"
             + (f" @ {e['data'].get('where')}" if e["data"].get("where") else "") for e in events]  # fmt: skip
    return Section("events", "Recent events", lines, share=share(request, "context_budget_events"))


def conflicts_section(request: ContextRequest, conn, view) -> Section | None:
    model = request.memory
    if model is None:
        return None
    conflicts = model.conflicts.list("open", project=request.project, limit=5)
    if not conflicts:
        return None
    lines = []
    for c in conflicts:
        old, new = c.get("existing") or {}, c.get("candidate") or {}
        lines.append(f"- conflict {c['id']}: {clip(old.get('text', ''), 120)!r} vs {clip(new.get('text', ''), 120)!r}")
    lines.append("  (a human resolves them: `memory-anchor conflicts resolve ID keep_existing|keep_new|keep_both`)")
    return Section("conflicts", "Open conflicts", lines, share=0.1)


def approvals_section(request: ContextRequest, conn, view) -> Section | None:
    model = request.memory
    if model is None:
        return None
    pending = model.approvals.count_pending(request.project)
    if not pending:
        return None
    return Section("approvals", "Pending approvals",
                   [f"- {pending} proposal(s) wait for a human: `memory-anchor approvals list`"], share=0.05)  # fmt: skip
