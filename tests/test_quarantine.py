"""One event that keeps failing is quarantined; capture goes on; the user sees it and decides.

The poisoned events here are inbox rows an earlier version accepted before the
door checked types (a `cwd` that is a list or a number): they get past
validation, as anything unforeseen would, and must not stop the pipeline.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from memory_anchor.core import paths
from memory_anchor.worker.capture.inbox import Inbox
from memory_anchor.worker.index.indexer import Indexer
from memory_anchor.worker.index.vectors import Vectors
from memory_anchor.worker.store.db import Database
from memory_anchor.worker.store.quarantine import QUARANTINE_AFTER, Quarantine
from memory_anchor.worker.store.records import Records
from tests.conftest import ROOT, start_worker, tool_use_event, wait_for


def poison(data_dir, session_id: str, cwd) -> int:
    """Put a PostToolUse event with a bad `cwd` straight into the inbox, as an older worker would have."""
    db = Database(paths.database_path(data_dir))
    try:
        inbox_id, _ = Inbox(db).accept(tool_use_event(session_id, 0) | {"cwd": cwd})
    finally:
        db.close()
    return inbox_id


def cli(worker, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "memory_anchor.cli.main", "--data-dir", str(worker.data_dir), *args],
        cwd=ROOT, env=worker.env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_a_poisoned_event_is_quarantined_while_later_events_flow(tmp_path):
    data_dir = tmp_path / "data"
    first = poison(data_dir, "poison-a", ["/tmp", "list"])
    second = poison(data_dir, "poison-b", 42)
    worker = start_worker(data_dir)
    try:
        for n in range(10):
            worker.post("/api/v1/events", tool_use_event("after-poison", n), expect=202)
        wait_for(lambda: worker.get("/api/v1/observations?session_id=after-poison")["total"] == 10, what="later events flow")
        wait_for(lambda: worker.get("/api/v1/inbox")["counts"]["quarantined"] == 2, what="both quarantined")
        inbox = worker.get("/api/v1/inbox")
        assert not inbox["counts"].get("pending")
        items = {item["inbox_id"]: item for item in inbox["quarantined"]}
        assert set(items) == {first, second}
        assert items[first]["attempts"] == QUARANTINE_AFTER and "TypeError" in items[first]["error"]
        assert items[first]["stage"] == "capture" and items[first]["event"] == "PostToolUse"
        assert abs(items[first]["quarantined_at"] - time.time()) < 600

        log = (data_dir / paths.LOGS / paths.WORKER_LOG).read_text()
        said = [line for line in log.splitlines() if "QUARANTINED inbox event" in line]
        assert len(said) == 2, "the log says it once per event"
        assert f"QUARANTINED inbox event {first} (PostToolUse, session poison-a)" in said[0] + said[1]

        shown = cli(worker, "status")
        assert shown.returncode == 0, shown.stderr
        assert "quarantined: 2" in shown.stdout and "TypeError" in shown.stdout

        # drop one: gone for good; retry the other: back in line with a fresh count.
        dropped = cli(worker, "inbox", "drop", str(items[second]["id"]))
        assert dropped.returncode == 0 and "dropped" in dropped.stdout, dropped.stderr
        retried = cli(worker, "inbox", "retry", str(items[first]["id"]))
        assert retried.returncode == 0 and "back in line" in retried.stdout, retried.stderr
        after = worker.get("/api/v1/inbox")
        assert items[first]["id"] not in {i["id"] for i in after["quarantined"]}
        assert second not in {i["inbox_id"] for i in after["quarantined"]}
        # it still fails (nothing fixed it), so it comes back, with its error, once more
        wait_for(lambda: worker.get("/api/v1/inbox")["counts"]["quarantined"] == 1, what="re-quarantined")
        assert cli(worker, "inbox", "drop", "999999").returncode != 0
        assert worker.get("/api/health", token=None)["status"] == "ok"
    finally:
        worker.stop()


class PoisonedEmbedder:
    """Embeds anything but a text containing POISON (a record the model chokes on)."""

    dimension = 384

    def __init__(self, dimension: int):
        self.dimension = dimension

    def embed(self, texts: list[str]) -> np.ndarray:
        if any("POISON" in text for text in texts):
            raise ValueError("the model chokes on this text")
        rows = np.random.default_rng(len(texts)).normal(size=(len(texts), self.dimension)).astype(np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_a_record_that_cannot_be_embedded_is_quarantined_and_the_rest_indexed(tmp_path):
    from memory_anchor.worker.index.embeddings import Embedder

    db = Database(paths.database_path(tmp_path))
    vectors = Vectors(paths.chroma_path(tmp_path))
    indexer = Indexer(db, vectors, PoisonedEmbedder(Embedder.dimension))
    with db.transaction() as conn:
        seqs = [Records.put(conn, "memory", f"fact number {n}", user_id="u")["seq"] for n in range(5)]
        bad = Records.put(conn, "memory", "a POISON record", user_id="u")["seq"]
        seqs += [Records.put(conn, "memory", f"later fact {n}", user_id="u")["seq"] for n in range(5)]
    assert indexer.drain() == 10, "one bad record holds back none of the others"
    assert indexer.pending_count() == 1
    for _ in range(QUARANTINE_AFTER - 1):
        indexer.drain_once()
    assert indexer.pending_count() == 0
    (item,) = Quarantine(db).items()
    assert item["stage"] == "index" and item["record_seq"] == bad and "chokes" in item["error"]
    # a retry puts it back in the indexing queue
    Quarantine(db).retry(item["id"])
    assert indexer.pending_count() == 1 and Quarantine(db).count() == 0


def test_when_every_record_fails_nothing_is_quarantined(tmp_path):
    """A broken model is not the records' fault: they stay queued, nothing is parked."""
    from memory_anchor.worker.index.embeddings import Embedder

    class Broken(PoisonedEmbedder):
        def embed(self, texts):
            raise RuntimeError("model file missing")

    db = Database(paths.database_path(tmp_path))
    indexer = Indexer(db, Vectors(paths.chroma_path(tmp_path)), Broken(Embedder.dimension))
    with db.transaction() as conn:
        for n in range(3):
            Records.put(conn, "memory", f"fact {n}", user_id="u")
    for _ in range(QUARANTINE_AFTER + 1):
        try:
            indexer.drain_once()
        except RuntimeError as exc:
            assert "model file missing" in str(exc)
    assert indexer.pending_count() == 3 and Quarantine(db).count() == 0


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium is not installed (optional check)")
def test_the_viewer_shows_quarantined_events_with_their_error_and_drops_them(tmp_path):
    from tests.browser import Browser

    data_dir = tmp_path / "data"
    poison(data_dir, "poison-viewer", {"not": "a path"})
    worker = start_worker(data_dir)
    try:
        wait_for(lambda: worker.get("/api/v1/inbox")["counts"]["quarantined"] == 1, what="quarantined")
        with Browser(CHROMIUM, tmp_path / "profile") as browser:
            browser.open(f"{worker.url}/?token={worker.token}#inbox")
            browser.wait_for("document.body.textContent.includes('TypeError')")
            browser.wait_for("document.getElementById('count-inbox').textContent === '1'")  # the tab's badge
            browser.click_button("Drop")
            browser.wait_for("document.body.textContent.includes('Nothing quarantined')")
        assert worker.get("/api/v1/inbox")["counts"]["quarantined"] == 0
    finally:
        worker.stop()
