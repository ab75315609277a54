"""How stored rows look on the wire: one conversion, used by every endpoint."""

from __future__ import annotations

from typing import Any

from memory_anchor.worker.store.records import iso

_INTERNAL = ("text", "op", "content_hash", "fact_key", "source_id", "tool_use_id")


def record_to_wire(record: dict[str, Any]) -> dict[str, Any]:
    """A record version as the API returns it: mem0's `memory` for the text, ISO times."""
    out = {k: v for k, v in record.items() if k not in _INTERNAL}
    out["memory"] = record.get("text", "")
    out["deleted"] = record.get("op") == "delete"
    out["happened_at"] = iso(record.get("happened_at"))
    out["created_at"] = iso(record.get("created_at"))
    if record.get("tool_use_id"):
        out["tool_use_id"] = record["tool_use_id"]
    if record.get("fact_key"):
        out["fact_key"] = record["fact_key"]
    if record.get("source_id"):
        out["source_id"] = record["source_id"]
    if "score" in record:
        out["score"] = round(float(record["score"]), 6)
    return out
