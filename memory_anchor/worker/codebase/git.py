"""The git repository a path belongs to, read as cheaply as it can be.

What the `.git` files say (the HEAD, a branch's commit in a loose ref or in
`packed-refs`) is read here without a process, and a file's blob id is computed
in Python (sha1 of `blob <len>\\0<content>`, as `git hash-object` does for a file
without filters), so recording and checking a memory start no process per file.
History (commits that touched a file since a commit, renames) needs git: one
`git log` per (repository, base commit, HEAD), with a timeout, kept in memory;
the hooks never call it. Without git, or outside a repository, the answers are
None: the caller treats them as "unknown".
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import threading
from stat import S_ISREG
from dataclasses import dataclass, field

from memory_anchor.core.projects import git_dirs
from memory_anchor.core.safe_read import open_regular, read_regular, read_text

log = logging.getLogger(__name__)

GIT_TIMEOUT = 5.0
# A history of more commits than this since a memory was written says enough: "changed since, 2000+ commits".
MAX_COMMITS = 2000
# Files larger than this are not hashed: a memory about them is "unknown", never a slow SessionStart.
MAX_FILE_BYTES = 8 * 1024 * 1024
# A loose ref or HEAD is one line; `packed-refs` of the largest public repositories is a few MB.
MAX_REF_BYTES = 4096
MAX_PACKED_REFS_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Repo:
    """A work tree and where its git data is (a worktree's own dir, and the dir it shares)."""

    root: str
    git_dir: str
    common_dir: str

    def relative(self, path: str) -> str | None:
        """`path` (absolute, or relative to the root) as the repository names it, or None outside it."""
        full = os.path.normpath(path if os.path.isabs(path) else os.path.join(self.root, path))
        for base in dict.fromkeys((self.root, os.path.realpath(self.root))):
            if full.startswith(base + os.sep):
                rel = full[len(base) + 1:]
                return rel.replace(os.sep, "/") if not rel.startswith(".git" + os.sep) and rel != ".git" else None
        real = os.path.realpath(full)
        if real != full:
            return self.relative(real)
        return None

    def absolute(self, rel: str) -> str:
        return self.root + os.sep + (rel if os.sep == "/" else rel.replace("/", os.sep))


def find_repo(path: str | None) -> Repo | None:
    """The repository `path` (a file or a directory) is in, or None."""
    if not path or not isinstance(path, str):
        return None
    try:
        candidate = os.path.realpath(os.path.expanduser(path))
    except (OSError, ValueError):
        return None
    if not os.path.isdir(candidate):
        candidate = os.path.dirname(candidate)
    return _repo_at_or_above(candidate)


_repos: dict[str, Repo] = {}


def _repo_at_or_above(directory: str) -> Repo | None:
    """Kept once found (while its `.git` is there); a directory outside any repository is walked
    again each time (a few stats), so a `git init` later is seen without a restart."""
    known = _repos.get(directory)
    if known is not None and os.path.exists(os.path.join(known.root, ".git")):
        return known
    found = None
    candidate = directory
    try:
        while True:
            if os.path.exists(os.path.join(candidate, ".git")):
                dirs = git_dirs(candidate)
                found = Repo(candidate, *dirs) if dirs else None
                break
            parent = os.path.dirname(candidate)
            if parent == candidate:
                break
            candidate = parent
    except (OSError, ValueError):
        found = None
    if found is not None:
        if len(_repos) > 4096:
            _repos.clear()
        _repos[directory] = found
    return found


def head(repo: Repo | None) -> str | None:
    """The commit HEAD points to, read from the files (a loose ref or `packed-refs`), or None
    (no commit yet, or a layout this reader does not know)."""
    if repo is None:
        return None
    text = _read(os.path.join(repo.git_dir, "HEAD"))
    for _ in range(5):  # a symbolic ref may point to another
        if text is None:
            return None
        if not text.startswith("ref:"):
            return text if _is_sha(text) else None
        name = text[4:].strip()
        if not is_ref_name(name):  # `ref: ../../secret` or `ref: /dev/zero` names no ref of this repository
            return None
        text = _read_ref(repo.git_dir, name) or _read_ref(repo.common_dir, name)
        if text is None:
            text = _packed_ref(repo.common_dir, name)
    return None


def is_ref_name(name: str) -> bool:
    """A name git could have written in a symbolic ref: `refs/...` (or a top-level one such as
    `HEAD`), relative, without `..`, empty or hidden parts, or characters git refuses."""
    if not name or len(name) > 1024 or name.startswith("/") or name.endswith((".", "/", ".lock")):
        return False
    if any(ord(c) < 0x20 or c in ' ~^:?*[\\\x7f' for c in name) or "@{" in name:
        return False
    parts = name.split("/")
    if any(not part or part.startswith(".") for part in parts):
        return False
    return parts[0] == "refs" or (len(parts) == 1 and name.isupper())


def _read_ref(git_dir: str, name: str) -> str | None:
    """A loose ref's text, when the file is inside `git_dir` once symlinks are resolved."""
    path = os.path.join(git_dir, name)
    try:
        inside = os.path.realpath(path).startswith(os.path.realpath(git_dir) + os.sep)
    except (OSError, ValueError):
        return None
    return _read(path) if inside else None


def _packed_ref(common_dir: str, name: str) -> str | None:
    try:
        fd = open_regular(os.path.join(common_dir, "packed-refs"), MAX_PACKED_REFS_BYTES)
    except (OSError, ValueError):
        return None
    try:
        with open(fd, encoding="utf-8", errors="replace", closefd=True) as handle:
            for line in handle:
                sha, _, ref = line.strip().partition(" ")
                if ref == name and _is_sha(sha):
                    return sha
    except OSError:
        pass
    return None


def _read(path: str) -> str | None:
    return read_text(path, MAX_REF_BYTES)


def _is_sha(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


def blob_id(content: bytes) -> str:
    """The id git gives `content` as a blob (`git hash-object`), computed without git."""
    digest = hashlib.sha1(b"blob %d\0" % len(content))
    digest.update(content)
    return digest.hexdigest()


def read_file(repo: Repo, rel: str) -> bytes | None:
    """A file's bytes in the work tree, or None when it is absent, not a regular file or too large."""
    try:
        return read_regular(repo.absolute(rel), MAX_FILE_BYTES)
    except ValueError:
        return None


class WorkTree:
    """Files' blob ids (and their text, squeezed, for finding an edit again) by path, kept while the
    file's mtime and size stay the same: a SessionStart re-checks a file with one stat."""

    def __init__(self, max_entries: int = 20_000):
        self.max_entries = max_entries
        self._files: dict[str, tuple[int, int, str, str | None]] = {}
        self._lock = threading.Lock()

    def blob(self, repo: Repo, rel: str) -> str | None:
        """The file's blob id now, or None when it is absent (or unreadable, or too large)."""
        entry = self._entry(repo, rel, text=False)
        return entry[2] if entry else None

    def squeezed_text(self, repo: Repo, rel: str) -> str | None:
        """The file's text with every run of whitespace one space (see `squeeze`), or None."""
        entry = self._entry(repo, rel, text=True)
        return entry[3] if entry else None

    @staticmethod
    def signature(repo: Repo, rel: str) -> tuple[int, int] | None:
        """(mtime, size) of a regular file, or None: what says a kept blob id still holds."""
        try:
            stat = os.stat(repo.absolute(rel))
        except (OSError, ValueError):
            return None
        return (stat.st_mtime_ns, stat.st_size) if S_ISREG(stat.st_mode) else None

    def _entry(self, repo: Repo, rel: str, *, text: bool):
        path = repo.absolute(rel)
        try:
            stat = os.stat(path)
        except (OSError, ValueError):
            return None
        if not S_ISREG(stat.st_mode) or stat.st_size > MAX_FILE_BYTES:
            return None
        with self._lock:
            entry = self._files.get(path)
        if entry and entry[0] == stat.st_mtime_ns and entry[1] == stat.st_size and (entry[3] is not None or not text):
            return entry
        content = read_file(repo, rel)
        if content is None:
            return None
        squeezed = squeeze(content.decode("utf-8", "replace")) if text else None
        entry = (stat.st_mtime_ns, stat.st_size, blob_id(content), squeezed)
        with self._lock:
            if len(self._files) >= self.max_entries:
                self._files.clear()
            self._files[path] = entry
        return entry


def squeeze(text: str) -> str:
    """`text` with every run of whitespace one space: an edit is found again after a re-indent."""
    return " ".join(text.split())


# --- what only git answers ---------------------------------------------------------------------


_git_by_path: dict[str, str | None] = {}


def git_executable() -> str | None:
    """The `git` on PATH, looked up once per PATH (a lookup stats every PATH entry)."""
    search = os.environ.get("PATH", "")
    if search not in _git_by_path:
        _git_by_path[search] = shutil.which("git")
    return _git_by_path[search]


def git_available() -> bool:
    return git_executable() is not None


def run_git(repo: Repo, args: list[str], timeout: float = GIT_TIMEOUT) -> str | None:
    """git's output, or None when git is missing, fails or takes longer than `timeout`."""
    executable = git_executable()
    if executable is None:
        return None
    try:
        done = subprocess.run(
            [executable, "-C", repo.root, *args], capture_output=True, timeout=timeout, check=False,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"},
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("git %s in %s failed: %s", args[0], repo.root, exc)
        return None
    if done.returncode != 0:
        log.debug("git %s in %s: %s", " ".join(args), repo.root, done.stderr.decode("utf-8", "replace").strip())
        return None
    return done.stdout.decode("utf-8", "replace")


@dataclass
class Commit:
    sha: str
    subject: str
    # (status letter, path, new path for a rename or copy else None), as `--name-status -M` lists them.
    changes: list[tuple[str, str, str | None]] = field(default_factory=list)


@dataclass
class History:
    """The commits in `base..head`, newest first, and what they did to each path."""

    base: str
    head: str
    commits: list[Commit]
    truncated: bool = False

    _touched: dict[str, int] | None = field(default=None, repr=False)

    def commits_touching(self, path: str) -> int:
        """How many of these commits changed `path` (under that name, or renamed to or from it)."""
        if self._touched is None:
            touched: dict[str, int] = {}
            for commit in self.commits:
                for name in {p for _, old, new in commit.changes for p in (old, new) if p}:
                    touched[name] = touched.get(name, 0) + 1
            self._touched = touched
        return self._touched.get(path, 0)

    def follow(self, path: str) -> str | None:
        """Where `path` is at `head` when these commits renamed it (a chain of renames followed), else None."""
        current, moved = path, False
        for commit in reversed(self.commits):  # oldest first
            for status, old, new in commit.changes:
                if status.startswith("R") and old == current and new:
                    current, moved = new, True
                    break
        return current if moved else None


class GitHistory:
    """`git log base..head` per (repository, base, head), asked once and kept (a commit's past never changes)."""

    def __init__(self, timeout: float = GIT_TIMEOUT, max_entries: int = 512):
        self.timeout = timeout
        self.max_entries = max_entries
        self._cache: dict[tuple[str, str, str], History | None] = {}
        self._lock = threading.Lock()
        self.calls = 0  # git processes started: the bench prints it

    def between(self, repo: Repo, base: str | None, head_sha: str | None) -> History | None:
        """The commits since `base` up to `head_sha`; None when unknown (no git, an unknown commit, a timeout)."""
        if repo is None or not base or not head_sha:
            return None
        if base == head_sha:
            return History(base, head_sha, [])
        key = (repo.root, base, head_sha)
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        history = self._log(repo, base, head_sha)
        with self._lock:
            if len(self._cache) >= self.max_entries:
                self._cache.clear()
            self._cache[key] = history
        return history

    def _log(self, repo: Repo, base: str, head_sha: str) -> History | None:
        self.calls += 1
        out = run_git(repo, ["log", "--no-color", "-M", "--name-status",
                             f"--max-count={MAX_COMMITS + 1}", "--format=%x00%H%x09%s", f"{base}..{head_sha}"],
                      self.timeout)  # fmt: skip
        if out is None:
            return None
        commits = parse_log(out)
        truncated = len(commits) > MAX_COMMITS
        return History(base, head_sha, commits[:MAX_COMMITS], truncated)


def parse_log(out: str) -> list[Commit]:
    """`git log --name-status --format=%x00%H%x09%s` as commits, newest first."""
    commits: list[Commit] = []
    for chunk in out.split("\0")[1:]:
        lines = chunk.split("\n")
        sha, _, subject = lines[0].partition("\t")
        commit = Commit(sha.strip(), subject.strip())
        for line in lines[1:]:
            parts = line.split("\t")
            if len(parts) >= 2 and parts[0][:1].isalpha():
                commit.changes.append((parts[0], parts[1], parts[2] if len(parts) > 2 else None))
        commits.append(commit)
    return commits
