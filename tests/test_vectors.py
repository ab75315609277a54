"""The in-memory vector index: projected (shortlist + exact rescoring) search returns the exact top k."""

from __future__ import annotations

import numpy as np
import pytest

from memory_anchor.worker.index.vectors import MemoryIndex, VectorFilter, VectorItem

DIM = 96  # the index works at any dimension; 96 keeps the projection fits quick


def _corpus(n: int, seed: int = 7) -> np.ndarray:
    """Unit vectors with the low intrinsic dimension of real sentence embeddings (random ones have none)."""
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=(n, 12)) * np.linspace(3.0, 0.5, 12)
    vectors = latent @ rng.normal(size=(12, DIM)) + rng.normal(scale=0.15, size=(n, DIM))
    vectors = vectors.astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _index(vectors: np.ndarray, meta_for=lambda i: {"project": "p", "branch": "main"}, **options) -> MemoryIndex:
    index = MemoryIndex(DIM, **{"reduced_dim": 24, **options})
    for start in range(0, len(vectors), 1000):
        page = vectors[start : start + 1000]
        index.add([VectorItem(start + i + 1, v, meta_for(start + i)) for i, v in enumerate(page)])
    return index


def _exact(vectors: np.ndarray, query: np.ndarray, k: int, allowed=None) -> list[int]:
    scores = vectors @ query
    if allowed is not None:
        scores = np.where(allowed, scores, -np.inf)
    return [int(i) + 1 for i in np.argsort(-scores)[:k]]


def _assert_exact_top_k(hits: list[tuple[int, float]], vectors: np.ndarray, query: np.ndarray, expected: list[int]):
    """The exact top k, each with its cosine; float16 rescoring may swap rows whose cosines differ by < 1e-3."""
    assert sorted(seq for seq, _ in hits) == sorted(expected)
    for seq, cosine in hits:  # rescored from the stored vectors, not the projection's estimate
        assert cosine == pytest.approx(float(vectors[seq - 1] @ query), abs=2e-3)
    exact_in_returned_order = [float(vectors[seq - 1] @ query) for seq, _ in hits]
    assert all(a >= b - 1e-3 for a, b in zip(exact_in_returned_order, exact_in_returned_order[1:]))


def _projected(index: MemoryIndex) -> bool:
    return all(segment.projection is not None for segment in index._segments.values())


def test_projected_search_returns_the_exact_top_k_with_exact_cosines():
    vectors = _corpus(6000)
    queries = _corpus(30, seed=8)
    index = _index(vectors, project_from=2000)
    assert _projected(index)
    for query in queries:
        for k in (1, 10, 60):
            _assert_exact_top_k(index.search(query, k), vectors, query, _exact(vectors, query, k))


def test_small_segments_are_scored_exactly_on_float32():
    vectors = _corpus(500)
    index = _index(vectors, project_from=2000)
    assert not _projected(index)
    query = _corpus(1, seed=9)[0]
    hits = index.search(query, 5)
    assert [seq for seq, _ in hits] == _exact(vectors, query, 5)
    assert [c for _, c in hits] == pytest.approx([float(vectors[s - 1] @ query) for s, _ in hits], abs=1e-6)


def test_projected_search_honours_filters_and_removal():
    n = 12_000  # enough rows pass the filter for the shortlist to be used (it starts at 2,000)
    vectors = _corpus(n)
    users = np.array(["alice", "bob"])[np.arange(n) % 2]
    branches = np.where(np.arange(n) < 9000, "main", "exp")
    index = _index(
        vectors, lambda i: {"project": "p", "branch": str(branches[i]), "user_id": str(users[i])}, project_from=1000
    )
    assert _projected(index)
    query = _corpus(1, seed=10)[0]
    # alice, on exp as forked from main at seq 7000: main rows up to 7000 and every exp row
    where = VectorFilter(chain=(("exp", None), ("main", 7000)), user_ids=("alice",))
    seqs = np.arange(1, n + 1)
    allowed = (users == "alice") & (((branches == "main") & (seqs <= 7000)) | (branches == "exp"))
    assert allowed.sum() > 4000
    expected = _exact(vectors, query, 20, allowed)
    _assert_exact_top_k(index.search(query, 20, where), vectors, query, expected)

    removed = expected[:5]
    index.remove(removed)
    assert all(seq not in index for seq in removed) and len(index) == n - 5
    allowed[np.array(removed) - 1] = False
    _assert_exact_top_k(index.search(query, 20, where), vectors, query, _exact(vectors, query, 20, allowed))
    assert index.vector(removed[0]) is None


def test_projection_is_refitted_as_the_segment_grows():
    vectors = _corpus(9000)
    index = _index(vectors[:3000], project_from=2000)
    segment = index._segments["p"]
    first = segment.projection
    assert first is not None
    index.add([VectorItem(3001 + i, v, {"project": "p", "branch": "main"}) for i, v in enumerate(vectors[3000:])])
    assert segment.projection is not first and segment.fitted_rows >= 6000
    query = _corpus(1, seed=11)[0]
    _assert_exact_top_k(index.search(query, 30), vectors, query, _exact(vectors, query, 30))


