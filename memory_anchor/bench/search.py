"""`memory-anchor bench search --n 20000`: keyword and hybrid search in process, SQLite beside PostgreSQL.

`bench team` times search through three workers' HTTP APIs on a loaded machine;
this one calls the search service itself, so its figures are the search's own:

- N memories of `bench scale`'s generator (5 projects, 4 users, as `bench team`
  writes them), each text embedded once, written with the same vector to a SQLite
  data dir and to a team database, there in the names of three members in turn
  (a throwaway cluster, as `bench team` starts, or `--storage-url`: an empty
  database's owner URL); then the team database is vacuumed and analyzed, as
  autovacuum leaves a settled one;
- keyword and hybrid searches (the default mode), without filters and with
  project + user filters, plus the kinds the mem0 API searches; on PostgreSQL
  as one of the members, row-level security in force, and with the log
  follower that catches a worker's vector index up before each dense query;
- p50 / p95 per search and backend.
"""

from __future__ import annotations

import contextlib
import os
import random
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the worker runs (memory_anchor/worker/__main__.py); before numpy loads

from memory_anchor.bench.locomo import percentile  # noqa: E402
from memory_anchor.bench.scale import PROJECTS, USERS, batches, query_text  # noqa: E402
from memory_anchor.bench.team import ROLES, member_url, owner_database, storage_command  # noqa: E402

SEARCHES = [(mode, filtered) for mode in ("keyword", "hybrid") for filtered in (False, True)]


class Backend:
    """One backend's store, vectors and search service, as a worker builds them."""

    def __init__(self, name: str, db, vectors, embedder, follower=None):
        from memory_anchor.worker.index.search import SearchService

        self.name, self.db, self.vectors = name, db, vectors
        self.search = SearchService(db, vectors, embedder, follower=follower)

    def close(self) -> None:
        self.vectors.close()
        self.db.close()


def load(n: int, sqlite_dir: Path, owner_url: str, embedder) -> float:
    """Write the n memories to both backends; the seconds it took."""
    from memory_anchor.worker.index.database_vectors import DatabaseVectorStore
    from memory_anchor.worker.index.indexer import vector_meta
    from memory_anchor.worker.index.vectors import VectorItem, Vectors
    from memory_anchor.worker.store.db import Database
    from memory_anchor.worker.store.postgres.database import PostgresDatabase
    from memory_anchor.worker.store.records import Records

    members = [PostgresDatabase(member_url(owner_url, role)) for role in ROLES]
    local = Database(sqlite_dir / "memory.sqlite3")
    local_vectors = Vectors(sqlite_dir / "chroma")
    targets = [(local, local_vectors)] + [(member, DatabaseVectorStore(member)) for member in members]
    started = time.perf_counter()
    written = 0
    try:
        for number, (project, user, texts) in enumerate(batches(n)):
            vectors = embedder.embed(texts)
            # SQLite, and the team database in each member's name in turn (as bench team's workers).
            for db, store in (targets[0], targets[1 + number % len(members)]):
                with db.transaction() as conn:
                    rows = [Records.put(conn, "memory", text, project=project, user_id=user) for text in texts]
                store.add([VectorItem(row["seq"], vectors[i], vector_meta(row)) for i, row in enumerate(rows)])
            written += len(texts)
            if (number + 1) % 50 == 0:
                print(f"  {written} written, {time.perf_counter() - started:.0f} s", flush=True)
    finally:
        local_vectors.close()
        local.close()
        for member in members:
            member.close()
    return time.perf_counter() - started


def backends(sqlite_dir: Path, owner_url: str, embedder) -> list[Backend]:
    from memory_anchor.worker.index.database_vectors import DatabaseVectorStore
    from memory_anchor.worker.index.follower import LogFollower
    from memory_anchor.worker.index.vectors import Vectors
    from memory_anchor.worker.store.db import Database
    from memory_anchor.worker.store.postgres.database import PostgresDatabase

    local = Backend("SQLite", Database(sqlite_dir / "memory.sqlite3"), Vectors(sqlite_dir / "chroma"), embedder)
    local.vectors.load()
    team = PostgresDatabase(member_url(owner_url, ROLES[1]))
    vectors = Vectors(store=DatabaseVectorStore(team))
    follower = LogFollower(team, vectors, embedder)
    follower.catch_up(embed=False)
    return [local, Backend("PostgreSQL", team, vectors, embedder, follower)]


def latencies(backend: Backend, mode: str, filtered: bool, queries: int) -> list[float]:
    """Milliseconds per search, the same seeded queries on every backend."""
    from memory_anchor.worker.memory.memories import DEFAULT_SEARCH_KINDS
    from memory_anchor.worker.store.records import resolve_view

    rng = random.Random(7)

    def one() -> None:
        filters = {"kind": DEFAULT_SEARCH_KINDS}
        if filtered:
            filters.update(project=rng.choice(PROJECTS), user_id=rng.choice(USERS))
        view = resolve_view(backend.db.reader(), "main")
        backend.search.search(query_text(rng), view, filters=filters, top_k=10, mode=mode)

    for _ in range(10):  # warm-up: caches of document frequencies and speakers, the embedding session
        one()
    out = []
    for _ in range(queries):
        t0 = time.perf_counter()
        one()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def run(args) -> int:
    from memory_anchor.worker.index.embeddings import Embedder
    from memory_anchor.worker.store.postgres.admin import vacuum_analyze

    n = int(args.n)
    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="ma-bench-search-"))
    sqlite_dir = work / "sqlite"
    sqlite_dir.mkdir(parents=True, exist_ok=True)
    print(f"Memory Anchor search benchmark: {n} memories, {args.queries} searches each (data in {work})", flush=True)
    with contextlib.ExitStack() as cleanup:
        database = owner_database(args.storage_url, cleanup)
        if database is None:
            return 2
        owner_url = database[0]
        storage_command("init", owner_url)
        for role in ROLES:
            storage_command("add-member", role, "--url", owner_url)
        embedder = Embedder()
        elapsed = load(n, sqlite_dir, owner_url, embedder)
        print(f"  written to both in {elapsed:.0f} s; vacuuming and analyzing the team database", flush=True)
        vacuum_analyze(owner_url)
        pair = backends(sqlite_dir, owner_url, embedder)
        try:
            rows = []
            for mode, filtered in SEARCHES:
                figures = []
                for backend in pair:
                    ms = latencies(backend, mode, filtered, args.queries)
                    figures.append(f"{percentile(ms, .5):.1f} / {percentile(ms, .95):.1f} ms")
                rows.append((f"{mode}, {'project + user' if filtered else 'no filter'}", *figures))
        finally:
            for backend in pair:
                backend.close()
    print()
    print(f"{'search (p50 / p95)':<26} " + " ".join(f"{b.name:<20}" for b in pair))
    for label, *figures in rows:
        print(f"{label:<26} " + " ".join(f"{f:<20}" for f in figures))
    print(f"\n{n} memories, {args.queries} searches per row, in process; load average "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))  # fmt: skip
    return 0
