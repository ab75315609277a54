"""Privacy in a team database is the database's job: row-level security on each developer's role.

Alice and Bob are members of one team database. Alice's worker writes through
the store, connected as alice. Bob does not use our code at all: he connects
with plain psycopg, as a curious developer could, and the database still
shows him only what is shared and refuses to let him write in Alice's name or
touch her rows.
"""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors

from memory_anchor.cli.main import main
from memory_anchor.worker.store import branches as registry
from memory_anchor.worker.store import snapshots
from memory_anchor.worker.branching.merge import MergeEngine, list_merges
from memory_anchor.worker.store.postgres.database import PostgresDatabase
from memory_anchor.worker.store.records import RecordError, Records, resolve_view


@pytest.fixture
def team(postgres_cluster, capsys):
    """A team database set up the documented way: `storage init` by the owner, then two members."""
    database = postgres_cluster.create_database()
    owner = postgres_cluster.url(database)
    assert main(["storage", "init", owner]) == 0
    for developer in ("alice", "bob"):
        assert main(["storage", "add-member", developer, "--url", owner]) == 0
    capsys.readouterr()
    yield {
        "owner": owner,
        "alice": postgres_cluster.url(database, user="alice"),
        "bob": postgres_cluster.url(database, user="bob"),
    }
    postgres_cluster.drop_database(database)


@pytest.fixture
def alice_wrote(team):
    """Through the store, as alice: a prompt (private by default), a fact (shared by default),
    a fact marked private, and a prompt she chose to share."""
    store = PostgresDatabase(team["alice"])
    with store.transaction() as conn:
        written = {
            "prompt": Records.put(conn, "prompt", "alice's prompt: fix the flaky login test"),
            "fact": Records.put(conn, "fact", "the login test needs a fake clock"),
            "private fact": Records.put(conn, "fact", "alice's salary review is Friday", metadata={"private": True}),
            "shared prompt": Records.put(conn, "prompt", "alice's prompt for everyone", metadata={"private": False}),
            "observation": Records.put(conn, "observation", "alice ran the test suite"),
        }
    yield written
    store.close()


def bob(team) -> psycopg.Connection:
    return psycopg.connect(team["bob"], autocommit=True)


def test_the_author_and_privacy_of_each_row_come_from_the_database(alice_wrote):
    assert {name: (row["author"], row["private"]) for name, row in alice_wrote.items()} == {
        "prompt": ("alice", True),
        "fact": ("alice", False),
        "private fact": ("alice", True),
        "shared prompt": ("alice", False),
        "observation": ("alice", True),
    }


def test_bob_reads_the_shared_rows_and_none_of_alices_private_ones(team, alice_wrote):
    with bob(team) as conn:
        seen = {text for (text,) in conn.execute("SELECT text FROM records")}
    assert seen == {"the login test needs a fake clock", "alice's prompt for everyone"}


def test_alice_reads_her_own_private_rows_through_the_store(team, alice_wrote):
    store = PostgresDatabase(team["alice"])
    try:
        conn = store.reader()
        view = resolve_view(conn)
        assert Records.get(conn, alice_wrote["prompt"]["id"], view)["text"].startswith("alice's prompt")
        assert Records.get(conn, alice_wrote["private fact"]["id"], view) is not None
    finally:
        store.close()


def test_bobs_worker_through_the_store_does_not_find_alices_private_rows(team, alice_wrote):
    store = PostgresDatabase(team["bob"])
    try:
        conn = store.reader()
        view = resolve_view(conn)
        assert Records.get(conn, alice_wrote["private fact"]["id"], view) is None
        assert Records.get(conn, alice_wrote["fact"]["id"], view)["text"] == "the login test needs a fake clock"
        rows, total = Records.query(conn, view, filters={"kind": ["prompt", "fact", "observation"]})
        assert total == 2 and all(not r["private"] for r in rows)
    finally:
        store.close()


def test_bob_cannot_write_a_row_in_alices_name(team, alice_wrote):
    with bob(team) as conn, pytest.raises(errors.InsufficientPrivilege, match="row-level security"):
        conn.execute(
            "INSERT INTO records(id, version, kind, text, happened_at, created_at, author)"
            " VALUES ('forged', 1, 'fact', 'alice says bob is right', 0, 0, 'alice')"
        )


