"""The one error shape every endpoint returns."""

from __future__ import annotations

from pydantic import Field

from memory_anchor.schemas.base import WireModel


class ErrorDetail(WireModel):
    code: str
    message: str


class ErrorResponse(WireModel):
    """`{"error": {"code", "message"}, "detail"}` with a 4xx status for bad input, 5xx for our faults."""

    error: ErrorDetail
    detail: str | None = Field(None, description="The message again, where mem0's SDK reads it")
