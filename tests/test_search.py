"""SearchService: hybrid retrieval over the real model and each backend: SQLite with Chroma files,
PostgreSQL (as a member, row-level security in force) with vectors in the database followed by seq.

Tests taking `store` run on both; those that open a data dir again (restart,
Chroma, the FTS5 query text) are SQLite's."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from memory_anchor.core import paths
from memory_anchor.worker.index.database_vectors import DatabaseVectorStore
from memory_anchor.worker.index.embeddings import Embedder
from memory_anchor.worker.index.follower import LogFollower
from memory_anchor.worker.index.indexer import Indexer
from memory_anchor.worker.index.search import SearchError, SearchService, Tuning
from memory_anchor.worker.index.vectors import Vectors
from memory_anchor.worker.store.db import Database
from memory_anchor.worker.store.records import Records, resolve_view

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


class Store:
    def __init__(self, data_dir: Path, embedder: Embedder, db=None):
        self.data_dir = data_dir
        self.db = db if db is not None else Database(paths.database_path(data_dir))
        if isinstance(self.db, Database):
            self.vectors = Vectors(paths.chroma_path(data_dir))
            self.indexer = Indexer(self.db, self.vectors, embedder)
            self.service = SearchService(self.db, self.vectors, embedder)
        else:  # team storage: vectors in the database, this worker's index following the log
            self.vectors = Vectors(store=DatabaseVectorStore(self.db))
            self.indexer = LogFollower(self.db, self.vectors, embedder)
            self.service = SearchService(self.db, self.vectors, embedder, follower=self.indexer)

    def put(self, text: str, *, branch: str = "main", index: bool = True, **values):
        values.setdefault("user_id", "alice")
        with self.db.transaction() as conn:
            record = Records.put(conn, values.pop("kind", "memory"), text, branch=branch, **values)
        if index:
            self.indexer.flush([record["seq"]])
        return record

    def search(self, query: str, *, branch: str = "main", as_of=None, **kwargs):
        view = resolve_view(self.db.reader(), branch, as_of)
        kwargs.setdefault("filters", {"user_id": "alice"})
        return self.service.search(query, view, **kwargs)

    def close(self):
        self.vectors.close()
        self.db.close()


@pytest.fixture
def store(tmp_path, embedder, store_db):
    s = Store(tmp_path, embedder, store_db)
    yield s
    s.vectors.close()  # the database is store_db's to close


def texts(hits):
    return [h["text"] for h in hits]


def test_paraphrase_ranks_above_unrelated(store):
    store.put("The nightly deploy broke because the database migration timed out.")
    store.put("Lunch options near the office include ramen and tacos.")
    store.put("We renamed the marketing newsletter.")
    hits = store.search("why did the release pipeline fail overnight?", mode="vector")
    assert hits[0]["text"].startswith("The nightly deploy broke")
    assert 0 < hits[0]["score"] <= 1


def test_keyword_finds_rare_identifier_and_hybrid_keeps_it(store):
    store.put("Error ERR_SOCK_4471 appears when the proxy drops idle sockets.")
    for n in range(10):
        store.put(f"General note {n} about networking and sockets in the proxy layer.")
    assert store.search("ERR_SOCK_4471", mode="keyword")[0]["text"].startswith("Error ERR_SOCK_4471")
    assert store.search("what is ERR_SOCK_4471?")[0]["text"].startswith("Error ERR_SOCK_4471")


def test_user_filter_excludes_other_users(store):
    store.put("Alice prefers tabs over spaces.", user_id="alice")
    store.put("Bob prefers tabs over spaces.", user_id="bob")
    hits = store.search("tabs or spaces preference", filters={"user_id": "bob"}, top_k=10)
    assert texts(hits) == ["Bob prefers tabs over spaces."]


def test_project_kind_and_metadata_filters(store):
    store.put("Cache invalidation uses versioned keys.", project="/repo/a", metadata={"topic": "cache"})
    store.put("Cache invalidation uses TTLs.", project="/repo/b", metadata={"topic": "cache"})
    store.put("Cache warmup happens at boot.", project="/repo/a", metadata={"topic": "boot"})
    store.put("Cache facts are verified.", project="/repo/a", kind="fact", metadata={"topic": "cache"})
    hits = store.search("cache", filters={"user_id": "alice", "project": "/repo/a", "kind": "memory", "topic": "cache"})
    assert texts(hits) == ["Cache invalidation uses versioned keys."]
    hits = store.search("cache", filters={"project": "/repo/a", "metadata": {"topic": "cache"}}, top_k=10)
    assert sorted(texts(hits)) == ["Cache facts are verified.", "Cache invalidation uses versioned keys."]


def test_branch_invisible_rows_never_returned(store):
    store.put("Main knows the API uses REST.")
    with store.db.transaction() as conn:
        fork = Records.head_seq(conn)
        conn.execute(
            "INSERT INTO branches(name, parent, fork_seq, created_at) VALUES ('experiment', 'main', ?, ?)",
            (fork, time.time()),
        )
    store.put("Experiment switched the API to GraphQL.", branch="experiment")
    store.put("Main later added API rate limits.")
    for mode in ("hybrid", "vector", "keyword"):
        on_main = texts(store.search("API", mode=mode, top_k=10))
        assert "Experiment switched the API to GraphQL." not in on_main
        assert "Main later added API rate limits." in on_main
        on_branch = texts(store.search("API", branch="experiment", mode=mode, top_k=10))
        assert "Experiment switched the API to GraphQL." in on_branch
        assert "Main knows the API uses REST." in on_branch
        assert "Main later added API rate limits." not in on_branch  # written after the fork


def test_as_of_hides_later_writes_and_updates_supersede(store):
    first = store.put("The retry limit is 3 attempts.")
    cut = first["seq"]
    store.put("The retry backoff is exponential.")
    with store.db.transaction() as conn:
        updated = Records.update(conn, first["id"], text="The retry limit is 5 attempts.")
    store.indexer.flush([updated["seq"]])
    now_hits = texts(store.search("retry limit attempts", top_k=10))
    assert "The retry limit is 5 attempts." in now_hits
    assert "The retry limit is 3 attempts." not in now_hits  # superseded version
    past = store.search("retry limit attempts", as_of=cut, top_k=10)
    assert texts(past) == ["The retry limit is 3 attempts."]


def test_deleted_and_identity_records_are_not_returned(store):
    gone = store.put("Temporary note about the staging password rotation.")
    store.put("I am a careful engineer who values tests.", kind="identity")
    with store.db.transaction() as conn:
        Records.delete(conn, gone["id"])
    hits = store.search("staging password rotation careful engineer tests", top_k=10)
    assert all(h["kind"] != "identity" for h in hits)
    assert "Temporary note about the staging password rotation." not in texts(hits)
    assert store.search("engineer", filters={"user_id": "alice", "kind": "identity"}, top_k=10) == []


def test_fallback_returns_most_recent_and_threshold_can_empty(store):
    store.put("Alpha note.", happened_at=1_000)
    store.put("Beta note.", happened_at=2_000)
    # A query whose words match nothing and with no vectors yet indexed: most recent first.
    store.put("Gamma note.", happened_at=3_000, index=False)
    hits = store.search("zzqx", mode="keyword", top_k=2)
    assert texts(hits) == ["Gamma note.", "Beta note."]
    assert all(h["match"] == "recent" and h["score"] == 0 for h in hits)
    assert store.search("zzqx", mode="keyword", threshold=0.1) == []
    assert store.search("zzqx", mode="keyword", fallback=False) == []
    assert store.search("anything", filters={"user_id": "nobody"}) == []


def test_unindexed_records_are_found_by_keyword_in_vector_mode(store):
    store.put("Kubernetes liveness probe flaps under load.", index=False)
    hits = store.search("liveness probe", mode="vector")
    assert hits and hits[0]["text"].startswith("Kubernetes liveness")


def test_time_range_and_query_dates(store):
    may = time.mktime((2023, 5, 10, 12, 0, 0, 0, 0, 0))
    july = time.mktime((2023, 7, 10, 12, 0, 0, 0, 0, 0))
    store.put("We went hiking in the mountains.", happened_at=may)
    store.put("We went hiking by the lake.", happened_at=july)
    hits = store.search("hiking", time_range=(None, "2023-06-01T00:00:00Z"), top_k=10)
    assert texts(hits) == ["We went hiking in the mountains."]
    assert store.search("where did we go hiking in July 2023?")[0]["text"] == "We went hiking by the lake."
    assert store.search("where did we go hiking in May 2023?")[0]["text"] == "We went hiking in the mountains."


def test_bad_arguments_are_clear_errors(store):
    with pytest.raises(SearchError, match="mode"):
        store.search("x", mode="magic")
    with pytest.raises(SearchError, match="top_k"):
        store.search("x", top_k=0)
    with pytest.raises(SearchError, match="time_range"):
        store.search("x", time_range=("not a date", None))


def test_keyword_query_is_shaped(tmp_path, embedder):
    store = Store(tmp_path, embedder)
    conn = store.db.reader()
    assert store.service.keyword_query(conn, "What did the team decide about the cache?") == '"team" OR "decide" OR "cache"'
    assert store.service.keyword_query(conn, "the of and") == ""
    assert store.service.keyword_query(conn, 'quote" AND NOT injection') == '"quote" OR "injection"'


def test_vectors_survive_restart_and_rebuild(tmp_path, embedder):
    first = Store(tmp_path, embedder)
    for n in range(5):
        first.put(f"Persistent memory number {n} about the billing service.")
    pending = first.put("Queued but not yet embedded: invoices are monthly.", index=False)
    first.close()

    second = Store(tmp_path, embedder)
    assert len(second.vectors) == 5  # read back from Chroma's files
    assert second.indexer.pending_count() == 1
    assert second.indexer.drain() == 1  # crash-safe queue: nothing written is forgotten
    assert pending["seq"] in second.vectors
    assert second.indexer.rebuild() == 6
    assert len(second.vectors) == 6
    assert second.search("how often are invoices sent?", mode="vector")[0]["seq"] == pending["seq"]
    second.close()


def test_retriever_has_no_benchmark_special_cases():
    """The retrieval code must not know the benchmark: no dataset names, ids or speakers."""
    suspicious = ("locomo", "dia_id", "conv-", "caroline", "melanie", "sample_id", "evidence")
    for name in ("index/search.py", "index/vectors.py", "index/indexer.py", "index/embeddings.py"):
        source = (ROOT / "memory_anchor" / "worker" / name).read_text(encoding="utf-8").lower()
        for word in suspicious:
            assert word not in source, f"{name} mentions {word!r}"


def test_vector_store_takes_any_chroma_client(tmp_path, embedder):
    """The scale-out seam: ChromaStore works with any chromadb client (here an in-memory one,
    standing in for chromadb.HttpClient against a Chroma server)."""
    import chromadb
    from chromadb.config import Settings

    from memory_anchor.worker.index.vectors import ChromaStore, VectorFilter, VectorItem

    store = ChromaStore(client_factory=lambda: chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False)))
    vectors = Vectors(store=store)
    texts = ["deploy failed on friday", "the cat sleeps all day", "rollback of the friday release"]
    items = [
        VectorItem(n + 1, v, {"project": "p", "branch": "main", "kind": "memory", "happened_at": 1.0})
        for n, v in enumerate(embedder.embed(texts))
    ]
    vectors.add(items)
    assert store.count() == 3
    hits = vectors.search(embedder.embed_one("release problems"), 2, VectorFilter(chain=(("main", None),)))
    assert {seq for seq, _ in hits} == {1, 3}
    assert vectors.search(embedder.embed_one("x"), 3, VectorFilter(chain=(("other", None),))) == []
    vectors.delete([1])
    assert store.count() == 2 and 1 not in vectors
    store.release()


def test_search_during_vector_load_answers_by_keyword_and_meaning(tmp_path, embedder):
    first = Store(tmp_path, embedder)
    first.put("The flaky test is test_upload_retry.")
    first.put("The cat sleeps on the test bench all day.")
    first.close()
    second = Store(tmp_path, embedder)
    loaded = second.search("flaky upload retry test")
    second.close()
    third = Store(tmp_path, embedder)
    # Another thread is reading the vectors back (worker start-up): searches must not wait; what
    # their words find is ranked by them, with the similarity it has once the index is loaded.
    with third.vectors._load_lock:
        assert third.vectors.loading
        hits = third.search("flaky upload retry test")
        assert hits[0]["text"] == loaded[0]["text"] and hits[0]["match"] == "keyword"
        assert hits[0]["similarity"] == pytest.approx(loaded[0]["similarity"], abs=1e-3)
    assert third.search("flaky upload retry test")[0]["match"] == "vector+keyword"
    third.close()


def test_dense_query_drops_the_names_of_transcript_speakers(store):
    """A chat stored as "Name: text" embeds the name into every turn: a question naming
    the speaker must not pull the speaker's empty turns by the name alone."""
    chat = [
        "Ada: Cool, thanks Ada!",
        "Ada: Haha, yes!",
        "Ada: Sounds great, talk soon!",
        "Ada: Wow, that's amazing!",
        "Ada: Last weekend we went camping in the mountains and roasted marshmallows with the kids.",
        "Ada: I signed up for a pottery class, working with clay calms me down.",
        "Bob: I spent the whole weekend fixing my bike.",
    ]
    for text in chat:
        store.put(text)
    conn = store.db.reader()
    service = store.service
    assert service.dense_query(conn, "What hobbies does Ada have in Lisbon?") == "What hobbies does have in Lisbon?"
    assert service.dense_query(conn, "Where did Ada's sister and Bob go?") == "Where did sister and go?"
    # Not a speaker of any record: a name is content like any other word.
    assert service.dense_query(conn, "What did Zed say?") == "What did Zed say?"
    assert service.dense_query(conn, "Ada") == "Ada"  # nothing left to embed: keep the query

    for mode in ("vector", "hybrid"):
        found = texts(store.search("What hobbies does Ada have?", mode=mode, top_k=2))
        assert set(found) == {chat[4], chat[5]}, (mode, found)


