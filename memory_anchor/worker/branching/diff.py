"""What two branches changed since they last shared a version of each record.

Per record id, each side has a history: the versions its view can see. A merge
copies a version onto the target and remembers the original in `merge_copies`,
so a copy and its original count as the same version (`canon`). Then:

- a side *changed* a record when its head version is not in the other side's
  history (git's three-way rule, with the merge base found per record, so
  repeated merges in either direction neither re-apply nor falsely conflict);
- a *record conflict* is a record both sides changed, to different contents;
- a *fact_key conflict* is a live fact the source changed and a different live
  fact with the same `fact_key` (normalised subject) the target changed, with
  different texts: two branches learnt different things about one subject.

Candidate ids come from the rows visible to exactly one of the two views: per
branch that is one seq range on the (branch, seq) index, so a diff costs what
the branches wrote since they diverged, not the size of memory.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any, Iterable

from memory_anchor.worker.store.merges import origins
from memory_anchor.worker.store.records import RecordError, View, ids_written_on, resolve_view, row_to_dict, versions_of

# Statuses that take a record out of live memory (the version still exists).
INACTIVE_STATUSES = frozenset({"superseded", "invalidated", "rejected", "archived", "deleted", "expired"})
# Columns whose equality means "the same outcome" on both sides.
_CONTENT = ("op", "kind", "text", "title", "type", "status", "fact_key", "confidence", "layer")

BATCH = 500


@dataclass
class Change:
    """The head version of a record on one side, and how it differs from the other side."""

    side: str  # source|target
    change: str  # added|changed|invalidated
    row: dict[str, Any]

    @property
    def id(self) -> str:
        return self.row["id"]

    @property
    def is_live_fact(self) -> bool:
        return is_live(self.row) and self.row["kind"] == "fact" and bool(self.row.get("fact_key"))

    def to_wire(self) -> dict[str, Any]:
        r = self.row
        return {
            "id": r["id"], "kind": r["kind"], "change": self.change, "side": self.side, "seq": r["seq"],
            "version": r["version"], "text": r["text"], "title": r.get("title"), "fact_key": r.get("fact_key"),
            "status": r["status"], "deleted": r["op"] == "delete", "confidence": r.get("confidence"),
            "branch": r["branch"],
        }  # fmt: skip


@dataclass
class Conflict:
    key: str
    type: str  # record|fact_key
    source: Change
    target: Change
    reason: str

    @property
    def fact_key(self) -> str | None:
        return self.source.row.get("fact_key") or self.target.row.get("fact_key")

    def to_wire(self) -> dict[str, Any]:
        return {
            "key": self.key, "type": self.type, "fact_key": self.fact_key, "source": self.source.to_wire(),
            "target": self.target.to_wire(), "reason": self.reason,
        }  # fmt: skip


@dataclass
class Diff:
    source: str
    target: str
    source_view: View
    target_view: View
    base: str | None
    source_changes: list[Change] = field(default_factory=list)
    target_changes: list[Change] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    # canonical origin of every copied seq met while diffing (for the merge)
    canon: dict[int, int] = field(default_factory=dict)

    def conflict_for(self, record_id: str) -> list[Conflict]:
        return [c for c in self.conflicts if record_id in (c.source.id, c.target.id)]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for side, changes in (("source", self.source_changes), ("target", self.target_changes)):
            for kind in ("added", "changed", "invalidated"):
                out[f"{side}_{kind}"] = sum(1 for c in changes if c.change == kind)
        out["conflicts"] = len(self.conflicts)
        return out

    def to_wire(self, limit: int | None = None) -> dict[str, Any]:
        cut = (lambda items: items[:limit]) if limit else (lambda items: items)
        return {
            "source": self.source, "target": self.target, "base": self.base, "counts": self.counts(),
            "source_changes": [c.to_wire() for c in cut(self.source_changes)],
            "target_changes": [c.to_wire() for c in cut(self.target_changes)],
            "conflicts": [c.to_wire() for c in cut(self.conflicts)],
        }  # fmt: skip


def is_live(row: dict[str, Any]) -> bool:
    return row["op"] == "put" and row["status"] not in INACTIVE_STATUSES


def same_outcome(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if a["op"] == "delete" and b["op"] == "delete":
        return True
    if any(a.get(k) != b.get(k) for k in _CONTENT):
        return False
    return _json(a.get("data")) == _json(b.get("data")) and _json(a.get("metadata")) == _json(b.get("metadata"))


def _json(value: Any) -> str:
    return json.dumps(value or {}, sort_keys=True, default=str)


def normalise(text: str) -> str:
    return " ".join((text or "").lower().split()).rstrip(".")


def compute_diff(
    conn: sqlite3.Connection, source: str, target: str, *, kinds: Iterable[str] | None = None
) -> Diff:
    sv, tv = resolve_view(conn, source), resolve_view(conn, target)  # an unknown branch is a 404 first
    if source == target:
        raise RecordError("source and target are the same branch; nothing to compare", code="same_branch")
    diff = Diff(source, target, sv, tv, _base(sv, tv))
    ids = _candidate_ids(conn, sv, tv)
    kinds = set(kinds) if kinds else None
    for start in range(0, len(ids), BATCH):
        chunk = ids[start : start + BATCH]
        rows = versions_of(conn, chunk)
        histories: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            histories.setdefault(row["id"], []).append(row_to_dict(row))
        diff.canon.update(_canon(conn, [r["seq"] for r in rows]))
        for record_id in chunk:
            history = histories.get(record_id, [])
            if kinds is not None and history and history[-1]["kind"] not in kinds:
                continue
            _compare(diff, history)
    _fact_key_conflicts(diff)
    return diff


def _compare(diff: Diff, history: list[dict[str, Any]]) -> None:
    canon = diff.canon
    s_hist = [r for r in history if diff.source_view.sees_row(r["branch"], r["seq"])]
    t_hist = [r for r in history if diff.target_view.sees_row(r["branch"], r["seq"])]
    s_set = {canon.get(r["seq"], r["seq"]) for r in s_hist}
    t_set = {canon.get(r["seq"], r["seq"]) for r in t_hist}
    s_head = s_hist[-1] if s_hist else None
    t_head = t_hist[-1] if t_hist else None
    s_changed = s_head is not None and canon.get(s_head["seq"], s_head["seq"]) not in t_set
    t_changed = t_head is not None and canon.get(t_head["seq"], t_head["seq"]) not in s_set
    shared = bool(s_set & t_set)
    s_change = _classify("source", s_head, shared, bool(t_hist)) if s_changed else None
    t_change = _classify("target", t_head, shared, bool(s_hist)) if t_changed else None
    if s_change and t_change:
        if same_outcome(s_head, t_head):  # type: ignore[arg-type]
            return  # both sides did the same thing: nothing to merge, nothing to decide
        diff.source_changes.append(s_change)
        diff.target_changes.append(t_change)
        what = _describe(s_head, t_head)  # type: ignore[arg-type]
        diff.conflicts.append(Conflict(f"record:{s_change.id}", "record", s_change, t_change, what))
        return
    if s_change:
        diff.source_changes.append(s_change)
    if t_change:
        diff.target_changes.append(t_change)


def _classify(side: str, head: dict[str, Any] | None, shared: bool, other_has: bool) -> Change | None:
    if head is None:
        return None
    if not is_live(head):
        if not shared and not other_has:
            return None  # born and removed on one side: the other never saw it
        return Change(side, "invalidated", head)
    return Change(side, "changed" if shared or other_has else "added", head)


def _describe(s: dict[str, Any], t: dict[str, Any]) -> str:
    if s["op"] == "delete" or t["op"] == "delete":
        deleted = "source" if s["op"] == "delete" else "target"
        return f"the {deleted} deleted the record while the other side changed it"
    return "both sides wrote a new version of the same record"


def _fact_key_conflicts(diff: Diff) -> None:
    in_conflict = {c.source.id for c in diff.conflicts}
    by_key: dict[str, list[Change]] = {}
    for change in diff.target_changes:
        if change.is_live_fact:
            by_key.setdefault(change.row["fact_key"], []).append(change)
    for change in diff.source_changes:
        if not change.is_live_fact or change.id in in_conflict:
            continue
        for other in by_key.get(change.row["fact_key"], []):
            if other.id == change.id or normalise(other.row["text"]) == normalise(change.row["text"]):
                continue
            diff.conflicts.append(
                Conflict(
                    f"fact_key:{change.id}:{other.id}", "fact_key", change, other,
                    f"both sides hold a different fact about {change.row['fact_key']!r}",
                )  # fmt: skip
            )


def _canon(conn: sqlite3.Connection, seqs: list[int]) -> dict[int, int]:
    return origins(conn, seqs)


def _candidate_ids(conn: sqlite3.Connection, sv: View, tv: View) -> list[str]:
    """Ids with a row visible to exactly one view: one seq range per branch of either chain."""
    s_lim, t_lim = dict(sv.chain), dict(tv.chain)
    ids: dict[str, None] = {}
    for name in dict.fromkeys([*s_lim, *t_lim]):
        lo, hi = _exclusive_range(s_lim.get(name, -1), t_lim.get(name, -1))
        if lo == hi:
            continue
        for record_id in ids_written_on(conn, name, lo, hi):
            ids.setdefault(record_id, None)
    return list(ids)


def _exclusive_range(a: int | None, b: int | None) -> tuple[int, int | None]:
    """(lo, hi]: the seqs one limit admits and the other does not; -1 = nothing, None = everything."""
    if a is None and b is None:
        return 0, 0
    if a is None or b is None:
        return (b if a is None else a), None  # type: ignore[return-value]
    return min(a, b), max(a, b)


def _base(sv: View, tv: View) -> str | None:
    t_lim = dict(tv.chain)
    for name, s_upto in sv.chain:
        if name in t_lim:
            t_upto = t_lim[name]
            upto = s_upto if t_upto is None else t_upto if s_upto is None else min(s_upto, t_upto)
            return f"{name}@{upto}" if upto is not None else name
    return None
