"""`memory-anchor bench scale --n 100000`: ingest and search at scale, through the HTTP API.

A real worker in a throw-away data dir receives N synthetic but realistic
memories (engineering notes with varied vocabulary) spread over several
projects and users, a tenth of them written on branches forked from main. This
process is a separate client; it measures:

- ingest: wall time to store and embed all N (batched `POST /api/v1/memories`)
- search p50/p95 without filters, with project + user filters, on main and on a branch
- worker RSS (from `/api/v1/status`) and disk size of the data dir
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from memory_anchor.bench.locomo import percentile
from memory_anchor.bench.workdir import fresh_or_reused, wait_vectors_loaded

TARGETS = {"ingest_minutes": 15, "search_p95_ms": 50, "rss_mb": 500}
PROJECTS = [f"/home/dev/src/{name}" for name in ("billing-api", "web-shop", "data-pipeline", "mobile-app", "infra")]
USERS = ["alice", "bob", "carol", "dave"]
BATCH = 100

SUBJECTS = (
    "the payment webhook handler", "the checkout page", "the nightly ETL job", "the login flow", "the Redis cache",
    "the Postgres migration", "the Kafka consumer", "the image resizer", "the feature flag service", "the CI pipeline",
    "the search indexer", "the rate limiter", "the invoice generator", "the push notification worker",
    "the GraphQL gateway", "the Terraform module", "the Docker build", "the S3 uploader", "the session store",
    "the onboarding wizard", "the metrics exporter", "the retry queue", "the PDF renderer", "the audit log",
)  # fmt: skip
EVENTS = (
    "timed out under load", "leaked file descriptors", "returned stale data", "double-charged a customer",
    "crashed on empty input", "was slow on cold start", "dropped messages during deploys", "logged secrets",
    "failed on daylight saving days", "ran out of memory", "deadlocked with the scheduler", "ignored the config",
)  # fmt: skip
FIXES = (
    "we added an idempotency key", "we raised the pool size to 20", "we switched to streaming parsing",
    "we pinned the library version", "we moved the work to a background queue", "we added a circuit breaker",
    "we cached the lookup for five minutes", "we rewrote the query with an index", "we added input validation",
    "we split the job into batches of 500", "we set an explicit timezone", "we redacted tokens before logging",
)  # fmt: skip
EXTRAS = (
    "Ticket {n} tracks the follow-up.", "Owner: {user}.", "Verified in staging on build {n}.",
    "See the runbook section {m}.", "The regression test is test_case_{n}.", "Rollout finished by {user}.",
)  # fmt: skip
QUERIES = (
    "why did {s} fail", "how did we fix {s}", "{s} timeout", "what changed in {s} after the incident",
    "memory problems in {s}", "who owns {s}", "idempotency for payments", "circuit breaker settings",
    "slow cold start", "timezone bug", "secrets in logs", "batch size for jobs", "query index rewrite",
)  # fmt: skip


def memory_text(rng: random.Random, n: int, user: str) -> str:
    subject, event, fix = rng.choice(SUBJECTS), rng.choice(EVENTS), rng.choice(FIXES)
    extra = rng.choice(EXTRAS).format(n=n, m=rng.randint(1, 40), user=user)
    return f"{subject.capitalize()} {event}; {fix}. {extra}"


def query_text(rng: random.Random) -> str:
    return rng.choice(QUERIES).format(s=rng.choice(SUBJECTS))


def batches(n: int) -> Iterator[tuple[str, str, list[str]]]:
    """N memories in batches of BATCH as `bench team` and `bench search` write them:
    (project, user, texts), the projects in turn, the user changing every len(PROJECTS) batches."""
    rng = random.Random(42)
    for written in range(0, n, BATCH):
        count = min(BATCH, n - written)
        project = PROJECTS[(written // BATCH) % len(PROJECTS)]
        user = USERS[(written // (BATCH * len(PROJECTS))) % len(USERS)]
        yield project, user, [memory_text(rng, written + i, user) for i in range(count)]


def dir_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def run(args) -> int:
    from memory_anchor.client.worker_client import WorkerClient
    from memory_anchor.core import lifecycle

    n = int(args.n)
    work = Path(args.work_dir) if getattr(args, "work_dir", None) else Path(tempfile.mkdtemp(prefix="ma-bench-scale-"))
    data_dir = work / "data"
    reuse = fresh_or_reused(data_dir, bool(getattr(args, "reuse", False)))
    os.environ["MEMORY_ANCHOR_DATA_DIR"] = str(data_dir)
    os.environ.pop("ANTHROPIC_API_KEY", None)
    os.environ["MEMORY_ANCHOR_LLM_ROUTE"] = "local"  # nor the Claude Code login: these measure the local path
    rng = random.Random(42)
    print(f"Memory Anchor scale benchmark: {n} memories (data in {data_dir})", flush=True)
    started = time.perf_counter()
    lifecycle.start_background(data_dir, wait=120)
    client = WorkerClient(data_dir, timeout=600, autostart=False)
    rows: list[tuple[str, str, str]] = []
    try:
        # Half-way through main's writes, each project gets a branch; a tenth of the rest go there.
        branches: dict[str, str] = {}
        start = time.perf_counter()
        written = 0
        if reuse:  # search-only re-run over an earlier run's data (its ingest figure stands)
            written = n
            branches = {p: f"exp/{Path(p).name}" for p in PROJECTS}
            rows.append(("ingest", "skipped (--reuse)", "-"))
            wait_vectors_loaded(client)
            rows.append(("start-up until vectors loaded", f"{time.perf_counter() - started:.1f} s", "-"))
        while written < n:
            count = min(BATCH, n - written)
            project = PROJECTS[(written // BATCH) % len(PROJECTS)]
            user = USERS[(written // (BATCH * len(PROJECTS))) % len(USERS)]
            if written >= n // 2 and not branches:
                for p in PROJECTS:
                    name = f"exp/{Path(p).name}"
                    client.post("/api/v1/branches", {"name": name, "description": "scale bench experiment"})
                    branches[p] = name
            body = {
                "messages": [{"role": "user", "content": memory_text(rng, written + i, user)} for i in range(count)],
                "user_id": user,
                "project": project,
                "infer": False,
                "timestamp": time.time() - rng.randint(0, 365 * 86400),
            }
            if branches and rng.random() < 0.1:
                body["branch"] = branches[project]
            client.post("/api/v1/memories", body)
            written += count
            if written % 10_000 == 0 or written == n:
                elapsed = time.perf_counter() - start
                print(f"  {written} stored, {elapsed:.0f} s ({written / elapsed:.0f}/s)", flush=True)
        if not reuse:
            ingest = time.perf_counter() - start
            rows.append(("ingest", f"{ingest / 60:.1f} min ({n / ingest:.0f}/s)", f"<= {TARGETS['ingest_minutes']} min"))

        def measure(label: str, make_body) -> None:
            latencies = []
            for _ in range(5):  # warm-up
                client.post("/api/v1/memories/search", make_body())
            for _ in range(args.queries):
                body = make_body()
                t0 = time.perf_counter()
                client.post("/api/v1/memories/search", body)
                latencies.append((time.perf_counter() - t0) * 1000)
            rows.append(
                (f"search {label}", f"p50 {percentile(latencies, .5):.1f} ms / p95 {percentile(latencies, .95):.1f} ms",
                 f"p95 < {TARGETS['search_p95_ms']} ms")
            )  # fmt: skip

        measure("no filters, main", lambda: {"query": query_text(rng), "top_k": 10})
        measure(
            "project+user, main",
            lambda: {"query": query_text(rng), "top_k": 10,
                     "filters": {"project": rng.choice(PROJECTS), "user_id": rng.choice(USERS)}},
        )  # fmt: skip
        if branches:
            measure(
                "project+user, branch",
                lambda: (lambda p: {"query": query_text(rng), "top_k": 10, "branch": branches[p],
                                    "filters": {"project": p, "user_id": rng.choice(USERS)}})(rng.choice(PROJECTS)),
            )  # fmt: skip
            measure("no filters, branch", lambda: {"query": query_text(rng), "top_k": 10, "branch": rng.choice(list(branches.values()))})
        status = client.get("/api/v1/status")
        rows.append(("worker RSS", f"{status['rss_mb']:.0f} MB", f"< {TARGETS['rss_mb']} MB"))
        idle_wait = getattr(args, "idle_wait", 12.0)
        if idle_wait:
            time.sleep(idle_wait)  # the vector store closes Chroma a few seconds after the last write
            status = client.get("/api/v1/status")
            rows.append(("worker RSS, idle", f"{status['rss_mb']:.0f} MB", f"< {TARGETS['rss_mb']} MB"))
        rows.append(("worker RSS, peak (VmHWM)", f"{status['peak_rss_mb']:.0f} MB", "-"))
    finally:
        lifecycle.stop(data_dir)
    rows.append(("disk (data dir)", f"{dir_size(data_dir) / 2**20:.0f} MiB", "-"))
    width = max(len(r[0]) for r in rows)
    print()
    for name, result, target in rows:
        print(f"{name.ljust(width)}  {result:<34} {target}")
    return 0
