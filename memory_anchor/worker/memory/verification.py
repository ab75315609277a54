"""Every memory of a project checked against its working tree: `memory-anchor verify [--fix]`.

The briefing checks what it shows; this walks everything the project remembers
that names a file of its repository (observations, session summaries, facts,
memories), page by page, and reports each stale one with why: the file changed
since (and in how many commits), was deleted, moved (to where), or the edit a
session made is no longer in it. It also lists the open next steps commits did.

With `fix`, what the check found is acted on through the paths the memory
model already has: facts whose files are gone lose confidence and wait for
re-verification (FactStore.reconcile_with_code, the same demotion the briefing
applies; a fact the code confirms again regains its confidence), and the steps
commits did are closed with their commit (steps_done.py). Nothing is deleted.
"""

from __future__ import annotations

from typing import Any

from memory_anchor.schemas.codebase import STALE_STATES
from memory_anchor.schemas.verify import CheckedMemory, StepDone, VerifyReport
from memory_anchor.worker.codebase.git import git_available
from memory_anchor.worker.memory.steps_done import last_cwd
from memory_anchor.worker.memory.text import clip, one_line
from memory_anchor.worker.store.records import MAIN, Records, iso, resolve_view

# The kinds that can be about code (prompts and raw transcripts are what was said, not what is).
KINDS = ["observation", "summary", "fact", "memory", "event"]
PAGE = 500


class Verification:
    def __init__(self, db, codebase, model):
        self.db = db
        self.codebase = codebase  # memory_anchor/worker/codebase/service.py: the one door to the checker
        self.model = model  # the MemoryModel: facts to demote, steps to close

    def verify(self, project: str, *, cwd: str | None = None, branch: str | None = None, fix: bool = False,
               include_fresh: bool = False) -> VerifyReport:  # fmt: skip
        conn = self.db.reader()
        repo = self.codebase.repo(project, cwd) or self.codebase.repo(project, last_cwd(conn, project))
        report = VerifyReport(project=project, repository=repo.root if repo else None, head=self.codebase.head(repo))
        if repo is None:
            report.why_unknown = "the project is not in a git repository here"
            return report
        if not git_available():
            report.why_unknown = "git is not installed"
            return report
        view = resolve_view(conn, branch or MAIN)
        facts: list[dict[str, Any]] = []
        found_for_facts: dict[str, Any] = {}
        offset = 0
        while True:
            page, _ = Records.query(conn, view, filters={"project": project, "kind": KINDS}, order="seq ASC",
                                    limit=PAGE, offset=offset)  # fmt: skip
            offset += len(page)
            found = self.codebase.check_records(page, repo)
            for record in page:
                freshness = found.get(record["id"])
                if freshness is None:
                    continue
                report.checked += 1
                report.states[freshness.state] = report.states.get(freshness.state, 0) + 1
                if freshness.state in STALE_STATES or include_fresh:
                    (report.stale if freshness.state in STALE_STATES else report.fresh).append(_checked(record, freshness))
                if record["kind"] == "fact":
                    facts.append(record)
                    found_for_facts[record["id"]] = freshness
            if len(page) < PAGE:
                break
        if fix:
            done = self.model.steps_done.close(project, repo=repo, force=True)
            changed = self.model.facts.reconcile_with_code(facts, found_for_facts, branch=branch or MAIN)
            report.fixed = True
            report.facts_demoted, report.facts_restored = changed["demoted"], changed["restored"]
        else:
            done = self.model.steps_done.find(project, repo) or []  # git too slow: none shown done
        report.steps_done = [StepDone(id=s["id"], text=s["text"], closed_by_commit=s["closed_by_commit"]) for s in done]
        return report


def _checked(record: dict[str, Any], freshness) -> CheckedMemory:
    line = record.get("title") if record.get("kind") == "observation" and record.get("title") else record.get("text")
    return CheckedMemory(id=record["id"], kind=record["kind"], type=record.get("type"), line=clip(one_line(line or ""), 200),
                         session_id=record.get("session_id"), happened_at=iso(record.get("happened_at")),
                         freshness=freshness)  # fmt: skip
