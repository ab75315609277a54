"""Embeds stored record versions and puts them in the vector store.

Every `put` version with text lands in `pending_vectors` through a trigger, in
the same transaction as the record, so nothing written is ever forgotten. The
indexer drains that queue: embed a batch, store it in the vector store, then
delete those seqs from the queue. A crash between the two steps only means the
batch is embedded again on restart (vector writes are idempotent upserts).

    indexer = Indexer(db, vectors, embedder)
    indexer.flush([seq, ...])    # index these now, on the calling thread
    indexer.index_soon([seq, ...])   # index these on the indexer's thread, with whatever else is asked (mem0 adds)
    indexer.catch_up()           # wait until what index_soon was given is searchable (before a dense search)
    indexer.drain()              # index everything pending (the pipeline calls this after each pass)
    indexer.rebuild()            # `memory-anchor reindex`: drop all vectors, re-embed from SQLite
    indexer.reembed([seq, ...])  # new vectors in place for these (after a model change: reembed.py)
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

import numpy as np

from memory_anchor.core.projects import without_root
from memory_anchor.worker.index.embeddings import Embedder
from memory_anchor.worker.index.heap import release_free_memory
from memory_anchor.worker.index.vectors import META_KEYS, VectorItem, Vectors
from memory_anchor.worker.store.db import Database
from memory_anchor.worker.store import pending_vectors as pending
from memory_anchor.worker.store.records import Records, earlier_same_text

log = logging.getLogger(__name__)

# Kinds that get no vector when they are stored. Identity is never searched (it is always
# injected whole). An observation (one tool call: "Edited app/cart.py", "Ran `pytest`") is found
# by its words, the files, commands and errors a question names; the few a search finds that way
# are then scored by meaning (search.py, `_score_by_meaning`). Stored vectors of every tool call
# cost an import a quarter of its CPU and only brought near-duplicate tool calls into the nearest
# neighbours: on four real people's imports, search answered as many of their questions or more
# without them (docs/benchmarks.md, import speed).
NOT_EMBEDDED = frozenset({"identity", "observation"})


# Embedding cost grows steeply with length (here ~400 short texts/s, ~22/s at 140
# tokens), so a record is embedded by what carries its meaning: an observation by
# the head of its title and summary (its narrative and command output are found by
# keywords), anything else by the head of its text.
EMBED_MAX_CHARS = 512
# An observation is scored by its gist (the tool, the file or command, how it went); keyword search
# covers every word. Vectors stored by earlier versions were made from more of it: the same model,
# a little more text, still valid.
OBSERVATION_MAX_TOKENS = 32
# Claude's prose (reply passages, session summaries) is read by its words, not its Markdown: table
# rules, pipes, emphasis and heading marks are a sixth of its tokens and say nothing to the model.
# A reply passage is then embedded by its first REPLY_MAX_TOKENS tokens: its opening says what it
# is about, keyword search covers the rest. On brain's import the replies were 60 % of the tokens
# embedded (946 passages, 120 tokens on average); at 64 tokens of plain words, search and recall
# answered as many questions (docs/benchmarks.md, import speed).
REPLY_MAX_TOKENS = 64
_WRITTEN_IN_MARKDOWN = frozenset({"transcript", "summary"})
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$", re.MULTILINE)
_MARKUP = re.compile(r"[*_`#>|]+|-{2,}|={2,}")
RECENT_TEXTS = 4096  # texts whose vectors are kept for reuse (1.5 KB each)
BULK = 32  # records indexed by one API write after which the heap is trimmed
# What one pass of the add thread takes: the adds that came in while the last pass ran. A Chroma
# write costs about as much for one vector as for a hundred, and the model embeds short texts
# faster together, so adds that share a pass share both; capped so a pass stays well under a second.
SOON_BATCH = 256
# How long a search waits at most for the vectors of adds already acknowledged, before it runs on
# what is indexed (their words are found by keyword meanwhile). Usually one pass, well under a
# second; the first adds of a new worker also wait for the model and Chroma to load (seconds on a
# busy machine), which the add itself used to wait for before it answered.
CATCH_UP_SECONDS = 30.0
BURST_OVER_SECONDS = 0.5  # no add for this long: the burst is over, its memory goes back
# The add thread's vectors are searchable at once and stored in Chroma together (Vectors.add,
# store_later): when this many wait, when the oldest has waited this long, or when the burst is over.
STORE_BATCH = 256
STORE_SECONDS = 1.0


def embedding_text(record: dict[str, Any]) -> str:
    """What a record is embedded as (the full text stays in the keyword index).

    Paths inside the project are embedded as the project names them (`app/cart.py`):
    the project's own folder says nothing about any one record, and spelled out
    twice in every Read and Edit it was a third of the tokens an import embedded.
    """
    title = (record.get("title") or "").strip()
    if record.get("kind") == "observation":
        summary = str((record.get("data") or {}).get("summary") or "").strip()
        if summary.lower().startswith(title.lower()):
            title = ""  # the summary already opens with it
        if title or summary:
            return _in_project(f"{title}\n{summary}".strip(), record)[:EMBED_MAX_CHARS]
    text = record.get("text") or ""
    if record.get("kind") in _WRITTEN_IN_MARKDOWN:
        text = plain_words(text[: EMBED_MAX_CHARS * 3])
    if record.get("kind") == "transcript":
        title = ""  # a reply passage's title is the request it answers (found by keyword): its vector is its own words
    if title and title.lower() not in text.lower():
        text = f"{title}\n{text}"
    return _in_project(text[: EMBED_MAX_CHARS * 2], record)[:EMBED_MAX_CHARS]


def plain_words(markdown: str) -> str:
    """Markdown's words without its markup (table rules, pipes, emphasis, heading and quote marks)."""
    text = _MARKUP.sub(" ", _TABLE_RULE.sub("", markdown))
    return re.sub(r"[ \t]+", " ", text).strip()


