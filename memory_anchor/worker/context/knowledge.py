"""What holds and what is open: standing rules and decisions, what the user said once, open next steps.

Rules and decisions are verified facts of the standing categories (rule,
decision, preference, convention), whether the user stated them in a prompt
(local cue words) or Claude extracted them; a later change of mind has already
superseded the old version, so only the current one is listed.

What the user said once in a form that is usually, not always, a lasting
instruction ("make sure that handoff updates siyuan", "be sure to also use
serena") waits for confirmation, but not where nobody looks: it is briefed in
the user's own words (the quote it stands on), with the day it was said, under
a heading that says it is not yet confirmed. Claude reads the user's words and
can weigh them; a rule shown as plain fact would claim more than memory knows,
and one kept in Approvals reaches nobody. Approving it (or the user saying it
again) makes it a standing rule; rejecting it takes it out. A reply that picked
among Claude's options, and a rule the source re-check doubted, are not the
user's instructions and are never briefed as such. The latest few replies to
options are listed for Claude to ask the user about once, in their words; the
answer, carried by the record_user_answer tool, settles them. Open next steps
are the open items sessions left undone at their end (memory_anchor/worker/memory/open_items.py),
a handful, the freshest first.
"""

from __future__ import annotations

from memory_anchor.schemas.memory_model import STANDING
from memory_anchor.worker.context.layers import facts_of_types, standing_facts, when
from memory_anchor.worker.memory.ask_once import replies_to_ask, said_at
from memory_anchor.worker.memory.facts import on_their_words
from memory_anchor.worker.memory.instructions import HEDGED
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


# The freshest first, as many as the section's share of the budget holds (about 14 lines of 200
# characters); older ones stay in Approvals until confirmed.
SAID_ONCE = 20


def said_once_section(request: ContextRequest, conn, view) -> Section | None:
    """The user's instructions said once and not yet confirmed, in their words, with the day they said them."""
    facts = [f for f in facts_of_types(conn, view, request.project, STANDING, statuses=("pending",))
             if _said_by_the_user(f)]  # fmt: skip
    if not facts:
        return None
    facts.sort(key=lambda f: -float((f.get("data") or {}).get("verified_at") or 0))  # the latest said first
    lines = []
    for fact in facts[:SAID_ONCE]:
        # The day it was said. Not how often: a resumed session's transcript copies the earlier
        # conversation, so one saying can sit in two sessions (said again for real, it is confirmed).
        said = when((fact.get("data") or {}).get("verified_at"))[:10]
        lines.append(f'- "{clip(_their_words(fact), 260)}" (said {said}; fact {fact["id"][:8]})')
    return Section("said_once", "Instructions the user gave once (their own words, not yet confirmed: "
                   "follow them unless the user says otherwise)", lines, share=0.25)  # fmt: skip


def ask_once_section(request: ContextRequest, conn, view) -> Section | None:
    """Replies that picked among Claude's options and may hold beyond that task, for Claude to ask the
    user about once (memory/ask_once.py): possible decisions, not instructions, so never followed before the
    user confirms them."""
    replies = replies_to_ask(conn, view, request.project, request.session_id)
    if not replies:
        return None
    lines = [f'- "{clip(_their_words(f), 260)}" (their reply to your options, {when(said_at(f))[:10]}; fact {f["id"][:8]})'
             for f in replies]  # fmt: skip
    # "Possible decisions": what they may be, and the heading says they are not followed yet.
    return Section("ask_once", "Possible decisions to ask the user about once (their replies to your options: not "
                   "followed until they say these hold beyond that task; record their answer with "
                   "record_user_answer)", lines, share=0.1)  # fmt: skip


def _their_words(fact: dict) -> str:
    """The fact's text when it is the user's words as said (the local reader keeps the part of a long
    sentence that gives the instruction), else the quote it stands on (Claude's wording is not theirs)."""
    quote = str((fact.get("data") or {}).get("quote") or "")
    text = str(fact.get("text") or "")

    def normal(value: str) -> str:
        return " ".join(value.lower().split()).strip(" .!?;")

    return text if text and normal(text) in normal(quote) else quote


def _said_by_the_user(fact: dict) -> bool:
    """A pending rule on the user's words, said as an instruction (not a reply that picked an option)."""
    return on_their_words(fact) and float(fact.get("confidence") or 0) >= HEDGED


def next_steps_section(request: ContextRequest, conn, view) -> Section | None:
    model = request.memory
    if model is None:
        return None
    latest, _ = Records.query(conn, view, filters={"kind": "summary", "project": request.project}, order="happened_at DESC",
                              limit=1)  # fmt: skip
    reference = latest[0].get("happened_at") if latest else None
    # Steps a commit did are shown closed; the git watch and the maintenance job record it (a briefing only reads).
    done = [step["id"] for step in model.steps_done.pending(request.project)] if request.settings.code_checks else []
    items = model.open_items.fresh(request.project, reference=reference, limit=NEXT_STEPS, conn=conn, done=done)
    if not items:
        return None
    # The number names the step to `memory-anchor forget step N` and the forget_memory tool.
    lines = [f"- {clip(item['text'], 220)} (step {item['id']}, open since {when(item['opened_at'])})" for item in items]
    return Section("next_steps", "Open next steps (left by earlier sessions)", lines, share=0.15)
