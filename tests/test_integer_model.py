"""The int8 rewrite of the embedding model: same vectors as the shipped graph, cached once, rebuilt when damaged."""

from __future__ import annotations

import numpy as np
import pytest

from memory_anchor.worker.index import integer_model
from memory_anchor.worker.index.embeddings import MODEL_SHA256, Embedder, default_model_path

SENTENCES = [
    "The payment webhook handler timed out under load; we added an idempotency key.",
    "Melanie: I went camping with the kids last weekend.",
    "How do I fix the failing database migration?",
    "x",
    "Caroline: The support group meeting on May 7 was really moving. " * 6,
]


def _float_weight_vectors(texts: list[str]) -> np.ndarray:
    """Vectors from the shipped graph as onnxruntime runs it unchanged (weights folded to float32)."""
    import onnxruntime

    reference = Embedder()
    reference.load()
    session = onnxruntime.InferenceSession(str(default_model_path()), providers=["CPUExecutionProvider"])
    reference._session = session  # the same tokenizer and pooling, the unmodified graph
    return reference.embed(texts)


def test_rewrite_keeps_the_vectors(tmp_path):
    rewritten = Embedder(cache_dir=tmp_path).embed(SENTENCES)
    original = _float_weight_vectors(SENTENCES)
    cosines = (rewritten * original).sum(axis=1)
    assert cosines.min() > 0.997, cosines  # measured 0.9977 at worst over 1,500 texts


def test_a_texts_vector_does_not_depend_on_its_batch(tmp_path):
    embedder = Embedder(cache_dir=tmp_path)
    together = embedder.embed(SENTENCES)
    alone = np.stack([embedder.embed([text])[0] for text in SENTENCES])
    assert np.array_equal(together, alone)


def test_rewritten_model_multiplies_in_integers():
    import onnx

    model = onnx.load_from_string(integer_model.rewrite(default_model_path().read_bytes()))
    ops = [node.op_type for node in model.graph.node]
    assert ops.count("MatMulInteger") == 36  # 6 layers x (Q, K, V, attention out, 2 feed-forward)
    assert ops.count("MatMul") == 12  # left in float: attention's scores and weighted sum (no weights)
    assert ops.count("QuantizeLinear") == 24  # Q, K and V share one quantization of their input
    float_weights = sum(
        np.prod(init.dims) for init in model.graph.initializer if init.data_type == onnx.TensorProto.FLOAT
    )
    assert float_weights < 1_000_000  # layer norms, biases and scales only; the matrices stay int8


def test_cached_once_and_reused(tmp_path):
    first = integer_model.integer_model_path(default_model_path(), MODEL_SHA256, tmp_path)
    stamp = first.stat().st_mtime_ns
    again = integer_model.integer_model_path(default_model_path(), MODEL_SHA256, tmp_path)
    assert again == first and again.stat().st_mtime_ns == stamp


def test_damaged_cache_file_is_rebuilt_not_loaded(tmp_path):
    path = integer_model.integer_model_path(default_model_path(), MODEL_SHA256, tmp_path)
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 2])  # a torn write
    rebuilt = integer_model.integer_model_path(default_model_path(), MODEL_SHA256, tmp_path)
    assert rebuilt.read_bytes() == good


def test_old_rewrite_versions_are_removed(tmp_path):
    stale = tmp_path / f"model-{MODEL_SHA256[:16]}-int8mm-v0.onnx"
    stale.write_bytes(b"old")
    integer_model.integer_model_path(default_model_path(), MODEL_SHA256, tmp_path)
    assert not stale.exists()


def test_unwritable_cache_dir_falls_back_to_memory(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache dir should be")
    vectors = Embedder(cache_dir=blocker / "models").embed(SENTENCES[:2])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)


def test_a_graph_without_int8_weights_is_refused():
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "plain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    with pytest.raises(ValueError, match="no int8 weights"):
        integer_model.rewrite(helper.make_model(graph).SerializeToString())
