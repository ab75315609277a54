"""In-process vector index benchmark: speed and shortlist recall of `MemoryIndex` against exact scoring.

    memory-anchor bench vectors --data-dir DIR   # DIR's stored vectors, queries embedded here
    memory-anchor bench vectors --random 100000  # random unit vectors (speed only is meaningful)

Every vector goes into ONE segment (one project, one user: the worst case for a
scoped search). For each query it times `MemoryIndex.search` and exact numpy
scoring over the same rows, and counts how many of the exact top k the index
returns (recall@k). Near-ties count: a returned row whose exact cosine is
within 1e-4 of the exact k-th best is as good as the one it displaced.
"""

from __future__ import annotations

import os
import random
import statistics
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the worker runs (memory_anchor/worker/__main__.py); before numpy loads
import numpy as np  # noqa: E402

TIE = 1e-4


def _vectors_from(data_dir) -> np.ndarray:
    from memory_anchor.core import paths
    from memory_anchor.worker.index.vectors import ChromaStore

    store = ChromaStore(paths.chroma_path(data_dir))
    try:
        return np.concatenate([np.stack([it.vector for it in page]) for page in store.iterate()])
    finally:
        store.release()


def _queries(count: int) -> np.ndarray:
    from memory_anchor.bench import branches, scale
    from memory_anchor.worker.index.embeddings import Embedder

    rng = random.Random(1)
    words = branches.WORDS
    texts = [scale.query_text(rng) for _ in range(count // 2)]
    texts += [f"{words[n % len(words)]} {words[(n * 5 + 1) % len(words)]} problem" for n in range(count - len(texts))]
    return Embedder().embed(texts)


def measure(vectors: np.ndarray, queries: np.ndarray, k: int = 60, **index_options) -> dict[str, float]:
    from memory_anchor.worker.index.vectors import MemoryIndex, VectorItem

    index = MemoryIndex(**index_options)
    t0 = time.perf_counter()
    meta = {"project": "p", "branch": "main", "user_id": "u"}
    for start in range(0, len(vectors), 5000):
        index.add([VectorItem(start + i + 1, v, meta) for i, v in enumerate(vectors[start : start + 5000])])
    load_s = time.perf_counter() - t0
    exact_ms, index_ms, recalls = [], [], []
    for query in queries:
        t0 = time.perf_counter()
        exact = vectors @ query
        top = np.argpartition(-exact, k - 1)[:k]
        exact_ms.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        hits = index.search(query, k)
        index_ms.append((time.perf_counter() - t0) * 1000)
        kth = exact[top].min()
        got = np.array([seq - 1 for seq, _ in hits])
        recalls.append(min(1.0, float(np.sum(exact[got] >= kth - TIE)) / k))
        worst = max(abs(exact[seq - 1] - score) for seq, score in hits)
        assert worst < 2e-3, f"returned cosine off by {worst}"
    return {
        "rows": len(vectors),
        "load_s": load_s,
        "exact_p50_ms": statistics.median(exact_ms),
        "index_p50_ms": statistics.median(index_ms),
        "index_p95_ms": sorted(index_ms)[int(0.95 * len(index_ms))],
        "recall": statistics.mean(recalls),
        "recall_min": min(recalls),
        "index_mb": index.memory_bytes() / 2**20,
        "exact_mb": vectors.nbytes / 2**20,
    }


def run(args) -> int:
    if args.data_dir:
        vectors, queries = _vectors_from(args.data_dir), _queries(args.queries)
    else:
        rng = np.random.default_rng(0)
        vectors = rng.normal(size=(args.random + args.queries, 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors, queries = vectors[: args.random], vectors[args.random :]
    result = measure(vectors, queries, args.k)
    print(f"{result['rows']:,} vectors in one segment, {len(queries)} queries, top {args.k}")
    print(f"  exact numpy scoring       p50 {result['exact_p50_ms']:.1f} ms   ({result['exact_mb']:.0f} MiB float32)")
    print(f"  MemoryIndex.search        p50 {result['index_p50_ms']:.1f} ms  p95 {result['index_p95_ms']:.1f} ms"
          f"   ({result['index_mb']:.0f} MiB, built in {result['load_s']:.1f} s)")  # fmt: skip
    print(f"  recall@{args.k} of exact top {args.k}: mean {result['recall']:.4f}, "
          f"worst query {result['recall_min']:.2f}")  # fmt: skip
    return 0
