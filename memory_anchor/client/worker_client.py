"""A small synchronous client for the worker's REST API.

Used by the CLI, the MCP server and the benchmarks. It finds the worker through
worker.json, sends the bearer token, and can start the worker when it is down.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, BinaryIO

from memory_anchor.core import paths
from memory_anchor.core.processes import pid_alive


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
        return json.loads(raw) if raw else None

    def download(self, path: str, out: BinaryIO, *, chunk_size: int = 1 << 16, **params: Any) -> int:
        """Stream a (large) response body into `out`; returns the bytes written."""
        written = 0
        with self._open("GET", path, None, params=params, timeout=max(self.timeout, 600.0)) as response:
            while chunk := self._read(response.read, chunk_size):
                out.write(chunk)
                written += len(chunk)
        return written

    def upload(self, path: str, source: BinaryIO, size: int, *, content_type: str, **params: Any) -> Any:
        """POST a (large) file as the raw body without reading it into memory; the JSON reply."""
        headers = {"Content-Type": content_type, "Content-Length": str(size)}
        with self._open("POST", path, source, params=params, headers=headers, timeout=max(self.timeout, 600.0)) as response:
            raw = self._read(response.read)
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
    ):
        """The open HTTP response, or WorkerError with the worker's own error message."""
        info = self.info()
        query = {k: v for k, v in (params or {}).items() if v is not None and v != ""}
        url = f"{info.url}{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Authorization", f"Bearer {info.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        agent = os.environ.get("MEMORY_ANCHOR_AGENT_ID")
        if agent:
            request.add_header("X-Memory-Anchor-Agent", agent)
        for key, value in (headers or {}).items():
            request.add_header(key, value)
        try:
            return urllib.request.urlopen(request, timeout=timeout or self.timeout)
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                error = json.loads(raw)["error"]
                raise WorkerError(error["message"], status=exc.code, code=error["code"]) from None
            except (ValueError, KeyError, TypeError):
                raise WorkerError(f"HTTP {exc.code} from worker", status=exc.code, code="http_error") from None
        except (urllib.error.URLError, OSError) as exc:
            self._info = None
            raise WorkerError(f"cannot reach the worker at {info.url}: {exc}") from None

    def _read(self, read, *args: Any) -> bytes:
        try:
            return read(*args)
        except OSError as exc:
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
        import time

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