# Kinds embedded by the head of their text only: how many tokens of it.
HEAD_TOKENS = {"observation": OBSERVATION_MAX_TOKENS, "transcript": REPLY_MAX_TOKENS}


def embedding_texts(records: list[dict[str, Any]], embedder: Embedder) -> list[str]:
    """What these records are embedded as: `embedding_text`, cut to its first HEAD_TOKENS
    tokens for the kinds listed there."""
    texts = [embedding_text(record) for record in records]
    for kind, max_tokens in HEAD_TOKENS.items():
        cut = [n for n, record in enumerate(records) if record.get("kind") == kind]
        if cut:
            for n, head in zip(cut, embedder.heads([texts[n] for n in cut], max_tokens)):
                texts[n] = head
    return texts


def _in_project(text: str, record: dict[str, Any]) -> str:
    return without_root(text, str(record.get("project") or ""))


def _error() -> str:
    """The exception being handled, as one line."""
    import sys

    exc = sys.exc_info()[1]
    return f"{type(exc).__name__}: {exc}"


def vector_meta(record: dict[str, Any]) -> dict[str, Any]:
    meta = {key: record.get(key) for key in META_KEYS}
    meta["happened_at"] = record.get("happened_at")
    return meta


class Indexer:
    def __init__(self, db: Database, vectors: Vectors, embedder: Embedder, *, batch_size: int = 128):
        self.db = db
        self.vectors = vectors
        self.embedder = embedder
        self.batch_size = batch_size
        # One batch at a time: the background drain and a flush never embed the same seq twice.
        # Re-entrant: a rebuild holds it from dropping the vectors until every one is made again.
        self._work_lock = threading.RLock()
        self.indexed = 0  # versions embedded since start, for status pages
        self._failures: dict[int, int] = {}  # seq -> failed indexing passes, until quarantined
        self._recent: OrderedDict[str, np.ndarray] = OrderedDict()  # text -> its vector, the latest last
        self._drain_kept_arena = False  # the last drain batch kept the model's arena (more was queued)
        # index_soon's queue and its thread, started with the first add.
        self._soon: set[int] = set()
        self._soon_changed = threading.Condition()
        self._soon_thread: threading.Thread | None = None
        self._soon_taken: set[int] = set()  # the pass under way
        self._handed: set[int] = set()  # seqs whose vectors wait in Vectors to be stored
        self._stopping = False

    # --- work ----------------------------------------------------------------

    def pending_count(self) -> int:
        return pending.pending_count(self.db.reader())

    def drain_once(self) -> int:
        """Index one batch of the queue; returns how many versions it handled.

        A batch that raises is indexed one version at a time, so one record that
        cannot be embedded holds back no other; it is quarantined after a few
        failed passes. When every version of the batch fails, the fault is not
        theirs (the model, the disk): nothing is quarantined and it raises.
        """
        seqs = pending.oldest_pending(self.db.reader(), self.batch_size)
        # A full batch: more is likely queued (an import), so the model's arena is kept for the next
        # batch, as for a burst of adds. Shrinking it after every batch and growing it again at the
        # next cost 7 % more CPU for the same texts (brain's 2,925 texts in the drain's batches of
        # 128, measured). The batch that finds the queue short or empty hands it all back once
        # its runs are over (a shrink inside a call misses the run still going on the other thread).
        keep_arena = len(seqs) >= self.batch_size
        try:
            return self._drain_batch(seqs, keep_arena)
        finally:
            if self._drain_kept_arena and not keep_arena:
                self._release_arena()
            self._drain_kept_arena = keep_arena

    def _drain_batch(self, seqs: list[int], keep_arena: bool) -> int:
        try:
            return self._index(seqs, keep_arena=keep_arena)
        except Exception:
            if len(seqs) <= 1:  # alone in the queue: no way to tell whose fault it is, so count it
                self._count_failure(seqs, _error())
                return 0
        done, failed = 0, []
        for seq in seqs:
            try:
                done += self._index([seq])
            except Exception:
                failed.append((seq, _error()))
        if not done:
            raise RuntimeError(f"indexing failed for all {len(seqs)} queued versions: {failed[0][1]}")
        for seq, error in failed:
            self._count_failure([seq], error)
        return done

    def _count_failure(self, seqs: list[int], error: str) -> None:
        from memory_anchor.worker.store.quarantine import QUARANTINE_AFTER, Quarantine

        for seq in seqs:
            attempts = self._failures.get(seq, 0) + 1
            self._failures[seq] = attempts
            log.warning("record version %d could not be indexed (attempt %d): %s", seq, attempts, error)
            if attempts >= QUARANTINE_AFTER:
                Quarantine(self.db).park_record(seq, error, attempts)
                self._failures.pop(seq, None)

    def drain(self) -> int:
        total = 0
        while True:
            done = self.drain_once()
            if done == 0:
                return total
            total += done

    def flush(self, seqs: Iterable[int]) -> int:
        """Index these versions now if they are still queued; returns how many were."""
        seqs = sorted({int(s) for s in seqs})
        total = 0
        for start in range(0, len(seqs), self.batch_size):
            total += self._index(seqs[start : start + self.batch_size])
        if total >= BULK:
            # A bulk add leaves tokenizer and activation scratch in the heap; glibc keeps it otherwise.
            release_free_memory()
        return total

    def index_soon(self, seqs: Iterable[int]) -> None:
        """Index these versions on the indexer's thread, together with whatever else is waiting.

        They are committed already (and in `pending_vectors`), so a crash before they are indexed
        only means the pipeline's drain indexes them at the next start.
        """
        with self._soon_changed:
            if self._stopping:
                return  # the worker is stopping: the next start's drain indexes them
            self._soon.update(int(s) for s in seqs)
            if self._soon_thread is None:
                self._soon_thread = threading.Thread(target=self._index_soon_loop, name="ma-add-index", daemon=True)
                self._soon_thread.start()
            self._soon_changed.notify_all()

    def catch_up(self, *, embed: bool = True, wait: bool = True, max_batches: int | None = None) -> int:
        """Wait until the versions `index_soon` has been given so far are searchable (at most
        CATCH_UP_SECONDS), so a search right after an acknowledged add finds it by meaning too.

        The search service calls this before a dense search, as it calls a team database's
        follower (same signature; nothing is embedded on the caller's thread here). Returns how
        many versions it waited for.
        """
        with self._soon_changed:
            waiting = self._soon | self._soon_taken
            if not waiting:
                return 0
            deadline = time.monotonic() + CATCH_UP_SECONDS
            while waiting & (self._soon | self._soon_taken):
                left = deadline - time.monotonic()
                if left <= 0 or self._stopping:
                    break
                self._soon_changed.wait(left)
            return len(waiting)

    def stop(self) -> None:
        """Finish the pass under way and start no other (what is left stays in `pending_vectors`)."""
        with self._soon_changed:
            self._stopping = True
            self._soon_changed.notify_all()
            thread = self._soon_thread
        if thread is not None:
            thread.join(timeout=30)
        self._store_unstored()

    def _index_soon_loop(self) -> None:
        burst = False  # passes made since the arena was last released
        while True:
            with self._soon_changed:
                if burst and not self._soon and not self._stopping:
                    self._soon_changed.wait(BURST_OVER_SECONDS)
                while not self._soon and not self._stopping and not burst:
                    self._soon_changed.wait()
                if self._stopping:
                    return
                taken = sorted(self._soon)[:SOON_BATCH]
                self._soon.difference_update(taken)
                self._soon_taken = set(taken)
            if not taken:
                # The adds stopped: their vectors are stored; the model's arena, kept from pass to
                # pass meanwhile (15 % less CPU for small passes, measured), and the passes' scratch
                # go back to the OS.
                self._store_unstored()
                self._release_arena()
                release_free_memory()
                burst = False
                continue
            burst = True
            try:
                self._index(taken, keep_arena=True, store_later=True)
                waiting, waited = self.vectors.unstored()
                if len(waiting) >= STORE_BATCH or waited >= STORE_SECONDS:
                    self._store_unstored()
            except Exception:
                # Left in pending_vectors: the pipeline's drain retries them, one by one, and
                # quarantines a version that never indexes.
                log.warning("indexing %d added versions failed; the background drain retries them: %s", len(taken), _error())
            finally:
                with self._soon_changed:
                    self._soon_taken = set()
                    self._soon_changed.notify_all()

    def release_memory(self) -> None:
        """The worker is idle: forget the vectors kept for reuse and hand the model's arena back."""
        with self._work_lock:
            self._recent.clear()
        self._release_arena()

    def _release_arena(self) -> None:
        with self._work_lock:
            try:
                release = getattr(self.embedder, "release_arena", None)
                if release is not None:
                    release()
            except Exception:  # noqa: BLE001 - a buffer not handed back is no reason to stop indexing
                log.warning("could not release the embedding arena: %s", _error())

    def rebuild(self) -> int:
        """Drop every vector and re-embed every stored version from SQLite."""
        with self._work_lock:
            self.vectors.reset()
            with self.db.transaction() as conn:
                pending.queue_every_version(conn)
            return self.drain()

    def reembed(self, seqs: list[int]) -> int:
        """Embed these versions again and replace their stored vectors (after a model change,
        memory_anchor/worker/index/reembed.py); versions without a vector are left alone. Returns how many were replaced."""
        if not seqs:
            return 0
        with self._work_lock:
            records = Records.by_seqs(self.db.reader(), seqs)
            wanted = [records[s] for s in seqs if s in records and s in self.vectors.index]
            if not wanted:
                return 0
            vectors = self.embedder.embed(embedding_texts(wanted, self.embedder))
            return self.vectors.overwrite([VectorItem(r["seq"], vectors[n], vector_meta(r)) for n, r in enumerate(wanted)])

    def _store_unstored(self) -> None:
        """Store the vectors the add thread made searchable, then take their seqs off the queue."""
        with self._work_lock:
            try:
                self.vectors.store_unstored()
            except Exception:  # still queued: the pipeline's drain embeds and stores them again
                log.warning("storing the vectors of recent adds failed; the background drain retries them: %s", _error())
                self._handed.clear()
                return
            # Stored, or deleted meanwhile (a forget): either way nothing is left to embed for them.
            waiting, _ = self.vectors.unstored()
            done = sorted(self._handed - waiting)
            self._handed -= set(done)
            if done:
                with self.db.transaction() as conn:
                    pending.done(conn, done)

    def _index(self, seqs: list[int], *, keep_arena: bool = False, store_later: bool = False) -> int:
        if not seqs:
            return 0
        with self._work_lock:
            conn = self.db.reader()
            # Re-check under the lock: another thread may have indexed them meanwhile (and the add
            # thread's vectors, searchable already, wait to be stored: they stay queued till then).
            unstored, _ = self.vectors.unstored()
            queued = [seq for seq in pending.still_pending(conn, seqs) if seq not in unstored]
            if not queued:
                return 0
            records = Records.by_seqs(conn, queued)
            wanted = [
                records[s]
                for s in queued
                if s in records and records[s]["op"] == "put" and records[s]["kind"] not in NOT_EMBEDDED
            ]
            if store_later:
                vectors = self._vectors_for(wanted, keep_arena=keep_arena)
                items = [VectorItem(r["seq"], vectors[n], vector_meta(r)) for n, r in enumerate(wanted)]
                self.vectors.add(items, store_later=True)
                self._handed.update(item.seq for item in items)
                done = sorted(set(queued) - {item.seq for item in items})  # nothing to store for them
            else:
                with self.vectors.writing():  # Chroma stays open while the batch is embedded
                    vectors = self._vectors_for(wanted, keep_arena=keep_arena)
                    items = [VectorItem(r["seq"], vectors[n], vector_meta(r)) for n, r in enumerate(wanted)]
                    self.vectors.add(items)
                done = queued
            if done:
                with self.db.transaction() as wconn:
                    pending.done(wconn, done)
            self.indexed += len(items)
            return len(queued)

    def _vectors_for(self, records: list[dict[str, Any]], *, keep_arena: bool = False) -> np.ndarray:
        """Embeddings for these versions: each distinct text embedded once, an earlier version's
        vector reused when the text is unchanged, and a text embedded lately reused as it is.

        Sessions repeat themselves (the same file read again, the same command run in every
        session, a summary rewritten at Stop then at SessionEnd): in 107 imported sessions a
        third of the texts had been embedded already, and embedding is most of an import's cost.
        """
        out = np.zeros((len(records), self.embedder.dimension), dtype=np.float32)
        texts = embedding_texts(records, self.embedder)
        waiting: dict[str, list[int]] = {}  # text -> the positions it fills
        conn = self.db.reader()
        for n, record in enumerate(records):
            known = self._recent.get(texts[n])
            if known is None and record.get("version", 1) > 1:
                earlier = earlier_same_text(conn, record["id"], record["seq"], record["content_hash"])
                known = self.vectors.index.vector(earlier) if earlier is not None and texts[n] == record["text"] else None
            if known is not None:
                out[n] = known
            else:
                waiting.setdefault(texts[n], []).append(n)
        if waiting:
            texts_to_embed = list(waiting)
            fresh = self.embedder.embed(texts_to_embed, keep_arena=True) if keep_arena else self.embedder.embed(texts_to_embed)
            for vector, (text, positions) in zip(fresh, waiting.items()):
                out[positions] = vector
                self._remember(text, vector)
        return out

    def _remember(self, text: str, vector: np.ndarray) -> None:
        self._recent[text] = vector
        self._recent.move_to_end(text)
        if len(self._recent) > RECENT_TEXTS:
            self._recent.popitem(last=False)
