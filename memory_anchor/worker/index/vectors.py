"""The vector store: durable embeddings in Chroma, searched from a compact in-memory index.

Two layers, one interface (`Vectors`):

* `ChromaStore` (chroma_store.py) is where embeddings live on disk (ids =
  str(seq), the metadata needed to filter, never documents, always explicit
  embeddings so Chroma's downloading default embedding function never runs),
  in shards of 8,192 seqs so a write never loads more than one small HNSW
  index. It takes any chromadb client: `PersistentClient` on one machine,
  `HttpClient` against a Chroma server for a team (DESIGN "scale-out").
* `MemoryIndex` answers queries. Chroma's `where` filters take 60-180 ms at
  100k rows, so filtered search runs on matrices held in memory, one segment
  per project (searches are project-scoped by default, so a query scores only
  its project's rows), with numpy masks for branch visibility,
  user/agent/run/session, kind, layer and time. Small segments are scored
  exactly on float32 vectors; past PROJECT_FROM_ROWS a segment keeps its
  vectors as float16 plus a 128-d PCA projection, scans the projection for a
  shortlist and rescores the shortlist exactly. At 100k x 384: 128 MiB instead
  of 152, and 9 ms a search instead of 17 (row-major float32, one BLAS thread).
* `IndexSnapshot` saves the memory index to one file so a restart does not
  read every vector back from Chroma (14 s at 100k on a quiet machine).

    vectors = Vectors(chroma_path)          # opens nothing yet
    vectors.load()                          # fill the memory index from Chroma
    vectors.add([VectorItem(seq, vector, meta), ...])
    hits = vectors.search(query_vector, k=50, where=VectorFilter(...))  # [(seq, cosine)]

`VectorFilter` uses exact codes for the columns records carry; anything it
cannot express (metadata keys, head-version visibility) is checked by the
caller in SQLite on the candidates.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memory_anchor.worker.index.chroma_store import ChromaStore
from memory_anchor.worker.index.embeddings import DIMENSION
from memory_anchor.worker.index.heap import release_free_memory
from memory_anchor.worker.index.vector_item import META_KEYS, VectorItem
from memory_anchor.worker.store.atomic_write import replaced_atomically

__all__ = ["META_KEYS", "ChromaStore", "MemoryIndex", "VectorFilter", "VectorItem", "Vectors"]

log = logging.getLogger(__name__)

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

    def names(self) -> list[str | None]:
        """Value by code (code 0 is None)."""
        return [None, *sorted(self._codes, key=self._codes.get)]

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


# Segments up to this many rows are scored exactly on float32 vectors. Larger ones
# are scanned on a PCA projection for a shortlist that is rescored exactly: the
# 128-d scan reads a third of the bytes of the 384-d one (scoring is memory-bound).
# Measured with `memory-anchor bench vectors`: recall of the exact top 60 is 1.0
# on the scale and branch benchmark corpora and 0.996 on 31k varied texts (code
# comments and conversation turns, where 128 dimensions hold only 80% of the variance;
# 96-d with a 500-row shortlist got 0.94 there).
PROJECT_FROM_ROWS = 32_768  # below, exact scoring is as fast (5 x 20k rows: 13 ms exact, 21 ms with 5 shortlists)
REDUCED_DIM = 128
REFIT_GROWTH = 2.0  # refit the projection when the segment has doubled since the last fit
FIT_SAMPLE = 16_384  # rows the projection is fitted on
SHORTLIST_MIN = 2_000
SHORTLIST_PER_K = 10


class _Projection:
    """A PCA basis of a segment's vectors: `reduce(x) . reduce_query(q)` ranks rows like `x . q`.

    The mean is subtracted from the rows only: `(x - mean) . q` differs from
    `x . q` by the same amount for every row, so the order is the same, and the
    projection keeps the directions in which the rows differ most.
    """

    def __init__(self, mean: np.ndarray, basis: np.ndarray):
        self.mean = mean.astype(np.float32)
        self.basis = np.ascontiguousarray(basis, dtype=np.float32)  # (dim, reduced)

    @classmethod
    def fit(cls, rows: np.ndarray, reduced: int, sample: int = FIT_SAMPLE) -> "_Projection":
        if len(rows) > sample:
            picked = np.random.default_rng(len(rows)).choice(len(rows), sample, replace=False)
            rows = rows[np.sort(picked)]
        rows = rows.astype(np.float32)
        mean = rows.mean(axis=0)
        centred = rows - mean
        _, eigenvectors = np.linalg.eigh(centred.T @ centred)  # ascending eigenvalues
        return cls(mean, eigenvectors[:, ::-1][:, :reduced])

    def reduce(self, rows: np.ndarray, chunk: int = 8192) -> np.ndarray:
        out = np.empty((len(rows), self.basis.shape[1]), dtype=np.float32)
        for start in range(0, len(rows), chunk):
            block = rows[start : start + chunk].astype(np.float32)
            out[start : start + chunk] = (block - self.mean) @ self.basis
        return out

    def reduce_query(self, query: np.ndarray) -> np.ndarray:
        return query @ self.basis


class _Segment:
    """The rows of one project: growable vector storage plus one array per filter column.

    Small: `scan` holds the float32 vectors and scores are exact. Past
    PROJECT_FROM_ROWS: `full` holds the vectors as float16 (for rescoring and
    `vector()`) and `scan` their float32 projection.
    """

    def __init__(self, number: int, dim: int, reduced_dim: int, project_from: int):
        self.number = number
        self.dim = dim
        self.reduced_dim = reduced_dim
        self.project_from = project_from
        self.n = 0
        self.scan = _scan_matrix(0, dim)
        self.full: np.ndarray | None = None
        self.projection: _Projection | None = None
        self.fitted_rows = 0
        self.seq = np.zeros(0, dtype=np.int64)
        self.happened = np.zeros(0, dtype=np.float64)
        self.alive = np.zeros(0, dtype=bool)
        self.cols = {c: np.zeros(0, dtype=np.int32) for c in _COLUMNS}

    def _arrays(self) -> list[str]:
        return ["scan", "seq", "happened", "alive"] + (["full"] if self.full is not None else [])

    def _grow(self, need: int) -> None:
        cap = len(self.seq)
        if need <= cap:
            return
        new_cap = max(need, 1024, int(cap * 1.5))
        for name in self._arrays():
            setattr(self, name, _grown(getattr(self, name), self.n, new_cap, "F" if name == "scan" else "C"))
        self.cols = {c: _grown(a, self.n, new_cap) for c, a in self.cols.items()}

    def append(self, vectors: np.ndarray, seqs: list[int], happened: list[float], cols: dict[str, list[int]]) -> int:
        start = self.n
        count = len(seqs)
        self._grow(start + count)
        end = start + count
        if self.projection is None:
            self.scan[start:end] = vectors
        else:
            self.full[start:end] = vectors
            self.scan[start:end] = self.projection.reduce(vectors)
        self.seq[start:end] = seqs
        self.happened[start:end] = happened
        self.alive[start:end] = True
        for name, values in cols.items():
            self.cols[name][start:end] = values
        self.n = end
        if self.n >= self.project_from and self.n >= self.fitted_rows * REFIT_GROWTH:
            self._project()
        return start

    def overwrite(self, row: int, vector: np.ndarray) -> None:
        """A new vector for `row` (re-embedding), projected with the current fit."""
        if self.projection is None:
            self.scan[row] = vector
        else:
            self.full[row] = vector
            self.scan[row] = self.projection.reduce(vector[None, :])[0]

    def _project(self) -> None:
        """(Re)fit the projection on the current rows and rebuild `scan` from the full vectors."""
        cap = len(self.seq)
        if self.full is None:
            self.full = np.zeros((cap, self.dim), dtype=np.float16)
            self.full[: self.n] = self.scan[: self.n]
        self.projection = _Projection.fit(self.full[: self.n], self.reduced_dim)
        scan = _scan_matrix(cap, self.reduced_dim)
        scan[: self.n] = self.projection.reduce(self.full[: self.n])
        self.scan = scan
        self.fitted_rows = self.n

    @property
    def stored(self) -> np.ndarray:
        """The full vectors: float32 `scan` while small, float16 `full` once projected."""
        return self.scan if self.full is None else self.full

    def vectors(self, rows) -> np.ndarray:
        """Full float32 vectors of these rows (an index array or a slice)."""
        return self.stored[rows].astype(np.float32)

    def score(self, query: np.ndarray, rows: slice | np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The best `k` (rows, exact cosine) among `rows`, unordered."""
        if self.projection is None:
            scores = _scores(self.scan, self.n, rows, query)
            candidates = rows
        else:
            shortlist = max(SHORTLIST_MIN, SHORTLIST_PER_K * k)
            candidates = np.arange(self.n)[rows] if isinstance(rows, slice) else rows
            if len(candidates) > shortlist:
                approx = _scores(self.scan, self.n, rows, self.projection.reduce_query(query))
                candidates = candidates[np.argpartition(-approx, shortlist - 1)[:shortlist]]
                candidates.sort()  # rescoring reads the float16 rows in memory order
            scores = self.full[candidates].astype(np.float32) @ query
        if isinstance(candidates, slice):
            candidates = np.arange(self.n)[candidates]
        if len(scores) > k:
            top = np.argpartition(-scores, k - 1)[:k]
            return candidates[top], scores[top]
        return candidates, scores

    def nbytes(self) -> int:
        total = sum(getattr(self, name)[: self.n].nbytes for name in self._arrays())
        return total + sum(a[: self.n].nbytes for a in self.cols.values())


