"""Reading query parameters the same way in every handler."""

from __future__ import annotations

import re

from aiohttp import web

from memory_anchor.schemas.common import SESSION_ID_MAX_CHARS, SESSION_ID_PATTERN
from memory_anchor.schemas.events import BRANCH_HEADER
from memory_anchor.worker.store.records import MAIN, RecordError


def int_param(request: web.Request, name: str, default: int, *, low: int = 0, high: int = 10_000) -> int:
    raw = request.query.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        raise RecordError(f"{name} must be an integer, got {raw!r}")
    if not low <= value <= high:
        raise RecordError(f"{name} must be between {low} and {high}")
    return value


def int_path(request: web.Request, name: str, what: str) -> int:
    """A numeric id from the path; 400 unless it is an integer SQLite can hold."""
    raw = request.match_info[name]
    try:
        value = int(raw)
    except ValueError:
        raise RecordError(f"{what} must be an integer")
    if not 0 <= value < 2**63:
        raise RecordError(f"{what} must be between 0 and {2**63 - 1}")
    return value


_SESSION_ID = re.compile(SESSION_ID_PATTERN)


def session_path(request: web.Request) -> str:
    """The session id in the path; 422 when it is longer than any session's or holds control characters."""
    value = request.match_info["session_id"]
    if len(value) > SESSION_ID_MAX_CHARS:
        raise RecordError(f"session_id is {len(value)} characters long; at most {SESSION_ID_MAX_CHARS} are accepted",
                          code="invalid_session_id", status=422)  # fmt: skip
    if not _SESSION_ID.match(value):
        raise RecordError("session_id must not be empty nor hold control characters (a NUL, a newline)",
                          code="invalid_session_id", status=422)  # fmt: skip
    return value


def branch_param(request: web.Request) -> str:
    return request.query.get("branch") or request.headers.get(BRANCH_HEADER) or MAIN


def as_of_param(request: web.Request) -> str | None:
    return request.query.get("as_of") or None


def actor(request: web.Request) -> str:
    return request.headers.get("X-Memory-Anchor-Agent") or request.query.get("agent_id") or "api"
