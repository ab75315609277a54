"""The worker's malloc on glibc (Linux): resident memory kept small, and no old
bytes in new blocks; no-ops elsewhere.

glibc gives each thread that contends for malloc its own arena and keeps freed
memory for reuse; a long-lived worker with bursts of requests then holds
hundreds of MB it no longer uses.

Freed memory also keeps its bytes, and a block malloc hands out again starts
with them. Chroma's HNSW index writes its whole capacity to
`data_level0.bin`, the slots no vector uses yet included, as malloc gave them:
an earlier request's body (a secret before redaction, the worker's token)
ended up on disk that way (tests/test_capture.py).
"""

from __future__ import annotations

M_ARENA_MAX = -8  # mallopt parameter numbers, from glibc's malloc.h
M_MMAP_THRESHOLD = -3
M_PERTURB = -6
# glibc fills a freed block with this byte and a new one with its complement: zeros.
PERTURB_BYTE = 0xFF
MMAP_THRESHOLD = 1 << 20


def _libc():
    import ctypes

    return ctypes.CDLL("libc.so.6")


def configure_malloc(arenas: int = 2) -> None:
    """Call before starting threads: at most `arenas` malloc arenas, big blocks always mapped.

    glibc raises its mmap threshold each time a mapped block is freed (up to
    32 MB), after which the embedding's activation buffers (1-13 MB) land in
    the heap and fragment it: one batch of 1,024 tokens left the peak 340 MB
    higher. A fixed threshold keeps every block over 1 MB in its own mapping,
    returned to the OS when freed (peak +50 KB a token, measured).
    """
    try:
        libc = _libc()
        libc.mallopt(M_ARENA_MAX, arenas)
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    except (OSError, AttributeError):
        pass


def clear_reused_memory() -> None:
    """Call before the first request: every block malloc hands out starts zeroed, and every
    freed block is overwritten, so no library writes an earlier request's bytes to disk.

    glibc's M_PERTURB (the MALLOC_PERTURB_ setting, made from inside the process). Its small
    per-thread cache (blocks up to 1 KB) skips both; whatever a library persists from a larger
    buffer it did not fill (Chroma's index) is zeros.
    """
    try:
        _libc().mallopt(M_PERTURB, PERTURB_BYTE)
    except (OSError, AttributeError):
        pass


def release_free_memory() -> None:
    """Give freed heap back to the OS (after loading vectors, after a burst of work)."""
    try:
        _libc().malloc_trim(0)
    except (OSError, AttributeError):
        pass