def _scan_matrix(rows: int, dim: int) -> np.ndarray:
    # Column-major: with one BLAS thread, scoring a (100k, 96) column-major matrix
    # takes 3.2 ms against 6 ms row-major (12.5 against 21 ms at 384-d), measured.
    return np.zeros((rows, dim), dtype=np.float32, order="F")


def _grown(arr: np.ndarray, n: int, cap: int, order: str = "C") -> np.ndarray:
    # np.zeros maps untouched pages lazily: spare capacity costs no RSS.
    out = np.zeros((cap, *arr.shape[1:]), dtype=arr.dtype, order=order)
    out[:n] = arr[:n]
    return out


def _scores(matrix: np.ndarray, n: int, rows: slice | np.ndarray, query: np.ndarray) -> np.ndarray:
    if isinstance(rows, np.ndarray) and len(rows) * 32 > n:
        # Gathering scattered rows of the column-major matrix costs ~30x more per
        # row than scoring it whole (measured), so score all unless few pass.
        return (matrix[:n] @ query)[rows]
    return matrix[rows] @ query


class _SeqMap:
    """seq -> (segment number, row) as three arrays sorted by seq (a dict of 100k tuples is 16 MB)."""

    def __init__(self) -> None:
        self.seqs = np.zeros(0, dtype=np.int64)
        self.segments = np.zeros(0, dtype=np.int32)
        self.rows = np.zeros(0, dtype=np.int32)

    def __len__(self) -> int:
        return len(self.seqs)

    def positions(self, seqs: np.ndarray) -> np.ndarray:
        """Where each of `seqs` is in the arrays, or -1."""
        seqs = np.asarray(seqs, dtype=np.int64)
        at = np.searchsorted(self.seqs, seqs)
        found = at < len(self.seqs)
        found[found] = self.seqs[at[found]] == seqs[found]
        return np.where(found, at, -1)

    def get(self, seq: int) -> tuple[int, int] | None:
        at = self.positions(np.array([seq]))[0]
        return None if at < 0 else (int(self.segments[at]), int(self.rows[at]))

    def add(self, seqs: np.ndarray, segment: int, rows: np.ndarray) -> None:
        ascending = len(self.seqs) == 0 or seqs.min() > self.seqs[-1]
        self.seqs = np.concatenate([self.seqs, seqs])
        self.segments = np.concatenate([self.segments, np.full(len(seqs), segment, dtype=np.int32)])
        self.rows = np.concatenate([self.rows, rows.astype(np.int32)])
        if not (ascending and np.all(np.diff(seqs) > 0)):
            order = np.argsort(self.seqs, kind="stable")
            self.seqs, self.segments, self.rows = self.seqs[order], self.segments[order], self.rows[order]

    def pop(self, seqs: np.ndarray) -> list[tuple[int, int]]:
        """Forget these seqs; returns the (segment, row) of those that were present."""
        at = self.positions(seqs)
        at = np.unique(at[at >= 0])
        places = [(int(self.segments[i]), int(self.rows[i])) for i in at]
        if len(at):
            self.seqs = np.delete(self.seqs, at)
            self.segments = np.delete(self.segments, at)
            self.rows = np.delete(self.rows, at)
        return places