def test_bob_cannot_change_or_delete_alices_rows(team, alice_wrote):
    with bob(team) as conn:
        with pytest.raises(errors.InsufficientPrivilege, match="permission denied"):
            conn.execute("UPDATE records SET text = 'edited by bob' WHERE author = 'alice'")
        with pytest.raises(errors.InsufficientPrivilege, match="permission denied"):
            conn.execute("DELETE FROM records WHERE author = 'alice'")
    with psycopg.connect(team["owner"]) as owner:
        texts = {text for (text,) in owner.execute("SELECT text FROM records")}
    assert "edited by bob" not in texts and len(texts) == len(alice_wrote)


def test_sessions_are_private_to_their_author(team):
    with psycopg.connect(team["alice"], autocommit=True) as alice:
        alice.execute("INSERT INTO sessions(session_id, started_at, last_seen_at) VALUES ('s-alice', 0, 0)")
    with bob(team) as conn:
        assert conn.execute("SELECT count(*) FROM sessions").fetchone()[0] == 0
        assert conn.execute("UPDATE sessions SET status = 'ended'").rowcount == 0
        assert conn.execute("DELETE FROM sessions").rowcount == 0
    with psycopg.connect(team["alice"]) as alice:
        assert alice.execute("SELECT status FROM sessions").fetchall() == [("active",)]


def test_vectors_of_a_private_row_are_as_private_as_the_row(team, alice_wrote):
    with psycopg.connect(team["alice"], autocommit=True) as alice:
        for name in ("prompt", "fact"):
            alice.execute(
                "INSERT INTO record_vectors(seq, model, embedding) VALUES (%s, 'm', %s)",
                (alice_wrote[name]["seq"], b"\x00" * 8),
            )
    with bob(team) as conn:
        assert [seq for (seq,) in conn.execute("SELECT seq FROM record_vectors")] == [alice_wrote["fact"]["seq"]]


def test_a_branch_is_deleted_by_its_author_only_and_takes_every_row_on_it(team):
    """Records are append-only: nobody deletes a row. Deleting a branch is the one way rows go,
    and it takes all of them, Bob's private ones on Alice's branch included."""
    alice_store = PostgresDatabase(team["alice"])
    bob_store = PostgresDatabase(team["bob"])
    try:
        with alice_store.transaction() as conn:
            registry.create_branch(conn, "alice-experiment")
            Records.put(conn, "fact", "tried on the experiment", branch="alice-experiment")
            snapshots.create_snapshot(conn, "alice-checkpoint", "alice-experiment")
        with bob_store.transaction() as conn:
            Records.put(conn, "prompt", "bob's prompt on alice's branch", branch="alice-experiment")

        with pytest.raises(RecordError) as refused, bob_store.transaction() as conn:
            registry.delete_branch(conn, "alice-experiment")
        assert refused.value.code == "not_branch_author" and "created by alice" in str(refused.value)
        with pytest.raises(RecordError, match="taken by alice"), bob_store.transaction() as conn:
            snapshots.delete_snapshot(conn, "alice-checkpoint")
        with bob(team) as conn:  # and without our code, the database says the same
            assert conn.execute("DELETE FROM branches WHERE name = 'alice-experiment'").rowcount == 0
            assert conn.execute("DELETE FROM branches WHERE name = 'main'").rowcount == 0
            assert conn.execute("DELETE FROM snapshots").rowcount == 0

        with alice_store.transaction() as conn:
            deleted = registry.delete_branch(conn, "alice-experiment")
        assert deleted["deleted_versions"] == 1 and deleted["deleted_snapshots"] == 1  # all alice could see
    finally:
        alice_store.close()
        bob_store.close()
    with psycopg.connect(team["owner"]) as owner:
        assert owner.execute("SELECT count(*) FROM records WHERE branch = 'alice-experiment'").fetchone()[0] == 0
        assert owner.execute("SELECT count(*) FROM snapshots").fetchone()[0] == 0


def test_a_merge_of_private_rows_keeps_their_text_out_of_the_shared_merge_history(team):
    alice_store = PostgresDatabase(team["alice"])
    try:
        with alice_store.transaction() as conn:
            registry.create_branch(conn, "alice-spike")
            Records.put(conn, "prompt", "alice's private prompt on the spike", branch="alice-spike")
            Records.put(conn, "fact", "the spike proved the cache works", branch="alice-spike")
        result = MergeEngine(alice_store).merge("alice-spike", "main", "accept", actor="alice")
        assert sorted(item["text"] for item in result["merged"]) == [  # alice is told everything
            "alice's private prompt on the spike", "the spike proved the cache works",
        ]  # fmt: skip
    finally:
        alice_store.close()
    bob_store = PostgresDatabase(team["bob"])
    try:
        (history,) = list_merges(bob_store.reader())
    finally:
        bob_store.close()
    assert sorted(item["text"] for item in history["merged"]) == ["", "the spike proved the cache works"]