def test_a_query_of_only_very_common_words_skips_bm25_beside_the_dense_list(tmp_path, embedder):
    """BM25 scores every row a word matches: beside a dense list, a word found in more than
    `max_df_docs` records is not worth that cost; a keyword-only search still uses the rarest."""
    store = Store(tmp_path, embedder)
    store.service.tuning = Tuning(max_df_docs=100)
    with store.db.transaction() as conn:
        for n in range(1200):
            common = "deploy pipeline" if n % 2 else "deploy cache"
            Records.put(conn, "memory", f"note {n}: the {common} was checked", user_id="alice")
    conn = store.db.reader()
    assert store.service.keyword_query(conn, "deploy pipeline", alone=False) == ""
    assert store.service.keyword_query(conn, "deploy pipeline", alone=True) == '{text title} : ("pipeline")'
    # An informative word keeps its place whatever else the query holds.
    with store.db.transaction() as conn:
        Records.put(conn, "memory", "the rollback runbook lives in the wiki", user_id="alice")
    assert store.service.keyword_query(store.db.reader(), "deploy rollback", alone=False) == '"rollback"'
    store.close()


def test_thread_neighbours_are_the_two_before_and_after_in_the_session_else_the_user(store_db):
    """Neighbour context's walks: per thread (the session, else the user), per kind, puts only,
    stopping at the thread's ends. PostgreSQL runs them as lateral walks of the (thread, seq)
    index, SQLite as a UNION ALL: the same links either way."""
    from memory_anchor.worker.index.search import _thread_neighbours

    with store_db.transaction() as conn:
        put = lambda text, **v: Records.put(conn, v.pop("kind", "memory"), text, **v)  # noqa: E731
        s1 = [put(f"session one {n}", session_id="s1", user_id="ada") for n in range(5)]
        other_session = put("another session between", session_id="s2", user_id="ada")
        put("another kind between", kind="fact", session_id="s1", user_id="ada")
        u = [put(f"ada without a session {n}", user_id="ada") for n in range(3)]
        put("bob's", user_id="bob")
        deleted = put("ada's last, deleted", user_id="ada")
        Records.delete(conn, deleted["id"])
        lone = put("nobody's")
    conn = store_db.reader()
    links = _thread_neighbours(conn, [s1[0], s1[2], s1[4], u[1], lone])
    seq = lambda r: r["seq"]  # noqa: E731
    assert links == {
        seq(s1[0]): [(seq(s1[1]), 1), (seq(s1[2]), 2)],
        seq(s1[2]): [(seq(s1[1]), 1), (seq(s1[0]), 2), (seq(s1[3]), 1), (seq(s1[4]), 2)],
        seq(s1[4]): [(seq(s1[3]), 1), (seq(s1[2]), 2)],
        # A record without a session walks its user's records, in sessions or not (a deleted
        # record's put stays in the thread; another user's record is not in it).
        seq(u[1]): [(seq(u[0]), 1), (seq(other_session), 2), (seq(u[2]), 1), (seq(deleted), 2)],
    }
