"""The one error shape every endpoint returns."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorResponse(BaseModel):
    """`{"error": {"code", "message"}, "detail"}` with a 4xx status for bad input, 5xx for our faults."""

    error: ErrorDetail
    detail: str | None = Field(None, description="The message again, where mem0's SDK reads it")
