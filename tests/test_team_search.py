"""Team storage: two workers (two PostgresDatabase handles, two members) search one memory.

Each worker holds its own in-memory vector index; a record written through one
is found through the other once the other's follower has read the log (at
search time, or by its periodic catch-up). Real PostgreSQL, the real model.
"""

from __future__ import annotations

import pytest

from tests.postgres import init_team_database, member_url
from memory_anchor.worker.store import branches as registry
from memory_anchor.worker.index.database_vectors import DatabaseVectorStore
from memory_anchor.worker.index.embeddings import Embedder
from memory_anchor.worker.index.follower import LogFollower
from memory_anchor.worker.index.search import SearchService
from memory_anchor.worker.index.vectors import Vectors
from memory_anchor.worker.store.postgres.database import PostgresDatabase
from memory_anchor.worker.store.records import Records, resolve_view


class Worker:
    def __init__(self, url: str, embedder: Embedder, **follower_options):
        self.db = PostgresDatabase(url)
        self.vectors = Vectors(store=DatabaseVectorStore(self.db))
        self.follower = LogFollower(self.db, self.vectors, embedder, **follower_options)
        self.service = SearchService(self.db, self.vectors, embedder, follower=self.follower)

    def put(self, text: str, *, branch: str = "main", kind: str = "fact", **values) -> dict:
        with self.db.transaction() as conn:
            record = Records.put(conn, kind, text, branch=branch, user_id="team", **values)
        self.follower.flush([record["seq"]])
        return record

    def search(self, query: str, *, mode: str = "vector", branch: str = "main") -> list[str]:
        view = resolve_view(self.db.reader(), branch)
        return [h["text"] for h in self.service.search(query, view, mode=mode, top_k=5, fallback=False)]

    def close(self) -> None:
        self.db.close()


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


@pytest.fixture
def team(postgres_cluster, embedder):
    name = init_team_database(postgres_cluster)
    alice = Worker(member_url(postgres_cluster, name, "alice"), embedder)
    bob = Worker(member_url(postgres_cluster, name, "bob"), embedder, grace_seconds=3600)
    yield alice, bob
    alice.close()
    bob.close()
    postgres_cluster.drop_database(name)


def test_a_record_written_by_one_worker_is_found_by_the_other_without_embedding_it(team):
    alice, bob = team
    assert bob.search("why did the nightly deploy fail?") == []
    alice.put("The nightly deploy failed because the database migration timed out.")
    alice.put("Lunch options near the office include ramen and tacos.")
    # Bob's search catches up first: it reads alice's stored vectors, it embeds nothing.
    assert bob.search("why did the nightly deploy fail?")[0].startswith("The nightly deploy failed")
    assert bob.follower.indexed == 0 and alice.follower.indexed == 2
    assert len(bob.vectors.index) == 2
    # And by keywords, with no follower involved (BM25 over the shared terms).
    assert bob.search("migration timed out", mode="keyword")[0].startswith("The nightly deploy failed")


def test_a_record_nobody_embedded_waits_for_its_writer_then_is_embedded_by_a_follower(team, embedder):
    alice, bob = team
    with alice.db.transaction() as conn:  # alice's worker stops before embedding it
        seq = Records.put(conn, "fact", "The on-call rotation changes every Monday.", user_id="team")["seq"]
    assert bob.follower.catch_up() == 0  # alice's, within the grace period: left to her worker
    assert seq not in bob.vectors.index and bob.follower.pending_count() == 1
    bob.follower.batch_size = 1
    with alice.db.transaction() as conn:
        Records.put(conn, "fact", "Deploys freeze on Fridays.", user_id="team")
    bob.follower.grace_seconds = 0  # her worker is down for good
    # One batch per call, as the pipeline calls it between hook events.
    assert [bob.follower.drain_once() for _ in range(3)] == [1, 1, 0]
    assert seq in bob.vectors.index
    assert alice.follower.catch_up() == 0  # alice reads bob's vector rather than embedding again
    assert seq in alice.vectors.index


def test_private_records_stay_out_of_the_other_members_index(team):
    alice, bob = team
    alice.put("Alice's prompt: remind me about the dentist on Friday.", kind="prompt")
    bob.follower.catch_up()
    assert len(bob.vectors.index) == 0
    assert bob.search("dentist appointment", mode="hybrid") == []


def test_a_deleted_branch_leaves_every_follower(team):
    alice, bob = team
    with alice.db.transaction() as conn:
        registry.create_branch(conn, "spike", parent="main")
    doomed = alice.put("Spike: the cache moved to Redis.", branch="spike")
    bob.follower.catch_up()
    assert doomed["seq"] in bob.vectors.index
    assert bob.search("where is the cache?", branch="spike") == ["Spike: the cache moved to Redis."]
    with alice.db.transaction() as conn:
        registry.delete_branch(conn, "spike")
    # A branch of the same name, made again, is another branch: the old rows must still go.
    with alice.db.transaction() as conn:
        registry.create_branch(conn, "spike", parent="main")
    kept = alice.put("Spike two: the cache stays in memory.", branch="spike")
    bob.follower.catch_up()
    assert doomed["seq"] not in bob.vectors.index
    assert kept["seq"] in bob.vectors.index
