"""Serve only requests addressed to this worker: the DNS-rebinding defence.

A web page on evil.example can make its own name resolve to 127.0.0.1 and so
reach a local server from the user's browser; the browser then still sends
`Host: evil.example` (and `Origin: http://evil.example`). The worker answers
only requests whose Host is its own loopback address or `localhost`, with or
without a port.

The browser door. A page on another port of this machine (any local dev server) is
"same-site" to the browser: it gets the viewer's SameSite=Strict cookie sent along, and a
`text/plain` POST needs no preflight. So every request a browser says comes from a page
must come from the worker's own origin, port included: an Origin header (sent with every
POST, and by `null` pages) must be `http://<the Host it was sent to>`, and `Sec-Fetch-Site`,
when sent, must say `same-origin` (or `none`: the user typed the address). Programs (hooks,
the CLI, MCP, SDKs) send neither and are unaffected; so is the viewer, served from here.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from aiohttp import web

from memory_anchor.worker.api.middleware import PUBLIC_PATHS, error_response

LOCAL_NAMES = ("localhost",)


def allowed_hosts(bound_host: str) -> frozenset[str]:
    """Host names (without port, lower case) this worker answers to."""
    names = {bound_host.strip("[]").lower(), *LOCAL_NAMES}
    if bound_host == "localhost":
        names.update({"127.0.0.1", "::1"})
    return frozenset(names)


def host_name(value: str) -> str:
    """`127.0.0.1:37777` → `127.0.0.1`, `[::1]:80` → `::1`, `LocalHost` → `localhost`."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


@web.middleware
async def host_middleware(request: web.Request, handler):
    allowed = request.app["allowed_hosts"]
    host = request.headers.get("Host")
    # A request without Host (HTTP/1.0 from a local tool) cannot come from a rebound page.
    if host is not None and host_name(host) not in allowed:
        return error_response(
            403, "invalid_host", f"this worker answers only to {', '.join(sorted(allowed))}; Host was {host!r}"
        )
    origin = request.headers.get("Origin")
    if origin is not None and not same_origin(origin, host, allowed, _local_port(request)):
        return error_response(403, "invalid_origin", f"requests from {origin!r} are not served; only the worker's own "
                              "pages (the viewer) call it from a browser")  # fmt: skip
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None and site.lower() not in SAME_ORIGIN_SITES and not _public(request.path):
        return error_response(403, "invalid_origin", f"a request a page of another origin made ({site}) is not served")
    return await handler(request)


# What `Sec-Fetch-Site` says of a request the worker's own page made, or the user made by typing the URL.
SAME_ORIGIN_SITES = ("same-origin", "none")


def same_origin(origin: str, host: str | None, allowed: frozenset[str], local_port: int | None) -> bool:
    """Whether a browser's Origin is this worker's own: `http`, one of its names, and the port
    the request was sent to (the Host's, else the socket's). `null` never is."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port or 80
    except ValueError:
        return False
    if parts.scheme != "http" or not parts.hostname or parts.hostname not in allowed or parts.path not in ("", "/"):
        return False
    if host is not None:
        try:
            expected = urlsplit(f"http://{host.strip()}").port or 80
        except ValueError:
            return False
    else:
        expected = local_port
    return port == expected


def _local_port(request: web.Request) -> int | None:
    sockname = request.transport.get_extra_info("sockname") if request.transport is not None else None
    return sockname[1] if isinstance(sockname, tuple) and len(sockname) >= 2 else None


def _public(path: str) -> bool:
    """The viewer's page and assets, and the health check: nothing a page could misuse, and what
    a link from elsewhere (a README, the printed URL) opens."""
    return path in PUBLIC_PATHS or path.startswith("/static/")
