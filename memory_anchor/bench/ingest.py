"""`memory-anchor bench ingest`: memories per second through the mem0 add API, counted until searchable.

A real worker in a throw-away data dir receives N short memories (bench scale's
generator, `infer: false`) three ways: one memory per `POST /api/v1/memories`
from 1 client, the same from 4 concurrent clients, and adds of 50 messages from
4 clients. Each way is timed from the first request to the moment the last
memory is searchable by vector (no version left in `pending_vectors`), and
writes its own user's memories, so the three never touch the same records.

mem0's SDK and most of its clients add one memory a call: that row is what a
LongMemEval or LoCoMo load through the API runs at.
"""

from __future__ import annotations

import os
import random
import tempfile
import threading
import time
from pathlib import Path

from memory_anchor.bench.scale import PROJECTS, memory_text

TARGETS = {"one_per_add_4_clients": 200, "adds_of_50": 1000}


def ingest(client_factory, texts: list[str], *, clients: int, per_add: int, user: str) -> float:
    """Seconds from the first add until every text is stored and embedded."""
    adds = [texts[i : i + per_add] for i in range(0, len(texts), per_add)]
    lock = threading.Lock()
    errors: list[BaseException] = []

    def work() -> None:
        client = client_factory()
        while True:
            with lock:
                if not adds or errors:
                    return
                batch = adds.pop(0)
            try:
                client.post("/api/v1/memories", {
                    "messages": [{"role": "user", "content": text} for text in batch],
                    "user_id": user, "project": PROJECTS[0], "infer": False,
                })  # fmt: skip
            except BaseException as exc:  # noqa: BLE001 - reported once the threads are joined
                with lock:
                    errors.append(exc)
                return

    started = time.perf_counter()
    threads = [threading.Thread(target=work) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    probe = client_factory()
    # Each look at the status page costs the worker 2-3 ms of CPU (it counts every record): every
    # 20 ms, that took a tenth of a core from the embedding it waits for.
    while probe.get("/api/v1/status")["pending_vectors"]:
        time.sleep(0.05)
    return time.perf_counter() - started


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time so far of a process and its children (Linux), or None.

    The children count: the worker's Chroma runs in one (memory_anchor/worker/index/chroma_child.py).
    Those that have exited and been waited for are in the process's own counters (cutime, cstime);
    those still running are read one by one.
    """
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = sum(int(fields[n]) for n in (11, 12, 13, 14))
    except (OSError, ValueError, IndexError):
        return None
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            child = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(child[1]) == pid:
                ticks += int(child[11]) + int(child[12])
        except (OSError, ValueError, IndexError):
            continue
    return ticks / os.sysconf("SC_CLK_TCK")


def run(args) -> int:
    from memory_anchor.client.worker_client import WorkerClient
    from memory_anchor.core import lifecycle

    n = int(args.n)
    work = Path(args.work_dir) if getattr(args, "work_dir", None) else Path(tempfile.mkdtemp(prefix="ma-bench-ingest-"))
    data_dir = work / "data"
    os.environ["MEMORY_ANCHOR_DATA_DIR"] = str(data_dir)
    os.environ.pop("ANTHROPIC_API_KEY", None)
    os.environ["MEMORY_ANCHOR_LLM_ROUTE"] = "local"  # infer is false anyway: nothing may reach Claude
    lifecycle.start_background(data_dir, wait=120)

    def client() -> WorkerClient:
        return WorkerClient(data_dir, timeout=600, autostart=False)

    rng = random.Random(7)
    ways = [("one per add, 1 client", 1, 1, None), ("one per add, 4 clients", 4, 1, "one_per_add_4_clients"),
            ("adds of 50, 4 clients", 4, 50, "adds_of_50")]  # fmt: skip
    print(f"Memory Anchor ingest benchmark: {n} memories each way, counted until searchable (data in {data_dir})")
    try:
        # The model and Chroma load with the first add: not part of any way's figure.
        ingest(client, [memory_text(rng, 0, "warm")], clients=1, per_add=1, user="warm-up")
        pid = client().info().pid
        for number, (label, clients, per_add, target) in enumerate(ways):
            texts = [memory_text(rng, i, f"user{number}") for i in range(n)]
            cpu = cpu_seconds(pid)
            seconds = ingest(client, texts, clients=clients, per_add=per_add, user=f"user{number}")
            rate = n / seconds
            # The worker's CPU per memory (its Chroma process's included) holds still when a busy
            # machine slows the wall clock.
            used = cpu_seconds(pid)
            per = f"worker CPU {(used - cpu) / n * 1000:5.1f} ms/memory" if cpu is not None and used is not None else ""
            goal = f"(target >= {TARGETS[target]}/s: {'ok' if rate >= TARGETS[target] else 'under'})" if target else ""
            print(f"  {label:24} {rate:7.0f} memories/s   {seconds:6.1f} s   {per}   {goal}", flush=True)
        status = client().get("/api/v1/status")
        print(f"  worker RSS {status['rss_mb']:.0f} MB (peak {status['peak_rss_mb']:.0f} MB)")
    finally:
        lifecycle.stop(data_dir)
    return 0
