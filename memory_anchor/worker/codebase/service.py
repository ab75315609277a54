"""The one door the rest of the worker uses: refs to keep when a record is written, marks when
records are shown. Built once per worker (`services.codebase`), so the recorder and the checker
share what they read of the work tree and of git's history.

Every read of a repository through this door is bounded in time (bounded.py): a repository
that does not answer is "unknown", and the drain, the briefing and `verify` go on."""

from __future__ import annotations

import logging
import threading
from typing import Any, Iterable

from memory_anchor.schemas.codebase import Freshness
from memory_anchor.worker.codebase.bounded import Bounded
from memory_anchor.worker.codebase.freshness import FreshnessChecker, repo_for
from memory_anchor.worker.codebase.git import GitHistory, Repo, WorkTree, head
from memory_anchor.worker.codebase.refs import CodeRecorder, to_data
from memory_anchor.worker.store.sessions import session_cwd

log = logging.getLogger(__name__)

# The commits per repository `warm` asks history from: the most recently recorded or shown.
MAX_BASES = 32


class Codebase:
    def __init__(self):
        self.worktree = WorkTree()
        self.history = GitHistory()
        self.recorder = CodeRecorder(self.worktree)
        self.checker = FreshnessChecker(self.worktree, self.history)
        # The repositories memories were recorded in or checked against, with the commits they
        # were recorded at (newest last), and the HEAD `warm` last saw: see `warm`.
        self._bases: dict[str, tuple[Repo, dict[str, None]]] = {}
        self._warmed: dict[str, str | None] = {}
        # Roots whose HEAD moved since `warm` last answered, also those found by a read that
        # finished after `warm` had stopped waiting for it: the move is reported once, never lost.
        self._moved: set[str] = set()
        self._lock = threading.Lock()
        self.reads = Bounded()

    def repo(self, project: str | None, cwd: str | None = None) -> Repo | None:
        """The repository of `cwd` (else of `project`), or None, also when it cannot be read in time."""
        return self.reads.run(_where(project, cwd), repo_for, project, cwd)

    def head(self, repo: Repo | None) -> str | None:
        """The commit HEAD points to, or None (also when the repository cannot be read in time)."""
        return self.reads.run(repo.root, head, repo) if repo is not None else None

    def check_records(self, records: list[dict[str, Any]], repo: Repo | None) -> dict[str, Freshness]:
        """`FreshnessChecker.check_records`, {} when the repository cannot be read in time."""
        if repo is None:
            return {}
        return self.reads.run(repo.root, self.checker.check_records, records, repo, default={})

    # --- when a record is written ------------------------------------------------------------

    def record_data(self, record: dict[str, Any], *, project: str | None, cwd: str | None = None,
                    payload: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
        """The fields to add to a record's `data` ({"code", "code_head"}), {} outside git.
        Never raises: a memory is worth more than its refs."""
        try:
            return self.reads.run(_where(project, cwd), self._record_data, record, project, cwd, payload, default={})
        except Exception:
            log.warning("could not read the code a %s names", record.get("kind"), exc_info=True)
            return {}

    def _record_data(self, record: dict[str, Any], project: str | None, cwd: str | None,
                     payload: dict[str, Any] | None) -> dict[str, Any]:  # fmt: skip
        repo = repo_for(project, cwd)
        refs, head_sha = self.recorder.refs_for(record, repo, payload=payload, cwd=cwd)
        self._note(repo, [head_sha])
        return to_data(refs, head_sha)

    def summary_data(self, summary: dict[str, Any], observations: list[dict[str, Any]], *, project: str | None,
                     cwd: str | None = None) -> dict[str, Any]:  # fmt: skip
        """A session summary's {"code", "code_head"}: the files it changed, and the HEAD at its end
        even when it changed none (later commits are measured from it)."""
        try:
            return self.reads.run(_where(project, cwd), self._summary_data, summary, observations, project, cwd, default={})
        except Exception:
            log.warning("could not read the code a session changed", exc_info=True)
            return {}

    def _summary_data(self, summary: dict[str, Any], observations: list[dict[str, Any]], project: str | None,
                      cwd: str | None) -> dict[str, Any]:  # fmt: skip
        repo = repo_for(project, cwd)
        refs, head_sha = self.recorder.summary_refs(summary, observations, repo, cwd=cwd)
        self._note(repo, [head_sha])
        return to_data(refs, head_sha, keep_head=True)  # the commit its next steps are open since

    def fact_data(self, conn, *, project: str | None, session_id: str | None, text: str) -> dict[str, Any]:
        """A fact's refs: the paths its text names that exist, in the repository of the session
        that stated it (or of the project, on one machine)."""
        return self.record_data({"kind": "fact", "text": text}, project=project, cwd=session_cwd(conn, session_id))

    # --- when records are shown --------------------------------------------------------------

    def check(self, records: Iterable[dict[str, Any]], *, project: str | None, cwd: str | None = None) -> dict[str, Freshness]:
        """{record id: Freshness} for the records that keep refs; {} outside git. Never raises:
        a briefing without marks is better than no briefing."""
        try:
            return self.reads.run(_where(project, cwd), self._check, list(records), project, cwd, default={})
        except Exception:
            log.warning("could not check memories against the code", exc_info=True)
            return {}

    def _check(self, records: list[dict[str, Any]], project: str | None, cwd: str | None) -> dict[str, Freshness]:
        repo = repo_for(project, cwd)
        self._note(repo, [(r.get("data") or {}).get("code_head") for r in records])
        return self.checker.check_records(records, repo)

    # --- ahead of the next SessionStart ------------------------------------------------------

    def warm(self) -> int:
        """Ask git now what the next check will need: for each repository seen, when its HEAD moved
        since the last call, the history since each commit memories were recorded at. A commit
        made between sessions then costs the next SessionStart no git process. Returns how many
        repositories' HEADs moved (the worker calls this every few seconds, off the request path,
        and records what the commits did when one did)."""
        with self._lock:
            seen = [(root, repo, list(bases)) for root, (repo, bases) in self._bases.items()]
        for root, repo, bases in seen:
            try:
                self.reads.run(root, self._warm_one, root, repo, bases)
            except Exception:
                log.warning("could not read the history of %s", root, exc_info=True)
        with self._lock:
            moved, self._moved = len(self._moved), set()
        return moved

    def _warm_one(self, root: str, repo: Repo, bases: list[str]) -> None:
        head_sha = head(repo)
        if head_sha is None or self._warmed.get(root) == head_sha:
            return
        for base in bases:
            self.history.between(repo, base, head_sha)
        with self._lock:
            self._warmed[root] = head_sha
            self._moved.add(root)

    def _note(self, repo: Repo | None, heads: Iterable[str | None]) -> None:
        if repo is None:
            return
        with self._lock:
            _, bases = self._bases.setdefault(repo.root, (repo, {}))
            for head_sha in heads:
                if head_sha:
                    bases.pop(head_sha, None)
                    bases[head_sha] = None
            while len(bases) > MAX_BASES:
                bases.pop(next(iter(bases)))


def _where(project: str | None, cwd: str | None) -> str:
    """What a stuck read is remembered by: the directory it was about."""
    return cwd or project or ""

