"""mem0's `Memory` interface over Memory Anchor, for agents that are not Claude Code.

    from memory_anchor import Memory

    memory = Memory()                       # finds the worker, starts it when it is down
    memory.add("I prefer tabs", user_id="alice")
    memory.search("tabs or spaces?", filters={"user_id": "alice"})["results"]

Codex, scripts and other agents share one memory with Claude Code this way:
the same worker, the same records, the same search. Results have mem0's shapes
(`{"results": [...]}`, memory objects with id, memory, user_id, metadata,
created_at, updated_at, score). `AsyncMemory` is the same over aiohttp.

Errors are `WorkerError` (status, code and the worker's message); `get` answers
None for an unknown id, as mem0's does.
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.parse
from pathlib import Path
from typing import Any

from memory_anchor.client.worker_client import WorkerClient, WorkerError
from memory_anchor.schemas.events import AGENT_HEADER

__all__ = ["Memory", "AsyncMemory", "WorkerError"]

ENTITY_KEYS = ("user_id", "agent_id", "run_id", "app_id")


def _messages(messages: Any) -> list[dict[str, Any]]:
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    if isinstance(messages, dict):
        return [messages]
    if isinstance(messages, list):
        return messages
    raise ValueError(f"messages must be a str, a dict or a list of dicts, not {type(messages).__name__}")


def _filters(filters: dict[str, Any] | None, ids: dict[str, Any]) -> dict[str, Any]:
    """mem0 2.x wants entity ids inside `filters`; earlier versions took them as arguments: both work."""
    merged = dict(filters or {})
    merged.update({k: v for k, v in ids.items() if v is not None})
    return merged


def _quote(memory_id: str) -> str:
    return urllib.parse.quote(str(memory_id), safe="")


class _Requests:
    """The HTTP calls both classes make: (method, path, body, params) for each operation."""

    def __init__(self, branch: str | None):
        self.branch = branch

    def params(self, **extra: Any) -> dict[str, Any]:
        return {"branch": self.branch, **extra} if self.branch else extra

    def add(self, messages, user_id, agent_id, run_id, app_id, metadata, infer, timestamp):
        body = {
            "messages": _messages(messages), "user_id": user_id, "agent_id": agent_id, "run_id": run_id,
            "app_id": app_id, "metadata": metadata or {}, "infer": infer, "timestamp": timestamp,
        }  # fmt: skip
        return "POST", "/v3/memories/add/", {k: v for k, v in body.items() if v is not None}, self.params()

    def search(self, query, filters, top_k, threshold):
        body = {"query": query, "filters": filters, "top_k": top_k, "threshold": threshold}
        return "POST", "/v3/memories/search/", {k: v for k, v in body.items() if v is not None}, self.params()

    def get_all(self, filters, top_k):
        return "POST", "/v3/memories/", {"filters": filters}, self.params(page=1, page_size=top_k)

    def get(self, memory_id):
        return "GET", f"/v1/memories/{_quote(memory_id)}/", None, self.params()

    def update(self, memory_id, text, metadata):
        if text is None and metadata is None:
            raise ValueError("give text or metadata to update")
        body = {k: v for k, v in {"text": text, "metadata": metadata}.items() if v is not None}
        return "PUT", f"/v1/memories/{_quote(memory_id)}/", body, self.params()

    def delete(self, memory_id):
        return "DELETE", f"/v1/memories/{_quote(memory_id)}/", None, self.params()

    def delete_all(self, ids: dict[str, Any]):
        given = {k: v for k, v in ids.items() if v}
        if not given:
            raise ValueError("delete_all needs user_id, agent_id, run_id or app_id (reset() deletes everything)")
        return "DELETE", "/v1/memories/", None, self.params(**given)

    def history(self, memory_id):
        return "GET", f"/v1/memories/{_quote(memory_id)}/history/", None, self.params()

    def reset(self):
        # Every memory written through the mem0 interfaces; Claude Code's captured sessions stay.
        return "DELETE", "/v1/memories/", None, self.params(filters=json.dumps({"kind": "memory"}))


class _Worker:
    """Which worker, branch and agent a `Memory` or `AsyncMemory` speaks to."""

    def __init__(
        self,
        data_dir: str | Path | None = None,
        *,
        branch: str | None = None,
        agent_id: str | None = None,
        autostart: bool = True,
        timeout: float = 30.0,
    ):
        """`data_dir`: the worker's (default: the plugin's); `branch`: read and write there;
        `agent_id`: who writes (default $MEMORY_ANCHOR_AGENT_ID); `autostart`: start the worker if down."""
        self._worker = WorkerClient(Path(data_dir) if data_dir else None, timeout=timeout, autostart=autostart)
        self._requests = _Requests(branch)
        self._timeout = timeout
        agent = agent_id or os.environ.get("MEMORY_ANCHOR_AGENT_ID")
        self._headers = {AGENT_HEADER: agent} if agent else {}


class Memory(_Worker):
    """mem0's `Memory` (add, search, get, get_all, update, delete, delete_all, history, reset)."""

    def _call(self, request: tuple) -> Any:
        method, path, body, params = request
        return self._worker.request(method, path, body, params=params, headers=self._headers)

    def add(self, messages, *, user_id=None, agent_id=None, run_id=None, app_id=None, metadata=None,
            infer: bool = True, timestamp=None, **_ignored) -> dict[str, Any]:  # fmt: skip
        """Store messages (a string, one message dict or a list); `infer=False` keeps each as given."""
        return self._call(self._requests.add(messages, user_id, agent_id, run_id, app_id, metadata, infer, timestamp))

    def search(self, query: str, *, filters: dict | None = None, top_k: int = 20, threshold: float | None = None,
               user_id=None, agent_id=None, run_id=None, **_ignored) -> dict[str, Any]:  # fmt: skip
        """Hybrid search; `filters` is mem0's filter language (AND/OR/NOT, eq, in, gte, contains, ...)."""
        ids = {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}
        return self._call(self._requests.search(query, _filters(filters, ids), top_k, threshold))

    def get(self, memory_id: str) -> dict[str, Any] | None:
        try:
            return self._call(self._requests.get(memory_id))
        except WorkerError as exc:
            if exc.status == 404:
                return None
            raise

    def get_all(self, *, filters: dict | None = None, top_k: int = 100, user_id=None, agent_id=None, run_id=None,
                **_ignored) -> dict[str, Any]:  # fmt: skip
        """The newest `top_k` memories matching `filters` (at most 1000)."""
        ids = {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}
        page = self._call(self._requests.get_all(_filters(filters, ids), top_k))
        return {"results": page["results"]}

    def update(self, memory_id: str, text: str | None = None, metadata: dict | None = None) -> dict[str, Any]:
        """A new version; the old one stays in `history`."""
        self._call(self._requests.update(memory_id, text, metadata))
        return {"message": "Memory updated successfully!"}

    def delete(self, memory_id: str) -> dict[str, Any]:
        self._call(self._requests.delete(memory_id))
        return {"message": "Memory deleted successfully!"}

    def delete_all(self, user_id=None, agent_id=None, run_id=None, app_id=None) -> dict[str, Any]:
        ids = {"user_id": user_id, "agent_id": agent_id, "run_id": run_id, "app_id": app_id}
        self._call(self._requests.delete_all(ids))
        return {"message": "Memories deleted successfully!"}

    def history(self, memory_id: str) -> list[dict[str, Any]]:
        """Every version, oldest first: event ADD/UPDATE/DELETE, old_memory, new_memory, times."""
        return self._call(self._requests.history(memory_id))

    def reset(self) -> None:
        """Delete every memory added through this interface or mem0's (captured sessions stay)."""
        self._call(self._requests.reset())


