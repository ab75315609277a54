"""How an observation draft becomes the columns of an observation record."""

from __future__ import annotations

from typing import Any

from memory_anchor.schemas.observations import ObservationDraft


def observation_values(draft: ObservationDraft, payload: dict[str, Any]) -> dict[str, Any]:
    """Record columns for a distilled tool use; `text` is what search indexes."""
    data = draft.model_dump()
    if not data.get("tool_name") and isinstance(payload.get("tool_name"), str):
        data["tool_name"] = payload["tool_name"]
    parts = [draft.text()]
    files = list(dict.fromkeys([*draft.files_read, *draft.files_modified]))
    if files:
        parts.append("Files: " + ", ".join(files))
    if draft.command:
        parts.append(f"Command: {draft.command}")
    return {
        "text": "\n".join(parts),
        "title": draft.title,
        "type": draft.type,
        "layer": draft.layer,
        "data": data,
    }
