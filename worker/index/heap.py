"""Keeping the worker's resident memory small on glibc (Linux); no-ops elsewhere.

glibc gives each thread that contends for malloc its own arena and keeps freed
memory for reuse; a long-lived worker with bursts of requests then holds
hundreds of MB it no longer uses.
"""

from __future__ import annotations

M_ARENA_MAX = -8  # mallopt parameter numbers, from glibc's malloc.h
M_MMAP_THRESHOLD = -3
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


def release_free_memory() -> None:
    """Give freed heap back to the OS (after loading vectors, after a burst of work)."""
    try:
        _libc().malloc_trim(0)
    except (OSError, AttributeError):
        pass
