"""Does a memory's code still say what it said? Its refs compared with the working tree.

For each file a record keeps (`data.code`, see refs.py):
- the same blob as then: fresh;
- absent now: moved when the commits since followed a rename to a file that exists
  (the new path is named), else deleted;
- another blob: changed, with the number of commits that touched the file since;
  and when what an edit put in is no longer in the file (reverted or rewritten),
  superseded.
A record's state is its worst file's. Without git, outside a repository, or for a
record written before memories kept their code refs, the answer is "unknown" and nothing is marked.

Cheap enough for every SessionStart: a file costs one stat while it is unchanged
(`WorkTree`), the history since a commit one `git log` per (base, HEAD), kept
(`GitHistory`); only files whose blob differs ask for history at all.
"""

from __future__ import annotations

import os
from typing import Any, Iterable

from memory_anchor.schemas.codebase import CodeRef, Freshness
from memory_anchor.worker.codebase.git import GitHistory, Repo, WorkTree, find_repo, git_available, head
from memory_anchor.worker.codebase.refs import stored_refs

# Worst first: the state a record with several files takes.
SEVERITY = {"superseded": 5, "deleted": 4, "moved": 3, "changed": 2, "fresh": 1, "unknown": 0}
UNKNOWN = Freshness(state="unknown")


def repo_for(project: str | None, cwd: str | None = None) -> Repo | None:
    """The repository a project's memories are about on this machine: the session's directory's,
    else the project's when it is a path (one machine names a project by its git root)."""
    repo = find_repo(cwd) if cwd else None
    if repo is None and project and os.path.isabs(project):
        repo = find_repo(project)
    return repo


def commits_phrase(commits: int | None) -> str:
    if commits is None:
        return ""
    if commits == 0:
        return ", not committed"
    return f", {commits} commit{'s' if commits != 1 else ''}"


def mark(freshness: Freshness | None) -> str:
    """The mark shown after a memory's line: ' (app/cart.py changed since, 3 commits)',
    ' (superseded: the edit to app/cart.py is no longer in the file)', or '' when not stale."""
    if freshness is None or not freshness.stale or not freshness.detail:
        return ""
    prefix = "superseded: " if freshness.state == "superseded" else ""
    return f" ({prefix}{freshness.detail})"


class FreshnessChecker:
    """Compares records' refs with the working tree. One per worker, shared by every surface."""

    def __init__(self, worktree: WorkTree | None = None, history: GitHistory | None = None, max_memo: int = 50_000):
        self.worktree = worktree or WorkTree()
        self.history = history or GitHistory()
        # A file that is still there answers as it did while HEAD and the file stay the same:
        # {(root, HEAD, the ref): ((mtime, size), Freshness)}, so a SessionStart re-checks it with one stat.
        self._memo: dict[tuple, tuple[tuple[int, int], Freshness]] = {}
        self.max_memo = max_memo

    def check(self, refs: Iterable[CodeRef], repo: Repo | None, *, head_sha: str | None = None) -> Freshness:
        """The state of the worst of `refs` now."""
        refs = list(refs)
        if repo is None or not refs or head_sha is None and not git_available():
            return UNKNOWN
        head_sha = head_sha or head(repo)
        worst = UNKNOWN
        for ref in refs:
            found = self._check_one(ref, repo, head_sha)
            if SEVERITY[found.state] > SEVERITY[worst.state]:
                worst = found
        return worst

    def check_record(self, record: dict[str, Any], repo: Repo | None, *, head_sha: str | None = None) -> Freshness:
        return self.check(stored_refs(record), repo, head_sha=head_sha)

    def check_records(self, records: Iterable[dict[str, Any]], repo: Repo | None) -> dict[str, Freshness]:
        """{record id: its Freshness} for the records that keep refs (HEAD read once)."""
        records = [r for r in records if (r.get("data") or {}).get("code")]
        if repo is None or not records or not git_available():
            return {}
        head_sha = head(repo)
        return {r["id"]: self.check_record(r, repo, head_sha=head_sha) for r in records}

    def _check_one(self, ref: CodeRef, repo: Repo, head_sha: str | None) -> Freshness:
        if ref.blob is None:  # the file was absent then: nothing it said can have changed
            return UNKNOWN
        key = (repo.root, head_sha, ref.path, ref.blob, ref.head, ref.inserted)
        signature = self.worktree.signature(repo, ref.path)
        memo = self._memo.get(key)
        if memo is not None and signature is not None and memo[0] == signature:
            return memo[1]
        found = self._compare(ref, repo, head_sha)
        if signature is not None:  # a deleted or moved file is asked again: the new path may change
            if len(self._memo) >= self.max_memo:
                self._memo.clear()
            self._memo[key] = (signature, found)
        return found

    def _compare(self, ref: CodeRef, repo: Repo, head_sha: str | None) -> Freshness:
        now = self.worktree.blob(repo, ref.path)
        if now == ref.blob:
            return Freshness(state="fresh", path=ref.path)
        history = self.history.between(repo, ref.head, head_sha)
        commits = history.commits_touching(ref.path) if history is not None else None
        if now is None:
            new_path = history.follow(ref.path) if history is not None else None
            if new_path and self.worktree.blob(repo, new_path) is not None:
                return Freshness(state="moved", path=ref.path, new_path=new_path, commits=commits,
                                 detail=f"{ref.path} moved to {new_path}")  # fmt: skip
            return Freshness(state="deleted", path=ref.path, commits=commits, detail=f"{ref.path} deleted since")
        if ref.inserted and ref.inserted not in (self.worktree.squeezed_text(repo, ref.path) or ""):
            return Freshness(state="superseded", path=ref.path, commits=commits,
                             detail=f"the edit to {ref.path} is no longer in the file")  # fmt: skip
        return Freshness(state="changed", path=ref.path, commits=commits,
                         detail=f"{ref.path} changed since{commits_phrase(commits)}")  # fmt: skip
