"""The commits since a moment: what each says and what its diff did, in one git call.

git.py's `GitHistory` answers which files commits touched (for freshness marks);
this answers what they said and added (for next steps done by a commit).

Later work closes an open next step (worker/memory/steps_done.py) when a commit
made after the step was opened says it did it and touched what the step names.
That needs each commit's subject and body, the files it touched and the lines
its diff added, which `git log -p` gives in one process for the whole range.
It runs in the worker, never in a hook, and is bounded: the number of commits,
the added text kept per commit, and a timeout. Outside a repository, with git
missing or too slow, the answer is no commits, and nothing else changes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from worker.codebase.git import GIT_TIMEOUT, Repo, run_git

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


def commits_since(repo: Repo | None, since: float, *, limit: int = MAX_COMMITS, timeout: float = GIT_TIMEOUT) -> list[CommitDetail]:
    """The commits reachable from HEAD committed after `since` (epoch seconds), oldest first.

    Merges are left out: the commits they bring are listed themselves.
    """
    if repo is None:
        return []
    out = run_git(repo, ["-c", "core.quotepath=off", "log", f"--since=@{int(since)}", f"-n{int(limit)}", "--no-merges",
                         "-M", "-p", "--unified=0", "--no-color", "--no-ext-diff",
                         f"--format={_MARK}%H%x00%ct%x00%s%x00%b%x00"], timeout)  # fmt: skip
    if out is None:
        return []  # git missing or too slow, not a repository, no commit yet
    commits = [c for c in (_parse(chunk) for chunk in out.split(_MARK)[1:]) if c is not None]
    commits = [c for c in commits if c.time > since]  # --since is inclusive, to the second
    commits.reverse()
    return commits


def _parse(chunk: str) -> CommitDetail | None:
    parts = chunk.split("\x00", 4)
    if len(parts) < 5:
        return None
    sha, stamp, subject, body, diff = parts
    files: list[str] = []
    added: list[str] = []
    size = 0
    for line in diff.splitlines():
        if line.startswith("diff --git "):
            files += _diff_paths(line)
        elif line.startswith(("rename from ", "rename to ")):
            files.append(line.split(" ", 2)[2])
        elif line.startswith("+") and not line.startswith("+++") and size < MAX_ADDED_CHARS:
            added.append(line[1:])
            size += len(line)
    try:
        when = float(stamp)
    except ValueError:
        return None
    return CommitDetail(sha=sha.strip(), time=when, subject=subject.strip(), body=body.strip(),
                  files=tuple(dict.fromkeys(files)), added="\n".join(added)[:MAX_ADDED_CHARS])  # fmt: skip


def _diff_paths(line: str) -> list[str]:
    """`diff --git a/x b/y` -> [x, y] (one when they are the same)."""
    rest = line[len("diff --git ") :]
    half = len(rest) // 2
    # With spaces in names the two halves are "a/<p>" and "b/<p>" of equal length when unchanged.
    if rest[:half].startswith("a/") and rest[half + 1 :].startswith("b/") and rest[2:half] == rest[half + 3 :]:
        return [rest[2:half]]
    found = re.match(r"a/(.*?) b/(.*)$", rest)
    return list(dict.fromkeys(found.groups())) if found else []

