"""`memory-anchor bench spine`: the capture spine's figures, side by side, in one run.

- hook: median wall time of a PostToolUse hook process vs a bare `python3 -c pass`
- capture: hook events per second accepted durably (HTTP 202) from concurrent clients
- search: p50/p95 of hybrid search with a user filter at N stored memories
- context: p50/p95 of the SessionStart context with N observations in the project
- RSS of the worker with the embedding model loaded

Everything runs against a real worker in a throw-away data dir, over HTTP, from
separate processes, so the figures are what a user's machine would see.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from memory_anchor.bench.locomo import percentile

ROOT = Path(__file__).resolve().parents[2]
HOOK = ROOT / "hooks" / "hook.py"
TARGETS = {
    "hook_ratio": 1.5,
    "events_per_second": 1000,
    "search_p95_ms": 50,
    "context_p95_ms": 100,
    "rss_mb": 300,
}
WORDS = (
    "parser cache index query schema migration worker hook session branch merge deploy config token "
    "retry backoff timeout socket thread queue logging metrics test fixture build release docs api"
).split()


def tool_event(session: str, n: int, project: str) -> dict:
    words = " ".join(WORDS[(n * 7 + i) % len(WORDS)] for i in range(6))
    return {
        "session_id": session,
        "transcript_path": f"/tmp/{session}.jsonl",
        "cwd": project,
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": f"pytest tests/test_{WORDS[n % len(WORDS)]}.py -k case{n}", "description": words},
        "tool_response": {"stdout": f"{n % 17} passed; {words}", "stderr": "", "interrupted": False},
        "tool_use_id": f"toolu_bench_{session}_{n}",
        "duration_ms": 40,
    }


def _real_python3() -> str:
    """The interpreter `python3` resolves to (a version manager's shim would add its own start-up)."""
    out = subprocess.run(["python3", "-c", "import sys; print(sys.executable)"], capture_output=True, text=True)
    return out.stdout.strip() or "python3"


def time_process(argv: list[str], stdin: bytes, env: dict[str, str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, input=stdin, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - start)
    return times


def _post_events(args: tuple[int, str, int, int, str, str]) -> tuple[int, int]:
    """One client process: post `count` events over a keep-alive connection."""
    port, token, client_no, count, project, session_prefix = args
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    accepted = 0
    for n in range(count):
        body = json.dumps(tool_event(f"{session_prefix}-{client_no}", n, project))
        conn.request("POST", "/api/v1/events", body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        accepted += response.status == 202
    conn.close()
    return accepted, count


def run(args) -> int:
    from memory_anchor.client.worker_client import WorkerClient
    from memory_anchor.core import lifecycle

    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="ma-bench-spine-"))
    data_dir = work / "data"
    shutil.rmtree(data_dir, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["MEMORY_ANCHOR_DATA_DIR"] = str(data_dir)
    os.environ["MEMORY_ANCHOR_DATA_DIR"] = str(data_dir)
    os.environ.pop("ANTHROPIC_API_KEY", None)
    os.environ["MEMORY_ANCHOR_LLM_ROUTE"] = "local"  # nor the Claude Code login: these measure the local path
    print(f"Memory Anchor spine benchmark (data in {data_dir})", flush=True)
    info = lifecycle.start_background(data_dir, wait=120)
    client = WorkerClient(data_dir, timeout=300, autostart=False)
    rows: list[tuple[str, str, str, str]] = []
    try:
        # 1. Hook process wall time.
        event = json.dumps(tool_event("hook-bench", 0, str(work / "hook-project"))).encode()
        hook_env = {**env, "CLAUDE_PLUGIN_ROOT": str(ROOT)}
        python3 = _real_python3()
        bare, hook = [], []
        for _ in range(40):  # interleaved, so machine load hits both alike
            bare += time_process([python3, "-c", "pass"], b"", hook_env, 1)
            hook += time_process([python3, "-S", str(HOOK), "PostToolUse"], event, hook_env, 1)
        bare_ms, hook_ms = statistics.median(bare) * 1000, statistics.median(hook) * 1000
        ratio = hook_ms / bare_ms
        rows.append(("PostToolUse hook median", f"{hook_ms:.1f} ms", f"python3 -c pass {bare_ms:.1f} ms (x{ratio:.2f})", f"<= x{TARGETS['hook_ratio']}"))
        rows.append(("  vs claude-mem hooks", f"{hook_ms:.1f} ms", "about 500-600 ms (DESIGN.md figure)", f"{550 / hook_ms:.0f}x faster"))

        # 2. Capture rate from concurrent client processes.
        project = str(work / "bench-project")
        per_client = max(1, args.observations // args.clients)
        start = time.perf_counter()
        with ProcessPoolExecutor(max_workers=args.clients) as pool:
            results = list(pool.map(_post_events, [(info.port, info.token, c, per_client, project, "cap") for c in range(args.clients)]))
        elapsed = time.perf_counter() - start
        accepted = sum(r[0] for r in results)
        rate = accepted / elapsed
        rows.append(("Events accepted durably", f"{rate:,.0f} /s", f"{accepted} events, {args.clients} clients, {elapsed:.1f} s", f">= {TARGETS['events_per_second']}/s"))

        # 3. Let the pipeline distil and embed them (the observations for the context test).
        start = time.perf_counter()
        client.wait_idle(timeout=3600)
        drain = time.perf_counter() - start
        observations = client.get("/api/v1/observations", project=project, limit=1)["total"]
        rows.append(("Pipeline drain (local)", f"{observations / max(drain, 1e-9):,.0f} obs/s", f"{observations} observations in {drain:.1f} s", "-"))

        # 4. SessionStart context at that many observations.
        latencies = []
        for _ in range(100):
            t0 = time.perf_counter()
            context = client.get("/api/v1/context", project=project, source="startup")
            latencies.append((time.perf_counter() - t0) * 1000)
        rows.append(("SessionStart context", f"p50 {percentile(latencies, .5):.1f} ms / p95 {percentile(latencies, .95):.1f} ms", f"{observations} observations, {context['tokens']} tokens", f"p95 < {TARGETS['context_p95_ms']} ms"))

        # 5. Search at N memories (several users, filters on).
        users = [f"user-{u}" for u in range(5)]
        batch = 250
        start = time.perf_counter()
        for offset in range(0, args.memories, batch):
            user = users[(offset // batch) % len(users)]
            messages = [
                {"role": "user", "content": f"{user} note {n}: " + " ".join(WORDS[(n * 3 + i) % len(WORDS)] for i in range(10))}
                for n in range(offset, min(offset + batch, args.memories))
            ]
            client.post("/api/v1/memories", {"messages": messages, "user_id": user, "infer": False})
        ingest = time.perf_counter() - start
        latencies = []
        for n in range(200):
            query = f"how did we handle {WORDS[n % len(WORDS)]} {WORDS[(n * 5) % len(WORDS)]} problems"
            t0 = time.perf_counter()
            client.post("/api/v1/memories/search", {"query": query, "filters": {"user_id": users[n % len(users)]}, "top_k": 10})
            latencies.append((time.perf_counter() - t0) * 1000)
        rows.append(("Add memories (API, batches)", f"{args.memories / ingest:,.0f} /s", f"{args.memories} memories in {ingest:.1f} s", "-"))
        rows.append(("Search, user filter", f"p50 {percentile(latencies, .5):.1f} ms / p95 {percentile(latencies, .95):.1f} ms", f"{args.memories + observations} records stored", f"p95 < {TARGETS['search_p95_ms']} ms"))

        # 6. Worker memory.
        status = client.get("/api/v1/status")
        rows.append(("Worker RSS", f"{status['rss_mb']:.0f} MB", "right after the searches", f"< {TARGETS['rss_mb']} MB"))
        time.sleep(12)  # the vector store closes Chroma (and its in-memory HNSW) a few seconds after the last write
        status = client.get("/api/v1/status")
        rows.append(("Worker RSS, idle", f"{status['rss_mb']:.0f} MB", "12 s later, embedding model loaded", f"< {TARGETS['rss_mb']} MB"))
        rows.append(("Worker RSS, peak", f"{status['peak_rss_mb']:.0f} MB", "highest over the whole run (VmHWM)", f"< {TARGETS['rss_mb']} MB"))
    finally:
        lifecycle.stop(data_dir)
    width = max(len(r[0]) for r in rows)
    print()
    print(f"{'measure'.ljust(width)}  {'result':<32} {'context':<48} target")
    for name, result, context, target in rows:
        print(f"{name.ljust(width)}  {result:<32} {context:<48} {target}")
    return 0

