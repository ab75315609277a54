"""What the HTTP benchmarks share about their data dir and the worker they start on it."""

from __future__ import annotations

import shutil
import time
from pathlib import Path


def fresh_or_reused(data_dir: Path, reuse: bool) -> bool:
    """Empty `data_dir` for a fresh run, unless `reuse` and an earlier run left its data there.

    Returns True when the earlier data is reused (the benchmark then skips writing).
    """
    if reuse and (data_dir / "memory.sqlite3").exists():
        return True
    shutil.rmtree(data_dir, ignore_errors=True)
    return False


def wait_vectors_loaded(client, timeout: float = 600.0) -> float:
    """Seconds until the worker reports its vector index loaded (searches before that are keyword-only)."""
    t0 = time.perf_counter()
    while not client.get("/api/v1/status").get("vectors_loaded", True):
        if time.perf_counter() - t0 > timeout:
            raise TimeoutError(f"the worker did not load its vectors within {timeout:.0f} s")
        time.sleep(0.1)
    return time.perf_counter() - t0
