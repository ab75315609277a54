"""The memory model's sections of the SessionStart context (see worker/context.py).

Order: identity first, in full, outside the budget (`always`), read without any
search and falling back to the last good read; then facts (with
needs-verification flags), recent events, open conflicts and the count of
pending approvals. Shares follow seed 002 §5.2 (facts 2000 tokens, events 500 of
a 4000-token request); the settings `context_budget_facts` and
`context_budget_events` change them.
"""

from __future__ import annotations

from typing import Any

from worker.memory.common import DEFAULT_AGENT, one_line as _one_line
from worker.store.records import iso



def _model(request):
    services = request.services
    return getattr(services, "memory", None) if services is not None else None


def _share(request, name: str) -> float:
    """The fraction of the context budget a layer may use (its settings value in tokens)."""
    tokens = getattr(request.settings, name)
    return min(1.0, tokens / max(request.budget, 1))


def _section(*args, **kwargs):
    from worker.context import Section

    return Section(*args, **kwargs)


def identity_lines(items: list[dict[str, Any]]) -> list[str]:
    return [f"- {item['text']}" for item in items]


def identity_section(request, conn, view):
    model = _model(request)
    if model is None:
        return None
    items = model.identity.context_items(request.project or "")
    if not items:
        return None
    return _section("identity", "Identity (always loaded; change it only with `memory-anchor identity`)",
                    identity_lines(items), always=True)  # fmt: skip


def facts_section(request, conn, view):
    model = _model(request)
    if model is None:
        return None
    facts = model.facts.list(project=request.project, branch=request.branch, statuses=("active",), limit=60)
    if not facts:
        return None
    facts.sort(key=lambda f: (f["needs_verification"], -f["effective_confidence"], -f["seq"]))
    lines = []
    for fact in facts:
        flag = " [needs verification]" if fact["needs_verification"] else ""
        lines.append(f"- {_one_line(fact['text'], 300)}{flag} (fact {fact['id'][:8]}, confidence {fact['effective_confidence']:.2f})")
    return _section("facts", "Verified facts", lines, share=_share(request, "context_budget_facts"))


def events_section(request, conn, view):
    model = _model(request)
    if model is None:
        return None
    events = model.events.recent(request.project, agent_id=request.agent_id or DEFAULT_AGENT, limit=10,
                                 branch=request.branch, all_agents=False)  # fmt: skip
    if not events:
        return None
    lines = [f"- {(iso(e['happened_at']) or '')[:16].replace('T', ' ')}: {_one_line(e['text'], 200)}"
             + (f" @ {e['data'].get('where')}" if e["data"].get("where") else "") for e in events]  # fmt: skip
    return _section("events", "Recent events", lines, share=_share(request, "context_budget_events"))


def conflicts_section(request, conn, view):
    model = _model(request)
    if model is None:
        return None
    conflicts = model.conflicts.list("open", project=request.project, limit=5)
    if not conflicts:
        return None
    lines = []
    for c in conflicts:
        old, new = c.get("existing") or {}, c.get("candidate") or {}
        lines.append(f"- conflict {c['id']}: {_one_line(old.get('text', ''), 120)!r} vs {_one_line(new.get('text', ''), 120)!r}")
    lines.append("  (a human resolves them: `memory-anchor conflicts resolve ID keep_existing|keep_new|keep_both`)")
    return _section("conflicts", "Open conflicts", lines, share=0.1)


def approvals_section(request, conn, view):
    model = _model(request)
    if model is None:
        return None
    pending = model.approvals.count_pending(request.project)
    if not pending:
        return None
    return _section("approvals", "Pending approvals",
                    [f"- {pending} proposal(s) wait for a human: `memory-anchor approvals list`"], share=0.05)  # fmt: skip
