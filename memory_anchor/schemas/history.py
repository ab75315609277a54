"""Importing Claude Code history: the events read from its transcripts, and what the worker did with them.

`memory-anchor import-history` reads the transcripts (memory_anchor/worker/capture/history.py) and
posts their events in batches to `POST /api/v1/events/history`; the worker takes them
through the same door as the hooks' events (checked, redacted, into the inbox), with
their original times.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

MAX_HISTORY_BATCH = 2000


class HistoryEventIn(BaseModel):
    """One hook event read from a transcript."""

    model_config = ConfigDict(extra="forbid")

    payload: dict[str, Any] = Field(description="the hook payload, as Claude Code's hook would have sent it")
    event_id: str = Field(min_length=1, max_length=300,
                          description="stable id (from the transcript line), so importing again adds nothing")  # fmt: skip
    at: float | None = Field(None, ge=0, description="when it happened, epoch seconds (the transcript line's time)")


class HistoryImportRequest(BaseModel):
    """`POST /api/v1/events/history`: a batch of events of Claude Code's history."""

    model_config = ConfigDict(extra="forbid")

    events: list[HistoryEventIn] = Field(max_length=MAX_HISTORY_BATCH)
    claude: bool = Field(False, description="distil through Claude (spends the Claude allowance); default: locally")


class RefusedEvent(BaseModel):
    index: int
    reason: str


class HistoryImported(BaseModel):
    """What became of a batch: new in the inbox, already there, or left out (and why)."""

    accepted: int = 0
    duplicates: int = 0
    skipped_sessions: list[str] = Field(default_factory=list,
                                        description="sessions the hooks captured live: not imported again")  # fmt: skip
    skipped_events: int = 0
    refused: list[RefusedEvent] = Field(default_factory=list)
