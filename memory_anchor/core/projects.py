"""Which project a directory belongs to. Standard library only, and cheap to import: the
SessionStart and UserPromptSubmit hooks call `project_for_cwd` (pathlib and hashlib cost
them more than the rest of their imports, so they are not used or imported lazily)."""

from __future__ import annotations

import ntpath
import os
import posixpath

from memory_anchor.core.safe_read import read_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path


# A `.git` file, `commondir` or config larger than these is not a repository's: it is not read.
MAX_POINTER_BYTES = 64 * 1024
MAX_CONFIG_BYTES = 1024 * 1024

# How projects are named. One machine: by the git root's path. A team database: by the
# repository's `origin` remote (host/owner/name), the one name every developer's clone shares
# whatever directory it sits in; a repository without one keeps its path.
BY_PATH = "path"
BY_REMOTE = "remote"


def _windows_path(path: str) -> bool:
    drive, rest = ntpath.splitdrive(path)
    return bool(drive) and rest.startswith(("\\", "/"))


def is_clean_path(path: str) -> bool:
    """Absolute and normalised: no `..`, `.` or doubled separators (a trailing one allowed), as a
    working directory from a transcript must be to name a project. A Windows path (`C:\\Users\\x`,
    `\\\\server\\share`) is one too: transcripts made on Windows are read on any machine."""
    if posixpath.isabs(path):
        return posixpath.normpath(path) in (path, path.rstrip("/"))
    if not _windows_path(path):  # "C:relative" is relative to that drive's directory
        return False
    native = path.replace("/", "\\")
    return ntpath.normpath(native) in (native, native.rstrip("\\"))


def is_absolute(path: str) -> bool:
    """Absolute on the machine that wrote it: POSIX, or a Windows drive or UNC path."""
    return posixpath.isabs(path) or _windows_path(path)


def joined(cwd: str, path: str) -> str:
    """`path` as seen from `cwd`, joined the way the machine that wrote `cwd` joins paths."""
    if is_absolute(path):
        return path
    return ntpath.join(cwd, path) if _windows_path(cwd) else posixpath.join(cwd, path)


def project_for_cwd(cwd: str | None, naming: str = BY_PATH) -> str:
    """The project `cwd` belongs to: its git root (a `.git` dir or file above it), else `cwd`
    itself, else ''. With `naming` BY_REMOTE, a git root with an `origin` remote is named by it."""
    root = _root_for_cwd(cwd)
    if naming == BY_REMOTE and root:
        return remote_name(root) or root
    return root


def _root_for_cwd(cwd: str | None) -> str:
    if not cwd:
        return ""
    path = os.path.expanduser(os.fspath(cwd))  # a list or a number is a TypeError: such an event is quarantined
    if not os.path.isabs(path) and _windows_path(path):  # another machine's: its path names it, nothing here to look at
        return _windows_spelling(path)
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


def _windows_spelling(path: str) -> str:
    """One spelling of a directory of a Windows machine: Claude Code reports the drive letter
    either way (`c:\\Users\\me\\app` from the VS Code extension, `C:\\Users\\me\\app` from a
    terminal), and both are one folder; on Windows itself `realpath` settles it the same way."""
    drive, rest = ntpath.splitdrive(path.rstrip("\\/") or path)
    return (drive.upper() if len(drive) == 2 else drive) + rest


def remote_name(root: str) -> str | None:
    """`host/owner/name` of the `origin` remote of the repository at `root`, or None.

    Read from the repository's config file (a worktree's or submodule's `.git` file points
    to its git dir, whose `commondir` holds the config), so no git process is started.
    """
    url = _origin_url(_git_config_path(root))
    return _normalise_remote(url) if url else None


def _git_config_path(root: str) -> str | None:
    dirs = git_dirs(root)
    return os.path.join(dirs[1], "config") if dirs else None


