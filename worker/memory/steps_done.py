"""Open next steps a commit did: closed with the commit that did them.

A session leaves "add a retry to fetch_user in src/api/client.py" open; later
someone commits "Add retry to fetch_user" touching src/api/client.py, outside
any session. The step is done, and the briefing must stop listing it. A wrong
close hides work the user still has to do, so a commit closes a step only on
plain evidence (`does_step`):

- it was committed after the step was opened, is on HEAD, and no later commit
  reverted it;
- when the step names files, the commit touched one of them, and its message
  (or, for the code names the step uses, the lines it added) says at least half
  of the step's own words, two at least;
- when the step names no file, its message alone says 60% of the step's words;
- every code name the step uses (`fetch_user`, `parseConfig`) appears in the
  message or the added lines;
- or its message names the step as the briefing does ("step 12").

The closed step stays in `open_items` with `closed_by` "commit:<sha>" and the
commit's subject as `closed_because` (`closed_by_commit` on the wire). The
check runs at the briefing build when HEAD moved since the last one (one `git
log` over the commits since the oldest open step), in the maintenance job and
in `memory-anchor verify --fix`: never in a hook.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

from worker.codebase.commits import CommitDetail, commits_since
from worker.codebase.freshness import repo_for
from worker.codebase.git import Repo, head
from worker.memory.cues import terms

COMMIT_PREFIX = "commit:"
WITH_FILES = 0.5  # of the step's words the commit's message says, when it touched a file the step names
WITHOUT_FILES = 0.6  # when the step names no file: its message alone
# Words that say a step is open, not what it is.
_TODO_WORDS = terms("still need needs todo to-do yet remain remains left follow up should must also next step later "
                    "then maybe probably")  # fmt: skip
_PATH = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-][\w.-]*\.[A-Za-z][A-Za-z0-9]{0,7}|(?:[\w.-]+/)+[\w.-]+/?)(?![\w/-])")
_CODE_NAME = re.compile(r"`([^`\s]{2,80})`|\b([A-Za-z_]\w*_\w+|[a-z]+[A-Z]\w*|\w+\(\))")


@dataclass(frozen=True)
class StepWords:
    """What a step asks for, in the forms a commit can show."""

    paths: tuple[str, ...]
    words: frozenset[str]
    code_names: frozenset[str]

    @classmethod
    def of(cls, text: str) -> "StepWords":
        paths = tuple(dict.fromkeys(p.strip("./") for p in _PATH.findall(text) if p.strip("./")))
        path_terms = terms(" ".join(paths)) | terms(" ".join(p.replace("/", " ").replace(".", " ") for p in paths))
        names = {(a or b).rstrip("()").strip("`") for a, b in _CODE_NAME.findall(text)}
        names = {n for n in names if n not in paths and "/" not in n}
        code_terms = terms(" ".join(names))
        words = terms(text) - path_terms - _TODO_WORDS
        return cls(paths, frozenset(words | code_terms), frozenset(code_terms))


def touches(commit: CommitDetail, paths: tuple[str, ...]) -> bool:
    """Did the commit touch a file (or a folder) the step names? A bare file name matches in any folder."""
    for path in paths:
        for changed in commit.files:
            if changed == path or changed.startswith(path.rstrip("/") + "/") or changed.endswith("/" + path):
                return True
    return False


def does_step(step_id: Any, text: str, commit: CommitDetail) -> bool:
    """Does `commit` plainly do the step `text`? (the rules are in the module's docstring)"""
    if re.search(rf"\bstep {re.escape(str(step_id))}\b", commit.message, re.IGNORECASE):
        return True
    step = StepWords.of(text)
    if not step.words:
        return False
    said = terms(commit.message)
    code = terms(commit.added) if step.code_names else set()
    if step.code_names and not step.code_names <= (said | code):
        return False
    if step.paths:
        if not touches(commit, step.paths):
            return False
        shared = len(step.words & (said | (code & step.code_names)))
        wanted = WITH_FILES
    else:
        shared = len(step.words & said)
        wanted = WITHOUT_FILES
    return shared >= min(2, len(step.words)) and shared / len(step.words) >= wanted


def closed_by_commit(item: dict[str, Any]) -> dict[str, str] | None:
    """`{commit, subject}` of the commit that closed an open item, or None."""
    by = item.get("closed_by") or ""
    if not by.startswith(COMMIT_PREFIX):
        return None
    return {"commit": by[len(COMMIT_PREFIX) :], "subject": item.get("closed_because") or ""}


def repository_of(conn, project: str) -> Repo | None:
    """The repository of a project here: its name when that is a path (one machine), else the one of
    the last session's directory in it (a team names projects by their remote)."""
    row = conn.execute("SELECT cwd FROM sessions WHERE project = ? AND cwd IS NOT NULL ORDER BY last_seen_at DESC LIMIT 1",
                       (project,)).fetchone()  # fmt: skip
    return repo_for(project, row["cwd"] if row else None)


class StepsDoneByCommits:
    """Closes a project's open steps that commits did, once per HEAD it has not seen."""

    def __init__(self, db):
        self.db = db
        self._seen: dict[tuple[str, str], str] = {}  # (project, root) -> the HEAD last checked
        self._lock = threading.Lock()

    def close(self, project: str, *, repo: Repo | None = None, force: bool = False) -> list[dict[str, Any]]:
        """Close the open steps of `project` that commits did; the steps closed, each with its commit."""
        repo = repo or repository_of(self.db.reader(), project)
        if repo is None:
            return []
        now_head = head(repo)
        if now_head is None:
            return []  # not a git repository, or no commit yet: nothing can have been done by one
        with self._lock:
            if not force and self._seen.get((project, repo.root)) == now_head:
                return []
            self._seen[(project, repo.root)] = now_head
        closed = self.find(project, repo)
        if closed:
            with self.db.transaction() as conn:
                for item in closed:
                    conn.execute("UPDATE open_items SET closed_at = ?, closed_by = ?, closed_because = ? "
                                 "WHERE id = ? AND closed_at IS NULL",
                                 (item["closed_at"], item["closed_by"], item["closed_because"], item["id"]))  # fmt: skip
        return closed

    def find(self, project: str, repo: Repo) -> list[dict[str, Any]]:
        """The open steps of `project` that commits on `repo`'s HEAD did, as they would be closed (nothing written)."""
        items = [dict(r) for r in self.db.reader().execute(
            "SELECT id, text, opened_at FROM open_items WHERE project = ? AND closed_at IS NULL", (project,)).fetchall()]  # fmt: skip
        if not items:
            return []
        commits = commits_since(repo, min(i["opened_at"] for i in items))
        reverted = {c.reverts for c in commits if c.reverts}
        commits = [c for c in commits if not any(c.sha.startswith(r) for r in reverted)]
        found = []
        for item in items:
            commit = next((c for c in commits if c.time > item["opened_at"] and does_step(item["id"], item["text"], c)), None)
            if commit is not None:
                closing = {"closed_at": commit.time, "closed_by": COMMIT_PREFIX + commit.sha, "closed_because": commit.subject}
                found.append({**item, **closing, "closed_by_commit": closed_by_commit(closing)})
        return found

    @staticmethod
    def done_by_commits(conn, project: str, limit: int = 200) -> dict[str, str]:
        """{step text: the commit that did it} of the project's steps commits closed, the latest first."""
        rows = conn.execute("SELECT text, closed_by FROM open_items WHERE project = ? AND closed_by LIKE ? "
                            "ORDER BY closed_at DESC LIMIT ?", (project, COMMIT_PREFIX + "%", limit)).fetchall()  # fmt: skip
        return {row["text"]: row["closed_by"][len(COMMIT_PREFIX) :] for row in reversed(rows)}
