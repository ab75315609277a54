"""Process helpers shared by the hooks' bootstrap and the worker. Standard library only."""

from __future__ import annotations

import os


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
