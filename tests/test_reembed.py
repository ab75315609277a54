"""Vectors follow the embedding model: a worker that finds another model's vectors re-embeds them.

The data dir records which model made its vectors (`vectors-model.json`,
memory_anchor/worker/index/reembed.py). Here a real worker's vectors are replaced by noise and
the file says another model made them, as after an upgrade that changed the
model; the next worker says so in its log, re-embeds every vector in the
background, and dense search finds the right memories again.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from memory_anchor.core import paths
from tests.conftest import ROOT, start_worker
from memory_anchor.worker.index.embeddings import MODEL_ID
from memory_anchor.worker.index.reembed import MARKER
from memory_anchor.worker.index.vector_item import VectorItem
from memory_anchor.worker.index.vectors import MemoryIndex, Vectors

MEMORIES = {
    "build": "The project builds with ninja, never with make.",
    "db": "Production runs PostgreSQL 15 on a dedicated host.",
    "style": "Formatting is black with a line length of 100.",
    "deploy": "Deploys go out on Tuesdays after the standup.",
}


def _add_all(worker) -> dict[str, str]:
    ids = {}
    for key, text in MEMORIES.items():
        body = {"messages": [{"role": "user", "content": text}], "user_id": "u", "infer": False}
        ids[key] = worker.post("/api/v1/memories", body)["results"][0]["id"]
    worker.wait_idle()
    return ids


def _wait_for_model(data_dir: Path, worker, model: str = MODEL_ID, *, search: bool = False) -> None:
    """Until the data dir's marker names `model` (searching meanwhile if asked)."""
    deadline = time.monotonic() + 120
    while True:
        marker = data_dir / MARKER
        if marker.exists() and json.loads(marker.read_text()).get("model") == model:
            return
        assert time.monotonic() < deadline, worker.get("/api/v1/status")
        if search:  # search answers all along, whatever the vectors are meanwhile
            worker.post("/api/v1/memories/search", {"query": "database", "top_k": 3})
        time.sleep(0.1)


def _log_says(data_dir: Path, *texts: str) -> bool:
    """Whether the worker's log holds all of `texts`, waiting a little: the last line follows the marker."""
    deadline = time.monotonic() + 30
    while True:
        log = (data_dir / "logs" / "worker.log").read_text()
        if all(text in log for text in texts) or time.monotonic() > deadline:
            return all(text in log for text in texts)
        time.sleep(0.1)


def _dense_first(worker, query: str) -> str | None:
    hits = worker.post("/api/v1/memories/search", {"query": query, "mode": "vector", "top_k": 1})["results"]
    return hits[0]["id"] if hits else None


def _scramble_vectors(data_dir: Path) -> int:
    """Replace every stored vector with random unit vectors (what another model's would look like to this one)."""
    vectors = Vectors(paths.chroma_path(data_dir), snapshot=paths.vector_snapshot_path(data_dir))
    seqs = [int(s) for s in vectors.index.export()["seq"]] if vectors.load() else []
    rng = np.random.default_rng(7)
    noise = rng.standard_normal((len(seqs), vectors.index.dim)).astype(np.float32)
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    replaced = vectors.overwrite([VectorItem(seq, noise[n], {}) for n, seq in enumerate(seqs)])
    vectors.close()
    return replaced


def test_a_new_store_records_its_model_and_another_models_vectors_are_reembedded(tmp_path):
    data_dir = tmp_path / "data"
    worker = start_worker(data_dir)
    try:
        ids = _add_all(worker)
        assert _dense_first(worker, "which build tool do we use") == ids["build"]
        _wait_for_model(data_dir, worker)  # written at warm-up
        assert json.loads((data_dir / MARKER).read_text()) == {"model": MODEL_ID}
        assert worker.get("/api/v1/status")["reembedding"] is None
    finally:
        worker.stop()

    assert _scramble_vectors(data_dir) == len(MEMORIES)
    (data_dir / MARKER).write_text(json.dumps({"model": "an-older-model"}))

    worker = start_worker(data_dir)
    try:
        _wait_for_model(data_dir, worker, search=True)
        assert worker.get("/api/v1/status")["reembedding"] is None
        assert _dense_first(worker, "which build tool do we use") == ids["build"]
        assert _dense_first(worker, "what database runs in production") == ids["db"]
        assert _log_says(data_dir, "made by model an-older-model", f"re-embedded {len(MEMORIES)} vectors")
    finally:
        worker.stop()


