"""Data dirs written before the freed-bytes fix: the first worker start clears what they leaked, once.

A leaky data dir is made the way older workers made one (tests/test_secrets_at_rest.py shows the
leak and the fix): a process whose malloc hands out freed blocks as they are holds a secret in
freed memory and writes to Chroma, until the secret's bytes are in an index file. Then a real
worker starts on it (worker/index/scrub.py).
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from memory_anchor import paths
from tests.conftest import ROOT, start_worker, wait_for, worker_env
from tests.test_secrets_at_rest import leaks
from worker.index.scrub import MARKER, ChromaScrub, scrub_chroma_dir

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the leak is glibc's malloc reusing blocks")

SECRET = "sk-ant-api03-scrubTest7Qw9xLr2Vb8Nz4Kp1Hd6Fj3Gm5Ts0Ye"

MEMORIES = {
    "The deploy script lives in ops/deploy.sh and needs the staging kubeconfig": "where is the deploy script?",
    "Integration tests run against PostgreSQL 16 in a throwaway cluster": "which database do integration tests use?",
    "The team prefers squash merges with a conventional commit title": "how do we merge pull requests?",
    "Releases are cut every second Tuesday from the main branch": "when do releases happen?",
    "The billing service retries webhooks three times with exponential backoff": "how are webhooks retried?",
    "Frontend strings are translated through the i18n catalogue in web/locales": "where are translations kept?",
}

# As a worker before the fix: no clear_reused_memory, so freed blocks come back with their bytes.
# Rewrites the vectors Chroma already holds (the same values: search must not change), each time
# after freeing blocks full of the secret, until an index file holds it.
OLD_WORKER_WRITES = """
import ctypes, sys
from pathlib import Path
from worker.index import heap
from worker.index.chroma_store import ChromaStore

heap.configure_malloc()
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
root, secret = Path(sys.argv[1]), sys.argv[2].encode()

def leave_freed_secret():
    blocks = []
    for size in (50_000, 120_000, 165_000, 170_000, 200_000, 300_000, 600_000, 900_000) * 4:
        block = libc.malloc(size)
        ctypes.memmove(block, secret * (size // len(secret)), size // len(secret) * len(secret))
        blocks.append(block)
        libc.malloc(64)  # kept: the freed blocks stay apart instead of merging back into the heap's top
    for block in blocks:
        libc.free(ctypes.c_void_p(block))

store = ChromaStore(root)
items = [item for page in store.iterate() for item in page]
for attempt in range(12):
    leave_freed_secret()
    store.add(items)
    store.release()
    if any(secret in p.read_bytes() for p in root.rglob("*.bin")):
        print(attempt + 1)
        break
"""


def search_all(worker) -> dict[str, list[tuple[str, float]]]:
    return {
        query: [(hit["memory"], hit["score"]) for hit in worker.post("/api/v1/memories/search",
                {"query": query, "filters": {"user_id": "scrub"}, "top_k": 3})["results"]]
        for query in MEMORIES.values()
    }  # fmt: skip


def vectors_loaded(worker) -> bool:
    """The warm-up loads the vectors right after its scrub (Services.warm_up)."""
    return bool(worker.get("/api/v1/status")["vectors_loaded"])


def scrub_log_lines(data_dir: Path, since: int = 0) -> list[str]:
    """What the scrub said in the worker log (from byte `since` on)."""
    with open(paths.log_path(data_dir), "rb") as handle:
        handle.seek(since)
        entries = [json.loads(line) for line in handle.read().decode().splitlines() if line.strip()]
    return [entry["message"] for entry in entries if entry["logger"] == "worker.index.scrub"]


def make_leaky_data_dir(data_dir: Path) -> dict[str, list[tuple[str, float]]]:
    """A data dir as an older worker left it, and what searches answered on it before it leaked."""
    worker = start_worker(data_dir, env=worker_env(data_dir))
    try:
        for content in MEMORIES:
            worker.post("/api/v1/memories", {"content": content, "infer": False, "user_id": "scrub"})
        worker.wait_idle(timeout=180)
        before = search_all(worker)
    finally:
        worker.stop()
    written = subprocess.run([sys.executable, "-c", OLD_WORKER_WRITES, str(paths.chroma_path(data_dir)), SECRET],
                             cwd=ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert written.returncode == 0, written.stderr
    # Older versions wrote no marker: without one, a data dir is taken to be theirs.
    (data_dir / MARKER).unlink()
    return before


def test_a_leaky_data_dir_is_scrubbed_at_the_first_start_and_only_then(tmp_path: Path):
    data_dir = tmp_path / "data"
    before = make_leaky_data_dir(data_dir)
    leaked = leaks(data_dir, [SECRET])
    assert leaked and all(f.endswith("data_level0.bin") for f in leaked[SECRET]), leaked  # the old leak, for real

    worker = start_worker(data_dir, env=worker_env(data_dir))
    try:
        wait_for(lambda: vectors_loaded(worker), timeout=120, what="warm-up")
        assert leaks(data_dir, [SECRET]) == {}
        _same(search_all(worker), before)
    finally:
        worker.stop()
    assert leaks(data_dir, [SECRET]) == {}
    marker = json.loads((data_dir / MARKER).read_text())
    assert marker["cleared_bytes"] > 0 and marker["skipped"] == []
    assert any("bytes of freed memory cleared" in line for line in scrub_log_lines(data_dir))

    # A second start does nothing: the marker stays as it was, and the log says no scrub.
    log_size = paths.log_path(data_dir).stat().st_size
    index_files = {p: p.read_bytes() for p in paths.chroma_path(data_dir).rglob("*.bin")}
    worker = start_worker(data_dir, env=worker_env(data_dir))
    try:
        wait_for(lambda: vectors_loaded(worker), timeout=120, what="warm-up")
        _same(search_all(worker), before)
    finally:
        worker.stop()
    assert json.loads((data_dir / MARKER).read_text()) == marker
    assert scrub_log_lines(data_dir, since=log_size) == []
    assert {p: p.read_bytes() for p in index_files} == index_files


def _same(after: dict, before: dict) -> None:
    """Every query finds what it found before the scrub, in the same order with the same scores.

    Scores come rounded to 4 places, and a restart reads the vectors back from Chroma, which
    returns them normalised for cosine (a few units in float32's last place off the embedder's):
    the last digit may differ by one.
    """
    assert {q: [m for m, _ in hits] for q, hits in after.items()} == {q: [m for m, _ in hits] for q, hits in before.items()}
    for query, hits in after.items():
        assert [s for _, s in hits] == pytest.approx([s for _, s in before[query]], abs=1.01e-4), query
    assert all(before[query] and before[query][0][0] == memory for memory, query in MEMORIES.items())
