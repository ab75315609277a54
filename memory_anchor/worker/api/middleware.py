"""Authentication and the JSON error shape, for every route."""

from __future__ import annotations

import hmac
import json
import logging

from aiohttp import web
from pydantic import ValidationError

from memory_anchor.worker.store.errors import StorageUnavailable
from memory_anchor.worker.store.records import RecordError

log = logging.getLogger(__name__)

# "/" is the web viewer's page: it checks its own `?token=` and holds no data;
# /static/ holds its assets. The data it shows come from authenticated /api calls.
PUBLIC_PATHS = {"/api/health", "/"}
TOKEN_COOKIE = "memory_anchor_token"
AUTH_SCHEMES = ("bearer", "token")
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def error_response(status: int, code: str, message: str, *, headers: dict[str, str] | None = None) -> web.Response:
    # `detail` is where mem0's SDK (and Django REST clients) look for the message.
    return web.json_response({"error": {"code": code, "message": message}, "detail": message}, status=status, headers=headers)


@web.middleware
async def auth_middleware(request: web.Request, handler):
    if request.path in PUBLIC_PATHS or request.path.startswith("/static/"):
        return await handler(request)
    expected = request.app["services"].token
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    # mem0's MemoryClient sends `Token <key>`; everything else here sends `Bearer <token>`.
    supplied = credentials.strip() if scheme.lower() in AUTH_SCHEMES else ""
    by_cookie = not supplied and bool(request.cookies.get(TOKEN_COOKIE))
    supplied = supplied or request.cookies.get(TOKEN_COOKIE, "")
    if by_cookie and request.method not in SAFE_METHODS and "Origin" not in request.headers:
        # The cookie is the viewer's: its page's writes carry their Origin (checked in hosts.py); a
        # write that carries the cookie but no Origin comes from a browser that hides where it was made.
        return error_response(403, "invalid_origin", "a write authenticated by the viewer's cookie must come from the viewer")
    if not supplied:
        return error_response(401, "missing_token", "send `Authorization: Bearer <token>` (see worker.json)")
    if not hmac.compare_digest(supplied.encode(), expected.encode()):
        return error_response(401, "invalid_token", "the bearer token does not match this worker's")
    return await handler(request)


@web.middleware
async def error_middleware(request: web.Request, handler):
    """Turn every failure into `{"error": {...}}`; never a stack trace on the wire."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        code = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}.get(
            exc.status, "http_error"
        )
        allow = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None
        return error_response(exc.status, code, exc.reason or exc.text or "request failed", headers=allow)
    except RecordError as exc:
        return error_response(exc.status, exc.code, str(exc))
    except ValidationError as exc:
        return error_response(422, "invalid_request", _describe_validation(exc))
    except json.JSONDecodeError as exc:
        return error_response(400, "invalid_json", f"request body is not valid JSON: {exc.msg}")
    except StorageUnavailable as exc:
        # Hooks never come here (capture is local); a read or a write of the shared memory does.
        return error_response(503, "storage_unavailable", f"the team store is unreachable: {exc}")
    except Exception as exc:
        if request.app["services"].disk.explains(exc):
            request.app["services"].disk.report(exc, f"{request.method} {request.path}")
            return error_response(
                507, "storage_full", "the disk holding Memory Anchor's data is full: free some space and "
                "send this again (nothing already stored is lost; see the worker's log)",
            )  # fmt: skip
        log.exception("unhandled error on %s %s", request.method, request.path)
        return error_response(500, "internal_error", "the worker hit an internal error; see its log")


def _describe_validation(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err.get("loc", ())) or "body"
        parts.append(f"{where}: {err.get('msg')}")
    return "; ".join(parts)


async def read_json_object(request: web.Request) -> dict:
    """The request body as a JSON object, or a clear 400."""
    raw = await request.read()
    if not raw.strip():
        raise RecordError("request body is empty; send a JSON object", code="invalid_json")
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RecordError(f"request body is not valid JSON: {exc}", code="invalid_json")
    except RecursionError:
        raise RecordError("request body nests too deeply to be read", code="invalid_json")
    if not isinstance(body, dict):
        raise RecordError("request body must be a JSON object", code="invalid_json")
    return body
