"""Merging one branch into another: plan from a diff, apply atomically, record it.

Strategies:
- `auto`: every non-conflicting change is applied; each conflict is settled by a
  manual resolution if given, else by the rules below, else by the Claude judge
  (when one is configured), else left open for review.
- `cherry_pick`: only the listed record ids; a listed id that conflicts wins
  (picking it is the decision), an unlisted one is reported as rejected.
- `squash`: the source's facts, consolidated (one fact per subject) onto the
  target; other kinds stay on the branch.
- `accept`: everything, the source winning every conflict.
- `skip`: everything that does not conflict; the target wins every conflict.

A merge runs in one write transaction: either every version is written and the
history row recorded, or nothing is. The judge is asked before the transaction
(it is slow); the diff is recomputed inside it so that writes that raced the
judge are never overwritten unseen.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from memory_anchor.worker.store import branches as registry
from memory_anchor.worker.store import merges
from memory_anchor.worker.store.conflicts import open_conflict
from memory_anchor.worker.branching.diff import Change, Conflict, Diff, compute_diff, is_live, normalise
from memory_anchor.worker.store.db import Database
from memory_anchor.worker.store.dialect import table_exists
from memory_anchor.worker.store.records import MAIN, RecordError, Records, ensure_writable, iso

log = logging.getLogger(__name__)

STRATEGIES = ("auto", "cherry_pick", "squash", "accept", "skip")
# Confidence gap at which the more confident fact wins a conflict by rule.
CONFIDENCE_MARGIN = 0.2


@dataclass
class JudgeDecision:
    resolution: str  # source|target|both
    reason: str = ""
    merged_text: str | None = None


class Judge(Protocol):
    """Decides conflicts the rules cannot (Claude, when a key is set)."""

    def resolve(self, conflict: Conflict) -> JudgeDecision | None: ...

    def consolidate(self, fact_key: str, texts: list[str]) -> str | None: ...


@dataclass
class Outcome:
    """How one conflict is settled."""

    resolution: str  # source|target|both|open
    decided_by: str  # strategy|rules|llm_judge|manual|none
    reason: str = ""
    merged_text: str | None = None


@dataclass
class MergeReport:
    merged: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    conflicts: list[dict[str, Any]] = field(default_factory=list)


class MergeEngine:
    def __init__(self, db: Database, judge: Judge | None = None):
        self.db = db
        self.judge = judge

    def diff(self, source: str, target: str, kinds: list[str] | None = None) -> Diff:
        return compute_diff(self.db.reader(), source, target, kinds=kinds)

    def merge(
        self,
        source: str,
        target: str = MAIN,
        strategy: str = "auto",
        *,
        items: list[str] | None = None,
        resolutions: dict[str, str] | None = None,
        actor: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        if strategy not in STRATEGIES:
            raise RecordError(f"strategy must be one of {', '.join(STRATEGIES)}", code="invalid_strategy")
        if strategy == "cherry_pick" and not items:
            raise RecordError("cherry_pick needs `items`: the record ids to bring over (see the diff)")
        resolutions = dict(resolutions or {})
        for key, value in resolutions.items():
            if value not in ("source", "target"):
                raise RecordError(f"resolution for {key!r} must be 'source' or 'target', got {value!r}")
        ensure_writable(self.db.reader(), target)  # archived: refused before the judge is asked
        # Ask the slow judge outside the write lock; decisions are keyed by conflict key.
        planned = compute_diff(self.db.reader(), source, target)
        if strategy == "cherry_pick":
            _check_picks(planned, items or [])
        judged = self._ask_judge(planned, strategy, resolutions)
        consolidated = self._ask_consolidation(planned) if strategy == "squash" else {}
        if dry_run:
            report = _Planner(planned, strategy, items, resolutions, judged, consolidated).plan_only()
            return _result(None, source, target, strategy, actor, report, dry_run=True, marked=False)
        with self.db.transaction() as conn:
            diff = compute_diff(conn, source, target)
            if strategy == "cherry_pick":
                _check_picks(diff, items or [])
            merge_id = str(uuid.uuid4())
            before = Records.head_seq(conn)
            merges.start_merge(conn, merge_id, source=source, target=target, strategy=strategy, actor=actor,
                               source_head=_head_of(diff), target_seq_before=before)  # fmt: skip
            planner = _Planner(diff, strategy, items, resolutions, judged, consolidated)
            report = planner.apply(conn, merge_id, actor)
            open_count = sum(1 for c in report.conflicts if c["resolution"] == "open")
            marked = False
            if source != MAIN and report.merged and not open_count:
                if registry.get_branch(conn, source)["status"] == "active":
                    registry.set_status(conn, source, "merged")
                    marked = True
            merged_by = _merged_by(report)
            shared_items = _shareable(report.merged, planner.private_seqs)
            merges.finish_merge(conn, merge_id, merged_by=merged_by, target_seq_after=Records.head_seq(conn),
                                items_merged=_dump(shared_items), items_rejected=_dump(report.rejected),
                                conflicts=_dump(report.conflicts))  # fmt: skip
        return _result(merge_id, source, target, strategy, actor, report, dry_run=False, marked=marked)

    # --- slow decisions, before the transaction ------------------------------------

    def _ask_judge(self, diff: Diff, strategy: str, resolutions: dict[str, str]) -> dict[str, JudgeDecision]:
        if self.judge is None or strategy not in ("auto", "squash"):
            return {}
        decisions: dict[str, JudgeDecision] = {}
        for conflict in diff.conflicts:
            if _manual(conflict, resolutions) or rule_outcome(conflict):
                continue
            try:
                decision = self.judge.resolve(conflict)
            except Exception:  # a judge failure leaves the conflict open, never fails the merge
                log.warning("merge judge failed on %s", conflict.key, exc_info=True)
                continue
            if decision is not None and decision.resolution in ("source", "target", "both"):
                decisions[conflict.key] = decision
        return decisions

    def _ask_consolidation(self, diff: Diff) -> dict[str, str]:
        if self.judge is None:
            return {}
        out: dict[str, str] = {}
        for key, group in _squash_groups(diff).items():
            if len(group) < 2:
                continue
            try:
                text = self.judge.consolidate(key, [c.row["text"] for c in group])
            except Exception:
                log.warning("squash consolidation failed for %s", key, exc_info=True)
                continue
            if text and text.strip():
                out[key] = text.strip()
        return out


def rule_outcome(conflict: Conflict) -> Outcome | None:
    """The deterministic rules: identity is never overwritten; a far more confident fact wins."""
    s, t = conflict.source.row, conflict.target.row
    if t["kind"] == "identity" or t.get("layer") == "identity_schema":
        return Outcome("target", "rules", "identity is written by a human only; a merge never overwrites it")
    sc, tc = s.get("confidence"), t.get("confidence")
    if is_live(s) and is_live(t) and sc is not None and tc is not None and abs(sc - tc) >= CONFIDENCE_MARGIN:
        winner = "source" if sc > tc else "target"
        return Outcome(winner, "rules", f"the {winner} is far more confident ({max(sc, tc):.2f} vs {min(sc, tc):.2f})")
    return None


def _manual(conflict: Conflict, resolutions: dict[str, str]) -> str | None:
    for key in (conflict.key, conflict.source.id):
        if key in resolutions:
            return resolutions[key]
    return None


def _check_picks(diff: Diff, items: list[str]) -> None:
    known = {c.id for c in diff.source_changes}
    unknown = [i for i in items if i not in known]
    if unknown:
        raise RecordError(
            f"not changed on {diff.source} relative to {diff.target} (nothing to pick): {', '.join(unknown[:20])}",
            code="invalid_items",
            status=409,  # a well-formed request that the branches' current state cannot serve
        )


def _squash_groups(diff: Diff) -> dict[str, list[Change]]:
    groups: dict[str, list[Change]] = {}
    for change in diff.source_changes:
        if change.row["kind"] != "fact" or not is_live(change.row):
            continue
        key = change.row.get("fact_key") or "text:" + normalise(change.row["text"])
        groups.setdefault(key, []).append(change)
    return groups


class _Planner:
    """Turns a diff plus decisions into writes (or, on a dry run, into the report only)."""

    def __init__(self, diff, strategy, items, resolutions, judged, consolidated):
        self.diff: Diff = diff
        self.strategy: str = strategy
        self.picks = set(items or [])
        self.resolutions: dict[str, str] = resolutions
        self.judged: dict[str, JudgeDecision] = judged
        self.consolidated: dict[str, str] = consolidated
        self.report = MergeReport()
        self.conn = None
        self.merge_id: str | None = None
        self.actor: str | None = None
        self._fake_seq = 0
        # Versions this merge wrote that are private to their author (team storage only):
        # the merge history row every member reads names them by id, without their text.
        self.private_seqs: set[int] = set()

    def plan_only(self) -> MergeReport:
        self._run()
        return self.report

    def apply(self, conn, merge_id: str, actor: str | None) -> MergeReport:
        self.conn, self.merge_id, self.actor = conn, merge_id, actor
        self._run()
        return self.report

    # --- deciding ---------------------------------------------------------------

    def outcome(self, conflict: Conflict) -> Outcome:
        manual = _manual(conflict, self.resolutions)
        if manual:
            return Outcome(manual, "manual", "resolved by the caller")
        if self.strategy == "accept":
            return Outcome("source", "strategy", "accept: the source wins")
        if self.strategy == "skip":
            return Outcome("target", "strategy", "skip: the target wins")
        if self.strategy == "cherry_pick":
            if conflict.source.id in self.picks:
                return Outcome("source", "manual", "picked by the caller")
            return Outcome("target", "strategy", "not picked")
        ruled = rule_outcome(conflict)
        if ruled:
            return ruled
        judged = self.judged.get(conflict.key)
        if judged:
            return Outcome(judged.resolution, "llm_judge", judged.reason, judged.merged_text)
        return Outcome("open", "none", "no rule applies and no judge is configured; left for review")

    # --- the walk -----------------------------------------------------------------

    def _run(self) -> None:
        diff = self.diff
        conflicted: dict[str, list[Conflict]] = {}
        for conflict in diff.conflicts:
            conflicted.setdefault(conflict.source.id, []).append(conflict)
        if self.strategy == "squash":
            self._squash(conflicted)
            return
        for change in diff.source_changes:
            if self.strategy == "cherry_pick" and change.id not in self.picks:
                self._reject(change, "not picked")
                continue
            conflicts = conflicted.get(change.id, [])
            if not conflicts:
                self._copy(change, change.change)
                continue
            self._settle(change, conflicts)

    def _settle(self, change: Change, conflicts: list[Conflict]) -> None:
        """Apply the source change as its conflicts decide (all must allow it)."""
        outcomes = [(c, self.outcome(c)) for c in conflicts]
        for conflict, outcome in outcomes:
            self._note_conflict(conflict, outcome)
        resolutions = {o.resolution for _, o in outcomes}
        if "open" in resolutions:
            self._reject(change, "conflict left open for review")
            for conflict, outcome in outcomes:
                if outcome.resolution == "open" and conflict.type == "fact_key":
                    self._open_fact_conflict(conflict)
            return
        if "target" in resolutions:
            self._reject(change, "the target's version was kept")
            return
        merged_texts = [(c, o) for c, o in outcomes if o.resolution == "both" and o.merged_text]
        if merged_texts:
            conflict, outcome = merged_texts[0]
            self._write_text(conflict.target, outcome.merged_text or "", merged_from=[change.id])
            self._reject(change, f"merged into {conflict.target.id} by the judge")
            return
        self._copy(change, change.change)
        for conflict, outcome in outcomes:
            if conflict.type == "fact_key" and outcome.resolution == "source":
                self._supersede(conflict.target, by=change.id)

    def _squash(self, conflicted: dict[str, list[Conflict]]) -> None:
        groups = _squash_groups(self.diff)
        grouped = {c.id for group in groups.values() for c in group}
        for change in self.diff.source_changes:
            if change.id in grouped:
                continue
            if change.row["kind"] == "fact" and change.change == "invalidated" and change.id not in conflicted:
                self._copy(change, "invalidated")
            else:
                self._reject(change, "squash merges facts only; use auto or cherry_pick for other records")
        for key, group in groups.items():
            blocked = False
            for change in group:
                for conflict in conflicted.get(change.id, []):
                    outcome = self.outcome(conflict)
                    self._note_conflict(conflict, outcome)
                    if outcome.resolution == "open" and conflict.type == "fact_key":
                        self._open_fact_conflict(conflict)
                    if outcome.resolution in ("open", "target"):
                        blocked = True
                    elif conflict.type == "fact_key":
                        self._supersede(conflict.target, by=change.id)
            if blocked:
                for change in group:
                    self._reject(change, "its subject conflicts with the target; see conflicts")
                continue
            if len(group) == 1:
                self._copy(group[0], group[0].change)
                continue
            self._write_squashed(key, group)

    # --- writes (no-ops on a dry run) ---------------------------------------------------

    def _copy(self, change: Change, action: str) -> None:
        row = change.row
        origin = self.diff.canon.get(row["seq"], row["seq"])
        if self.conn is None:
            target_seq = self._planned_seq()
        else:
            written = Records.copy_version(
                self.conn, row, branch=self.diff.target, actor=self.actor, reason=f"merge:{self.strategy}"
            )
            target_seq = self._wrote(written)
            merges.record_copy(self.conn, target_seq, origin, self.merge_id)
        self.report.merged.append(_item(row, action, target_seq, source_seq=row["seq"]))

    def _supersede(self, target_change: Change, *, by: str) -> None:
        row = target_change.row
        if self.conn is None:
            target_seq = self._planned_seq()
        else:
            data = {**(row.get("data") or {}), "superseded_by": by, "superseded_in_merge": self.merge_id}
            written = Records.update(
                self.conn, row["id"], branch=self.diff.target, actor=self.actor,
                reason=f"merge:{self.strategy}", view=self.diff.target_view, status="superseded", data=data,
            )  # fmt: skip
            target_seq = self._wrote(written)
        self.report.merged.append(_item(row, "superseded", target_seq))

    def _write_text(self, target_change: Change, text: str, *, merged_from: list[str]) -> None:
        row = target_change.row
        if self.conn is None:
            target_seq = self._planned_seq()
        else:
            data = {**(row.get("data") or {}), "merged_from": merged_from}
            written = Records.update(
                self.conn, row["id"], branch=self.diff.target, actor=self.actor,
                reason=f"merge:{self.strategy}", view=self.diff.target_view, text=text, status="active", data=data,
            )  # fmt: skip
            target_seq = self._wrote(written)
        self.report.merged.append({**_item(row, "merged_text", target_seq), "text": text, "squashed_from": merged_from})

    def _write_squashed(self, key: str, group: list[Change]) -> None:
        newest = max(group, key=lambda c: c.row["seq"])
        text = self.consolidated.get(key) or newest.row["text"]
        confidence = max((c.row.get("confidence") or 0.0) for c in group) or newest.row.get("confidence")
        members = [c.id for c in group]
        # Keep an id the target already knows, so its history continues there.
        existing = next((c for c in group if c.change != "added"), None)
        if self.conn is None:
            target_seq, record_id = self._planned_seq(), existing.id if existing else "(new)"
        else:
            data = {**(newest.row.get("data") or {}), "squashed_from": members}
            if existing is not None:
                written = Records.update(
                    self.conn, existing.id, branch=self.diff.target, actor=self.actor, reason="merge:squash",
                    view=self.diff.target_view, text=text, confidence=confidence, data=data, status="active",
                )  # fmt: skip
            else:
                values = {k: newest.row.get(k) for k in ("layer", "project", "user_id", "agent_id", "run_id",
                                                         "session_id", "type", "title", "metadata", "fact_key")}  # fmt: skip
                written = Records.put(
                    self.conn, "fact", text, branch=self.diff.target, actor=self.actor, reason="merge:squash",
                    confidence=confidence, data=data, **values,
                )  # fmt: skip
            target_seq, record_id = self._wrote(written), written["id"]
        self.report.merged.append({
            "id": record_id, "kind": "fact", "action": "squashed", "source_seq": newest.row["seq"],
            "target_seq": target_seq, "text": text, "squashed_from": members,
        })  # fmt: skip

    def _open_fact_conflict(self, conflict: Conflict) -> None:
        """Bring the source fact onto the target as 'disputed' and open a conflict for review.

        This is the memory model's own contradiction shape, so the
        conflict shows in SessionStart and `memory-anchor conflicts` and its
        keep_existing/keep_new/keep_both resolution works unchanged.
        """
        if self.conn is None:
            return
        row = conflict.source.row
        written = Records.copy_version(
            self.conn, {**row, "status": "disputed"}, branch=self.diff.target, actor=self.actor,
            reason=f"merge:{self.strategy}:disputed",
        )  # fmt: skip
        merges.record_copy(self.conn, written["seq"], self.diff.canon.get(row["seq"], row["seq"]), self.merge_id)
        if not table_exists(self.conn, "conflicts"):
            return
        conflict_id = open_conflict(
            self.conn, project=conflict.target.row.get("project") or "", branch=self.diff.target,
            existing_id=conflict.target.id, candidate_id=row["id"], fact_key=conflict.fact_key,
            reason=f"merge of {self.diff.source} into {self.diff.target}: {conflict.reason}", agent_id=row.get("agent_id"),
        )  # fmt: skip
        for entry in self.report.conflicts:
            if entry["key"] == conflict.key:
                entry["conflict_id"] = str(conflict_id)

    def _reject(self, change: Change, reason: str) -> None:
        self.report.rejected.append({"id": change.id, "kind": change.row["kind"], "reason": reason})

    def _note_conflict(self, conflict: Conflict, outcome: Outcome) -> None:
        if any(entry["key"] == conflict.key for entry in self.report.conflicts):
            return
        self.report.conflicts.append({
            "key": conflict.key, "type": conflict.type, "source_id": conflict.source.id,
            "target_id": conflict.target.id, "resolution": outcome.resolution, "decided_by": outcome.decided_by,
            "reason": outcome.reason, "conflict_id": None,
        })  # fmt: skip

    def _wrote(self, written: dict[str, Any]) -> int:
        if written.get("private"):
            self.private_seqs.add(written["seq"])
        return written["seq"]

    def _planned_seq(self) -> int:
        self._fake_seq += 1
        return -self._fake_seq  # dry run: negative placeholders, never stored


def _item(row: dict[str, Any], action: str, target_seq: int, source_seq: int | None = None) -> dict[str, Any]:
    return {
        "id": row["id"], "kind": row["kind"], "action": action, "source_seq": source_seq,
        "target_seq": target_seq, "text": row.get("text") or "", "squashed_from": [],
    }  # fmt: skip


def _head_of(diff: Diff) -> int | None:
    seqs = [c.row["seq"] for c in diff.source_changes]
    return max(seqs) if seqs else None


def _merged_by(report: MergeReport) -> str:
    deciders = sorted({c["decided_by"] for c in report.conflicts} - {"none"})
    if not deciders:
        return "strategy"
    return deciders[0] if len(deciders) == 1 else "mixed"


def _shareable(merged: list[dict[str, Any]], private_seqs: set[int]) -> list[dict[str, Any]]:
    """The merged items as the shared history keeps them: a private version's text left out."""
    return [{**item, "text": ""} if item["target_seq"] in private_seqs else item for item in merged]


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _result(merge_id, source, target, strategy, actor, report: MergeReport, *, dry_run: bool, marked: bool):
    return {
        "id": merge_id, "source": source, "target": target, "strategy": strategy, "actor": actor,
        "merged_by": _merged_by(report), "created_at": iso(time.time()), "dry_run": dry_run,
        "merged": report.merged, "rejected": report.rejected, "conflicts": report.conflicts,
        "open_conflicts": sum(1 for c in report.conflicts if c["resolution"] == "open"),
        "source_marked_merged": marked,
    }  # fmt: skip


def list_merges(conn, branch: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    """Merge history, newest first; `branch` matches source or target."""
    return [merge_row_to_wire(r) for r in merges.merges(conn, branch, limit)]


def get_merge(conn, merge_id: str) -> dict[str, Any]:
    row = merges.merge(conn, merge_id)
    if row is None:
        from memory_anchor.worker.store.records import NotFound

        raise NotFound(f"merge {merge_id!r} does not exist")
    return merge_row_to_wire(row)


def merge_row_to_wire(row: dict[str, Any]) -> dict[str, Any]:
    conflicts = json.loads(row["conflicts"] or "[]")
    return {
        "id": row["id"], "source": row["source"], "target": row["target"], "strategy": row["strategy"],
        "actor": row["actor"], "merged_by": row["merged_by"], "created_at": iso(row["created_at"]),
        "dry_run": False, "merged": json.loads(row["items_merged"] or "[]"),
        "rejected": json.loads(row["items_rejected"] or "[]"), "conflicts": conflicts,
        "open_conflicts": sum(1 for c in conflicts if c.get("resolution") == "open"),
        "source_marked_merged": False,
    }  # fmt: skip
