"""L0 identity_schema: the few things an agent must never forget.

Rules (what an agent is must not drift, so only a person changes it, deliberately):
- at most 20 items visible to a project (its own plus the global ones, project '');
- written only by a human: every add/edit/remove/restore needs three
  confirmations (the CLI asks, or `--yes` says a script skips them) and an agent
  is refused outright, whatever path it takes;
- removal is a soft delete: the item is `removed` and can be restored for 7
  days; after that the purge job writes a tombstone (history keeps every version);
- never searched: `context_items` feeds SessionStart in full, first, outside any
  budget, and falls back to the last list it read if the store fails.

Identity lives on the `main` branch only: a memory branch is an experiment of
an agent, and the agent's identity must not differ between experiments.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from memory_anchor.schemas.memory_model import (
    IDENTITY,
    IDENTITY_CONFIRMATIONS,
    IDENTITY_MAX_ITEMS,
    IDENTITY_RESTORE_DAYS,
    IdentityWrite,
)
from memory_anchor.worker.memory.common import DAY, human_actor, now
from memory_anchor.worker.store.db import Database
from memory_anchor.worker.store.records import MAIN, NotFound, RecordError, Records, resolve_view

log = logging.getLogger(__name__)

IDENTITY_PROTECTED = (
    "the identity layer (L0) is written only by a human, with `memory-anchor identity add|edit|remove` "
    "(three confirmations); an agent can only propose a change with propose_identity_change"
)


def refuse_agent_identity_write(agent_id: str | None = None) -> None:
    """Raise the one clear error every agent path to L0 gets."""
    who = f"agent {agent_id!r}: " if agent_id else ""
    raise RecordError(who + IDENTITY_PROTECTED, code="identity_protected", status=403)


class IdentityService:
    def __init__(self, db: Database):
        self.db = db
        self._last_good: dict[str, list[dict[str, Any]]] = {}
        self._lock = threading.Lock()

    # --- reads -----------------------------------------------------------------

    def items(
        self, project: str = "", *, include_removed: bool = False, as_of: Any = None, conn=None
    ) -> list[dict[str, Any]]:
        """The identity items a project sees (its own and the global ones), by priority."""
        conn = conn or self.db.reader()
        view = resolve_view(conn, MAIN, as_of)
        scopes = [""] if not project else [project, ""]
        statuses = ("active", "removed") if include_removed else ("active",)
        rows, _ = Records.query(
            conn, view, filters={"kind": "identity", "project": scopes}, statuses=statuses, limit=1000
        )
        rows.sort(key=lambda r: (r["status"] != "active", (r["data"] or {}).get("priority", 50), r["seq"]))
        return rows

    def context_items(self, project: str = "") -> list[dict[str, Any]]:
        """Identity for SessionStart: never raises; the last good read if the store fails."""
        try:
            items = self.items(project)
        except Exception:  # the red line: identity is injected even when everything else fails
            log.exception("identity read failed; using the last identity read for %r", project)
            with self._lock:
                return list(self._last_good.get(project, []))
        with self._lock:
            self._last_good[project] = items
        return items

    def get(self, item_id: str) -> dict[str, Any]:
        conn = self.db.reader()
        record = Records.get(conn, item_id, resolve_view(conn, MAIN))
        if record is None or record["kind"] != "identity":
            raise NotFound(f"identity item {item_id} not found")
        return record

    def history(self, item_id: str) -> list[dict[str, Any]]:
        conn = self.db.reader()
        versions = Records.history(conn, item_id, resolve_view(conn, MAIN))
        if not versions or versions[0]["kind"] != "identity":
            raise NotFound(f"identity item {item_id} not found")
        return versions

    # --- human writes ---------------------------------------------------------------

    def add(self, write: IdentityWrite) -> dict[str, Any]:
        actor = self._require_human(write, "add")
        content = (write.content or "").strip()
        if not content:
            raise RecordError("an identity item needs `content`", code="invalid_request")
        with self.db.transaction() as conn:
            current = self.items(write.project, conn=conn)
            if any(r["text"].strip() == content and r["project"] == write.project for r in current):
                raise RecordError("this identity item already exists", code="duplicate", status=409)
            self._check_capacity(conn, write.project, adding=1)
            priority = write.priority if write.priority is not None else len(current)
            return Records.put(
                conn,
                "identity",
                content,
                branch=MAIN,
                actor=actor,
                reason=write.reason or "ADD (3 confirmations)",
                layer=IDENTITY,
                project=write.project,
                data={"priority": priority},
            )

    def edit(self, item_id: str, write: IdentityWrite) -> dict[str, Any]:
        actor = self._require_human(write, "edit")
        with self.db.transaction() as conn:
            current = self._current(conn, item_id)
            if current["status"] != "active":
                raise RecordError("a removed identity item must be restored before it is edited", code="conflict", status=409)
            changes: dict[str, Any] = {}
            if write.content is not None and write.content.strip():
                changes["text"] = write.content.strip()
            if write.priority is not None:
                changes["data"] = {**current["data"], "priority": write.priority}
            if not changes:
                raise RecordError("nothing to change: give `content` and/or `priority`", code="invalid_request")
            return Records.update(conn, item_id, branch=MAIN, actor=actor, reason=write.reason or "EDIT (3 confirmations)", **changes)

    def remove(self, item_id: str, write: IdentityWrite) -> dict[str, Any]:
        """Soft delete: restorable for IDENTITY_RESTORE_DAYS days."""
        actor = self._require_human(write, "remove")
        with self.db.transaction() as conn:
            current = self._current(conn, item_id)
            if current["status"] != "active":
                raise RecordError("this identity item is already removed", code="conflict", status=409)
            removed_at = now()
            data = {**current["data"], "removed_at": removed_at, "restore_until": removed_at + IDENTITY_RESTORE_DAYS * DAY}
            return Records.update(
                conn, item_id, branch=MAIN, actor=actor, reason=write.reason or "REMOVE (soft, 3 confirmations)",
                status="removed", data=data,
            )  # fmt: skip

    def restore(self, item_id: str, write: IdentityWrite) -> dict[str, Any]:
        actor = self._require_human(write, "restore")
        with self.db.transaction() as conn:
            current = self._current(conn, item_id)
            if current["status"] != "removed":
                raise RecordError("this identity item is not removed", code="conflict", status=409)
            until = float(current["data"].get("restore_until") or 0)
            if now() > until:
                raise RecordError(
                    f"the {IDENTITY_RESTORE_DAYS}-day restore window of this item has passed", code="restore_expired", status=410
                )
            self._check_capacity(conn, current["project"], adding=1)
            data = {k: v for k, v in current["data"].items() if k not in ("removed_at", "restore_until")}
            return Records.update(
                conn, item_id, branch=MAIN, actor=actor, reason=write.reason or "RESTORE (3 confirmations)",
                status="active", data=data,
            )  # fmt: skip

    def purge_expired(self, at: float | None = None) -> int:
        """Tombstone removed items whose restore window has passed (a periodic job)."""
        at = at or now()
        count = 0
        with self.db.transaction() as conn:
            view = resolve_view(conn, MAIN)
            rows, _ = Records.query(conn, view, filters={"kind": "identity"}, statuses=("removed",), limit=10_000)
            for row in rows:
                if float(row["data"].get("restore_until") or 0) < at:
                    Records.delete(conn, row["id"], branch=MAIN, actor="system:identity-purge",
                                   reason="PURGE (restore window over)", view=view)  # fmt: skip
                    count += 1
        return count

    # --- helpers -------------------------------------------------------------------------

    @staticmethod
    def _require_human(write: IdentityWrite, action: str) -> str:
        if (write.actor or "").startswith("agent:"):
            refuse_agent_identity_write(write.actor[6:])
        if write.confirmations < IDENTITY_CONFIRMATIONS:
            raise RecordError(
                f"changing the identity layer ({action}) needs {IDENTITY_CONFIRMATIONS} confirmations, "
                f"got {write.confirmations}; the CLI asks for them (or pass --yes in a script)",
                code="confirmation_required",
                status=400,
            )
        return human_actor(write.actor)

    def _current(self, conn, item_id: str) -> dict[str, Any]:
        record = Records.get(conn, item_id, resolve_view(conn, MAIN))
        if record is None or record["kind"] != "identity":
            raise NotFound(f"identity item {item_id} not found")
        return record

    def _check_capacity(self, conn, project: str, *, adding: int) -> None:
        """At most IDENTITY_MAX_ITEMS items visible to any project (own + global)."""
        view = resolve_view(conn, MAIN)
        rows, _ = Records.query(conn, view, filters={"kind": "identity"}, statuses=("active",), limit=100_000)
        per_project: dict[str, int] = {}
        for row in rows:
            per_project[row["project"]] = per_project.get(row["project"], 0) + 1
        globals_ = per_project.get("", 0)
        if project:
            worst = per_project.get(project, 0) + globals_
        else:  # a global item is seen by every project
            worst = globals_ + max([n for p, n in per_project.items() if p] or [0])
        if worst + adding > IDENTITY_MAX_ITEMS:
            raise RecordError(
                f"the identity layer holds at most {IDENTITY_MAX_ITEMS} items per project (global ones included); "
                "remove one first",
                code="identity_full",
                status=409,
            )