def git_dirs(root: str) -> tuple[str, str] | None:
    """(the git dir, the common dir) of the work tree at `root`, or None when it has neither.

    A worktree's or submodule's `.git` is a file naming its git dir; a worktree's git dir names
    the dir it shares with the main checkout in `commondir` (branches, packed refs, the config)."""
    dot_git = os.path.join(root, ".git")
    if os.path.isdir(dot_git):
        return dot_git, dot_git
    # A FIFO or a device named `.git` is read as nothing (safe_read.py): never a wait, never a flood.
    text = read_text(dot_git, MAX_POINTER_BYTES)
    first = text.splitlines()[0].strip() if text else ""
    if not first.startswith("gitdir:"):
        return None
    try:
        git_dir = os.path.normpath(os.path.join(root, first[len("gitdir:"):].strip()))
    except ValueError:  # a NUL byte
        return None
    common = read_text(os.path.join(git_dir, "commondir"), MAX_POINTER_BYTES)
    if common is None:
        return git_dir, git_dir  # a submodule's git dir holds its own config
    try:
        return git_dir, os.path.normpath(os.path.join(git_dir, common.splitlines()[0].strip()))
    except ValueError:
        return None


def _origin_url(config_path: str | None) -> str | None:
    if config_path is None:
        return None
    text = read_text(config_path, MAX_CONFIG_BYTES)
    if text is None:
        return None
    lines = text.splitlines()
    in_origin = False
    for line in lines:
        line = line.strip()
        if line.startswith("["):
            in_origin = line.replace("'", '"').replace(" ", "") == '[remote"origin"]'
        elif in_origin and "=" in line:
            key, _, value = line.partition("=")
            if key.strip().lower() == "url" and value.strip():
                return value.strip().strip('"')
    return None


def _normalise_remote(url: str) -> str | None:
    """`git@github.com:Org/App.git`, `https://user:token@github.com/Org/App` and
    `ssh://git@github.com:22/Org/App.git` are all `github.com/Org/App`: no scheme, no
    credentials, no port, no `.git`; the host in lower case (paths are case-sensitive)."""
    rest = url
    if "://" in rest:
        rest = rest.split("://", 1)[1]
        host, _, path = rest.partition("/")
    elif ":" in rest and not rest.startswith("/"):  # scp-like: user@host:path
        host, _, path = rest.partition(":")
    else:  # a local path: the same name only for whoever shares that path
        path = rest.rstrip("/")
        return (path[: -len(".git")] if path.endswith(".git") else path) or None
    host = host.rpartition("@")[2].split(":")[0].lower()
    path = path.strip("/")
    if path.endswith(".git"):
        path = path[: -len(".git")]
    name = "/".join(part for part in (host, path) if part)
    return name or None


def relative(path: str, project: str | None) -> str:
    """A path inside the project as the project names it (`app/cart.py`, not `/home/me/shop/app/cart.py`).
    A Windows project's paths match in any case and with either separator, as Windows matches them
    (`c:\\Users\\me\\app\\src\\main.ts` is `src\\main.ts` in `C:\\Users\\me\\app`)."""
    root = (project or "").rstrip("/")
    if root.startswith("/"):
        return path[len(root) + 1 :] if path.startswith(root + "/") else path
    if _windows_path(root):
        root = root.rstrip("\\/")
        inside = len(path) > len(root) + 1 and path[len(root)] in "\\/"
        return path[len(root) + 1 :] if inside and _windows_folded(path[: len(root)]) == _windows_folded(root) else path
    return path


def without_root(text: str, project: str | None) -> str:
    """`text` with the project's folder taken off every path inside it, matched as `relative` matches."""
    root = (project or "").rstrip("/")
    if root.startswith("/") and len(root) > 1:
        return text.replace(root + "/", "")
    if _windows_path(root):
        import re  # here only: the hooks import this module for `project_for_cwd` and never come here

        parts = [re.escape(part) for part in re.split(r"[\\/]", root.rstrip("\\/"))]
        return re.sub(r"[\\/]".join(parts) + r"[\\/]", "", text, flags=re.IGNORECASE)
    return text


def _windows_folded(path: str) -> str:
    return path.replace("/", "\\").casefold()


def relative_once(paths, project: str | None) -> list[str]:
    """Each path as the project names it, once: an Edit names a file by its absolute path, a shell
    command by the path it typed, and both are the same file."""
    return list(dict.fromkeys(relative(p, project) for p in paths if isinstance(p, str)))


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