# --- a record's privacy is the record's, whatever its later versions say ----------------------


def _head_text(url: str, record_id: str) -> str | None:
    """The newest version of `record_id` the role behind `url` can read, by plain SQL."""
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT text FROM records WHERE id = %s ORDER BY version DESC LIMIT 1", (record_id,)).fetchone()
    return row[0] if row else None


def test_a_shared_record_cannot_be_made_private_by_a_later_version(team):
    store = PostgresDatabase(team["alice"])
    try:
        with store.transaction() as conn:
            fact = Records.put(conn, "fact", "the staging database is db-2")
        # The store says so as a request's error (the API's 409), not as a driver's.
        with pytest.raises(RecordError, match="privacy is fixed by its first version") as refused:
            with store.transaction() as conn:
                Records.update(conn, fact["id"], text="the staging password is hunter2", metadata={"private": True})
        assert (refused.value.status, refused.value.code) == (409, "privacy_fixed")
    finally:
        store.close()
    with psycopg.connect(team["alice"], autocommit=True) as alice:  # nor by writing the column itself
        with pytest.raises(errors.CheckViolation):
            alice.execute(
                "INSERT INTO records(id, version, kind, text, happened_at, created_at, private)"
                " VALUES (%s, 2, 'fact', 'the staging password is hunter2', 0, 0, true)",
                (fact["id"],),
            )
    assert _head_text(team["bob"], fact["id"]) == "the staging database is db-2"
    assert _head_text(team["alice"], fact["id"]) == "the staging database is db-2"


def test_a_later_version_of_a_private_record_stays_private_unmarked(team, alice_wrote):
    """A fact is shared by kind; this one was written private, so its next version is too,
    though nothing on that version says so."""
    private_fact = alice_wrote["private fact"]
    with psycopg.connect(team["alice"], autocommit=True) as alice:
        (private,) = alice.execute(
            "INSERT INTO records(id, version, kind, text, happened_at, created_at)"
            " VALUES (%s, 2, 'fact', 'alice''s salary review moved to Monday', 0, 0) RETURNING private",
            (private_fact["id"],),
        ).fetchone()
    assert private is True
    assert _head_text(team["alice"], private_fact["id"]) == "alice's salary review moved to Monday"
    assert _head_text(team["bob"], private_fact["id"]) is None


def test_bob_cannot_publish_a_version_of_alices_private_record(team, alice_wrote):
    """Knowing the id of Alice's private record, Bob can neither write a shared version of it
    nor slip his own text in as the head she reads."""
    private_fact = alice_wrote["private fact"]
    with bob(team) as conn:
        with pytest.raises(errors.CheckViolation):
            conn.execute(
                "INSERT INTO records(id, version, kind, text, happened_at, created_at, private)"
                " VALUES (%s, 9, 'fact', 'bob says the review is cancelled', 0, 0, false)",
                (private_fact["id"],),
            )
        conn.execute(
            "INSERT INTO records(id, version, kind, text, happened_at, created_at)"
            " VALUES (%s, 9, 'fact', 'bob says the review is cancelled', 0, 0)",
            (private_fact["id"],),
        )
    assert _head_text(team["alice"], private_fact["id"]) == "alice's salary review is Friday"


def test_members_cannot_read_which_records_are_private(team, alice_wrote):
    with bob(team) as conn:
        with pytest.raises(errors.InsufficientPrivilege):
            conn.execute("SELECT id FROM record_privacy")


# --- the event archive is as private as the events in it ---------------------------------------


