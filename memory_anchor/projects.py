"""Which project a directory belongs to. Standard library only, and cheap to import: the
SessionStart and UserPromptSubmit hooks call `project_for_cwd` (pathlib and hashlib cost
them more than the rest of their imports, so they are not used or imported lazily)."""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path


def project_for_cwd(cwd: str | None) -> str:
    """The git root above `cwd` (a `.git` dir or file), else `cwd` itself, else ''."""
    if not cwd:
        return ""
    path = os.path.expanduser(os.fspath(cwd))  # a list or a number is a TypeError: such an event is quarantined
    try:
        path = os.path.realpath(path)
        candidate = path
        while True:
            if os.path.exists(os.path.join(candidate, ".git")):
                return candidate
            parent = os.path.dirname(candidate)
            if parent == candidate:
                return path
            candidate = parent
    except (OSError, ValueError, RuntimeError):  # too long, a NUL byte, a symlink loop: not a real directory
        return path


def project_key(project: str) -> str:
    """A short, filesystem-safe key for a project path."""
    import hashlib

    return hashlib.sha256(project.encode("utf-8", "replace")).hexdigest()[:16]


def context_cache_path(data_dir: Path | str, project: str) -> Path:
    """Last SessionStart context of a project, so a hook can print it when the worker is down."""
    from pathlib import Path

    return Path(data_dir) / "context-cache" / f"{project_key(project)}.md"


def is_excluded(name: str, patterns: list[str]) -> bool:
    """Whether `name` matches one of the glob `patterns` (settings' exclusion lists)."""
    from fnmatch import fnmatch

    return any(fnmatch(name, pattern) or name == pattern.rstrip(os.sep) for pattern in patterns)
