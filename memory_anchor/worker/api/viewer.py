"""The local web viewer: a static single-page app under /static, its page at `/`.

The page and its assets are public; the data they show are not. Opening
`/?token=<token>` (the URL `memory-anchor viewer` prints) trades the worker's
token for an HttpOnly, SameSite=Strict cookie and redirects to `/`, so the
token leaves the address bar and the page's own `fetch` calls are
authenticated by the cookie (see `auth_middleware`).
"""

from __future__ import annotations

import hmac
from pathlib import Path

from aiohttp import web

from memory_anchor.worker.api.middleware import TOKEN_COOKIE, error_response

routes = web.RouteTableDef()

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"

# Memory text is untrusted (tool outputs). The app renders it with textContent;
# this policy is the second line: no inline script, nothing from elsewhere.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}


@routes.get("/")
async def viewer_page(request: web.Request) -> web.StreamResponse:
    """The web viewer page; `?token=<token>` sets the session cookie and redirects to `/`."""
    token = request.query.get("token")
    if token is not None:
        expected = request.app["services"].token
        if not hmac.compare_digest(token.encode(), expected.encode()):
            return error_response(401, "invalid_token", "the token in the URL does not match this worker's")
        response = web.Response(status=303, headers={"Location": "/", **PAGE_HEADERS})
        response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="Strict", path="/")
        return response
    return web.FileResponse(STATIC_DIR / "index.html", headers=PAGE_HEADERS)


routes.static("/static", STATIC_DIR, show_index=False, follow_symlinks=False)
