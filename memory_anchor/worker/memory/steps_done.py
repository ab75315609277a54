"""Open next steps a commit did: closed with the commit that did them.

A session leaves "add a retry to fetch_user in src/api/client.py" open; later
someone commits "Add retry to fetch_user" touching src/api/client.py, outside
any session. The step is done, and the briefing must stop listing it. A wrong
close hides work the user still has to do, so a commit closes a step only on
plain evidence (`does_step`):

- it was committed after the step was opened, is on HEAD, and no later commit
  reverted it;
- it says what the step acts on (its objects: `fetch_user`, "retry"), whatever
  verb it uses ("remove" / "drop"), but never the opposite verb ("add" is not
  done by "remove");
- when the step names files, the commit touched one of them;
- or its message names the step as the briefing does ("step 12");
- or, when the step names files, the lines it added there say all that the step
  acts on (two objects, or a code name): the commit did the step even when its
  message names the effect ("Stop logins timing out on slow networks").
The exact rules are `does_step`'s. A commit that closed a step and is reverted
later (`git revert`), or is no longer on HEAD (the watch saw HEAD on a branch
that was left unmerged), reopens it.

The closed step stays in `open_items` with `closed_by` "commit:<sha>" and the
commit's subject as `closed_because` (`closed_by_commit` on the wire). Steps
are closed by the git watch when HEAD moves (one `git log` over the commits since
the oldest open step), in the maintenance job and in `memory-anchor verify --fix`:
never in a hook. The briefing shows them closed without writing (`pending`).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

from memory_anchor.worker.codebase.commits import CommitDetail, commits_since, shas_on_head_since
from memory_anchor.worker.codebase.freshness import repo_for
from memory_anchor.worker.codebase.git import Repo, head
from memory_anchor.worker.memory.cues import terms
from memory_anchor.worker.store import open_items as store_steps
from memory_anchor.worker.store.sessions import last_cwd

COMMIT_PREFIX = "commit:"
# Words that say a step is open, not what it is.
_TODO_WORDS = terms("still need needs todo to-do yet remain remains left follow up should must also next step later "
                    "then maybe probably")  # fmt: skip
# What a step does, in the words people vary most between the step and the commit ("remove" / "drop"): a commit
# need not repeat them. What it is done to (the objects: names, nouns) it must say.
_ACTIONS = terms("add create write implement introduce make update change fix document explain remove delete drop "
                 "rename move refactor clean tidy use replace wire support handle improve ensure set bump upgrade "
                 "migrate convert extract split finish complete do apply")  # fmt: skip
# Nouns too general to tell one piece of work from another ("the CART_TTL variable"): a commit need not say them.
_GENERIC = terms("variable function method class module file helper code doc docs documentation comment value setting "
                 "option thing part section line new old proper properly small quick same path flow case logic place "
                 "way rest remaining other")  # fmt: skip
# A commit that does the opposite of the step does not do it ("add X" is not done by "remove X").
_OPPOSITES = [(terms("add create write introduce enable"), terms("remove delete drop disable"))]
_PATH = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-][\w.-]*\.[A-Za-z][A-Za-z0-9]{0,7}|(?:[\w.-]+/)+[\w.-]*)(?![\w/-])")
_CODE_NAME = re.compile(r"`([^`\s]{2,80})`|\b([A-Za-z_]\w*_\w+|[a-z]+[A-Z]\w*|\w+\(\))")


def _key(word: str) -> str:
    """A word as matched: "retries"/"retry" and "caching"/"cache" meet (the stemmer keeps them apart);
    a code name (`fetch_user_2`) only as itself."""
    return word.rstrip("yie")[:6] if len(word) > 3 and word.isalpha() else word


def _keys(words) -> set[str]:
    return {_key(w) for w in words}


@dataclass(frozen=True)
class StepWords:
    """What a step asks for, in the forms a commit can show."""

    paths: tuple[str, ...]
    actions: frozenset[str]
    objects: frozenset[str]  # matched by _key

    @classmethod
    def of(cls, text: str) -> "StepWords":
        paths = tuple(dict.fromkeys(p.strip("./") for p in _PATH.findall(text) if p.strip("./")))
        path_terms = terms(" ".join(paths)) | terms(" ".join(p.replace("/", " ").replace(".", " ") for p in paths))
        names = {(a or b).rstrip("()").strip("`") for a, b in _CODE_NAME.findall(text)}
        names = {n for n in names if "/" not in n and not any(n in p for p in paths)}
        words = (terms(text) - path_terms - _TODO_WORDS) | terms(" ".join(names))
        return cls(paths, frozenset(words & _ACTIONS), frozenset(_keys(words - _ACTIONS - _GENERIC)))


def touches(commit: CommitDetail, paths: tuple[str, ...]) -> bool:
    """Did the commit touch a file (or a folder) the step names? A bare file name matches in any folder."""
    for path in paths:
        for changed in commit.files:
            if changed == path or changed.startswith(path.rstrip("/") + "/") or changed.endswith("/" + path):
                return True
    return False


def does_step(step_id: Any, text: str, commit: CommitDetail) -> bool:
    """Does `commit` plainly do the step `text`?

    - its message names the step as the briefing does ("step 12"); or
    - it does not do the opposite ("remove" for "add"), and
    - when the step names files: it touched one, its message says one of the step's objects (the
      names and nouns it acts on, general ones like "variable" aside) and its message or added lines
      say all of them; a step with one object or none (a code name aside) needs the step's own
      action word in the message too;
    - when the step names no file: its message says all the step's objects, two at least, or one
      with the step's action word.
    """
    if re.search(rf"\bstep {re.escape(str(step_id))}\b", commit.message, re.IGNORECASE):
        return True
    step = StepWords.of(text)
    said_words = terms(commit.message)
    said = _keys(said_words)
    for one, other in _OPPOSITES:
        for mine, theirs in ((one, other), (other, one)):
            if step.actions & mine and said_words & theirs and not said_words & mine:
                return False
    same_action = bool(step.actions & said_words)
    if step.paths:
        if not touches(commit, step.paths):
            return False
        if _diff_does(step, commit):
            return True  # its message may name the effect ("Stop flaky logins"), the lines it added are the step
        if len(step.objects) <= 1 and not same_action and not any(not o.isalpha() for o in step.objects):
            return False  # one plain word in common is too little without the step's own action (a code name is enough)
        return not step.objects or bool(step.objects & said) and step.objects <= (said | _keys(terms(commit.added)))
    if not step.objects or not step.objects <= said:
        return False
    return len(step.objects) >= 2 or same_action


def _diff_does(step: StepWords, commit: CommitDetail) -> bool:
    """Do the lines the commit added to the step's files say everything the step acts on: two objects
    at least, or a code name (one plain word is too little)? Never for a step that takes something
    away: added lines that say it show it is still there."""
    if step.actions & _REMOVALS or not step.objects:
        return False
    if len(step.objects) < 2 and all(o.isalpha() for o in step.objects):
        return False
    return step.objects <= _keys(terms(commit.added))


_REMOVALS = terms("remove delete drop disable")


def closed_by_commit(item: dict[str, Any]) -> dict[str, str] | None:
    """`{commit, subject}` of the commit that closed an open item, or None."""
    by = item.get("closed_by") or ""
    if not by.startswith(COMMIT_PREFIX):
        return None
    return {"commit": by[len(COMMIT_PREFIX) :], "subject": item.get("closed_because") or ""}


def repository_of(conn, project: str) -> Repo | None:
    """The repository of a project here: its name when that is a path (one machine), else the one of
    the last session's directory in it (a team names projects by their remote)."""
    return repo_for(project, last_cwd(conn, project))


