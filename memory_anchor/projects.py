"""Which project a directory belongs to. Standard library only (hooks use it too)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def project_for_cwd(cwd: str | None) -> str:
    """The git root above `cwd` (a `.git` dir or file), else `cwd` itself, else ''."""
    if not cwd:
        return ""
    path = Path(cwd)
    try:
        path = path.expanduser().resolve()
        for candidate in (path, *path.parents):
            if (candidate / ".git").exists():
                return str(candidate)
    except (OSError, ValueError, RuntimeError):  # too long, a NUL byte, a symlink loop: not a real directory
        return str(path)
    return str(path)


def project_key(project: str) -> str:
    """A short, filesystem-safe key for a project path."""
    return hashlib.sha256(project.encode("utf-8", "replace")).hexdigest()[:16]


def context_cache_path(data_dir: Path, project: str) -> Path:
    """Last SessionStart context of a project, so a hook can print it when the worker is down."""
    return Path(data_dir) / "context-cache" / f"{project_key(project)}.md"


def is_excluded(name: str, patterns: list[str]) -> bool:
    """Whether `name` matches one of the glob `patterns` (settings' exclusion lists)."""
    from fnmatch import fnmatch

    return any(fnmatch(name, pattern) or name == pattern.rstrip(os.sep) for pattern in patterns)