class MemoryIndex:
    """Cosine search over in-memory segments, with filters; returned scores are exact cosines."""

    def __init__(self, dim: int = DIMENSION, *, reduced_dim: int = REDUCED_DIM, project_from: int = PROJECT_FROM_ROWS):
        self.dim = dim
        self.reduced_dim = min(reduced_dim, dim)
        self.project_from = project_from
        self._lock = threading.RLock()
        self._segments: dict[str, _Segment] = {}
        self._numbered: list[_Segment] = []
        self._where = _SeqMap()
        self._codes = {c: _Codes() for c in _COLUMNS}

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, seq: int) -> bool:
        with self._lock:
            return self._where.get(int(seq)) is not None

    def clear(self) -> None:
        with self._lock:
            self._segments.clear()
            self._numbered.clear()
            self._where = _SeqMap()

    def add(self, items: list[VectorItem]) -> None:
        with self._lock:
            unique = list({int(it.seq): it for it in items}.values())
            if not unique:
                return
            known = self._where.positions(np.array([int(it.seq) for it in unique], dtype=np.int64)) >= 0
            by_project: dict[str, list[VectorItem]] = {}
            for item, seen in zip(unique, known):
                if not seen:
                    by_project.setdefault(str(item.meta.get("project") or ""), []).append(item)
            for project, group in by_project.items():
                segment = self._segments.get(project)
                if segment is None:
                    segment = _Segment(len(self._numbered), self.dim, self.reduced_dim, self.project_from)
                    self._segments[project] = segment
                    self._numbered.append(segment)
                vectors = np.stack([np.asarray(it.vector, dtype=np.float32) for it in group])
                cols = {c: [self._codes[c].code(it.meta.get(c)) for it in group] for c in _COLUMNS}
                seqs = np.array([int(it.seq) for it in group], dtype=np.int64)
                start = segment.append(
                    vectors, seqs.tolist(), [float(it.meta.get("happened_at") or 0.0) for it in group], cols
                )
                self._where.add(seqs, segment.number, np.arange(start, start + len(group)))

    def vector(self, seq: int) -> np.ndarray | None:
        """The stored vector of `seq` (a copy; float16 precision in projected segments), or None."""
        with self._lock:
            place = self._where.get(int(seq))
            if place is None:
                return None
            return self._numbered[place[0]].vectors(place[1])

    def overwrite(self, items: list[VectorItem]) -> None:
        """Replace the vectors of seqs it holds, in place (a re-embedding); other seqs are ignored."""
        with self._lock:
            for item in items:
                place = self._where.get(int(item.seq))
                if place is not None:
                    self._numbered[place[0]].overwrite(place[1], np.asarray(item.vector, dtype=np.float32))

    def refit(self) -> None:
        """Fit the projected segments' projections again: after a re-embedding, the old fit is another model's."""
        with self._lock:
            for segment in self._numbered:
                if segment.projection is not None:
                    segment._project()

    def remove(self, seqs: Iterable[int]) -> None:
        with self._lock:
            for segment, row in self._where.pop(np.array([int(s) for s in seqs], dtype=np.int64)):
                self._numbered[segment].alive[row] = False

    def seqs_on_branch(self, branch: str) -> list[int]:
        """The seqs held for rows written on `branch` (to forget a branch another worker deleted)."""
        with self._lock:
            code = self._codes["branch"].lookup([branch])
            if not len(code):
                return []
            found: list[int] = []
            for segment in self._numbered:
                n = segment.n
                mask = (segment.cols["branch"][:n] == code[0]) & segment.alive[:n]
                found.extend(int(s) for s in segment.seq[:n][mask])
            return found

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
                found, scores = segment.score(query, rows, k)
                best_seqs.append(segment.seq[found])
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

    def export(self) -> dict[str, np.ndarray]:
        """Every live row as column arrays (vectors as float16), for the snapshot file."""
        with self._lock:
            parts: dict[str, list[np.ndarray]] = {"seq": [], "vectors": [], "happened": [], "project": []}
            parts.update({c: [] for c in _COLUMNS})
            projects = list(self._segments)
            for number, project in enumerate(projects):
                segment = self._segments[project]
                rows = np.flatnonzero(segment.alive[: segment.n])
                parts["seq"].append(segment.seq[rows])
                parts["vectors"].append(segment.stored[rows].astype(np.float16))
                parts["happened"].append(segment.happened[rows])
                parts["project"].append(np.full(len(rows), number, dtype=np.int32))
                for c in _COLUMNS:
                    parts[c].append(segment.cols[c][rows])
            names = {c: self._codes[c].names() for c in _COLUMNS}
            names["project"] = projects
        out = {key: np.concatenate(arrays) if arrays else np.zeros(0) for key, arrays in parts.items()}
        out["vectors"] = out["vectors"].reshape(-1, self.dim)
        out["names"] = np.frombuffer(json.dumps(names).encode(), dtype=np.uint8)
        return out

    def memory_bytes(self) -> int:
        with self._lock:
            where = self._where.seqs.nbytes + self._where.segments.nbytes + self._where.rows.nbytes
            return where + sum(segment.nbytes() for segment in self._numbered)


