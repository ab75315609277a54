"""The branch and snapshot endpoints as functions over a WorkerClient.

One place that knows the paths, shared by the CLI (`memory-anchor branch|snapshot`),
the MCP tools and the benchmark. Each function returns the worker's JSON
(shapes in `memory_anchor.schemas.branches`).
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from memory_anchor.client.worker_client import WorkerClient


def _name(name: str) -> str:
    # '/' is legal in a branch name and the worker's routes accept it in the path.
    return urllib.parse.quote(name, safe="/")


def _clean(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if v is not None}


def list_branches(client: WorkerClient, status: str | None = None) -> list[dict[str, Any]]:
    return client.get("/api/v1/branches", **_clean({"status": status}))["results"]


def get_branch(client: WorkerClient, name: str) -> dict[str, Any]:
    return client.get(f"/api/v1/branches/{_name(name)}")


def create_branch(
    client: WorkerClient,
    name: str,
    *,
    parent: str | None = None,
    from_snapshot: str | None = None,
    as_of: str | int | None = None,
    description: str = "",
) -> dict[str, Any]:
    body = {"name": name, "parent": parent, "from_snapshot": from_snapshot, "as_of": as_of, "description": description}
    return client.post("/api/v1/branches", _clean(body))


def set_status(client: WorkerClient, name: str, status: str) -> dict[str, Any]:
    return client.request("PATCH", f"/api/v1/branches/{_name(name)}", {"status": status})


def delete_branch(client: WorkerClient, name: str) -> dict[str, Any]:
    return client.delete(f"/api/v1/branches/{_name(name)}")


def diff(client: WorkerClient, source: str, target: str = "main", *, kinds: list[str] | None = None,
         limit: int | None = None) -> dict[str, Any]:  # fmt: skip
    params = _clean({"target": target, "kinds": ",".join(kinds) if kinds else None, "limit": limit})
    return client.get(f"/api/v1/branches/{_name(source)}/diff", **params)


def merge(
    client: WorkerClient,
    source: str,
    target: str = "main",
    strategy: str = "auto",
    *,
    items: list[str] | None = None,
    resolutions: dict[str, str] | None = None,
    dry_run: bool = False,
) -> dict[str, Any]:
    body = {"target": target, "strategy": strategy, "items": items, "resolutions": resolutions, "dry_run": dry_run}
    return client.post(f"/api/v1/branches/{_name(source)}/merge", _clean(body))


def merges(client: WorkerClient, branch: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    return client.get("/api/v1/merges", **_clean({"branch": branch, "limit": limit}))["results"]


def switch(client: WorkerClient, session_id: str, branch: str, *, create: bool = False,
           parent: str | None = None) -> dict[str, Any]:  # fmt: skip
    body = {"session_id": session_id, "branch": branch, "create": create, "parent": parent}
    return client.post("/api/v1/branches/switch", _clean(body))


def session_branch(client: WorkerClient, session_id: str) -> dict[str, Any]:
    return client.get(f"/api/v1/sessions/{urllib.parse.quote(session_id, safe='')}/branch")


def snapshot(client: WorkerClient, label: str | None = None, branch: str = "main", description: str = "") -> dict:
    return client.post("/api/v1/snapshots", _clean({"label": label, "branch": branch, "description": description}))


def list_snapshots(client: WorkerClient, branch: str | None = None) -> list[dict[str, Any]]:
    return client.get("/api/v1/snapshots", **_clean({"branch": branch}))["results"]


def delete_snapshot(client: WorkerClient, label: str) -> dict[str, Any]:
    return client.delete(f"/api/v1/snapshots/{_name(label)}")


def time_travel(client: WorkerClient, query: str, as_of: str | int, *, branch: str = "main",
                project: str | None = None, top_k: int = 10) -> dict[str, Any]:  # fmt: skip
    body = {"query": query, "as_of": as_of, "branch": branch, "project": project, "top_k": top_k}
    return client.post("/api/v1/time-travel", _clean(body))
