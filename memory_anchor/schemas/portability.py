"""Export / import of the whole memory as JSON Lines, and the admin replies.

An export file is one JSON object per line:

    {"type": "header", "format": "memory-anchor-export", "format_version": 1, ...}
    {"type": "row", "table": "records", "row": {"seq": 1, "id": "...", ...}}
    ...
    {"type": "end", "rows": N}

The header names the schema migrations of the source, so an import into an
older worker fails clearly instead of half-loading. The end line carries the
row count, so a truncated file is refused rather than imported in part. A
bytes value (no table has one today) is written as {"$bytes": "<base64>"}.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

EXPORT_FORMAT = "memory-anchor-export"
EXPORT_FORMAT_VERSION = 1
EXPORT_MEDIA_TYPE = "application/x-ndjson"

# A column value in an export: what SQLite can hold, bytes wrapped as {"$bytes": ...}.
Scalar = str | int | float | bool | None | dict[str, str]


class _Line(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ExportHeader(_Line):
    type: Literal["header"] = "header"
    format: Literal["memory-anchor-export"] = EXPORT_FORMAT
    format_version: int = EXPORT_FORMAT_VERSION
    worker_version: str
    exported_at: str = Field(description="ISO 8601, UTC")
    head_seq: int = Field(description="Last record seq in the export")
    migrations: list[str] = Field(description="Schema migrations applied in the source")
    tables: dict[str, int] = Field(description="Rows per exported table, in file order")


class ExportRow(_Line):
    type: Literal["row"] = "row"
    table: str = Field(min_length=1)
    row: dict[str, Scalar]


class ExportedRecord(BaseModel):
    """The columns of a `records` row an import checks before writing it; the
    others are checked by SQLite's own constraints."""

    model_config = ConfigDict(extra="allow", strict=True)

    seq: int = Field(ge=1)
    id: str = Field(min_length=1)
    version: int = Field(ge=1)
    kind: str = Field(min_length=1)
    op: Literal["put", "delete"]
    branch: str = Field(min_length=1)
    data: str = Field(description="JSON object text")
    metadata: str = Field(description="JSON object text")
    happened_at: float | int
    created_at: float | int


class ExportEnd(_Line):
    type: Literal["end"] = "end"
    rows: int = Field(ge=0, description="Number of row lines in the file")


class ImportResult(BaseModel):
    imported: dict[str, int] = Field(description="Rows written per table")
    rows: int
    head_seq: int
    queued_for_embedding: int = Field(description="Live record versions queued to rebuild the vector index")
    seconds: float


class ReindexResult(BaseModel):
    indexed: int = Field(description="Record versions re-embedded")
    seconds: float

