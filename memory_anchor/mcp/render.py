"""Text the model reads: a compact index line per hit, full detail only on request.

Progressive disclosure is about tokens: an index line is ~20-40 words
(id, time, type, title, score), details are everything the record holds.
"""

from __future__ import annotations

import json
from typing import Any

from memory_anchor.schemas.common import RecordOut
from memory_anchor.schemas.observations import shorten

TITLE_CHARS = 100
TEXT_CHARS = 300


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


def index_line(rec: RecordOut) -> str:
    score = f" | score {rec.score:.2f}" if rec.score is not None else ""
    return f"- {rec.id} | {when(rec)} | {label(rec)}{by(rec)} | {title(rec)}{score}{code_mark(rec)}"


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
