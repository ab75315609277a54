"""What holds and what is open: standing rules and decisions, open next steps.

Rules and decisions are verified facts of the standing categories (rule,
decision, preference, convention), whether the user stated them in a prompt
(local cue words) or Claude extracted them; a later change of mind has already
superseded the old version, so only the current one is listed. Open next steps
are the open items sessions left undone at their end (memory_anchor/worker/memory/open_items.py),
a handful, the freshest first.
"""

from __future__ import annotations

from memory_anchor.worker.context.layers import standing_facts, when
from memory_anchor.worker.context.model import ContextRequest, Section
from memory_anchor.worker.context.staleness import fact_flag, mark, marks, reconcile_facts
from memory_anchor.worker.memory.text import clip
from memory_anchor.worker.store.records import Records

NEXT_STEPS = 5  # a handful, the freshest first; older ones age out (OpenItems.fresh)

LABELS = {"rule": "rule", "convention": "rule", "decision": "decision", "preference": "preference"}


def rules_section(request: ContextRequest, conn, view) -> Section | None:
    facts = standing_facts(conn, view, request.project)
    if not facts:
        return None
    facts.sort(key=lambda f: (f["needs_verification"], -f["seq"]))  # the newest statement first
    facts = facts[:40]
    found = marks(request.services, facts, request.project, request.session_id)
    facts = reconcile_facts(request, facts, found)
    lines = []
    for fact in facts:
        state = found.get(fact["id"])
        lines.append(f"- {LABELS[fact['type']]}: {clip(fact['text'], 260)}{fact_flag(fact, state)} (fact {fact['id'][:8]}){mark(state)}")
    return Section("rules", "Standing rules and decisions (follow them unless the user changes them)", lines, share=0.3)


def next_steps_section(request: ContextRequest, conn, view) -> Section | None:
    model = request.memory
    if model is None:
        return None
    latest, _ = Records.query(conn, view, filters={"kind": "summary", "project": request.project}, order="happened_at DESC",
                              limit=1)  # fmt: skip
    reference = latest[0].get("happened_at") if latest else None
    # Once per HEAD: steps a commit did since the last briefing are closed before the list is read.
    if request.settings.code_checks:
        model.steps_done.close(request.project)
    items = model.open_items.fresh(request.project, reference=reference, limit=NEXT_STEPS, conn=conn)
    if not items:
        return None
    # The number names the step to `memory-anchor forget step N` and the forget_memory tool.
    lines = [f"- {clip(item['text'], 220)} (step {item['id']}, open since {when(item['opened_at'])})" for item in items]
    return Section("next_steps", "Open next steps (left by earlier sessions)", lines, share=0.15)
