"""The offline embedder: the right model file, real vectors, paraphrases close, unrelated far."""

from __future__ import annotations


import numpy as np
import pytest

from memory_anchor.worker.index.embeddings import DIMENSION, Embedder, EmbeddingError
from tests.conftest import in_threads


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


def test_vectors_are_unit_float32(embedder):
    vectors = embedder.embed(["The build failed on the CI server.", "", "x" * 5000])
    assert vectors.shape == (3, DIMENSION)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)


def test_paraphrase_ranks_above_unrelated(embedder):
    query = embedder.embed_one("How do I fix the failing database migration?")
    paraphrase, unrelated = embedder.embed(
        ["The schema migration for the database keeps failing; here is the fix.", "We had pasta for dinner."]
    )
    assert float(query @ paraphrase) > float(query @ unrelated) + 0.3


def test_batching_and_order_do_not_change_vectors(embedder):
    texts = ["short", "a somewhat longer sentence about caching layers", "medium length text here"]
    together = embedder.embed(texts)
    alone = np.stack([embedder.embed_one(t) for t in texts])
    assert np.allclose(together, alone, atol=1e-4)


def test_long_text_is_truncated_at_256_tokens_not_128(embedder):
    lead = "alpha " * 140  # one token each: tokens 1-140 are the same in both texts
    a = embedder.embed_one(lead + "database crash " * 30)
    b = embedder.embed_one(lead + "sunny beach " * 30)
    # Truncated at 128 tokens (the shipped tokenizer.json's setting) they would be identical.
    assert not np.allclose(a, b, atol=1e-3)
    assert len(embedder._tokenizer.encode("alpha " * 600).ids) == 256
    # beyond 256 tokens nothing is seen
    assert np.allclose(
        embedder.embed_one("alpha " * 300 + "x"), embedder.embed_one("alpha " * 300 + "y z w"), atol=1e-5
    )


def test_thread_safe(embedder):
    expected = embedder.embed_one("parallel agents share one model")
    results = []
    in_threads(lambda: results.append(embedder.embed_one("parallel agents share one model")), [()] * 6)
    assert len(results) == 6
    assert all(np.allclose(r, expected, atol=1e-5) for r in results)


def test_wrong_model_file_is_refused(tmp_path):
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not the model")
    with pytest.raises(EmbeddingError, match="SHA256"):
        Embedder(model_path=fake).embed(["x"])


def test_lazy_load():
    embedder = Embedder()
    assert not embedder.loaded
    embedder.embed_one("now")
    assert embedder.loaded


def test_batches_stay_within_the_token_budget():
    embedder = Embedder(batch_size=32, max_batch_tokens=2048)
    lengths = [256] * 20 + [4] * 100 + [37, 90, 12]
    batches = embedder._batches(lengths)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    for batch in batches:
        assert len(batch) <= 32
        assert len(batch) * max(lengths[i] for i in batch) <= 2048  # padded to its longest
    assert any(len(batch) == 32 for batch in batches)  # short texts still share full batches


def test_batches_are_cut_by_tokens_not_characters(embedder):
    """Code and paths have more tokens a character than prose: batches are made from the texts'
    token counts, so a batch of them stays within the budget and holds little padding."""
    code = [f"django/db/models/sql/compiler.py:{n} `get_order_by()` -> ['-pk', F('a__b')]" for n in range(40)]
    prose = ["the build failed on the server today"] * 40
    texts = code + prose
    lengths = [len(embedder._tokenizer.encode(t).ids) for t in texts]
    assert min(lengths[:40]) > 1.5 * max(lengths[40:])  # the code lines are the longer ones in tokens
    batches = embedder._batches(lengths)
    padded = sum(len(batch) * max(lengths[i] for i in batch) for batch in batches)
    assert all(len(batch) * max(lengths[i] for i in batch) <= embedder.max_batch_tokens for batch in batches)
    assert padded <= 1.15 * sum(lengths)  # a batch where the short texts end and the long begin pads a little
    assert np.allclose(embedder.embed(texts), np.stack([embedder.embed_one(t) for t in texts]), atol=1e-4)
