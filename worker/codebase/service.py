"""The one door the rest of the worker uses: refs to keep when a record is written, marks when
records are shown. Built once per worker (`services.codebase`), so the recorder and the checker
share what they read of the work tree and of git's history."""

from __future__ import annotations

import logging
from typing import Any, Iterable

from memory_anchor.schemas.codebase import Freshness
from worker.codebase.freshness import FreshnessChecker, repo_for
from worker.codebase.git import GitHistory, Repo, WorkTree
from worker.codebase.refs import CodeRecorder, to_data

log = logging.getLogger(__name__)


class Codebase:
    def __init__(self):
        self.worktree = WorkTree()
        self.history = GitHistory()
        self.recorder = CodeRecorder(self.worktree)
        self.checker = FreshnessChecker(self.worktree, self.history)

    @staticmethod
    def repo(project: str | None, cwd: str | None = None) -> Repo | None:
        return repo_for(project, cwd)

    # --- when a record is written ------------------------------------------------------------

    def record_data(self, record: dict[str, Any], *, project: str | None, cwd: str | None = None,
                    payload: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
        """The fields to add to a record's `data` ({"code", "code_head"}), {} outside git.
        Never raises: a memory is worth more than its refs."""
        try:
            refs, head_sha = self.recorder.refs_for(record, self.repo(project, cwd), payload=payload, cwd=cwd)
            return to_data(refs, head_sha)
        except Exception:
            log.warning("could not read the code a %s names", record.get("kind"), exc_info=True)
            return {}

    def summary_data(self, summary: dict[str, Any], observations: list[dict[str, Any]], *, project: str | None,
                     cwd: str | None = None) -> dict[str, Any]:  # fmt: skip
        try:
            refs, head_sha = self.recorder.summary_refs(summary, observations, self.repo(project, cwd), cwd=cwd)
            return to_data(refs, head_sha)
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
            return self.checker.check_records(records, self.repo(project, cwd))
        except Exception:
            log.warning("could not check memories against the code", exc_info=True)
            return {}


def session_cwd(conn, session_id: str | None) -> str | None:
    if not session_id or conn is None:
        return None
    row = conn.execute("SELECT cwd FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    return row["cwd"] if row else None