SNAPSHOT_FORMAT = 1


class IndexSnapshot:
    """The memory index saved to one file, so a restart need not read every vector back from Chroma.

    Chroma stays the durable store. The file is only trusted while nothing has
    changed since it was written: `invalidate()` deletes it before any write to
    Chroma, it is replaced atomically (a torn file is never seen), and on load
    the Chroma files' fingerprint must be the one saved with it (or, for a
    Chroma without local files, its row count must equal Chroma's). A
    fingerprint is checked without opening Chroma, which would load every
    shard's index (+250 MB for a moment at 100k).
    """

    def __init__(self, path: Path):
        self.path = path
        self.read_fingerprint = ""  # the one saved in the file last read ("" in files from before fingerprints)

    def write(self, index: MemoryIndex, fingerprint: str | None = None) -> None:
        arrays = index.export()
        arrays["format"] = np.array([SNAPSHOT_FORMAT, index.dim], dtype=np.int64)
        arrays["store_fingerprint"] = np.frombuffer((fingerprint or "").encode(), dtype=np.uint8)
        with replaced_atomically(self.path) as handle:
            np.savez(handle, **arrays)

    def invalidate(self) -> None:
        self.path.unlink(missing_ok=True)

    def read(self, dim: int, fingerprint: str | None, count: Callable[[], int]) -> Iterator[list[VectorItem]] | None:
        """The snapshot's rows in pages, or None when there is none or it does not match the store.

        `fingerprint` is the store's now (None when it has none); `count` is
        called only when fingerprints cannot decide.
        """
        try:
            with np.load(self.path, allow_pickle=False) as data:
                arrays = {key: data[key] for key in data.files}
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            log.warning("ignoring unreadable vector snapshot %s", self.path, exc_info=True)
            return None
        saved = arrays["store_fingerprint"].tobytes().decode() if "store_fingerprint" in arrays else ""
        self.read_fingerprint = saved
        if list(arrays.get("format", [])) != [SNAPSHOT_FORMAT, dim]:
            current = False
        elif fingerprint and saved:
            current = saved == fingerprint
        else:
            current = len(arrays["seq"]) == count()
        if not current:
            log.info("vector snapshot %s is stale; reading Chroma instead", self.path)
            return None
        return self._pages(arrays)

    @staticmethod
    def _pages(arrays: dict[str, np.ndarray], page: int = 5000) -> Iterator[list[VectorItem]]:
        names = json.loads(arrays["names"].tobytes())
        columns = ["project", *_COLUMNS]
        for start in range(0, len(arrays["seq"]), page):
            end = start + page
            codes = {c: arrays[c][start:end].tolist() for c in columns}
            vectors = arrays["vectors"][start:end].astype(np.float32)
            happened = arrays["happened"][start:end].tolist()
            yield [
                VectorItem(
                    seq,
                    vectors[n],
                    {c: names[c][codes[c][n]] for c in columns} | {"happened_at": happened[n]},
                )
                for n, seq in enumerate(arrays["seq"][start:end].tolist())
            ]