def test_an_archived_private_event_keeps_its_text_from_other_members(team):
    from memory_anchor.schemas.memory_model import EventIn
    from memory_anchor.worker.memory import MemoryModel

    store = PostgresDatabase(team["alice"])
    try:
        model = MemoryModel(store)
        long_ago = 1_000_000.0  # its one-day TTL ran out long ago
        shared = model.events.log(EventIn(content="deployed v2 to staging", when=long_ago, ttl_days=1))
        with store.transaction() as conn:
            private = Records.put(
                conn, "event", "alice's one-to-one with her manager", metadata={"private": True},
                data={"expires_at": long_ago + 86400}, happened_at=long_ago,
            )  # fmt: skip
        assert model.events.archive_expired() == 2
        assert {row["record_id"] for row in model.events.archived()} == {shared["id"], private["id"]}
        # Alice may restore her own private event; it comes back private.
        (mine,) = [row for row in model.events.archived() if row["record_id"] == private["id"]]
        model.events.restore(mine["id"])
        assert _head_text(team["bob"], private["id"]) is None
    finally:
        store.close()
    with bob(team) as conn:
        archived = conn.execute("SELECT record_id, text, record FROM event_archive").fetchall()
        assert [row[0] for row in archived] == [shared["id"]]
        assert all("one-to-one" not in text + record for _, text, record in archived)
        assert conn.execute("UPDATE event_archive SET restored_at = 1 WHERE record_id = %s", (private["id"],)).rowcount == 0


def test_the_archive_decides_an_entrys_privacy_not_its_writer(team, alice_wrote):
    """An archive row written by hand saying it is shared is still as private as its event."""
    private_fact = alice_wrote["private fact"]
    with psycopg.connect(team["alice"], autocommit=True) as alice:
        alice.execute(
            "INSERT INTO event_archive(record_id, text, record, archived_at, private) VALUES (%s, %s, '{}', 0, false)",
            (private_fact["id"], private_fact["text"]),
        )
    with bob(team) as conn:
        assert conn.execute("SELECT count(*) FROM event_archive").fetchone()[0] == 0


def test_upgrading_makes_every_version_as_private_as_the_records_most_private_one(postgres_cluster, capsys):
    """A database written before privacy was the record's may hold a shared version under a
    private one; the upgrade makes the whole record private, and its archived text with it."""
    from memory_anchor.worker.store.postgres.schema import MIGRATIONS, apply_schema

    database = postgres_cluster.create_database()
    owner = postgres_cluster.url(database)
    try:
        with psycopg.connect(owner, autocommit=True) as conn:
            apply_schema(conn, MIGRATIONS[:4])
            conn.execute(
                "INSERT INTO records(id, version, kind, text, happened_at, created_at, author, private) VALUES"
                " ('mixed', 1, 'event', 'shared at first', 0, 0, 'alice', false),"
                " ('mixed', 2, 'event', 'then made private', 0, 0, 'alice', true),"
                " ('open', 1, 'fact', 'shared throughout', 0, 0, 'alice', false)"
            )
            conn.execute(
                "INSERT INTO event_archive(record_id, text, record, archived_at, author)"
                " VALUES ('mixed', 'then made private', '{}', 0, 'alice')"
            )
        assert main(["storage", "init", owner]) == 0
        with psycopg.connect(owner) as conn:
            privacy = dict(conn.execute("SELECT id, bool_and(private) FROM records GROUP BY id").fetchall())
            assert privacy == {"mixed": True, "open": False}
            assert conn.execute("SELECT private FROM event_archive").fetchall() == [(True,)]
    finally:
        postgres_cluster.drop_database(database)


def test_a_conflict_over_a_private_fact_is_as_private_as_the_fact(team, alice_wrote):
    from memory_anchor.worker.memory import MemoryModel

    store = PostgresDatabase(team["alice"])
    try:
        model = MemoryModel(store)
        with store.transaction() as conn:
            existing = Records.get(conn, alice_wrote["private fact"]["id"], resolve_view(conn, "main"))
            opened = model.conflicts.open(
                conn, existing, "alice's salary review moved to Monday", confidence=0.8,
                reason="less confident", actor="agent:claude-code", agent_id="claude-code", branch="main",
            )  # fmt: skip
            shared = Records.get(conn, alice_wrote["fact"]["id"], resolve_view(conn, "main"))
            model.conflicts.open(
                conn, shared, "the login test needs no fake clock", confidence=0.8,
                reason="less confident", actor="agent:claude-code", agent_id="claude-code", branch="main",
            )  # fmt: skip
        assert opened["candidate"]["private"] is True
        assert model.conflicts.count_open() == 2  # alice sees both
    finally:
        store.close()
    with bob(team) as conn:
        rows = conn.execute("SELECT existing_id FROM conflicts").fetchall()
        assert rows == [(alice_wrote["fact"]["id"],)]
        assert _head_text(team["bob"], opened["candidate"]["id"]) is None
        assert conn.execute("UPDATE conflicts SET status = 'resolved' WHERE existing_id = %s",
                            (alice_wrote["private fact"]["id"],)).rowcount == 0  # fmt: skip


