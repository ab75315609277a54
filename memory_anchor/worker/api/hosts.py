"""Serve only requests addressed to this worker: the DNS-rebinding defence.

A web page on evil.example can make its own name resolve to 127.0.0.1 and so
reach a local server from the user's browser; the browser then still sends
`Host: evil.example` (and `Origin: http://evil.example`). The worker answers
only requests whose Host is its own loopback address or `localhost`, with or
without a port, and whose Origin, when a browser sends one, is one of those too.
The viewer, served from that same address, is unaffected.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from aiohttp import web

from memory_anchor.worker.api.middleware import error_response

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
    if origin is not None and (urlsplit(origin).hostname or origin) not in allowed:
        return error_response(403, "invalid_origin", f"requests from {origin!r} are not served")
    return await handler(request)
