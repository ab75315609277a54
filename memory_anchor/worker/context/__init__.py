"""The SessionStart context: a briefing built from ordered sections within a budget.

One package owns every section (no module outside it builds context lines):

- `model`: ContextRequest, the services it reads (ContextServices), Section, BuiltContext, the budgets;
- `build`: the section order, the token and character budgets, the cache file;
- `layers`: identity (always first, never cut), verified facts, events,
  conflicts, approvals (the memory model's layers);
- `knowledge`: standing rules and decisions, open next steps;
- `sessions`: the last sessions' outcomes, recent activity with repeats collapsed;
- `branches`: which memory branch is active;
- `recall`: per-prompt recall, the few memories worth adding to a prompt.

Lines are cut with `memory_anchor.worker.memory.text.clip`: only at word boundaries, in any script.

Layer rule (docs/architecture.md): may import branching/, memory/ and the layers below them.
"""

from memory_anchor.worker.context.build import FIRST_RUN_NOTE, SECTIONS, build_context, write_cache
from memory_anchor.worker.context.model import MAX_CHARS, BuiltContext, ContextRequest, ContextServices, Section, estimate_tokens

__all__ = [
    "FIRST_RUN_NOTE", "MAX_CHARS", "SECTIONS", "BuiltContext", "ContextRequest", "ContextServices", "Section", "build_context",
    "estimate_tokens", "write_cache",
]  # fmt: skip