def test_vectors_come_back_by_seq_whatever_the_order_they_were_added_in():
    vectors = _corpus(3000)
    index = MemoryIndex(DIM, reduced_dim=24, project_from=1000)
    order = np.random.default_rng(3).permutation(3000)
    for chunk in np.array_split(order, 7):
        index.add([VectorItem(int(i) + 1, vectors[i], {"project": f"p{i % 3}"}) for i in chunk])
    index.add([VectorItem(5, vectors[4], {"project": "p0"})])  # already there: ignored
    assert len(index) == 3000
    for i in (0, 4, 1234, 2999):
        assert np.allclose(index.vector(i + 1), vectors[i], atol=2e-3)
    assert index.vector(99999) is None and 99999 not in index


# --- the snapshot file ---------------------------------------------------------


def _vectors(tmp_path):
    from memory_anchor.worker.index.vectors import ChromaStore, Vectors

    store = ChromaStore(tmp_path / "chroma", idle_release_seconds=0)
    return Vectors(store=store, dim=DIM, snapshot=tmp_path / "snap.npz")


def _items(vectors: np.ndarray, first_seq: int = 1) -> list[VectorItem]:
    return [
        VectorItem(first_seq + i, v, {"project": "p", "branch": "main", "user_id": f"u{i % 2}", "happened_at": 1e3 + i})
        for i, v in enumerate(vectors)
    ]


def test_a_restart_reads_the_snapshot_instead_of_chroma(tmp_path, monkeypatch):
    corpus = _corpus(300)
    first = _vectors(tmp_path)
    first.add(_items(corpus))
    first.delete([7])
    first.close()
    assert (tmp_path / "snap.npz").exists()

    second = _vectors(tmp_path)
    monkeypatch.setattr(second.store, "iterate", lambda *a, **k: pytest.fail("read Chroma despite a current snapshot"))
    assert second.load() == 299 and 7 not in second.index
    query = corpus[7] + corpus[8]
    where = VectorFilter(chain=(("main", None),), user_ids=("u0",), happened_after=1100.0)
    before, after = first.search(query, 5, where), second.search(query, 5, where)
    assert [seq for seq, _ in after] == [seq for seq, _ in before] and len(after) == 5
    assert [c for _, c in after] == pytest.approx([c for _, c in before], abs=1e-3)


def test_a_current_snapshot_is_trusted_without_opening_chroma(tmp_path, monkeypatch):
    first = _vectors(tmp_path)
    first.add(_items(_corpus(50)))
    first.close()

    second = _vectors(tmp_path)
    monkeypatch.setattr(second.store.child, "_start", lambda: pytest.fail("opened Chroma to check the snapshot"))
    assert second.load() == 50


def test_a_snapshot_from_before_fingerprints_is_stamped_on_first_use(tmp_path, monkeypatch):
    first = _vectors(tmp_path)
    first.add(_items(_corpus(40)))
    first.close()
    first.snapshot.write(first.index)  # as an earlier version wrote it: no fingerprint

    second = _vectors(tmp_path)
    assert second.load() == 40  # checked by count, then saved again with the fingerprint
    second.close()

    third = _vectors(tmp_path)
    monkeypatch.setattr(third.store.child, "_start", lambda: pytest.fail("opened Chroma to check the snapshot"))
    assert third.load() == 40


def test_a_chroma_changed_behind_the_snapshot_is_read_again(tmp_path):
    corpus = _corpus(60)
    first = _vectors(tmp_path)
    first.add(_items(corpus[:50]))
    first.close()
    first.store.add(_items(corpus[50:], first_seq=51))  # written around Vectors: the snapshot is not told
    first.store.release()
    assert _vectors(tmp_path).load() == 60


def test_a_stale_or_torn_snapshot_is_never_used(tmp_path):
    corpus = _corpus(300)
    first = _vectors(tmp_path)
    first.add(_items(corpus[:200]))
    first.close()
    stale = (tmp_path / "snap.npz").read_bytes()

    writer = _vectors(tmp_path)
    writer.add(_items(corpus[200:], first_seq=201))
    assert not (tmp_path / "snap.npz").exists()  # deleted before Chroma changed
    writer.store.release()

    (tmp_path / "snap.npz").write_bytes(stale)  # as if the deletion had been lost
    assert _vectors(tmp_path).load() == 300  # Chroma's files changed since the snapshot: read Chroma

    (tmp_path / "snap.npz").write_bytes(stale[: len(stale) // 2])  # torn
    restarted = _vectors(tmp_path)
    assert restarted.load() == 300
    assert restarted.search(corpus[250], 1)[0][0] == 251


def test_chroma_stays_open_while_a_batch_is_prepared_then_idles_out(tmp_path):
    """The indexer embeds a batch inside `writing()`: the idle release (what the store's timer
    calls) leaves Chroma open meanwhile, so a stream of batches does not reopen Chroma and
    reload its index between every two; once the writes are in, the release closes it as before."""
    from memory_anchor.worker.index.vectors import ChromaStore, Vectors

    vectors = Vectors(store=ChromaStore(tmp_path / "chroma", idle_release_seconds=3600), dim=DIM)
    corpus = _corpus(20)
    try:
        vectors.add(_items(corpus[:10]))
        store = vectors.store
        with vectors.writing():
            store._close_when_idle(store._generation)  # the idle timer firing while the next batch is embedded
            assert store.child.running
            vectors.add(_items(corpus[10:], first_seq=11))
        store._close_when_idle(store._generation)
        assert not store.child.running
        assert vectors.store.count() == 20
    finally:
        vectors.close()
