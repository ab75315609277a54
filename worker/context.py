"""The context SessionStart injects: ordered sections within a token budget.

Each section is a function `(ContextRequest, conn, View) -> Section | None`.
Sections marked `always` (identity) are included in full, outside the budget;
the others fill the budget in the order of `SECTIONS` and are cut at a line
boundary when it runs out.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from memory_anchor.projects import context_cache_path
from worker.memory.common import one_line as _one_line
from worker.store.records import Records, View, iso, resolve_view


def estimate_tokens(text: str) -> int:
    """About four characters a token: close enough to budget English and code."""
    return (len(text) + 3) // 4


@dataclass
class ContextRequest:
    project: str
    source: str = "startup"
    session_id: str | None = None
    branch: str = "main"
    agent_id: str | None = None
    budget: int = 3000
    services: Any = None

    @property
    def settings(self):
        """The worker's settings, or the defaults when built outside a worker (tests)."""
        if self.services is not None:
            return self.services.settings
        from memory_anchor.settings import Settings

        return Settings()


@dataclass
class Section:
    name: str
    title: str
    lines: list[str]
    always: bool = False  # outside the budget, never cut (identity)
    share: float = 1.0  # at most this fraction of the budget


SectionBuilder = Callable[[ContextRequest, Any, View], "Section | None"]


@dataclass
class BuiltContext:
    text: str
    tokens: int
    sections: list[str] = field(default_factory=list)


def recent_summaries(request: ContextRequest, conn, view: View) -> Section | None:
    page = Records.latest(conn, view, filters={"kind": "summary", "project": request.project}, limit=5)
    if not page:
        return None
    lines = [f"- {_when(r)}: {_one_line(r['text'], 400)}" for r in page]
    return Section("summaries", "Recent sessions", lines, share=0.35)


def recent_observations(request: ContextRequest, conn, view: View) -> Section | None:
    page = Records.latest(conn, view, filters={"kind": "observation", "project": request.project}, limit=30)
    if not page:
        return None
    lines = [f"- [{r['type'] or 'note'}] {_one_line(r['title'] or r['text'], 160)} (id {r['id'][:8]}, {_when(r)})" for r in page]
    return Section("observations", "Recent observations", lines, share=0.5)


def _when(record: dict[str, Any]) -> str:
    return (iso(record.get("happened_at")) or "")[:16].replace("T", " ")


# The sections in the order Claude reads them. Identity comes first and is never
# cut (seed 002's red line); the rest share the budget in this order.
from worker.branching.context import branch_section  # noqa: E402
from worker.memory.context_sections import (  # noqa: E402
    approvals_section,
    conflicts_section,
    events_section,
    facts_section,
    identity_section,
)

SECTIONS: list[SectionBuilder] = [
    identity_section,
    branch_section,
    facts_section,
    events_section,
    conflicts_section,
    approvals_section,
    recent_summaries,
    recent_observations,
]

FIRST_RUN_NOTE = (
    "Memory Anchor is active for this project but has no memories yet. "
    "Tool uses, prompts and session summaries will be remembered from now on; "
    "use the memory-search skill or the `search` MCP tool to recall them later."
)


def build_context(request: ContextRequest, conn) -> BuiltContext:
    try:
        view = resolve_view(conn, request.branch)
    except Exception:  # an unreadable branch registry must not cost the identity section
        logging.getLogger(__name__).exception("cannot resolve branch %s; reading main", request.branch)
        view = View()
    sections: list[Section] = []
    for builder in SECTIONS:
        try:
            section = builder(request, conn, view)
        except Exception:  # one broken section must never blank the others (identity first)
            logging.getLogger(__name__).exception("context section %s failed", builder.__name__)
            continue
        if section is not None and section.lines:
            sections.append(section)
    content = [s for s in sections if not s.always]
    if not content:
        fixed = [s for s in sections if s.always]
        body = "\n\n".join(_render(s, s.lines) for s in fixed)
        text = "# Memory Anchor\n\n" + (body + "\n\n" if body else "") + FIRST_RUN_NOTE
        return BuiltContext(text, estimate_tokens(text), [s.name for s in fixed])
    parts, used, names = [], 0, []
    for section in sections:
        if section.always:
            parts.append(_render(section, section.lines))
            names.append(section.name)
            continue
        allowance = min(int(request.budget * section.share), request.budget - used)
        kept: list[str] = []
        cost = estimate_tokens(section.title) + 2
        for line in section.lines:
            line_cost = estimate_tokens(line) + 1
            if cost + line_cost > allowance:
                break
            kept.append(line)
            cost += line_cost
        if kept:
            parts.append(_render(section, kept))
            used += cost
            names.append(section.name)
    header = f"# Memory Anchor (project {request.project or 'unknown'}, branch {request.branch})"
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
