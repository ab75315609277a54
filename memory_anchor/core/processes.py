"""Process helpers shared by the hooks' bootstrap and the worker. Standard library only."""

from __future__ import annotations

import os

# A worker's exit status when another worker already holds its data dir (that one serves it).
ALREADY_RUNNING_EXIT = 3


def pid_alive(pid: int | None) -> bool:
    """Whether a process with this pid exists (one we may not signal counts as alive)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def exited_child(pid: int) -> bool:
    """Whether `pid` is a child of this process that has exited; collects it if so.

    An exited child stays a zombie until its parent waits for it, and a zombie still
    answers kill(pid, 0): a process that started the worker itself (the SDK, the
    benchmarks) and then stops it would see it alive until its wait ran out.
    """
    if not pid or not hasattr(os, "WNOHANG"):  # Windows keeps no zombies
        return False
    try:
        return os.waitpid(pid, os.WNOHANG)[0] == pid
    except ChildProcessError:  # not our child, or already collected
        return False