def test_a_proposal_is_as_private_as_what_it_proposes(team, alice_wrote):
    """approvals.payload quotes the proposal: a pending fact's text, an agent's write."""
    from memory_anchor.schemas.memory_model import IdentityProposal
    from memory_anchor.worker.memory import MemoryModel

    store = PostgresDatabase(team["alice"])
    try:
        model = MemoryModel(store)
        with store.transaction() as conn:
            private_fact = Records.put(conn, "fact", "alice's offer from another company", status="pending",
                                       metadata={"private": True})  # fmt: skip
            shared_fact = Records.put(conn, "fact", "the deploy needs two approvals", status="pending")
            model.approvals.create(conn, "fact", "add", {"text": private_fact["text"]}, record_id=private_fact["id"])
            model.approvals.create(conn, "fact", "add", {"text": shared_fact["text"]}, record_id=shared_fact["id"])
            model.approvals.create(conn, "agent_write", "add", {"content": "alice's note to self: ask for a raise"},
                                   agent_id="reviewer")  # fmt: skip
        model.propose_identity_change(IdentityProposal(action="add", content="We ship on Thursdays", reason="team rule"))
        assert len(model.approvals.list()) == 4  # alice sees all of hers
    finally:
        store.close()
    with bob(team) as conn:
        seen = conn.execute("SELECT kind, payload FROM approvals ORDER BY id").fetchall()
        assert [kind for kind, _ in seen] == ["fact", "identity_change"]
        assert "two approvals" in seen[0][1] and "Thursdays" in seen[1][1]
        assert not any("offer" in payload or "raise" in payload for _, payload in seen)
        # Nor can he decide what he cannot see; forging a shared row is refused the same way.
        assert conn.execute("UPDATE approvals SET status = 'approved' WHERE kind = 'agent_write'").rowcount == 0


def test_rejected_fact_candidates_are_their_authors_alone(team):
    """A candidate below the confidence floor is logged with the words it came from."""
    with psycopg.connect(team["alice"], autocommit=True) as alice:
        alice.execute("INSERT INTO fact_rejections(text, confidence, source, created_at)"
                      " VALUES ('alice is interviewing elsewhere', 0.4, 'prompt', 0)")  # fmt: skip
        assert alice.execute("SELECT count(*) FROM fact_rejections").fetchone()[0] == 1
    with bob(team) as conn:
        assert conn.execute("SELECT count(*) FROM fact_rejections").fetchone()[0] == 0


def test_a_forgotten_wording_is_as_private_as_its_fact_and_never_changed(team, alice_wrote):
    """The forgotten list quotes what was forgotten: a private fact's wording stays Alice's; a shared
    fact's and a next step's are the team's, so Bob's extraction keeps them out too."""
    from memory_anchor.worker.memory import MemoryModel

    store = PostgresDatabase(team["alice"])
    try:
        corrections = MemoryModel(store).corrections
        with store.transaction() as conn:
            conn.execute("INSERT INTO open_items(project, session_id, text, opened_at) VALUES ('', 's1', 'rotate the keys', 0)")
        for name in ("fact", "private fact"):
            corrections.forget_fact(alice_wrote[name]["id"], actor="human:alice", reason="wrong")
        [step] = corrections.steps("")
        corrections.forget_step(step["id"], actor="human:alice")
    finally:
        store.close()
    with bob(team) as conn:
        seen = conn.execute("SELECT kind, text, private FROM forgotten ORDER BY id").fetchall()
        assert seen == [("fact", "the login test needs a fake clock", False), ("next_step", "rotate the keys", False)]
        for statement in ("UPDATE forgotten SET text = 'x'", "DELETE FROM forgotten"):
            with pytest.raises(errors.InsufficientPrivilege):
                conn.execute(statement)
        with pytest.raises(errors.InsufficientPrivilege):  # nor write in Alice's name
            conn.execute("INSERT INTO forgotten(kind, item_id, text, key, action, actor, created_at, author)"
                         " VALUES ('fact', 'x', 'x', 'x', 'forget', 'human:alice', 0, 'alice')")  # fmt: skip
