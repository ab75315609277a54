"""Where Memory Anchor keeps its files.

Standard library only: the hooks import this module from a bare `python3 -S`,
before any virtual environment exists, and must agree with the worker on every
path. A PostToolUse hook has a budget of a few milliseconds and importing
`pathlib` alone costs more than that, so the rules live once, on plain strings
(`*_file` functions and the file-name constants); the `Path` functions the rest
of the code uses wrap them and import pathlib only when called.
"""

from __future__ import annotations

import os
import sys
TYPE_CHECKING = False  # typing costs milliseconds to import; the hooks cannot afford it

if TYPE_CHECKING:
    from pathlib import Path

APP_NAME = "memory-anchor"

# File and directory names inside the data dir.
WORKER_INFO = "worker.json"
SPOOL = "spool.jsonl"
DATABASE = "memory.sqlite3"
CHROMA = "chroma"
VECTOR_SNAPSHOT = "vectors-snapshot.npz"  # the memory index, saved for a fast restart (memory_anchor/worker/index/vectors.py)
LOGS = "logs"
WORKER_LOG = "worker.log"
HOOKS_LOG = "hooks.log"
BOOTSTRAP_LOG = "bootstrap.log"
WORKER_LOCK = "worker.lock"
SETTINGS = "settings.json"
CONTEXT_CACHE = "context-cache"
# The Python environments the plugin builds for itself, one per plugin version (see
# memory_anchor/hookkit/bootstrap.py), and the lock that serialises building it.
ENVIRONMENT = "env"
BOOTSTRAP_LOCK = "bootstrap.lock"


def default_user_data_dir_str() -> str:
    """The platform's per-user data directory, computed the way platformdirs does.

    platformdirs is not importable from the hooks, so this mirrors its rules for
    the platforms Claude Code runs on; a test checks the two agree.
    """
    home = os.path.expanduser("~")
    if sys.platform == "darwin":
        return os.path.join(home, "Library", "Application Support", APP_NAME)
    if sys.platform.startswith("win"):
        base = os.environ.get("LOCALAPPDATA") or os.path.join(home, "AppData", "Local")
        return os.path.join(base, APP_NAME, APP_NAME)
    xdg = os.environ.get("XDG_DATA_HOME", "").strip()
    return os.path.join(xdg if xdg else os.path.join(home, ".local", "share"), APP_NAME)


def data_dir_str() -> str:
    """`$MEMORY_ANCHOR_DATA_DIR`, else `$CLAUDE_PLUGIN_DATA`, else the user data dir."""
    for var in ("MEMORY_ANCHOR_DATA_DIR", "CLAUDE_PLUGIN_DATA"):
        value = os.environ.get(var, "").strip()
        if value:
            return os.path.expanduser(value)
    return default_user_data_dir_str()


def data_file(name: str, base: str | None = None) -> str:
    """`name` (one of the constants above, or a relative path) inside the data dir."""
    return os.path.join(base or data_dir_str(), name)


def _path(name: str, base: Path | None) -> Path:
    from pathlib import Path

    return Path(data_file(name, str(base) if base is not None else None))


def default_user_data_dir() -> Path:
    from pathlib import Path

    return Path(default_user_data_dir_str())


def data_dir() -> Path:
    """`$MEMORY_ANCHOR_DATA_DIR`, else `$CLAUDE_PLUGIN_DATA`, else the user data dir."""
    from pathlib import Path

    return Path(data_dir_str())


def worker_info_path(base: Path | None = None) -> Path:
    """`worker.json`: port, pid and bearer token of the running worker (mode 0600)."""
    return _path(WORKER_INFO, base)


def spool_path(base: Path | None = None) -> Path:
    """Events that hooks could not deliver; the worker ingests them at start."""
    return _path(SPOOL, base)


def database_path(base: Path | None = None) -> Path:
    return _path(DATABASE, base)


def chroma_path(base: Path | None = None) -> Path:
    return _path(CHROMA, base)


def vector_snapshot_path(base: Path | None = None) -> Path:
    return _path(VECTOR_SNAPSHOT, base)


def log_path(base: Path | None = None) -> Path:
    return _path(os.path.join(LOGS, WORKER_LOG), base)


def hooks_log_path(base: Path | None = None) -> Path:
    """Errors of hooks (they never print into the session)."""
    return _path(os.path.join(LOGS, HOOKS_LOG), base)


def lock_path(base: Path | None = None) -> Path:
    return _path(WORKER_LOCK, base)


def settings_path(base: Path | None = None) -> Path:
    return _path(SETTINGS, base)


def environment_path(base: Path | None = None) -> Path:
    """The virtual environment the plugin builds on first use."""
    return _path(ENVIRONMENT, base)