class StepsDoneByCommits:
    """Closes a project's open steps that commits did, once per HEAD it has not seen."""

    def __init__(self, db):
        self.db = db
        self._seen: dict[tuple[str, str], str] = {}  # (project, root) -> the HEAD last checked
        # (project, root) -> ((HEAD, the open steps' ids), what `find` said then): see `pending`.
        self._found: dict[tuple[str, str], tuple[tuple[str, tuple[int, ...]], list[dict[str, Any]]]] = {}
        self._lock = threading.Lock()

    def pending(self, project: str) -> list[dict[str, Any]]:
        """The open steps of `project` that commits did, as `close` would close them, without writing:
        what a briefing shows until the git watch or the maintenance job records it. Git is asked once
        per HEAD and set of open steps."""
        conn = self.db.reader()
        repo = repository_of(conn, project)
        now_head = head(repo) if repo is not None else None
        if now_head is None:
            return []
        key = (now_head, tuple(sorted(step["id"] for step in store_steps.open_steps(conn, project))))
        with self._lock:
            cached = self._found.get((project, repo.root))
        if cached is not None and cached[0] == key:
            return cached[1]
        found = self.find(project, repo) if key[1] else []
        if found is None:
            return []  # git cannot say now: shown open, and asked again next time
        with self._lock:
            self._found[(project, repo.root)] = (key, found)
        return found

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
        reopened = self.undone(project, repo)
        closed = self.find(project, repo) if reopened is not None else None
        if reopened is None or closed is None:
            return []  # git could not say (too slow, busy): this HEAD is not seen, the next watch asks again
        if reopened:
            with self.db.transaction() as conn:
                for item in reopened:
                    store_steps.reopen_step(conn, item["id"], closed_by=item["closed_by"])
        if closed:
            with self.db.transaction() as conn:
                for item in closed:
                    store_steps.close_step(conn, item["id"], at=item["closed_at"], by=item["closed_by"],
                                           because=item["closed_because"], if_open=True)  # fmt: skip
        with self._lock:
            self._seen[(project, repo.root)] = now_head
        return closed

    def undone(self, project: str, repo: Repo, limit: int = 200) -> list[dict[str, Any]] | None:
        """The steps a commit closed that is no longer on HEAD (a branch left unmerged, history
        reset), or that a later commit on HEAD reverted: open again (nothing written). None when
        git cannot say."""
        items = [dict(r) for r in store_steps.closed_by_prefix(self.db.reader(), project, COMMIT_PREFIX, limit)]
        if not items:
            return []
        since = min(i["closed_at"] for i in items) - 1
        # Two git calls: commits_since reads messages (for reverts) but stops at MAX_COMMITS and skips
        # merges, so it cannot say a commit is gone; rev-list lists every sha on HEAD, and only those.
        on_head = shas_on_head_since(repo, since)
        commits = commits_since(repo, since) if on_head is not None else None
        if on_head is None or commits is None:
            return None
        reverted = [c.reverts for c in commits if c.reverts]

        def reopens(sha: str) -> bool:
            return sha not in on_head or any(r and sha.startswith(r) for r in reverted)

        return [i for i in items if reopens(i["closed_by"][len(COMMIT_PREFIX) :])]

    def find(self, project: str, repo: Repo) -> list[dict[str, Any]] | None:
        """The open steps of `project` that commits on `repo`'s HEAD did, as they would be closed
        (nothing written); None when git cannot say."""
        items = [{key: r[key] for key in ("id", "text", "opened_at")} for r in store_steps.open_steps(self.db.reader(), project)]
        if not items:
            return []
        named = [path for item in items for path in StepWords.of(item["text"]).paths]
        commits = commits_since(repo, min(i["opened_at"] for i in items), diff_paths=named)
        if commits is None:
            return None
        reverted = {c.reverts for c in commits if c.reverts}
        # Neither a reverted commit nor the revert (its message repeats the reverted one's) did the step.
        commits = [c for c in commits if not c.reverts and not any(c.sha.startswith(r) for r in reverted)]
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
        rows = store_steps.closed_by_prefix(conn, project, COMMIT_PREFIX, limit)
        return {row["text"]: row["closed_by"][len(COMMIT_PREFIX) :] for row in reversed(rows)}
