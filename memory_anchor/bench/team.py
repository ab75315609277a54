"""`memory-anchor bench team`: three workers on one PostgreSQL, writing and searching at once.

The bench starts a throwaway PostgreSQL cluster (memory_anchor/bench/postgres_cluster.py)
or uses `--storage-url` (an existing database's owner URL). It runs the real
`memory-anchor storage init` and `storage add-member` for three roles, then starts
three real worker processes, one data dir each, each connecting as its own member.
This process is their client, over HTTP; it measures:

- write throughput: N memories (`bench scale`'s generator, mem0 `POST /api/v1/memories`,
  `infer: false`, batches of 100, shared) written through the three workers at once;
  this is also how the bulk is loaded
- visibility lag: a memory with a unique token written on worker A, then searched for on
  B and C in a loop until each finds it; the time from A's request to the find, so it
  includes A's embedding and commit (p50/p95 over the probes, both readers)
- filtered search: p50/p95 with project + user filters at N memories, spread over the workers
- the database down: the cluster is stopped, each worker takes K hook events (each must
  answer 202), the cluster starts again; lost = events posted that never became records
- the same write throughput and filtered search for one worker on SQLite, for comparison
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from memory_anchor.bench.locomo import percentile
from memory_anchor.bench.scale import BATCH, PROJECTS, USERS, batches, query_text

TARGETS = {"lag_p95_ms": 2000, "search_p95_ms": 50}
ROLES = ("alice", "bob", "carol")
PROBE_USER = "visibility-probe"
PROBE_TIMEOUT = 30.0  # a probe not found by then counts as missing, not as a lag


def member_url(owner_url: str, role: str) -> str:
    """The owner's URL with the member's role as user and no password (the server must trust or know it)."""
    parts = urlsplit(owner_url)
    host = parts.hostname or ""
    netloc = f"{role}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def owner_database(storage_url: str | None, cleanup: contextlib.ExitStack):
    """(the owner's URL of the database to run on, the cluster started for it or None): `storage_url`'s,
    or a new database in a throwaway cluster, stopped by `cleanup` even on error. None, saying why,
    when there are no server binaries to start one from."""
    from memory_anchor.bench.postgres_cluster import ClusterUnavailable, start_cluster

    if storage_url:
        return storage_url, None
    try:
        cluster = start_cluster()
    except ClusterUnavailable as exc:
        print(f"no PostgreSQL server binaries to start one from: {exc}; give --storage-url", file=sys.stderr)
        return None
    cleanup.callback(cluster.stop)
    return cluster.url(cluster.create_database()), cluster


def storage_command(*argv: str) -> str:
    """Run `memory-anchor storage ...` as a user would; its output, or an error saying why."""
    result = subprocess.run(
        [sys.executable, "-m", "memory_anchor.cli.main", "storage", *argv],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if result.returncode != 0:
        raise RuntimeError(f"storage {argv[0]} failed: {result.stderr or result.stdout}")
    return result.stdout.strip()


class Worker:
    """A real worker process on its own data dir, and an HTTP client to it."""

    def __init__(self, name: str, data_dir: Path, storage_url: str | None):
        from memory_anchor.client.worker_client import WorkerClient
        from memory_anchor.core import lifecycle

        self.name, self.data_dir = name, data_dir
        # lifecycle passes this process's environment on: set the worker's storage for the start only.
        saved = os.environ.pop("MEMORY_ANCHOR_STORAGE_URL", None)
        if storage_url:
            os.environ["MEMORY_ANCHOR_STORAGE_URL"] = storage_url
        try:
            lifecycle.start_background(data_dir, wait=180)
        finally:
            os.environ.pop("MEMORY_ANCHOR_STORAGE_URL", None)
            if saved is not None:
                os.environ["MEMORY_ANCHOR_STORAGE_URL"] = saved
        self._local = threading.local()
        self._client_class = WorkerClient

    @property
    def client(self):
        """One client per thread: the bench drives the workers from several at once."""
        if not hasattr(self._local, "client"):
            self._local.client = self._client_class(self.data_dir, timeout=600, autostart=False)
        return self._local.client

    def search(self, query: str, filters: dict) -> list[dict]:
        return self.client.post("/api/v1/memories/search", {"query": query, "filters": filters, "top_k": 10})["results"]

    def post_event(self, event: dict) -> int:
        """POST a hook event as the hooks do; the HTTP status (202: durably in the inbox)."""
        info = self.client.info()
        conn = http.client.HTTPConnection("127.0.0.1", info.port, timeout=30)
        try:
            conn.request("POST", "/api/v1/events", body=json.dumps(event),
                         headers={"Authorization": f"Bearer {info.token}", "Content-Type": "application/json"})  # fmt: skip
            response = conn.getresponse()
            response.read()
            return response.status
        finally:
            conn.close()

    def stop(self) -> None:
        from memory_anchor.core import lifecycle

        lifecycle.stop(self.data_dir)


def write_bulk(workers: list[Worker], n: int) -> float:
    """Write n memories through the workers at once (one client thread each); the wall time."""
    bodies = [
        {"messages": [{"role": "user", "content": text} for text in texts], "user_id": user, "project": project, "infer": False}
        for project, user, texts in batches(n)
    ]
    share = [bodies[i :: len(workers)] for i in range(len(workers))]

    def write(worker: Worker, mine: list[dict]) -> None:
        for body in mine:
            worker.client.post("/api/v1/memories", body)

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(workers)) as pool:
        list(pool.map(write, workers, share))
    return time.perf_counter() - start


def wait_indexed(workers: list[Worker], timeout: float = 1800.0) -> float:
    """Seconds until every worker's vector index holds every record (a search makes a follower catch up)."""
    t0 = time.perf_counter()
    for worker in workers:
        while True:
            worker.search("warm up", {"user_id": USERS[0]})
            if worker.client.get("/api/v1/status").get("pending_vectors") in (0, None):
                break
            if time.perf_counter() - t0 > timeout:
                raise TimeoutError(f"{worker.name}'s vector index did not catch up within {timeout:.0f} s")
            time.sleep(0.5)
    return time.perf_counter() - t0


def filtered_search(workers: list[Worker], queries: int) -> list[float]:
    """Latencies (ms) of project + user filtered searches, round robin over the workers."""
    rng = random.Random(7)
    for worker in workers:
        for _ in range(5):  # warm-up
            worker.search(query_text(rng), {"project": rng.choice(PROJECTS), "user_id": rng.choice(USERS)})
    latencies = []
    for q in range(queries):
        worker = workers[q % len(workers)]
        query, filters = query_text(rng), {"project": rng.choice(PROJECTS), "user_id": rng.choice(USERS)}
        t0 = time.perf_counter()
        worker.search(query, filters)
        latencies.append((time.perf_counter() - t0) * 1000)
    return latencies


def visibility_lags(writer: Worker, readers: list[Worker], probes: int) -> tuple[list[float], int]:
    """Lags (ms) from the write on `writer` to the find on each reader; and how many finds timed out."""
    lags, missing = [], 0

    def poll(reader: Worker, token: str, t0: float) -> float | None:
        while time.perf_counter() - t0 < PROBE_TIMEOUT:
            if any(token in hit["memory"] for hit in reader.search(token, {"user_id": PROBE_USER})):
                return (time.perf_counter() - t0) * 1000
            time.sleep(0.01)
        return None

    with ThreadPoolExecutor(max_workers=len(readers) + 1) as pool:
        for _ in range(probes):
            token = "probe" + uuid.uuid4().hex[:12]
            body = {"messages": [{"role": "user", "content": f"Visibility check {token}: the release notes moved to the wiki."}],
                    "user_id": PROBE_USER, "infer": False}  # fmt: skip
            t0 = time.perf_counter()
            # The readers poll from the moment the write is sent, as a teammate's search would run.
            found = [pool.submit(poll, reader, token, t0) for reader in readers]
            writer.client.post("/api/v1/memories", body)
            for future in found:
                lag = future.result()
                if lag is None:
                    missing += 1
                else:
                    lags.append(lag)
    return lags, missing


def prompt_event(session: str, n: int) -> dict:
    return {"hook_event_name": "UserPromptSubmit", "session_id": session, "cwd": "/home/dev/src/billing-api",
            "prompt": f"prompt {n} of {session} while the team database is down"}  # fmt: skip


def outage(cluster, workers: list[Worker], owner_url: str, per_worker: int) -> tuple[int, int, int, float]:
    """Stop the database, post hook events to every worker, start it again, wait for them to be processed.

    Returns (posted, accepted with 202, records found for them, seconds from restart to all processed).
    """
    from memory_anchor.worker.store.postgres.admin import prompts_stored

    run = uuid.uuid4().hex[:8]
    sessions = {w.name: f"team-outage-{run}-{w.name}" for w in workers}
    posted = accepted = 0
    cluster.pause()
    try:
        for worker in workers:
            for n in range(per_worker):
                code = worker.post_event(prompt_event(sessions[worker.name], n))
                posted += 1
                accepted += code == 202
        # Hold the outage until every worker's pipeline has met it (not only the hooks' side).
        deadline = time.monotonic() + 60
        while any(w.client.get("/api/v1/status")["store"]["reachable"] for w in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        cluster.resume()
    t0 = time.perf_counter()
    deadline = time.monotonic() + 600
    found = 0
    while time.monotonic() < deadline:
        found = prompts_stored(owner_url, list(sessions.values()))
        if found >= posted and all(w.client.get("/api/v1/status")["inbox"].get("pending", 0) == 0 for w in workers):
            break
        time.sleep(0.5)
    return posted, accepted, found, time.perf_counter() - t0


def ms(values: list[float]) -> str:
    return f"p50 {percentile(values, .5):.1f} ms / p95 {percentile(values, .95):.1f} ms"


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def run(args) -> int:
    n, probes, events = int(args.n), int(args.probes), int(args.events)
    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="ma-bench-team-"))
    os.environ.pop("ANTHROPIC_API_KEY", None)
    os.environ["MEMORY_ANCHOR_LLM_ROUTE"] = "local"  # nor the Claude Code login: these measure the local path
    rows: list[tuple[str, str, str, str]] = []
    print(f"Memory Anchor team benchmark: {n} memories, {probes} probes, {events} events per worker "
          f"(data in {work}; {load()})", flush=True)  # fmt: skip
    with contextlib.ExitStack() as cleanup:
        database = owner_database(args.storage_url, cleanup)
        if database is None:
            return 2
        owner_url, cluster = database
        if cluster is None:
            where = "the server at --storage-url"
        else:
            where = f"a throwaway PostgreSQL cluster ({cluster.bin_dir.parent.name}) on 127.0.0.1:{cluster.port}"
        print(f"PostgreSQL: {where}", flush=True)
        print("  storage init: " + storage_command("init", owner_url).replace("\n", "; "), flush=True)
        for role in ROLES:
            print("  storage add-member: " + storage_command("add-member", role, "--url", owner_url), flush=True)

        workers: list[Worker] = []
        try:
            for role in ROLES:
                workers.append(Worker(role, work / f"worker-{role}", member_url(owner_url, role)))
            print(f"  3 workers up ({', '.join(ROLES)}); writing {n} memories through them at once", flush=True)
            elapsed = write_bulk(workers, n)
            rows.append(("PostgreSQL write throughput", f"{n / elapsed:,.0f} memories/s",
                         f"{n} in {elapsed:.1f} s, 3 workers at once", "-"))  # fmt: skip
            caught_up = wait_indexed(workers)
            print(f"  written; every worker's index caught up {caught_up:.1f} s later", flush=True)
            lags, missing = visibility_lags(workers[0], workers[1:], probes)
            rows.append(("PostgreSQL visibility lag", ms(lags) if lags else "none found",
                         f"{probes} probes x 2 readers, {missing} not found in {PROBE_TIMEOUT:.0f} s",
                         f"p95 < {TARGETS['lag_p95_ms']} ms"))  # fmt: skip
            latencies = filtered_search(workers, args.queries)
            rows.append(("PostgreSQL filtered search", ms(latencies), f"project+user, {n} memories, 3 workers",
                         f"p95 < {TARGETS['search_p95_ms']} ms"))  # fmt: skip
            if cluster is None:
                rows.append(("PostgreSQL lost while down", "not measured", "--storage-url: not our server to stop", "0"))
            else:
                posted, accepted, found, catch_up = outage(cluster, workers, owner_url, events)
                rows.append(("PostgreSQL lost while down", f"lost = {posted - found}",
                             f"{posted} posted, {accepted} got 202, processed {catch_up:.1f} s after restart", "0"))  # fmt: skip
        finally:
            for worker in workers:
                worker.stop()

        print(f"SQLite: one worker; writing {n} memories through it from 3 clients at once", flush=True)
        sqlite = Worker("sqlite", work / "worker-sqlite", None)
        try:
            elapsed = write_bulk([sqlite] * 3, n)
            rows.append(("SQLite write throughput", f"{n / elapsed:,.0f} memories/s",
                         f"{n} in {elapsed:.1f} s, 1 worker, 3 clients", "-"))  # fmt: skip
            wait_indexed([sqlite])
            latencies = filtered_search([sqlite], args.queries)
            rows.append(("SQLite filtered search", ms(latencies), f"project+user, {n} memories, 1 worker",
                         f"p95 < {TARGETS['search_p95_ms']} ms"))  # fmt: skip
        finally:
            sqlite.stop()
    width = max(len(r[0]) for r in rows)
    print()
    print(f"{'measure'.ljust(width)}  {'result':<34} {'context':<58} target")
    for name, result, context, target in rows:
        print(f"{name.ljust(width)}  {result:<34} {context:<58} {target}")
    print(f"\nbulk loaded through the workers' mem0 API (batches of {BATCH}); {load()}")
    return 0