class AsyncMemory(_Worker):
    """`Memory` for asyncio programs, over aiohttp; use `async with AsyncMemory() as memory:` or `await close()`."""

    _session = None  # the aiohttp session, opened at the first call

    async def __aenter__(self) -> "AsyncMemory":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _call(self, request: tuple) -> Any:
        import aiohttp

        method, path, body, params = request
        # Finding (or starting) the worker reads files and may wait for a process: not on the loop.
        info = await asyncio.to_thread(self._worker.info)
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self._timeout))
        headers = {"Authorization": f"Bearer {info.token}", **self._headers}
        query = {k: str(v) for k, v in params.items() if v is not None}
        try:
            async with self._session.request(method, f"{info.url}{path}", json=body, params=query, headers=headers) as response:
                payload = await response.read()
                data = json.loads(payload) if payload else None
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            self._worker._info = None  # look the worker up again next time
            raise WorkerError(f"cannot reach the worker at {info.url}: {exc}") from None
        if response.status >= 400:
            error = (data or {}).get("error") if isinstance(data, dict) else None
            if isinstance(error, dict):
                raise WorkerError(error.get("message", ""), status=response.status, code=error.get("code", "http_error"))
            raise WorkerError(f"HTTP {response.status} from worker", status=response.status, code="http_error")
        return data

    async def add(self, messages, *, user_id=None, agent_id=None, run_id=None, app_id=None, metadata=None,
                  infer: bool = True, timestamp=None, **_ignored) -> dict[str, Any]:  # fmt: skip
        return await self._call(self._requests.add(messages, user_id, agent_id, run_id, app_id, metadata, infer, timestamp))

    async def search(self, query: str, *, filters: dict | None = None, top_k: int = 20, threshold: float | None = None,
                     user_id=None, agent_id=None, run_id=None, **_ignored) -> dict[str, Any]:  # fmt: skip
        ids = {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}
        return await self._call(self._requests.search(query, _filters(filters, ids), top_k, threshold))

    async def get(self, memory_id: str) -> dict[str, Any] | None:
        try:
            return await self._call(self._requests.get(memory_id))
        except WorkerError as exc:
            if exc.status == 404:
                return None
            raise

    async def get_all(self, *, filters: dict | None = None, top_k: int = 100, user_id=None, agent_id=None,
                      run_id=None, **_ignored) -> dict[str, Any]:  # fmt: skip
        ids = {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}
        page = await self._call(self._requests.get_all(_filters(filters, ids), top_k))
        return {"results": page["results"]}

    async def update(self, memory_id: str, text: str | None = None, metadata: dict | None = None) -> dict[str, Any]:
        await self._call(self._requests.update(memory_id, text, metadata))
        return {"message": "Memory updated successfully!"}

    async def delete(self, memory_id: str) -> dict[str, Any]:
        await self._call(self._requests.delete(memory_id))
        return {"message": "Memory deleted successfully!"}

    async def delete_all(self, user_id=None, agent_id=None, run_id=None, app_id=None) -> dict[str, Any]:
        ids = {"user_id": user_id, "agent_id": agent_id, "run_id": run_id, "app_id": app_id}
        await self._call(self._requests.delete_all(ids))
        return {"message": "Memories deleted successfully!"}

    async def history(self, memory_id: str) -> list[dict[str, Any]]:
        return await self._call(self._requests.history(memory_id))

    async def reset(self) -> None:
        await self._call(self._requests.reset())
