"""The data dir is its user's alone: 0700, and nothing in it readable by another user.

It holds what the user's sessions said and did (the database, its WAL, the vector index, the
briefing cache, the logs). The worker runs with a umask of 077, so what it and its libraries
(SQLite, Chroma, the log handler) create is private from the start, and at each start it takes
group and other permissions off what an earlier version left readable. Standard library only.
"""

from __future__ import annotations

import os
import stat

from memory_anchor.core import paths

PRIVATE_UMASK = 0o077
# The plugin's own Python environment: code anyone may read, thousands of files; the data dir's
# 0700 already keeps other users out of it.
NOT_WALKED = frozenset({paths.ENVIRONMENT})


def private_umask() -> int:
    """Make files and folders this process creates from now on private; returns the previous umask."""
    return os.umask(PRIVATE_UMASK)


def make_private(data_dir: str | os.PathLike[str]) -> int:
    """The data dir 0700, and group and other permissions off every folder and file below it
    (a file 0644 becomes 0600, an executable 0755 becomes 0700); symlinks are not followed.
    Returns how many modes it changed. Never raises: a file it cannot change is left as it is."""
    root = os.fspath(data_dir)
    changed = _tighten(root, directory=True)
    stack = [root]
    while stack:
        current = stack.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            if current == root and entry.name in NOT_WALKED:
                continue
            try:
                if entry.is_symlink():
                    continue
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            changed += _tighten(entry.path, directory=is_dir)
            if is_dir:
                stack.append(entry.path)
    return changed


def _tighten(path: str, *, directory: bool) -> int:
    try:
        mode = stat.S_IMODE(os.lstat(path).st_mode)
        wanted = (mode | 0o700 if directory else mode) & ~PRIVATE_UMASK
        if wanted == mode:
            return 0
        os.chmod(path, wanted)  # a symlink was skipped by the caller: this is the file itself
        return 1
    except OSError:
        return 0
