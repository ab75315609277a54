"""Stored vectors follow the embedding model: after a model change, re-embed them in the background.

A query vector is only comparable with vectors of the same model. The data
dir records which model made its vectors (`vectors-model.json`). A worker
whose embedder is another model says so in its log and re-embeds every stored
vector in place, oldest first, on a low-priority thread: search keeps
working meanwhile (keyword search as always, dense search over a mix of old
and new vectors that gets better as it goes). The file names the new model
once every vector is redone; until then it records how far the work got, so a
restart resumes there.

    reembedder = Reembedder(db, vectors, indexer, model_id, data_dir)
    if reembedder.needed():        # at warm-up, once the vectors are loaded
        reembedder.run()           # on its own thread; reembedder.stop() ends it early
    reembedder.progress()          # for /api/v1/status: {"from", "to", "done", "total"} or None

A data dir from before this file existed holds vectors of the model that
release shipped, MiniLM as today: it is taken to hold the current model's.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

from memory_anchor.worker.store.atomic_write import replaced_atomically
from memory_anchor.worker.store.records import seqs_with_text_after

log = logging.getLogger(__name__)

MARKER = "vectors-model.json"
BATCH = 64


class Reembedder:
    def __init__(self, db, vectors, indexer, model_id: str, data_dir: Path, *, batch: int = BATCH):
        self.db = db
        self.vectors = vectors
        self.indexer = indexer
        self.model_id = model_id
        self.path = Path(data_dir) / MARKER
        self.batch = batch
        self._stop = threading.Event()
        self._progress: dict[str, Any] | None = None

    # --- the marker file -------------------------------------------------------

    def recorded(self) -> dict[str, Any]:
        """What the marker says ({} when there is none or it cannot be read)."""
        try:
            value = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return value if isinstance(value, dict) and isinstance(value.get("model"), str) else {}

    def _write(self, state: dict[str, Any]) -> None:
        with replaced_atomically(self.path) as handle:
            handle.write(json.dumps(state).encode("utf-8"))

    def mark_current(self) -> None:
        """Every stored vector is the current model's (a fresh store, or after a full rebuild)."""
        self._write({"model": self.model_id})

    # --- the work ----------------------------------------------------------------

    def needed(self) -> bool:
        """Whether the stored vectors are another model's; writes the marker when it is missing."""
        state = self.recorded()
        if not state:
            self.mark_current()
            return False
        return state["model"] != self.model_id

    def progress(self) -> dict[str, Any] | None:
        return dict(self._progress) if self._progress else None

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> int:
        """Re-embed every stored vector with the current model; returns how many were replaced."""
        state = self.recorded()
        old = state.get("model", "")
        resume = state.get("reembedding") if isinstance(state.get("reembedding"), dict) else {}
        after = int(resume.get("after_seq", 0)) if resume.get("to") == self.model_id else 0
        done = int(resume.get("done", 0)) if after else 0
        total = len(self.vectors)
        self._progress = {"from": old, "to": self.model_id, "done": done, "total": total}
        log.warning(
            "the stored vectors were made by model %s, this worker embeds with %s: re-embedding %d of them "
            "in the background (search keeps working meanwhile)%s",
            old, self.model_id, total - done, f", resuming after record version {after}" if after else "",
        )  # fmt: skip
        started = time.monotonic()
        replaced = 0
        while not self._stop.is_set():
            seqs = seqs_with_text_after(self.db.reader(), after, self.batch)
            if not seqs:
                self.vectors.index.refit()  # the projections were fitted on the old model's vectors
                self.mark_current()
                self._progress = None
                log.info("re-embedded %d vectors with %s in %.1f s", done, self.model_id, time.monotonic() - started)
                return replaced
            count = self.indexer.reembed(seqs)
            replaced += count
            done += count
            after = seqs[-1]
            self._progress["done"] = done
            self._write({"model": old, "reembedding": {"to": self.model_id, "after_seq": after, "done": done}})
        log.info("re-embedding stopped after %d of %d vectors; the next start resumes it", done, total)
        return replaced
