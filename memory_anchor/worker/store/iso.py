"""Epoch-second columns of plain tables, turned into ISO 8601 for the wire."""

from __future__ import annotations

from typing import Any

from memory_anchor.worker.store.records import iso


def iso_fields(row: dict[str, Any]) -> dict[str, Any]:
    """Every `*_at` float becomes an ISO 8601 string."""
    return {k: iso(v) if k.endswith("_at") and isinstance(v, (int, float)) else v for k, v in row.items()}
