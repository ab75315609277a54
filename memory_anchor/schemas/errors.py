"""The one error shape every endpoint returns."""

from __future__ import annotations

from pydantic import BaseModel


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorResponse(BaseModel):
    """`{"error": {"code", "message"}}` with a 4xx status for bad input, 5xx for our faults."""

    error: ErrorDetail
