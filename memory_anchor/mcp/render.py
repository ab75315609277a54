"""Text the model reads: a compact index line per hit, full detail only on request.

Progressive disclosure is about tokens: a search hit is an index line (id, time,
type, title, score, how often it was said) and the start of its text (~60-90
words in all); details are everything the record holds.
"""

from __future__ import annotations

import json
from typing import Any

from memory_anchor.core.projects import relative_once
from memory_anchor.schemas.common import RecordOut
from memory_anchor.schemas.observations import shorten

TITLE_CHARS = 100
TEXT_CHARS = 300
SNIPPET_CHARS = 220
CHANGED_SHOWN = 4  # files named on a session hit's line; the rest are counted


def record(raw: dict[str, Any]) -> RecordOut:
    return RecordOut.model_validate(raw)


def when(rec: RecordOut) -> str:
    stamp = rec.happened_at or rec.created_at or ""
    return stamp[:16].replace("T", " ")


def label(rec: RecordOut) -> str:
    return f"{rec.kind}/{rec.type}" if rec.type and rec.type != rec.kind else rec.kind


def title(rec: RecordOut) -> str:
    return shorten(rec.title or rec.memory or "(untitled)", TITLE_CHARS)


def code_mark(rec: RecordOut) -> str:
    """' | STALE: app/cart.py changed since, 3 commits' for a memory whose code moved on, else ''."""
    if rec.freshness is None or not rec.freshness.stale:
        return ""
    return f" | STALE ({rec.freshness.state}): {rec.freshness.detail}"


def by(rec: RecordOut) -> str:
    """" | by subagent <type>" for a subagent's tool use (the model should know whose work it was)."""
    subagent = rec.data.get("subagent")
    if not isinstance(subagent, dict):
        return ""
    return f" | by subagent {subagent.get('type') or subagent.get('id')}"


def repeats(rec: RecordOut) -> str:
    """" | said 3 times" for a memory stored more than once, " | +8 more like it" for others folded under
    its title (the search returns each once: memory_anchor/worker/index/search.py)."""
    extra = rec.model_extra or {}
    parts = []
    if isinstance(extra.get("count"), int) and extra["count"] > 1:
        parts.append(f"said {extra['count']} times")
    if isinstance(extra.get("similar"), int) and extra["similar"] > 0:
        parts.append(f"+{extra['similar']} more like it")
    return "".join(f" | {part}" for part in parts)


def index_line(rec: RecordOut) -> str:
    score = f" | score {rec.score:.2f}" if rec.score is not None else ""
    return f"- {rec.id} | {when(rec)} | {label(rec)}{by(rec)} | {title(rec)}{score}{repeats(rec)}{code_mark(rec)}"


def snippet(rec: RecordOut, limit: int = SNIPPET_CHARS) -> str:
    """The start of what the record says beyond its title, on one line: enough to tell hits apart
    and often to answer, without fetching the details."""
    text = " ".join((rec.memory or "").split())
    head = " ".join((rec.title or "").split()) or title(rec).rstrip("…")  # what the index line showed
    if head and text.startswith(head):
        text = text[len(head):].lstrip(" :-|")
    return shorten(text, limit) if text else ""


def changed_files(rec: RecordOut) -> str:
    """"changed: app/cart.py, app/tax.py (+3 more)" for a session's summary: the files its work
    changed, which "how did we fix X?" most often wants; its text names them only far down."""
    files = rec.data.get("files_changed") if rec.kind == "summary" else None
    if not isinstance(files, list):
        return ""
    names = relative_once(files, rec.project)
    if not names:
        return ""
    more = len(names) - CHANGED_SHOWN
    return "changed: " + ", ".join(names[:CHANGED_SHOWN]) + (f" (+{more} more)" if more > 0 else "")


def hit_lines(rec: RecordOut) -> str:
    """A search hit: its index line, then its snippet and (a session) the files it changed, indented."""
    more = [line for line in (snippet(rec), changed_files(rec)) if line]
    return "\n".join([index_line(rec), *(f"  {line}" for line in more)])


def text_line(rec: RecordOut) -> str:
    """An index line plus the record's text, for the seed-004 style memory_* tools."""
    return index_line(rec) + f"\n  {shorten(rec.memory, TEXT_CHARS)}"


def detail(rec: RecordOut) -> str:
    """Everything about one record, for get_observations."""
    lines = [f"## {rec.id}: {rec.title or shorten(rec.memory, TITLE_CHARS)}"]
    meta = {
        "kind": rec.kind,
        "type": rec.type,
        "layer": rec.layer,
        "when": rec.happened_at or rec.created_at,
        "session_id": rec.session_id,
        "project": rec.project,
        "branch": rec.branch,
        "version": rec.version,
        "confidence": rec.confidence,
        "code": f"{rec.freshness.state}" + (f": {rec.freshness.detail}" if rec.freshness.detail else "")
        if rec.freshness is not None and rec.freshness.state != "unknown" else None,
    }
    lines += [f"{key}: {value}" for key, value in meta.items() if value not in (None, "")]
    if rec.memory:
        lines += ["", rec.memory]
    data = {k: v for k, v in rec.data.items() if v not in (None, "", [], {})}
    if data:
        lines += ["", "details: " + json.dumps(data, ensure_ascii=False, indent=1)]
    return "\n".join(lines)
