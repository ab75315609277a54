"""The one door the rest of the worker uses: refs to keep when a record is written, marks when
records are shown. Built once per worker (`services.codebase`), so the recorder and the checker
share what they read of the work tree and of git's history."""

from __future__ import annotations

import logging
import threading
from typing import Any, Iterable

from memory_anchor.schemas.codebase import Freshness
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
        self._lock = threading.Lock()

    @staticmethod
    def repo(project: str | None, cwd: str | None = None) -> Repo | None:
        return repo_for(project, cwd)

    # --- when a record is written ------------------------------------------------------------

    def record_data(self, record: dict[str, Any], *, project: str | None, cwd: str | None = None,
                    payload: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
        """The fields to add to a record's `data` ({"code", "code_head"}), {} outside git.
        Never raises: a memory is worth more than its refs."""
        try:
            repo = self.repo(project, cwd)
            refs, head_sha = self.recorder.refs_for(record, repo, payload=payload, cwd=cwd)
            self._note(repo, [head_sha])
            return to_data(refs, head_sha)
        except Exception:
            log.warning("could not read the code a %s names", record.get("kind"), exc_info=True)
            return {}

    def summary_data(self, summary: dict[str, Any], observations: list[dict[str, Any]], *, project: str | None,
                     cwd: str | None = None) -> dict[str, Any]:  # fmt: skip
        """A session summary's {"code", "code_head"}: the files it changed, and the HEAD at its end
        even when it changed none (later commits are measured from it)."""
        try:
            repo = self.repo(project, cwd)
            refs, head_sha = self.recorder.summary_refs(summary, observations, repo, cwd=cwd)
            self._note(repo, [head_sha])
            return to_data(refs, head_sha, keep_head=True)  # the commit its next steps are open since
        except Exception:
            log.warning("could not read the code a session changed", exc_info=True)
            return {}

    def fact_data(self, conn, *, project: str | None, session_id: str | None, text: str) -> dict[str, Any]:
        """A fact's refs: the paths its text names that exist, in the repository of the session
        that stated it (or of the project, on one machine)."""
        return self.record_data({"kind": "fact", "text": text}, project=project, cwd=session_cwd(conn, session_id))

    # --- when records are shown --------------------------------------------------------------

    def check(self, records: Iterable[dict[str, Any]], *, project: str | None, cwd: str | None = None) -> dict[str, Freshness]:
        """{record id: Freshness} for the records that keep refs; {} outside git. Never raises:
        a briefing without marks is better than no briefing."""
        try:
            records = list(records)
            repo = self.repo(project, cwd)
            self._note(repo, [(r.get("data") or {}).get("code_head") for r in records])
            return self.checker.check_records(records, repo)
        except Exception:
            log.warning("could not check memories against the code", exc_info=True)
            return {}

    # --- ahead of the next SessionStart ------------------------------------------------------

    def warm(self) -> int:
        """Ask git now what the next check will need: for each repository seen, when its HEAD moved
        since the last call, the history since each commit memories were recorded at. A commit
        made between sessions then costs the next SessionStart no git process. Returns how many
        histories were asked (the worker calls this every few seconds, off the request path)."""
        asked = 0
        with self._lock:
            seen = [(root, repo, list(bases)) for root, (repo, bases) in self._bases.items()]
        for root, repo, bases in seen:
            head_sha = head(repo)
            if head_sha is None or self._warmed.get(root) == head_sha:
                continue
            for base in bases:
                self.history.between(repo, base, head_sha)
                asked += 1
            self._warmed[root] = head_sha
        return asked

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
