"""Importing Claude Code history: the events read from its transcripts, and what the worker did with them.

`memory-anchor import-history` reads the transcripts (memory_anchor/worker/capture/history.py) and
posts their events in batches to `POST /api/v1/events/history`; the worker takes them
through the same door as the hooks' events (checked, redacted, into the inbox), with
their original times.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, ValidationError

from memory_anchor.schemas.common import ID_PATTERN, refusal_text

MAX_HISTORY_BATCH = 2000
# The earliest time an imported event may claim: Claude Code did not exist before, and a time
# far outside what a date can show (1e308) is refused at the door rather than breaking every
# later read of the project's timeline.
EARLIEST_EVENT = 946684800.0  # 2000-01-01T00:00:00Z
FUTURE_SLACK = 86400.0  # a clock a day ahead is a wrong clock, not a future event


def _not_in_future(value: float | None) -> float | None:
    if value is not None and value > time.time() + FUTURE_SLACK:
        raise ValueError("is in the future (more than a day ahead of the worker's clock)")
    return value


EventTime = Annotated[
    float, Field(ge=EARLIEST_EVENT, allow_inf_nan=False, description="epoch seconds, 2000-01-01 to now + 1 day"),
    AfterValidator(_not_in_future),
]


class HistoryEventIn(BaseModel):
    """One hook event read from a transcript."""

    model_config = ConfigDict(extra="forbid")

    payload: dict[str, Any] = Field(description="the hook payload, as Claude Code's hook would have sent it")
    event_id: str = Field(min_length=1, max_length=300, pattern=ID_PATTERN,
                          description="stable id (from the transcript line), so importing again adds nothing")  # fmt: skip
    at: EventTime | None = Field(None, description="when it happened, epoch seconds (the transcript line's time)")


class HistoryImportRequest(BaseModel):
    """`POST /api/v1/events/history`: a batch of events of Claude Code's history.

    Each event is checked on its own: one that is malformed (a wrong type, a time out of range,
    an id too long) is refused with its reason in `refused`, and the others are taken."""

    model_config = ConfigDict(extra="forbid")

    events: list[HistoryEventIn] = Field(max_length=MAX_HISTORY_BATCH)
    claude: bool = Field(False, description="distil through Claude (spends the Claude allowance); default: locally")


class _Envelope(BaseModel):
    """The batch with its events unread: each is checked apart, so one bad event refuses only itself."""

    model_config = ConfigDict(extra="forbid")

    events: list[Any] = Field(max_length=MAX_HISTORY_BATCH)
    claude: StrictBool = False


class RefusedEvent(BaseModel):
    index: int
    reason: str


def checked_batch(body: dict[str, Any]) -> tuple[HistoryImportRequest, list[int], list[RefusedEvent]]:
    """The batch's valid events (and the index each had in the request), and each invalid one
    with its reason. Raises ValidationError only when the envelope itself is wrong."""
    envelope = _Envelope.model_validate(body)
    events: list[HistoryEventIn] = []
    indexes: list[int] = []
    refused: list[RefusedEvent] = []
    for index, item in enumerate(envelope.events):
        try:
            events.append(HistoryEventIn.model_validate(item))
            indexes.append(index)
        except ValidationError as exc:
            refused.append(RefusedEvent(index=index, reason=refusal_text(exc)))
    return HistoryImportRequest.model_construct(events=events, claude=envelope.claude), indexes, refused


class HistoryImported(BaseModel):
    """What became of a batch: new in the inbox, already there, or left out (and why)."""

    accepted: int = 0
    duplicates: int = 0
    skipped_sessions: list[str] = Field(default_factory=list,
                                        description="sessions the hooks captured live: not imported again")  # fmt: skip
    skipped_events: int = 0
    refused: list[RefusedEvent] = Field(default_factory=list)