class Vectors:
    """The vector store the rest of the worker uses: durable `ChromaStore` + fast `MemoryIndex`.

    With a `snapshot` path, the index is saved there after a load from Chroma and
    at close, and read back from there at start-up when it is still current.
    """

    def __init__(
        self,
        path: Path | str | None = None,
        *,
        store: ChromaStore | None = None,
        dim: int = DIMENSION,
        snapshot: Path | str | None = None,
    ):
        self.store = store or ChromaStore(path)
        self.index = MemoryIndex(dim)
        self.snapshot = IndexSnapshot(Path(snapshot)) if snapshot is not None else None
        self._snapshot_current = False  # the file on disk matches the index
        self._loaded = False
        self._load_lock = threading.Lock()
        # Writes that check the index first (overwrite) and deletes must not interleave.
        self._write_lock = threading.Lock()
        # Searchable already, stored in Chroma with the next `store_unstored` (add(store_later=True)).
        self._unstored: dict[int, VectorItem] = {}
        self._unstored_since = 0.0

    def load(self) -> int:
        """Read every stored embedding into memory (once); returns how many."""
        with self._load_lock:
            if not self._loaded:
                self.index.clear()
                pages = None
                if self.snapshot is not None:
                    pages = self.snapshot.read(self.index.dim, self.store.fingerprint(), self.store.count)
                from_snapshot = pages is not None
                for items in pages if from_snapshot else self.store.iterate():
                    self.index.add(items)
                self._loaded = True
                self.store.release()
                release_free_memory()
                # A file checked by count is saved again with a fingerprint, so the next start opens nothing.
                self._snapshot_current = from_snapshot and bool(
                    self.snapshot.read_fingerprint or self.store.fingerprint() is None
                )
                self._save_snapshot()
            return len(self.index)

    def _save_snapshot(self) -> None:
        if self.snapshot is None or self._snapshot_current or not self._loaded:
            return
        try:
            self.store.release()  # the fingerprint is of closed files
            self.snapshot.write(self.index, self.store.fingerprint())
            self._snapshot_current = True
        except OSError:
            log.warning("could not write the vector snapshot; start-up will read Chroma", exc_info=True)
        release_free_memory()

    def _before_write(self) -> None:
        """A snapshot must never outlive a change it does not hold: delete it before Chroma changes."""
        if self.snapshot is not None and (self._snapshot_current or self.snapshot.path.exists()):
            self.snapshot.invalidate()
            self._snapshot_current = False

    def writing(self):
        """A context for preparing and making writes: the store stays ready for them meanwhile
        (ChromaStore.writing); a store without that notion is left as it is."""
        writing = getattr(self.store, "writing", None)
        return writing() if writing is not None else nullcontext()

    def add(self, items: list[VectorItem], *, store_later: bool = False) -> None:
        """Store durably first, then make searchable (a crash between leaves Chroma ahead, which is harmless).

        `store_later`: searchable now, stored with the next `store_unstored`. A Chroma write costs
        about 7 ms of CPU however few vectors it holds (0.4 ms a vector in writes of 64), so adds
        that arrive one by one are stored together. The caller keeps their seqs queued until then
        (`pending_vectors`): a crash before loses no vector, the next start embeds them again.
        """
        if not items:
            return
        self.load()
        with self._write_lock:
            if store_later:
                self.index.add(items)
                if not self._unstored:
                    self._unstored_since = time.monotonic()
                self._unstored.update((item.seq, item) for item in items)
                return
            self._before_write()
            self.store.add(items)
            self.index.add(items)

    def store_unstored(self) -> list[int]:
        """Store in Chroma what `add(store_later=True)` made searchable; returns the seqs now stored."""
        with self._write_lock:
            items = list(self._unstored.values())
            # Taken off even if the write fails: their seqs are still queued, and the drain stores them.
            self._unstored.clear()
            if items:
                self._before_write()
                self.store.add(items)
        return [item.seq for item in items]

    def unstored(self) -> tuple[set[int], float]:
        """The seqs searchable and not yet stored, and how long the oldest of them has waited (s)."""
        with self._write_lock:
            return set(self._unstored), (time.monotonic() - self._unstored_since if self._unstored else 0.0)

    def overwrite(self, items: list[VectorItem]) -> int:
        """New vectors for seqs already stored (a re-embedding); a seq deleted meanwhile stays deleted.

        Returns how many were replaced.
        """
        self.load()
        with self._write_lock:
            items = [item for item in items if item.seq in self.index]
            waiting = [item for item in items if item.seq in self._unstored]
            self._unstored.update((item.seq, item) for item in waiting)  # stored with the others, new
            stored = [item for item in items if item.seq not in self._unstored]
            if stored:
                self._before_write()
                self.store.add(stored)  # an upsert
            self.index.overwrite(items)
        return len(items)

    def delete(self, seqs: Iterable[int]) -> None:
        seqs = list(seqs)
        self.load()
        with self._write_lock:
            for seq in seqs:
                self._unstored.pop(int(seq), None)  # never stored after it was deleted
            self._before_write()
            self.store.delete(seqs)
            self.index.remove(seqs)

    def __contains__(self, seq: int) -> bool:
        self.load()
        return seq in self.index

    def __len__(self) -> int:
        self.load()
        return len(self.index)

    @property
    def loaded(self) -> bool:
        return self._loaded

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
            self._before_write()
            self.store.drop()
            self.index.clear()
            with self._write_lock:
                self._unstored.clear()
            self._loaded = True

    def close(self) -> None:
        self.store_unstored()
        self.store.release()
        self._save_snapshot()
