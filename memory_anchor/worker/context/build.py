"""Building the SessionStart context: sections in order, within two budgets.

Each section is a function `(ContextRequest, conn, View) -> Section | None`.
Sections marked `always` (identity) are included in full; the others fill the
token budget in the order of `SECTIONS`, each within its share, cut at a line
boundary when it runs out. The whole text, identity included, also stays within
`request.max_chars` (Claude Code's 10,000-character cap on injected context).
A line that says what an earlier line already said is left out.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from memory_anchor.core.projects import context_cache_path
from memory_anchor.worker.context.branches import branch_section
from memory_anchor.worker.context.knowledge import ask_once_section, next_steps_section, rules_section, said_once_section
from memory_anchor.worker.context.layers import approvals_section, conflicts_section, events_section, facts_section, identity_section
from memory_anchor.worker.context.model import BuiltContext, ContextRequest, Section, SectionBuilder, estimate_tokens
from memory_anchor.worker.context.sessions import activity_section, outcomes_section
from memory_anchor.worker.memory.text import line_key
from memory_anchor.worker.store.dialect import one_moment, one_step
from memory_anchor.worker.store.records import View, resolve_view

log = logging.getLogger(__name__)

# The order Claude reads them: who we are, what holds (rules, decisions), what is
# open, what else is known, then what happened lately. Identity is never cut
# (what an agent is must always reach it); the rest share the budget in this order.
SECTIONS: list[SectionBuilder] = [
    identity_section,
    branch_section,
    rules_section,
    said_once_section,
    ask_once_section,
    next_steps_section,
    facts_section,
    events_section,
    conflicts_section,
    approvals_section,
    outcomes_section,
    activity_section,
]

FIRST_RUN_NOTE = (
    "Memory Anchor is active for this project but has no memories yet. "
    "Tool uses, prompts and session summaries will be remembered from now on; "
    "use the memory-search skill or the `search` MCP tool to recall them later."
)


def build_context(request: ContextRequest, conn) -> BuiltContext:
    # The sections read one moment of memory: a root cause written between the facts section and the
    # session lines (another worker's, on a team database) would be left out of both.
    with one_moment(conn):
        sections = _sections(request, conn)
    return _fit(request, sections)


def _sections(request: ContextRequest, conn) -> list[Section]:
    try:
        view = resolve_view(conn, request.branch)
    except Exception:  # an unreadable branch registry must not cost the identity section
        log.exception("cannot resolve branch %s; reading main", request.branch)
        view = View()
    sections: list[Section] = []
    for builder in SECTIONS:
        try:
            with one_step(conn):
                section = builder(request, conn, view)
        except Exception:  # one broken section must never blank the others (identity first)
            log.exception("context section %s failed", builder.__name__)
            continue
        if section is not None and section.lines:
            sections.append(section)
    return sections


def _fit(request: ContextRequest, sections: list[Section]) -> BuiltContext:
    """The sections in order, each within its share of the token budget, all within `max_chars`."""
    content = [s for s in sections if not s.always]
    if not content:
        fixed = [s for s in sections if s.always]
        body = "\n\n".join(_render(s, s.lines) for s in fixed)
        text = "# Memory Anchor\n\n" + (body + "\n\n" if body else "") + FIRST_RUN_NOTE
        return BuiltContext(text, estimate_tokens(text), [s.name for s in fixed])
    header = f"# Memory Anchor (project {request.project or 'unknown'}, branch {request.branch})"
    parts, used, names = [], 0, []
    chars = len(header)
    seen: set[str] = set()
    for section in sections:
        if section.always:
            parts.append(_render(section, section.lines))
            names.append(section.name)
            chars += len(parts[-1]) + 2
    for section in sections:
        if section.always:
            continue
        allowance = min(int(request.budget * section.share), request.budget - used)
        kept: list[str] = []
        cost = estimate_tokens(section.title) + 2
        size = len(section.title) + 6
        for line in section.lines:
            key = line_key(line)
            if key in seen and line.startswith("- "):
                continue  # said already (a fact repeated as an outcome, …)
            line_cost = estimate_tokens(line) + 1
            if cost + line_cost > allowance or chars + size + len(line) + 1 > request.max_chars:
                break
            kept.append(line)
            seen.add(key)
            cost += line_cost
            size += len(line) + 1
        if kept:
            parts.append(_render(section, kept))
            used += cost
            chars += size
            names.append(section.name)
    text = header + "\n\n" + "\n\n".join(parts)
    return BuiltContext(text, estimate_tokens(text), names)


def _render(section: Section, lines: list[str]) -> str:
    return f"## {section.title}\n" + "\n".join(lines)


def write_cache(data_dir: Path, project: str, text: str) -> None:
    """Keep the last context on disk so a hook can print it when the worker is down."""
    path = context_cache_path(data_dir, project)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{time.time_ns()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