def test_an_interrupted_reembedding_resumes_where_it_stopped(tmp_path):
    data_dir = tmp_path / "data"
    worker = start_worker(data_dir)
    try:
        ids = _add_all(worker)
        _wait_for_model(data_dir, worker)
    finally:
        worker.stop()
    with sqlite3.connect(paths.database_path(data_dir)) as conn:
        marks = ",".join("?" * len(ids))
        seqs = [r[0] for r in conn.execute(f"SELECT seq FROM records WHERE id IN ({marks}) ORDER BY seq", list(ids.values()))]
    _scramble_vectors(data_dir)
    # Another worker re-embedded the first two, then stopped.
    state = {"model": "an-older-model", "reembedding": {"to": MODEL_ID, "after_seq": seqs[1], "done": 2}}
    (data_dir / MARKER).write_text(json.dumps(state))

    worker = start_worker(data_dir)
    try:
        _wait_for_model(data_dir, worker)
        assert _log_says(data_dir, f"resuming after record version {seqs[1]}")
        # Only the last two were redone: the first two keep the noise this test gave them.
        assert _dense_first(worker, "which build tool do we use") != ids["build"]
        assert _dense_first(worker, "when do deploys go out") == ids["deploy"]
        assert _dense_first(worker, "how is code formatted") == ids["style"]
        assert _log_says(data_dir, f"re-embedded {len(MEMORIES)} vectors")  # counted with the earlier worker's two
    finally:
        worker.stop()


def test_reindex_command_rebuilds_and_records_the_model(tmp_path):
    data_dir = tmp_path / "data"
    worker = start_worker(data_dir)
    try:
        ids = _add_all(worker)
        _wait_for_model(data_dir, worker)
        (data_dir / MARKER).write_text(json.dumps({"model": "an-older-model", "reembedding": {"to": "x"}}))
        done = subprocess.run(
            [sys.executable, "-m", "memory_anchor.cli.main", "--data-dir", str(data_dir), "reindex"],
            cwd=ROOT, env=worker.env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert f"re-embedded {len(MEMORIES)} records" in done.stdout
        assert json.loads((data_dir / MARKER).read_text()) == {"model": MODEL_ID}
        assert _dense_first(worker, "which build tool do we use") == ids["build"]
    finally:
        worker.stop()


def test_overwrite_replaces_vectors_in_place_and_never_revives_a_deleted_one(tmp_path):
    index = MemoryIndex(4, project_from=4)  # projected from 4 rows, so the projected path is covered
    basis = np.eye(4, dtype=np.float32)
    index.add([VectorItem(seq, basis[seq % 4], {"project": ""}) for seq in range(1, 9)])
    index.overwrite([VectorItem(1, basis[3], {}), VectorItem(99, basis[0], {})])  # 99 is not held: ignored
    index.refit()
    assert 99 not in index
    assert {seq for seq, _ in index.search(basis[3], 3)} == {1, 3, 7}

    vectors = Vectors(tmp_path / "chroma", dim=4)
    vectors.add([VectorItem(seq, basis[seq % 4], {"project": ""}) for seq in (1, 2)])
    vectors.delete([2])
    assert vectors.overwrite([VectorItem(1, basis[2], {}), VectorItem(2, basis[2], {})]) == 1
    assert 2 not in vectors and vectors.search(basis[2], 1)[0][0] == 1
    vectors.close()
