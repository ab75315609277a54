"""Keeping the worker's resident memory small on glibc (Linux); no-ops elsewhere.

glibc gives each thread that contends for malloc its own arena and keeps freed
memory for reuse; a long-lived worker with bursts of requests then holds
hundreds of MB it no longer uses.
"""

from __future__ import annotations

M_ARENA_MAX = -8  # mallopt parameter number, from glibc's malloc.h


def _libc():
    import ctypes

    return ctypes.CDLL("libc.so.6")


def limit_arenas(count: int = 2) -> None:
    """Call before starting threads: at most `count` malloc arenas for the process."""
    try:
        _libc().mallopt(M_ARENA_MAX, count)
    except (OSError, AttributeError):
        pass


def release_free_memory() -> None:
    """Give freed heap back to the OS (after loading vectors, after a burst of work)."""
    try:
        _libc().malloc_trim(0)
    except (OSError, AttributeError):
        pass
