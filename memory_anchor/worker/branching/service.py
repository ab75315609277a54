"""BranchService: the branching engine as the API, CLI and MCP tools use it.

Each method is one transaction or one read; handlers call them through
`services.run(...)` so SQLite never blocks the event loop.
"""

from __future__ import annotations

import logging
from typing import Any

from memory_anchor.schemas.branches import (
    BranchCreate,
    BranchDiff,
    BranchOut,
    MergeOut,
    MergeRequest,
    SnapshotCreate,
    SnapshotOut,
    TimeTravelRequest,
)
from memory_anchor.worker.store import branches as registry
from memory_anchor.worker.branching import sessions
from memory_anchor.worker.store import snapshots
from memory_anchor.worker.store.sessions import session_branch
from memory_anchor.worker.branching.judge import ClaudeJudge
from memory_anchor.worker.branching.merge import MergeEngine, get_merge, list_merges
from memory_anchor.worker.store.records import MAIN, RecordError, resolve_as_of, validate_branch_name

log = logging.getLogger(__name__)


class BranchService:
    def __init__(self, services: Any):
        self.services = services
        self.db = services.db

    # --- branches ------------------------------------------------------------------

    def create(self, body: BranchCreate, *, actor: str | None = None) -> dict[str, Any]:
        with self.db.transaction() as conn:
            branch = registry.create_branch(
                conn, body.name, parent=body.parent, from_snapshot=body.from_snapshot, as_of=body.as_of,
                description=body.description, actor=actor, metadata=body.metadata,
            )  # fmt: skip
        return self.get(branch["name"])

    def get(self, name: str) -> dict[str, Any]:
        validate_branch_name(name)
        conn = self.db.reader()
        registry.get_branch(conn, name)
        found = next(b for b in registry.list_branches(conn) if b["name"] == name)
        return _out(BranchOut, registry.branch_to_wire(found))

    def list(self, status: str | None = None) -> list[dict[str, Any]]:
        return [_out(BranchOut, registry.branch_to_wire(b)) for b in registry.list_branches(self.db.reader(), status)]

    def set_status(self, name: str, status: str) -> dict[str, Any]:
        if status not in ("active", "archived"):
            raise RecordError("status can be set to 'active' (restore) or 'archived'; merging marks 'merged'")
        with self.db.transaction() as conn:
            registry.set_status(conn, name, status)
        return self.get(name)

    def describe(self, name: str, description: str) -> dict[str, Any]:
        with self.db.transaction() as conn:
            registry.get_branch(conn, name)
            registry.describe_branch(conn, name, description)
        return self.get(name)

    def delete(self, name: str) -> dict[str, Any]:
        validate_branch_name(name)
        with self.db.transaction() as conn:
            result = registry.delete_branch(conn, name)
        seqs = result.pop("seqs")
        vectors = self.services.__dict__.get("vectors")  # only if already loaded; a rebuild skips gone rows
        if vectors is not None and seqs:
            try:
                vectors.delete(seqs)
            except Exception:  # search filters by visibility anyway; this only frees space
                log.warning("could not drop %d vectors of deleted branch %s", len(seqs), name, exc_info=True)
        return result

    # --- diff and merge ------------------------------------------------------------

    def diff(self, source: str, target: str = MAIN, *, kinds: list[str] | None = None, limit: int = 500):
        validate_branch_name(source)
        validate_branch_name(target)
        return _out(BranchDiff, MergeEngine(self.db).diff(source, target, kinds).to_wire(limit))

    def merge(self, source: str, body: MergeRequest, *, actor: str | None = None) -> dict[str, Any]:
        validate_branch_name(source)
        validate_branch_name(body.target)
        judge = ClaudeJudge.from_services(self.services) if body.strategy in ("auto", "squash") else None
        engine = MergeEngine(self.db, judge)
        result = engine.merge(
            source, body.target, body.strategy, items=body.items, resolutions=body.resolutions, actor=actor,
            dry_run=body.dry_run,
        )  # fmt: skip
        return _out(MergeOut, result)

    def merges(self, branch: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        return [_out(MergeOut, m) for m in list_merges(self.db.reader(), branch, limit)]

    def merge_record(self, merge_id: str) -> dict[str, Any]:
        return _out(MergeOut, get_merge(self.db.reader(), merge_id))

    # --- sessions ------------------------------------------------------------------

    def switch(self, session_id: str, branch: str, *, create: bool = False, parent: str | None = None,
               actor: str | None = None) -> dict[str, Any]:  # fmt: skip
        with self.db.transaction() as conn:
            return sessions.switch_session_branch(conn, session_id, branch, create=create, parent=parent, actor=actor)

    def fork_session(self, session_id: str, parent_session: str) -> dict[str, Any]:
        """A Claude Code fork's own branch, from its parent session's (see memory_anchor/worker/branching/sessions.py)."""
        with self.db.transaction() as conn:
            known = sessions.fork_session(conn, session_id, parent_session, self.services.settings)
        return {"session_id": session_id, "branch": known["branch"], "chosen_by": known["chosen_by"]}

    def session_branch(self, session_id: str) -> dict[str, Any]:
        conn = self.db.reader()
        known = sessions.session_branch(conn, session_id)
        if known is not None:
            return {"session_id": session_id, "branch": known["branch"], "chosen_by": known["chosen_by"]}
        branch = session_branch(conn, session_id)
        if branch is not None:
            return {"session_id": session_id, "branch": branch, "chosen_by": "pipeline"}
        return {"session_id": session_id, "branch": self.services.settings.default_branch, "chosen_by": "default"}

    # --- snapshots and time travel -------------------------------------------------------

    def snapshot(self, body: SnapshotCreate, *, actor: str | None = None) -> dict[str, Any]:
        with self.db.transaction() as conn:
            snap = snapshots.create_snapshot(conn, body.label, body.branch, actor=actor, description=body.description)
        return _out(SnapshotOut, snapshots.snapshot_to_wire(snap))

    def snapshots(self, branch: str | None = None) -> list[dict[str, Any]]:
        return [_out(SnapshotOut, snapshots.snapshot_to_wire(s)) for s in snapshots.list_snapshots(self.db.reader(), branch)]

    def delete_snapshot(self, label: str) -> dict[str, Any]:
        with self.db.transaction() as conn:
            return snapshots.snapshot_to_wire(snapshots.delete_snapshot(conn, label))

    def time_travel(self, body: TimeTravelRequest) -> dict[str, Any]:
        """Search memory as it was at `as_of` on `branch`: superseded and deleted records come back."""
        from memory_anchor.schemas.memories import SearchRequest
        from memory_anchor.worker.memory.memories import MemoryService
        from memory_anchor.worker.store.present import record_to_wire

        validate_branch_name(body.branch)
        seq = resolve_as_of(self.db.reader(), body.as_of)
        filters = {"project": body.project} if body.project else {}
        request = SearchRequest(query=body.query, branch=body.branch, as_of=seq, top_k=body.top_k, filters=filters)
        hits = MemoryService(self.services).search(request)
        return {"as_of": body.as_of, "seq": seq, "branch": body.branch, "results": [record_to_wire(h) for h in hits]}


def _out(model, value: dict[str, Any]) -> dict[str, Any]:
    """The response as its wire model defines it (schemas/branches.py): one shape for every client."""
    return model.model_validate(value).model_dump(mode="json")
