"""A small synchronous client for the worker's REST API.

Used by the CLI, the MCP server and the benchmarks. It finds the worker through
worker.json, sends the bearer token, and can start the worker when it is down.
"""

from __future__ import annotations

import http.client
import json
import os
import select
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any, BinaryIO

from memory_anchor.core import paths
from memory_anchor.core.processes import pid_alive

# A connection is kept open between requests (one per thread): a new TCP connection for every call
# cost the worker about 0.25 ms of CPU and the caller 0.2 ms, a few per cent of a mem0 add. One idle
# this long is not used again: the worker's server closes idle connections after 75 s (aiohttp's
# keep-alive timeout), and a request sent on a connection it is closing would be lost.
KEEP_IDLE_SECONDS = 15.0


class WorkerError(Exception):
    """The worker answered with an error, or could not be reached."""

    def __init__(self, message: str, *, status: int = 0, code: str = "unreachable"):
        super().__init__(message)
        self.status = status
        self.code = code


class WorkerClient:
    def __init__(self, data_dir: Path | None = None, *, timeout: float = 30.0, autostart: bool = True):
        self.data_dir = Path(data_dir or paths.data_dir())
        self.timeout = timeout
        self.autostart = autostart
        self._info = None
        self._held = threading.local()  # this thread's open connection: (address, connection), answer read whole, idle since

    # --- connection ------------------------------------------------------------

    def project_for_cwd(self, cwd: str | None) -> str:
        """The project `cwd` belongs to, named as this worker names projects (by path, or by git
        remote on a team database: memory_anchor/core/projects.py)."""
        from memory_anchor.core.projects import project_for_cwd

        return project_for_cwd(cwd, self.info().project_names)

    def info(self):
        """worker.json of a live worker, starting one if allowed."""
        from memory_anchor.core import lifecycle

        if self._info is not None and pid_alive(self._info.pid):
            return self._info
        info = lifecycle.running_worker(self.data_dir)
        if info is None:
            if not self.autostart:
                raise WorkerError(f"no worker is running for {self.data_dir}; start it with `memory-anchor worker start`")
            info = lifecycle.start_background(self.data_dir)
        self._info = info
        return info

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        with self._open(method, path, data, params=params, headers=headers) as response:
            raw = self._read(response.read)
            self._read_to_end()
        return json.loads(raw) if raw else None

    def download(self, path: str, out: BinaryIO, *, chunk_size: int = 1 << 16, **params: Any) -> int:
        """Stream a (large) response body into `out`; returns the bytes written."""
        written = 0
        with self._open("GET", path, None, params=params, timeout=max(self.timeout, 600.0)) as response:
            while chunk := self._read(response.read, chunk_size):
                out.write(chunk)
                written += len(chunk)
            self._read_to_end()
        return written

    def upload(self, path: str, source: BinaryIO, size: int, *, content_type: str, **params: Any) -> Any:
        """POST a (large) file as the raw body without reading it into memory; the JSON reply."""
        headers = {"Content-Type": content_type, "Content-Length": str(size)}
        with self._open("POST", path, source, params=params, headers=headers, timeout=max(self.timeout, 600.0)) as response:
            raw = self._read(response.read)
            self._read_to_end()
        return json.loads(raw) if raw else None

    def _open(
        self,
        method: str,
        path: str,
        data: Any,
        *,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> http.client.HTTPResponse:
        """The open HTTP response, or WorkerError with the worker's own error message."""
        info = self.info()
        query = {k: v for k, v in (params or {}).items() if v is not None and v != ""}
        target = path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        sent = {"Authorization": f"Bearer {info.token}"}
        if data is not None:
            sent["Content-Type"] = "application/json"
        agent = os.environ.get("MEMORY_ANCHOR_AGENT_ID")
        if agent:
            sent["X-Memory-Anchor-Agent"] = agent
        sent.update(headers or {})
        try:
            connection = self._connection(info.url, timeout or self.timeout)
            connection.request(method, target, body=data, headers=sent)
            response = connection.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            self._drop()
            self._info = None
            raise WorkerError(f"cannot reach the worker at {info.url}: {exc}") from None
        self._held.done = False
        if not 200 <= response.status < 300:
            raw = self._read(response.read)
            self._read_to_end()
            try:
                error = json.loads(raw)["error"]
                raise WorkerError(error["message"], status=response.status, code=error["code"]) from None
            except (ValueError, KeyError, TypeError):
                raise WorkerError(f"HTTP {response.status} from worker", status=response.status, code="http_error") from None
        return response

    def _connection(self, url: str, timeout: float) -> http.client.HTTPConnection:
        """This thread's connection to the worker at `url`: the one kept from its last request when
        that answer was read to its end, is recent and still open; else a new one."""
        held = getattr(self._held, "connection", None)
        if held is not None:
            address, connection = held
            reusable = (
                address == url
                and connection.sock is not None
                and self._held.done
                and time.monotonic() - self._held.since < KEEP_IDLE_SECONDS
                and not _closed_by_peer(connection.sock)
            )
            if reusable:
                connection.timeout = timeout
                connection.sock.settimeout(timeout)
                self._held.since = time.monotonic()
                return connection
            connection.close()
        parts = urllib.parse.urlsplit(url)
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
        self._held.connection = (url, connection)
        self._held.done = True
        self._held.since = time.monotonic()
        return connection

    def _drop(self) -> None:
        held = getattr(self._held, "connection", None)
        if held is not None:
            held[1].close()
        self._held.connection = None

    def _read_to_end(self) -> None:
        """The answer was read whole: the next request may use the same connection."""
        self._held.done = True

    def close(self) -> None:
        """Close this thread's kept connection (it is closed anyway when the client is collected)."""
        self._drop()

    def _read(self, read, *args: Any) -> bytes:
        try:
            return read(*args)
        except (OSError, http.client.HTTPException) as exc:
            self._drop()
            self._info = None
            raise WorkerError(f"the connection to the worker broke: {exc}") from None

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params)

    def post(self, path: str, body: Any, **params: Any) -> Any:
        return self.request("POST", path, body, params=params)

    def put(self, path: str, body: Any, **params: Any) -> Any:
        return self.request("PUT", path, body, params=params)

    def delete(self, path: str, **params: Any) -> Any:
        return self.request("DELETE", path, params=params)

    def wait_idle(self, timeout: float = 3600) -> None:
        """Block until every captured event is processed and every record embedded."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.get("/api/v1/status")
            if not status["inbox"].get("pending") and not status["pending_vectors"]:
                return
            time.sleep(0.5)
        raise WorkerError(f"the worker did not finish its work within {timeout:.0f}s", code="timeout")

    # --- the mem0-compatible API -----------------------------------------------------

    def add(self, content: str | None = None, *, messages: list[dict] | None = None, **fields: Any) -> dict:
        body = {k: v for k, v in {"content": content, "messages": messages, **fields}.items() if v is not None}
        return self.post("/api/v1/memories", body)

    def search(self, query: str, *, filters: dict | None = None, top_k: int = 10, **fields: Any) -> list[dict]:
        body = {"query": query, "filters": filters or {}, "top_k": top_k, **{k: v for k, v in fields.items() if v is not None}}
        return self.post("/api/v1/memories/search", body)["results"]

    def get_memory(self, memory_id: str, **params: Any) -> dict:
        return self.get(f"/api/v1/memories/{urllib.parse.quote(memory_id)}", **params)

    def history(self, memory_id: str, **params: Any) -> list[dict]:
        return self.get(f"/api/v1/memories/{urllib.parse.quote(memory_id)}/history", **params)["results"]


def _closed_by_peer(sock) -> bool:
    """Whether an idle connection's socket has something to read: at rest it has nothing, so that
    is the end of the stream (the worker closed it, or restarted) and it must not be used."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):  # a descriptor select cannot watch: take a new connection
        return True
    return bool(readable)
