"""The commits since a moment: what each says and what its diff did, in one git call.

git.py's `GitHistory` answers which files commits touched (for freshness marks);
this answers what they said and added (for next steps done by a commit).

Later work closes an open next step (memory_anchor/worker/memory/steps_done.py) when a commit
made after the step was opened says it did it and touched what the step names.
That needs each commit's subject and body and the files it touched (one `git
log --name-status` for the whole range), and the lines its diff added to the
files the open steps name (one `git log -p -- <those paths>`, only when a step
names one). It runs in the worker, never in a hook, and is bounded: the number
of commits, the added text kept per commit, and a timeout. Outside a repository, with git
missing or too slow, the answer is no commits, and nothing else changes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Iterable

from memory_anchor.worker.codebase.git import GIT_TIMEOUT, Repo, run_git

MAX_COMMITS = 200
MAX_ADDED_CHARS = 20_000  # per commit: enough to find a step's words, not a vendored file
# A separator no commit message holds, so messages are split exactly.
_MARK = "\x1e\x1fcommit\x1f"
_REVERTS = re.compile(r"This reverts commit ([0-9a-f]{7,40})")


@dataclass(frozen=True)
class CommitDetail:
    sha: str
    time: float  # the committer's time: when it landed here
    subject: str
    body: str
    files: tuple[str, ...]  # paths relative to the repository root, both names of a rename
    added: str  # the lines its diff added, at most MAX_ADDED_CHARS

    @property
    def message(self) -> str:
        return f"{self.subject}\n{self.body}".strip()

    @property
    def reverts(self) -> str | None:
        """The commit this one reverts (`git revert`'s own message), or None."""
        found = _REVERTS.search(self.body)
        return found.group(1) if found else None


def commits_since(repo: Repo | None, since: float, *, diff_paths: Iterable[str] = (), limit: int = MAX_COMMITS,
                  timeout: float = GIT_TIMEOUT) -> list[CommitDetail] | None:  # fmt: skip
    """The commits reachable from HEAD committed after `since` (epoch seconds), oldest first, or
    None when git cannot say (missing, too slow, no commit yet): a caller must not take that for none.

    Each with the files it touched; the lines it added only in `diff_paths` (a bare file name
    matches in any folder): a diff of everything since would cost a SessionStart a lockfile's
    worth of text. Merges are left out: the commits they bring are listed themselves.
    """
    if repo is None:
        return []
    window = ["-c", "core.quotepath=off", "log", f"--since=@{int(since)}", f"-n{int(limit)}", "--no-merges", "--no-color"]
    out = run_git(repo, [*window, "-M", "--name-status", f"--format={_MARK}%H%x00%ct%x00%s%x00%b%x00"], timeout)
    if out is None:
        return None
    commits = [c for c in (_parse(chunk) for chunk in out.split(_MARK)[1:]) if c is not None]
    commits = [c for c in commits if c.time > since]  # --since is inclusive, to the second
    specs = [p if "/" in p else f":(glob)**/{p}" for p in dict.fromkeys(diff_paths) if p]
    if commits and specs:
        diffs = run_git(repo, [*window, "-p", "--unified=0", "--no-ext-diff", f"--format={_MARK}%H%x00", "--", *specs],
                        timeout)  # fmt: skip
        added = dict(_added(chunk) for chunk in (diffs or "").split(_MARK)[1:])
        commits = [replace(c, added=added.get(c.sha, "")) for c in commits]
    commits.reverse()
    return commits


def shas_on_head_since(repo: Repo | None, since: float, timeout: float = GIT_TIMEOUT) -> set[str] | None:
    """The full shas of every commit reachable from HEAD committed after `since` (merged ones too),
    or None when git cannot say: a caller must not take a commit for gone then."""
    if repo is None:
        return None
    out = run_git(repo, ["rev-list", f"--since=@{int(since)}", "HEAD"], timeout)
    return None if out is None else set(out.split())


def _parse(chunk: str) -> CommitDetail | None:
    """One commit of `--name-status` output: its header, then `M\tpath` or `R100\told\tnew` lines."""
    parts = chunk.split("\x00", 4)
    if len(parts) < 5:
        return None
    sha, stamp, subject, body, changes = parts
    files: list[str] = []
    for line in changes.splitlines():
        fields = line.split("\t")
        if len(fields) >= 2 and fields[0][:1].isalpha():
            files += fields[1:]
    try:
        when = float(stamp)
    except ValueError:
        return None
    return CommitDetail(sha=sha.strip(), time=when, subject=subject.strip(), body=body.strip(),
                        files=tuple(dict.fromkeys(files)), added="")  # fmt: skip


def _added(chunk: str) -> tuple[str, str]:
    """(sha, the lines its diff added, at most MAX_ADDED_CHARS) of one commit of `-p` output."""
    sha, _, diff = chunk.partition("\x00")
    added, size = [], 0
    for line in diff.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            added.append(line[1:])
            size += len(line)
            if size >= MAX_ADDED_CHARS:
                break
    return sha.strip(), "\n".join(added)[:MAX_ADDED_CHARS]
