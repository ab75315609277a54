"""Search on a branch three levels deep and at an as_of point, next to the same search on main.

`memory-anchor bench branches --memories 10000 --memories 100000`
(`--work-dir D --reuse` re-runs only the searches over D's data from an earlier run)

For each size: a fresh worker; most memories are written on main, then
`l1` forks main, `l1/l2` forks `l1`, `l1/l2/l3` forks `l1/l2`, each writing its
share, and main keeps writing after the forks (rows the branches must not
see). A snapshot in the middle gives the as_of point. The same queries then
run through the worker's HTTP search API (hybrid, top 10) on main, on
`l1/l2/l3`, on main as of the snapshot and on `l1/l2/l3` as of the snapshot.
Targets: branch/as_of p95 within 1.5x of main's and under 50 ms.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from memory_anchor.bench.locomo import percentile
from memory_anchor.bench.workdir import fresh_or_reused, wait_vectors_loaded

WORDS = (
    "cache router schema migration index token queue worker branch merge snapshot retry timeout "
    "deadlock parser lexer vector embedding tenant session hook status order invoice payment "
    "refund webhook cursor batch shard replica backup restore deploy rollback flag metric alert"
).split()
DEEP = "l1/l2/l3"
RATIO_TARGET = 1.5
P95_TARGET_MS = 50.0


def _text(n: int) -> str:
    words = " ".join(WORDS[(n * 7 + i * 3) % len(WORDS)] for i in range(12))
    return f"note {n}: {words}"


def _write(client, branch: str, start: int, count: int, batch: int = 500) -> None:
    for offset in range(start, start + count, batch):
        messages = [{"role": "user", "content": _text(n)} for n in range(offset, min(offset + batch, start + count))]
        client.post("/api/v1/memories", {"messages": messages, "user_id": "bench", "infer": False, "branch": branch})


def _measure(client, queries: list[str], branch: str, as_of: str | None) -> list[float]:
    latencies = []
    for query in queries:
        body = {"query": query, "top_k": 10, "branch": branch, "filters": {"user_id": "bench"}}
        if as_of:
            body["as_of"] = as_of
        t0 = time.perf_counter()
        hits = client.post("/api/v1/memories/search", body)["results"]
        latencies.append((time.perf_counter() - t0) * 1000)
        if not hits:
            raise AssertionError(f"search on {branch} as_of {as_of} returned nothing for {query!r}")
    return latencies


def _write_views(client, size: int) -> None:
    """Main, the snapshot in the middle, the three branch levels, then main again after the forks."""
    from memory_anchor.client import branches as branch_api

    share = max(1, size // 30)  # each branch level writes ~3%, main writes after the forks ~3%
    on_main = size - 4 * share
    _write(client, "main", 0, on_main // 2)
    branch_api.snapshot(client, "bench-mid", "main")
    _write(client, "main", on_main // 2, on_main - on_main // 2)
    parent, done = "main", on_main
    for name in ("l1", "l1/l2", DEEP):
        branch_api.create_branch(client, name, parent=parent, description="benchmark level")
        _write(client, name, done, share)
        parent, done = name, done + share
    _write(client, "main", done, share)  # after the forks: invisible on the branches


def bench_size(size: int, work: Path, queries: int, reuse: bool = False) -> list[tuple[str, float, float, float]]:
    from memory_anchor.client.worker_client import WorkerClient
    from memory_anchor.core import lifecycle

    data_dir = work / f"data-{size}"
    reused = fresh_or_reused(data_dir, reuse)
    os.environ["MEMORY_ANCHOR_DATA_DIR"] = str(data_dir)
    t0 = time.perf_counter()
    lifecycle.start_background(data_dir, wait=120)
    client = WorkerClient(data_dir, timeout=600, autostart=False)
    try:
        if reused:
            wait_vectors_loaded(client)
            print(f"  {size:,} memories reused; worker started and vectors loaded in {time.perf_counter() - t0:.1f} s",
                  flush=True)  # fmt: skip
        else:
            t0 = time.perf_counter()
            _write_views(client, size)
            client.wait_idle(timeout=7200)
            print(f"  {size:,} memories written and embedded in {time.perf_counter() - t0:.0f} s", flush=True)
        texts = [f"{WORDS[n % len(WORDS)]} {WORDS[(n * 5 + 1) % len(WORDS)]} problem" for n in range(queries)]
        _measure(client, texts[:20], "main", None)  # warm up caches
        rows = []
        base = None
        for label, branch, as_of in (
            ("main", "main", None),
            (f"{DEEP} (3 levels deep)", DEEP, None),
            ("main as_of snapshot", "main", "bench-mid"),
            (f"{DEEP} as_of snapshot", DEEP, "bench-mid"),
        ):
            lat = _measure(client, texts, branch, as_of)
            p50, p95 = statistics.median(lat), percentile(lat, 0.95)
            base = base or p95
            rows.append((label, p50, p95, p95 / base))
        print(f"  worker RSS after the searches: {client.get('/api/v1/status')['rss_mb']:.0f} MB", flush=True)
        return rows
    finally:
        lifecycle.stop(data_dir)


def run(args) -> int:
    sizes = args.memories or [10_000, 100_000]
    work = Path(args.work_dir) if getattr(args, "work_dir", None) else Path(tempfile.mkdtemp(prefix="ma-bench-branches-"))
    os.environ.pop("ANTHROPIC_API_KEY", None)
    os.environ["MEMORY_ANCHOR_LLM_ROUTE"] = "local"  # nor the Claude Code login: these measure the local path
    print(f"Memory Anchor branch-search benchmark (data in {work})", flush=True)
    results: list[tuple[int, str, float, float, float]] = []
    for size in sizes:
        for label, p50, p95, ratio in bench_size(size, work, args.queries, bool(getattr(args, "reuse", False))):
            results.append((size, label, p50, p95, ratio))
    print()
    print(f"{'memories':>9}  {'search on':<28} {'p50 ms':>7} {'p95 ms':>7} {'p95 vs main':>12}  target")
    ok = True
    for size, label, p50, p95, ratio in results:
        passed = p95 < P95_TARGET_MS and ratio <= RATIO_TARGET
        ok = ok and passed
        print(f"{size:>9,}  {label:<28} {p50:>7.1f} {p95:>7.1f} {ratio:>11.2f}x  "
              f"p95 < {P95_TARGET_MS:.0f} ms, <= {RATIO_TARGET}x main: {'ok' if passed else 'MISSED'}")  # fmt: skip
    return 0 if ok else 1
