"""The vector store: durable embeddings in Chroma, searched from a compact in-memory index.

Two layers, one interface (`Vectors`):

* `ChromaStore` is where embeddings live on disk (ids = str(seq), the metadata
  needed to filter, never documents, always explicit embeddings so Chroma's
  downloading default embedding function never runs). It takes any chromadb
  client: `PersistentClient` on one machine, `HttpClient` against a Chroma
  server for a team (DESIGN "scale-out").
* `MemoryIndex` answers queries. Chroma's `where` filters take 60-180 ms at
  100k rows, so filtered search runs on float32 matrices held in memory, one
  segment per project (searches are project-scoped by default, so a query
  scores only its project's rows), with numpy masks for branch visibility,
  user/agent/run/session, kind, layer and time. At 100k x 384 that is 146 MiB.

Chroma keeps its whole HNSW index resident while a collection is open (about
200 MB at 100k). We only write to Chroma and read it back at start-up, so the
client is closed after `idle_release_seconds` without writes.

    vectors = Vectors(chroma_path)          # opens nothing yet
    vectors.load()                          # fill the memory index from Chroma
    vectors.add([VectorItem(seq, vector, meta), ...])
    hits = vectors.search(query_vector, k=50, where=VectorFilter(...))  # [(seq, cosine)]

`VectorFilter` uses exact codes for the columns records carry; anything it
cannot express (metadata keys, head-version visibility) is checked by the
caller in SQLite on the candidates.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from worker.heap import release_free_memory

from worker.embeddings import DIMENSION

log = logging.getLogger(__name__)

COLLECTION = "memory_anchor_records"
# The record columns a vector carries so the index can filter without SQLite.
META_KEYS = ("project", "branch", "kind", "layer", "user_id", "agent_id", "run_id", "session_id")


@dataclass(frozen=True)
class VectorItem:
    seq: int
    vector: np.ndarray  # (DIMENSION,) float32, unit length
    meta: dict[str, Any]  # META_KEYS plus happened_at


@dataclass(frozen=True)
class VectorFilter:
    """Which rows a vector search may return. None means "any"."""

    chain: tuple[tuple[str, int | None], ...] | None = None  # View.chain: (branch, max seq)
    projects: tuple[str, ...] | None = None
    user_ids: tuple[str, ...] | None = None
    agent_ids: tuple[str, ...] | None = None
    run_ids: tuple[str, ...] | None = None
    session_ids: tuple[str, ...] | None = None
    kinds: tuple[str, ...] | None = None
    exclude_kinds: tuple[str, ...] = ()
    layers: tuple[str, ...] | None = None
    happened_after: float | None = None
    happened_before: float | None = None


class _Codes:
    """Interns strings as small ints so filters are integer comparisons; None is 0."""

    def __init__(self) -> None:
        self._codes: dict[str, int] = {}

    def code(self, value: Any) -> int:
        if value is None or value == "":
            return 0
        key = str(value)
        found = self._codes.get(key)
        if found is None:
            found = self._codes[key] = len(self._codes) + 1
        return found

    def lookup(self, values: Iterable[Any]) -> np.ndarray:
        """Codes of values already seen (unknown ones cannot match anything)."""
        out = []
        for value in values:
            if value is None or value == "":
                out.append(0)
            elif str(value) in self._codes:
                out.append(self._codes[str(value)])
        return np.array(out, dtype=np.int32)


_COLUMNS = ("branch", "kind", "layer", "user_id", "agent_id", "run_id", "session_id")


class _Segment:
    """The rows of one project: a growable matrix plus one array per filter column."""

    def __init__(self, dim: int):
        self.n = 0
        self.vecs = np.zeros((0, dim), dtype=np.float32)
        self.seq = np.zeros(0, dtype=np.int64)
        self.happened = np.zeros(0, dtype=np.float64)
        self.alive = np.zeros(0, dtype=bool)
        self.cols = {c: np.zeros(0, dtype=np.int32) for c in _COLUMNS}

    def _grow(self, need: int) -> None:
        cap = len(self.seq)
        if need <= cap:
            return
        new_cap = max(need, 1024, int(cap * 1.5))

        def grown(arr: np.ndarray) -> np.ndarray:
            out = np.zeros((new_cap, *arr.shape[1:]), dtype=arr.dtype)
            out[: self.n] = arr[: self.n]
            return out

        self.vecs = grown(self.vecs)
        self.seq = grown(self.seq)
        self.happened = grown(self.happened)
        self.alive = grown(self.alive)
        self.cols = {c: grown(a) for c, a in self.cols.items()}

    def append(self, vectors: np.ndarray, seqs: list[int], happened: list[float], cols: dict[str, list[int]]) -> int:
        start = self.n
        count = len(seqs)
        self._grow(start + count)
        end = start + count
        self.vecs[start:end] = vectors
        self.seq[start:end] = seqs
        self.happened[start:end] = happened
        self.alive[start:end] = True
        for name, values in cols.items():
            self.cols[name][start:end] = values
        self.n = end
        return start


class MemoryIndex:
    """Exact (brute-force) cosine search over in-memory segments, with filters."""

    def __init__(self, dim: int = DIMENSION):
        self.dim = dim
        self._lock = threading.RLock()
        self._segments: dict[str, _Segment] = {}
        self._where: dict[int, tuple[str, int]] = {}  # seq -> (project, row)
        self._codes = {c: _Codes() for c in _COLUMNS}

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, seq: int) -> bool:
        return int(seq) in self._where

    def clear(self) -> None:
        with self._lock:
            self._segments.clear()
            self._where.clear()

    def add(self, items: list[VectorItem]) -> None:
        with self._lock:
            fresh = [it for it in items if int(it.seq) not in self._where]
            by_project: dict[str, list[VectorItem]] = {}
            for item in fresh:
                by_project.setdefault(str(item.meta.get("project") or ""), []).append(item)
            for project, group in by_project.items():
                segment = self._segments.get(project)
                if segment is None:
                    segment = self._segments[project] = _Segment(self.dim)
                vectors = np.stack([np.asarray(it.vector, dtype=np.float32) for it in group])
                cols = {c: [self._codes[c].code(it.meta.get(c)) for it in group] for c in _COLUMNS}
                start = segment.append(
                    vectors,
                    [int(it.seq) for it in group],
                    [float(it.meta.get("happened_at") or 0.0) for it in group],
                    cols,
                )
                for offset, item in enumerate(group):
                    self._where[int(item.seq)] = (project, start + offset)

    def vector(self, seq: int) -> np.ndarray | None:
        """The stored vector of `seq` (a copy), or None."""
        with self._lock:
            place = self._where.get(int(seq))
            if place is None:
                return None
            return self._segments[place[0]].vecs[place[1]].copy()

    def remove(self, seqs: Iterable[int]) -> None:
        with self._lock:
            for seq in seqs:
                place = self._where.pop(int(seq), None)
                if place is not None:
                    self._segments[place[0]].alive[place[1]] = False

    def search(self, query: np.ndarray, k: int, where: VectorFilter | None = None) -> list[tuple[int, float]]:
        """The `k` best (seq, cosine) among rows passing `where`, best first."""
        where = where or VectorFilter()
        query = np.asarray(query, dtype=np.float32).reshape(-1)  # a float64 query is 20x slower
        best_seqs: list[np.ndarray] = []
        best_scores: list[np.ndarray] = []
        with self._lock:
            projects = self._segments.keys() if where.projects is None else where.projects
            for project in projects:
                segment = self._segments.get(project)
                if segment is None or segment.n == 0:
                    continue
                rows = self._rows(segment, where)
                if rows is None:
                    continue
                if isinstance(rows, np.ndarray) and len(rows) * 12 > segment.n:
                    # Gathering scattered rows costs ~12x more per row than scoring
                    # the contiguous matrix (measured), so score all unless few pass.
                    scores = (segment.vecs[: segment.n] @ query)[rows]
                else:
                    scores = segment.vecs[rows] @ query
                seqs = segment.seq[rows]
                if len(scores) > k:
                    top = np.argpartition(-scores, k - 1)[:k]
                    scores, seqs = scores[top], seqs[top]
                best_seqs.append(seqs)
                best_scores.append(scores)
        if not best_scores:
            return []
        scores = np.concatenate(best_scores)
        seqs = np.concatenate(best_seqs)
        order = np.argsort(-scores, kind="stable")[:k]
        return [(int(seqs[i]), float(scores[i])) for i in order]

    def _rows(self, segment: _Segment, where: VectorFilter) -> slice | np.ndarray | None:
        """The rows of `segment` passing the filter: a slice when all pass, else indices."""
        n = segment.n
        mask = segment.alive[:n].copy()
        if where.chain is not None:
            visible = np.zeros(n, dtype=bool)
            branch_codes = self._codes["branch"]
            column = segment.cols["branch"][:n]
            for name, upto in where.chain:
                code = branch_codes.lookup([name])
                if len(code) == 0:
                    continue
                on_branch = column == code[0]
                if upto is not None:
                    on_branch &= segment.seq[:n] <= upto
                visible |= on_branch
            mask &= visible
        for name, wanted in (
            ("user_id", where.user_ids),
            ("agent_id", where.agent_ids),
            ("run_id", where.run_ids),
            ("session_id", where.session_ids),
            ("kind", where.kinds),
            ("layer", where.layers),
        ):
            if wanted is None:
                continue
            codes = self._codes[name].lookup(wanted)
            if len(codes) == 0:
                return None
            column = segment.cols[name][:n]
            mask &= column == codes[0] if len(codes) == 1 else np.isin(column, codes)
        if where.exclude_kinds:
            codes = self._codes["kind"].lookup(where.exclude_kinds)
            if len(codes):
                mask &= ~np.isin(segment.cols["kind"][:n], codes)
        if where.happened_after is not None:
            mask &= segment.happened[:n] >= where.happened_after
        if where.happened_before is not None:
            mask &= segment.happened[:n] <= where.happened_before
        rows = np.flatnonzero(mask)
        if len(rows) == 0:
            return None
        if len(rows) == n:
            return slice(0, n)
        return rows

    def memory_bytes(self) -> int:
        with self._lock:
            total = 0
            for segment in self._segments.values():
                total += segment.vecs.nbytes + segment.seq.nbytes + segment.happened.nbytes
                total += segment.alive.nbytes + sum(a.nbytes for a in segment.cols.values())
            return total


class ChromaStore:
    """Durable embeddings in one Chroma collection; the client is opened on demand.

    `client_factory` returns a chromadb client; the default opens a
    PersistentClient at `path`. Pass one that returns `chromadb.HttpClient(...)`
    to keep the embeddings on a Chroma server instead.
    """

    def __init__(self, path: Path | str | None = None, *, client_factory=None, idle_release_seconds: float = 10.0):
        if path is None and client_factory is None:
            raise ValueError("ChromaStore needs a path or a client_factory")
        self.path = Path(path) if path is not None else None
        self._client_factory = client_factory or self._persistent_client
        self._idle_release_seconds = idle_release_seconds
        self._lock = threading.RLock()
        self._client = None
        self._collection = None
        self._timer: threading.Timer | None = None

    def _persistent_client(self):
        import chromadb
        from chromadb.config import Settings

        self.path.mkdir(parents=True, exist_ok=True)
        return chromadb.PersistentClient(
            path=str(self.path), settings=Settings(anonymized_telemetry=False, allow_reset=False)
        )

    def _open(self):
        if self._collection is None:
            self._client = self._client_factory()
            # embedding_function=None: we always pass embeddings ourselves, and
            # the default function would try to download a model.
            self._collection = self._client.get_or_create_collection(
                COLLECTION, embedding_function=None, metadata={"hnsw:space": "cosine"}
            )
        return self._collection

    def _touch(self) -> None:
        """Close the client after a quiet spell: an open collection holds its HNSW index in RAM."""
        if self._idle_release_seconds <= 0:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = threading.Timer(self._idle_release_seconds, self.release)
        self._timer.daemon = True
        self._timer.start()

    def release(self) -> None:
        """Close the client (frees Chroma's in-memory index); the next call reopens it."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._client is not None:
                try:
                    self._client.close()
                except Exception:  # closing is best effort; the files are consistent
                    log.debug("closing chroma client failed", exc_info=True)
            self._client = None
            self._collection = None
        release_free_memory()

    def add(self, items: list[VectorItem]) -> None:
        if not items:
            return
        with self._lock:
            collection = self._open()
            collection.upsert(
                ids=[str(int(it.seq)) for it in items],
                embeddings=np.stack([np.asarray(it.vector, dtype=np.float32) for it in items]),
                metadatas=[_chroma_meta(it) for it in items],
            )
            self._touch()

    def delete(self, seqs: Iterable[int]) -> None:
        ids = [str(int(s)) for s in seqs]
        if not ids:
            return
        with self._lock:
            self._open().delete(ids=ids)
            self._touch()

    def count(self) -> int:
        with self._lock:
            result = self._open().count()
            self._touch()
            return result

    def iterate(self, page: int = 5000) -> Iterator[list[VectorItem]]:
        """Every stored embedding, in pages."""
        offset = 0
        while True:
            with self._lock:
                batch = self._open().get(include=["embeddings", "metadatas"], limit=page, offset=offset)
            ids = batch["ids"]
            if not ids:
                break
            embeddings = np.asarray(batch["embeddings"], dtype=np.float32)
            yield [
                VectorItem(int(i), embeddings[n], dict(batch["metadatas"][n] or {})) for n, i in enumerate(ids)
            ]
            offset += len(ids)
            if len(ids) < page:
                break
        self._touch()

    def drop(self) -> None:
        """Delete every embedding (the collection is recreated empty)."""
        with self._lock:
            self._open()
            self._client.delete_collection(COLLECTION)
            self._collection = None
            self._open()
            self._touch()


def _chroma_meta(item: VectorItem) -> dict[str, Any]:
    # Chroma metadata cannot hold None; absent means None.
    meta: dict[str, Any] = {"seq": int(item.seq)}
    for key in META_KEYS:
        value = item.meta.get(key)
        if value is not None and value != "":
            meta[key] = str(value)
    if item.meta.get("happened_at") is not None:
        meta["happened_at"] = float(item.meta["happened_at"])
    return meta


class Vectors:
    """The vector store the rest of the worker uses: durable `ChromaStore` + fast `MemoryIndex`."""

    def __init__(self, path: Path | str | None = None, *, store: ChromaStore | None = None, dim: int = DIMENSION):
        self.store = store or ChromaStore(path)
        self.index = MemoryIndex(dim)
        self._loaded = False
        self._load_lock = threading.Lock()

    def load(self) -> int:
        """Read every stored embedding into memory (once); returns how many."""
        with self._load_lock:
            if not self._loaded:
                self.index.clear()
                for items in self.store.iterate():
                    self.index.add(items)
                self._loaded = True
                self.store.release()
                release_free_memory()
            return len(self.index)

    def add(self, items: list[VectorItem]) -> None:
        """Store durably first, then make searchable (a crash between leaves Chroma ahead, which is harmless)."""
        if not items:
            return
        self.load()
        self.store.add(items)
        self.index.add(items)

    def delete(self, seqs: Iterable[int]) -> None:
        seqs = list(seqs)
        self.load()
        self.store.delete(seqs)
        self.index.remove(seqs)

    def __contains__(self, seq: int) -> bool:
        self.load()
        return seq in self.index

    def __len__(self) -> int:
        self.load()
        return len(self.index)

    @property
    def loading(self) -> bool:
        """True while another thread reads the vectors back (start-up at 100k takes ~14 s)."""
        return not self._loaded and self._load_lock.locked()

    def search(self, query: np.ndarray, k: int, where: VectorFilter | None = None) -> list[tuple[int, float]]:
        if self.loading:
            return []  # don't stall searches during start-up: keyword search answers meanwhile
        self.load()
        return self.index.search(query, k, where)

    def reset(self) -> None:
        """Forget every embedding (used by a full rebuild)."""
        with self._load_lock:
            self.store.drop()
            self.index.clear()
            self._loaded = True

    def close(self) -> None:
        self.store.release()
