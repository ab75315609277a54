"""Property tests: branch visibility, time travel and merges against a reference model.

The store shares rows between branches (a view walks the parents up to each
fork point). The reference model here does the naive thing instead: a branch is
a full *copy* of its parent's state at the fork, every write is replayed on the
copy it belongs to, and every past state is kept. For random sequences of
writes, updates, deletes, branch creations (also from snapshots), merges,
snapshots and branch deletions, every read on every branch at every as_of point
(sequence number, snapshot name, timestamp) must match the copy, on SQLite
and on PostgreSQL.

Merges are checked against the model's own three-way rule: a side changed a
record when its head version is not in the other side's history, a copy
counting as its original.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test

from memory_anchor.worker.store import branches as registry
from memory_anchor.worker.store import snapshots
from memory_anchor.worker.branching.merge import MergeEngine
from tests.postgres import init_team_database, member_url
from memory_anchor.worker.store.db import Database
from memory_anchor.worker.store.postgres.database import PostgresDatabase
from memory_anchor.worker.store.records import Records, RecordError, resolve_view

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]


@dataclass(frozen=True)
class Version:
    seq: int
    op: str  # put|delete
    text: str
    status: str
    canon: int  # the original this version is a copy of (itself if not a copy)


@dataclass
class RefBranch:
    parent: str | None
    fork: int | None
    created_head: int
    # (seq after the write, state) where state maps id -> tuple of visible versions
    timeline: list[tuple[int, dict[str, tuple[Version, ...]]]] = field(default_factory=list)

    @property
    def state(self) -> dict[str, tuple[Version, ...]]:
        return self.timeline[-1][1]


class Reference:
    """Branches as copies; the obviously-correct (and slow) model."""

    def __init__(self):
        self.head = 0
        self.branches: dict[str, RefBranch] = {"main": RefBranch(None, None, 0, [(0, {})])}

    def read(self, branch: str, as_of: int | None = None) -> dict[str, tuple[Version, ...]]:
        ref = self.branches[branch]
        if as_of is None:
            return ref.state
        if as_of < ref.created_head and ref.parent is not None:
            return self.read(ref.parent, min(as_of, ref.fork))
        state: dict[str, tuple[Version, ...]] = {}
        for seq, snapshot in ref.timeline:
            if seq > as_of:
                break
            state = snapshot
        return state

    def write(self, branch: str, record_id: str, version: Version) -> None:
        ref = self.branches[branch]
        state = dict(ref.state)
        state[record_id] = state.get(record_id, ()) + (version,)
        ref.timeline.append((version.seq, state))
        self.head = max(self.head, version.seq)

    def fork(self, name: str, parent: str, fork: int) -> None:
        self.branches[name] = RefBranch(parent, fork, self.head, [(self.head, dict(self.read(parent, fork)))])


def live(versions: tuple[Version, ...]) -> Version | None:
    head = versions[-1] if versions else None
    return head if head is not None and head.op == "put" else None


def is_live(v: Version) -> bool:
    return v.op == "put" and v.status == "active"


def expected_merge(ref: Reference, source: str, target: str, strategy: str, picks: set[str]) -> dict[str, Version]:
    """Which source versions a merge must copy onto the target, by the three-way rule."""
    s_state, t_state = ref.read(source), ref.read(target)
    out: dict[str, Version] = {}
    for record_id in set(s_state) | set(t_state):
        s_hist, t_hist = s_state.get(record_id, ()), t_state.get(record_id, ())
        s_set, t_set = {v.canon for v in s_hist}, {v.canon for v in t_hist}
        s_head, t_head = (s_hist[-1] if s_hist else None), (t_hist[-1] if t_hist else None)
        s_changed = s_head is not None and s_head.canon not in t_set
        t_changed = t_head is not None and t_head.canon not in s_set
        if not s_changed:
            continue
        if not is_live(s_head) and not (s_set & t_set) and not t_hist:
            continue  # born and removed on the source: nothing to bring
        if t_changed:
            same = (s_head.op == t_head.op == "delete") or (
                (s_head.op, s_head.text, s_head.status) == (t_head.op, t_head.text, t_head.status)
            )
            if same:
                continue
            wins = strategy == "accept" or (strategy == "cherry_pick" and record_id in picks)
            if not wins:
                continue
        elif strategy == "cherry_pick" and record_id not in picks:
            continue
        out[record_id] = s_head
    return out


def source_changed_ids(ref: Reference, source: str, target: str) -> list[str]:
    return sorted(expected_merge(ref, source, target, "accept", set()))


class BranchMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.db = self.open_database()
        self.engine = MergeEngine(self.db)
        self.ref = Reference()
        self.ids: list[str] = []
        self.points: list[int] = [0]  # heads between operations
        self.snaps: dict[str, int] = {}
        self.times: list[tuple[float, int]] = []  # (wall time after an op, head then)
        self.merge_times: list[tuple[float, int]] = []  # (created_at of a merge's rows, head after it)
        self.counter = 0

    def open_database(self):
        self.tmp = tempfile.TemporaryDirectory()
        return Database(Path(self.tmp.name) / "memory.sqlite3")

    def close_database(self):
        self.db.close()
        self.tmp.cleanup()

    def teardown(self):
        try:
            self.check_everything()
        finally:
            self.close_database()

    # --- helpers ---------------------------------------------------------------------

    def _after_op(self):
        self.points.append(self.ref.head)
        time.sleep(0.0005)  # distinct wall times around each op
        self.times.append((time.time(), self.ref.head))
        time.sleep(0.0005)

    def _note_merge_time(self, copied: dict) -> None:
        """The time a merge's rows carry: as_of that time must show the whole merge, not part of it."""
        seqs = [m["target_seq"] for m in copied.values()]
        if not seqs:
            return
        stamps = self.db.reader().execute(
            f"SELECT DISTINCT created_at FROM records WHERE seq IN ({','.join('?' * len(seqs))})", seqs
        ).fetchall()
        self.merge_times += [(row[0], self.ref.head) for row in stamps]

    def _visible_ids(self, branch: str) -> list[str]:
        # Creation order, not uuid order: draws must not depend on random ids.
        state = self.ref.read(branch)
        return [i for i in self.ids if live(state.get(i, ()))]

    def _record(self, branch: str, stored: dict) -> None:
        self.ref.write(branch, stored["id"], Version(stored["seq"], stored["op"], stored["text"], stored["status"], stored["seq"]))

    # --- rules -----------------------------------------------------------------------

    @initialize(n=st.integers(1, 3))
    def seed_main(self, n):
        for _ in range(n):
            self.put_text("main", WORDS[len(self.ids) % len(WORDS)])

    def put_text(self, branch, text):
        with self.db.transaction() as conn:
            stored = Records.put(conn, "note", text, branch=branch, project="p")
        self.ids.append(stored["id"])
        self._record(branch, stored)
        self._after_op()

    @rule(data=st.data(), text=st.sampled_from(WORDS))
    def put(self, data, text):
        self.put_text(data.draw(st.sampled_from(sorted(self.ref.branches))), text)

    @rule(data=st.data(), text=st.sampled_from(WORDS), retire=st.booleans())
    def update(self, data, text, retire):
        branch = data.draw(st.sampled_from(sorted(self.ref.branches)))
        visible = self._visible_ids(branch)
        if not visible:
            return
        record_id = data.draw(st.sampled_from(visible))
        status = "superseded" if retire else "active"
        with self.db.transaction() as conn:
            stored = Records.update(conn, record_id, branch=branch, text=text, status=status)
        self._record(branch, stored)
        self._after_op()

    @rule(data=st.data())
    def delete(self, data):
        branch = data.draw(st.sampled_from(sorted(self.ref.branches)))
        visible = self._visible_ids(branch)
        if not visible:
            return
        record_id = data.draw(st.sampled_from(visible))
        with self.db.transaction() as conn:
            stored = Records.delete(conn, record_id, branch=branch)
        self._record(branch, stored)
        self._after_op()

    @precondition(lambda self: len(self.ref.branches) < 6)
    @rule(data=st.data(), how=st.sampled_from(["head", "snapshot", "as_of"]))
    def create_branch(self, data, how):
        self.counter += 1
        name = f"b{self.counter}/x" if self.counter % 2 else f"b{self.counter}"
        parent = data.draw(st.sampled_from(sorted(self.ref.branches)))
        with self.db.transaction() as conn:
            if how == "snapshot" and self.snaps:
                label = data.draw(st.sampled_from(sorted(self.snaps)))
                snap = snapshots.get_snapshot(conn, label)
                if snap["branch"] not in self.ref.branches:
                    return
                made = registry.create_branch(conn, name, from_snapshot=label)
                parent = snap["branch"]
            elif how == "as_of":
                point = data.draw(st.sampled_from(self.points))
                made = registry.create_branch(conn, name, parent=parent, as_of=point)
            else:
                made = registry.create_branch(conn, name, parent=parent)
        assert made["parent"] == parent
        self.ref.fork(name, parent, made["fork_seq"])

    @rule(data=st.data())
    def snapshot(self, data):
        branch = data.draw(st.sampled_from(sorted(self.ref.branches)))
        self.counter += 1
        label = f"snap-{self.counter}"
        with self.db.transaction() as conn:
            snap = snapshots.create_snapshot(conn, label, branch)
        assert snap["seq"] == self.ref.head
        self.snaps[label] = snap["seq"]

    @precondition(lambda self: len(self.ref.branches) > 1)
    @rule(data=st.data(), strategy=st.sampled_from(["accept", "skip", "auto", "cherry_pick"]))
    def merge(self, data, strategy):
        names = sorted(self.ref.branches)
        source = data.draw(st.sampled_from(names))
        target = data.draw(st.sampled_from([n for n in names if n != source]))
        picks: set[str] = set()
        if strategy == "cherry_pick":
            changed = set(source_changed_ids(self.ref, source, target))
            candidates = [i for i in self.ids if i in changed]
            if not candidates:
                with pytest.raises(RecordError):
                    self.engine.merge(source, target, "cherry_pick", items=["not-an-id"])
                return
            picks = set(data.draw(st.lists(st.sampled_from(candidates), min_size=1, unique=True)))
        expected = expected_merge(self.ref, source, target, strategy, picks)
        planned = self.engine.merge(source, target, strategy, items=sorted(picks) or None, dry_run=True)
        result = self.engine.merge(source, target, strategy, items=sorted(picks) or None)
        copied = {m["id"]: m for m in result["merged"]}
        assert set(copied) == set(expected), (strategy, source, target)
        assert {m["id"] for m in planned["merged"]} == set(copied)
        assert all(m["action"] in ("added", "changed", "invalidated") for m in copied.values())
        for record_id in sorted(copied, key=lambda i: copied[i]["target_seq"]):
            v = expected[record_id]
            self.ref.write(target, record_id, Version(copied[record_id]["target_seq"], v.op, v.text, v.status, v.canon))
        self._after_op()
        self._note_merge_time(copied)
        if strategy == "auto":
            assert result["open_conflicts"] == len(result["conflicts"])

    @precondition(lambda self: len(self.ref.branches) > 1)
    @rule(data=st.data())
    def delete_branch(self, data):
        name = data.draw(st.sampled_from(sorted(b for b in self.ref.branches if b != "main")))
        has_children = any(b.parent == name for b in self.ref.branches.values())
        with self.db.transaction() as conn:
            if has_children:
                with pytest.raises(RecordError):
                    registry.delete_branch(conn, name)
                return
            registry.delete_branch(conn, name)
        del self.ref.branches[name]
        self.snaps = {k: v for k, v in self.snaps.items() if k in self._stored_snapshot_names()}
        # Time travel into the deleted branch's past is gone with it; other branches
        # never saw its rows (merged copies live on their targets).

    def _stored_snapshot_names(self) -> set[str]:
        return {s["name"] for s in snapshots.list_snapshots(self.db.reader())}

    # --- checks ----------------------------------------------------------------------

    @invariant()
    def current_reads_match(self):
        conn = self.db.reader()
        for branch in self.ref.branches:
            self.check_view(conn, branch, None, ids=self.ids[-6:])
        if len(self.points) > 1:
            self.check_view(conn, sorted(self.ref.branches)[0], self.points[len(self.points) // 2], ids=[])

    def check_everything(self):
        conn = self.db.reader()
        for branch in self.ref.branches:
            for point in sorted(set(self.points)):
                self.check_view(conn, branch, point)
            for label, seq in self.snaps.items():
                self.check_view(conn, branch, seq, as_of=label, ids=self.ids[-4:])
            for when, seq in self.times[-4:] + self.merge_times[-4:]:
                self.check_view(conn, branch, seq, as_of=when, ids=self.ids[-4:])

    def check_view(self, conn, branch, point, as_of=None, ids=None):
        view = resolve_view(conn, branch, as_of if as_of is not None else point)
        state = self.ref.read(branch, point)
        where = f"branch {branch} as_of {as_of if as_of is not None else point}"
        for record_id in self.ids if ids is None else ids:
            hist = state.get(record_id, ())
            got = Records.get(conn, record_id, view)
            want = live(hist)
            if want is None:
                assert got is None, f"{where}: {record_id} should be invisible, got seq {got['seq']}"
            else:
                assert got is not None and got["seq"] == want.seq and got["text"] == want.text, where
            assert [r["seq"] for r in Records.history(conn, record_id, view)] == [v.seq for v in hist], where
        page, total = Records.query(conn, view, filters={"project": "p"}, limit=1000)
        want_active = sorted(v[-1].seq for v in state.values() if v and is_live(v[-1]))
        assert sorted(r["seq"] for r in page) == want_active and total == len(want_active), where
        newest = Records.latest(conn, view, filters={"project": "p"}, limit=3, batch=2)  # small batches: paging
        assert [r["seq"] for r in newest] == sorted(want_active, reverse=True)[:3], where
        all_seqs = [r[0] for r in conn.execute("SELECT seq FROM records")]
        want_live = {v[-1].seq for v in state.values() if v and v[-1].op == "put"}
        assert Records.visible_seqs(conn, all_seqs, view) == want_live, where


BranchMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get('BRANCH_PROPERTY_EXAMPLES', 40)), stateful_step_count=25, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)  # fmt: skip
TestBranchModel = BranchMachine.TestCase


class PostgresBranchMachine(BranchMachine):
    """The same machine on a team database, as a member (each example a fresh copy of the schema)."""

    cluster = None

    def open_database(self):
        self.name = init_team_database(self.cluster)
        return PostgresDatabase(member_url(self.cluster, self.name, "dev"))

    def close_database(self):
        self.db.close()
        self.cluster.drop_database(self.name)


def test_branch_model_on_postgres(postgres_cluster):
    PostgresBranchMachine.cluster = postgres_cluster
    examples = int(os.environ.get("BRANCH_PROPERTY_EXAMPLES_POSTGRES", 15))
    run_state_machine_as_test(
        PostgresBranchMachine,
        settings=settings(BranchMachine.TestCase.settings, max_examples=examples),
    )
