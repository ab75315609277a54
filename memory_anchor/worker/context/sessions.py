"""What happened lately: the last sessions' outcomes and recent activity.

An outcome line is structured: what was asked, what was done, the root causes
found, what was left next; each part cut at a word boundary. Activity lines say
what happened and what came of it (the command and its result, the test and its
verdict, the search and the files it found); the same thing happening again is
one line with a count and the last time.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from memory_anchor.core.projects import relative_once
from memory_anchor.worker.context.layers import facts_of_types, when
from memory_anchor.worker.context.model import ContextRequest, Section
from memory_anchor.worker.context.staleness import mark, marks
from memory_anchor.worker.memory.cues import terms
from memory_anchor.worker.memory.steps_done import COMMIT_PREFIX
from memory_anchor.worker.memory.text import clip, clip_path, line_key
from memory_anchor.worker.store.records import Records

OUTCOME_SESSIONS = 5
ACTIVITY_SCAN = 120
ACTIVITY_LINES = 25


def _known(text: str, facts: list[str]) -> bool:
    return any(text in fact for fact in facts)


def outcome_line(summary: dict[str, Any], known: list[str] = (), done_by_commits: dict[str, str] | None = None,
                 path_chars: int = 80) -> str:  # fmt: skip
    """One session: what was asked, the root cause found, what changed, what the tests said, what was done and left.

    Root causes already among the verified facts (`known`) are not repeated; a next step a commit
    did since (`done_by_commits`: its text -> the commit) says so. `path_chars`: the most a changed
    file's path takes (its folders dropped first).
    """
    data = summary.get("data") or {}
    parts = []
    # The first thing asked (a forgotten sentence scrubbed from it may leave the next one first).
    request = re.sub(r"^\s*\|\s*then:\s*", "", str(data.get("request") or "")).split(" | then: ")[0].strip()
    if request:
        parts.append(f"asked: {clip(request, 110)}")
    causes = [c for c in data.get("root_causes") or [] if isinstance(c, str) and not _known(c, known)]
    if causes:
        parts.append("root cause: " + "; ".join(clip(c, 160) for c in causes[:2]))
    changed = relative_once(data.get("files_changed") or [], summary.get("project"))
    if changed:
        more = f" (+{len(changed) - 4} more)" if len(changed) > 4 else ""
        parts.append("changed: " + ", ".join(clip_path(f, path_chars) for f in changed[:4]) + more)
    tests = [t for t in data.get("tests") or [] if isinstance(t, str)]
    if tests:
        parts.append("tests: " + "; ".join(clip(t, 90) for t in tests[-2:]))
    done = [d for d in data.get("done") or [] if isinstance(d, str)]
    if done:
        parts.append("done: " + "; ".join(clip(d, 110) for d in done[:3]))
    elif data.get("completed") and not changed:
        parts.append(f"done: {clip(str(data['completed']), 160)}")
    steps = [n for n in data.get("next") or [] if isinstance(n, str)]
    if steps:
        done_by_commits = done_by_commits or {}
        parts.append("next: " + "; ".join(clip(n, 100) + (f" (done since: commit {done_by_commits[n][:8]})"
                                                          if n in done_by_commits else "") for n in steps[:3]))  # fmt: skip
    if not parts:  # a summary of an older version (no fields), or one whose every part was forgotten
        parts.append("no outcome recorded" if data else clip(summary.get("title") or summary.get("text") or "", 200))
    return f"- {when(summary.get('happened_at'))} · " + " · ".join(parts)


def outcomes_section(request: ContextRequest, conn, view) -> Section | None:
    # The sessions that happened last (a summary per session: few rows), not the last ones written: history
    # imported today from last year is not what the user did lately.
    page, _ = Records.query(conn, view, filters={"kind": "summary", "project": request.project}, order="happened_at DESC",
                            limit=OUTCOME_SESSIONS)  # fmt: skip
    if not page:
        return None
    known = [f["text"] for f in facts_of_types(conn, view, request.project, ("bugfix",), limit=100)]
    if request.memory is not None:  # a forgotten root cause or next step leaves the session's line too
        page = [request.memory.forgotten.scrub_outcome(conn, request.project, r, view) for r in page]
    done = request.memory.steps_done.done_by_commits(conn, request.project) if request.memory is not None else {}
    if request.memory is not None and request.settings.code_checks:  # done by a commit, not yet recorded
        done.update((step["text"], step["closed_by"][len(COMMIT_PREFIX) :]) for step in request.memory.steps_done.pending(request.project))
    found = marks(request.services, page, request.project, request.session_id)
    lines = [outcome_line(r, known, done) + mark(found.get(r["id"])) for r in page]
    return Section("summaries", "Last sessions (asked · root cause · changed · tests · done · next)", lines, share=0.3)


@functools.lru_cache(maxsize=4096)  # every SessionStart re-reads the same recent observations
def _adds(detail: str, title: str) -> bool:
    """Does `detail` say anything `title` does not (beyond numbers and timings)?"""
    new = terms(detail) - terms(title)
    return any(not re.fullmatch(r"[\d.,:]+\w{0,2}", word) for word in new)


_DESCRIBED_COMMAND = re.compile(r"^:\s*`[^`]*`\s*(?:→\s*)?(.*)$")


def activity_text(record: dict[str, Any], *, command_chars: int = 0) -> str:
    """What happened and what came of it, in one line. `command_chars`: room for a command Claude
    described in other words ("Deploy plugin to SiYuan: `cp -r dist/* …/plugins/`"), where the command
    is the answer to "how do we deploy it?"; 0 keeps the description alone, as a briefing does."""
    data = record.get("data") or {}
    title = " ".join(str(record.get("title") or data.get("title") or record.get("text") or "").split())
    summary = " ".join(str(data.get("summary") or "").split())
    command = " ".join(str(data.get("command") or "").split())
    if summary and "→" in summary and (command or "`" in summary):
        summary = summary.split("→", 1)[1].strip()  # the command is in the title already
    if command_chars and command and command[:40] not in title:
        said = _DESCRIBED_COMMAND.match(summary[len(title):]) if summary.startswith(title) else None
        summary = said.group(1) if said else summary  # "<title>: `<command, cut>` produced no output"
        title = f"{title}: `{clip(command, command_chars)}`"
    if summary and not _adds(summary, title):
        return title  # "Ran tests `pytest -q`: 120 passed" says what "120 passed in 3.41s" says
    if summary and summary.lower() not in title.lower() and title.lower() not in summary.lower():
        return f"{title} → {summary}"
    return summary if len(summary) > len(title) else title


def activity_section(request: ContextRequest, conn, view) -> Section | None:
    page = Records.latest(conn, view, filters={"kind": "observation", "project": request.project}, limit=ACTIVITY_SCAN)
    if not page:
        return None
    # Newest written is not always newest done: an imported session's file may hold days of work,
    # filed after sessions that ended before it. The lines go by when each thing happened.
    page = sorted(page, key=lambda record: record.get("happened_at") or 0, reverse=True)
    groups: dict[str, dict[str, Any]] = {}
    for record in page:  # newest first
        text = clip(activity_text(record), 230)
        key = line_key(text)
        group = groups.get(key)
        if group is None:
            groups[key] = {"text": text, "kind": record.get("type") or "note", "count": 1, "id": record["id"][:8],
                           "last": record.get("happened_at"), "first": record.get("happened_at"), "record": record}  # fmt: skip
        else:
            group["count"] += 1
            group["first"] = record.get("happened_at")
    shown = list(groups.values())[:ACTIVITY_LINES]
    found = marks(request.services, [g["record"] for g in shown], request.project, request.session_id)
    lines = []
    for group in shown:
        # the id (the latest of a repeat) lets Claude fetch the details (get_observations)
        repeat = (f" ×{group['count']} (id {group['id']}, last {when(group['last'])})" if group["count"] > 1
                  else f" (id {group['id']}, {when(group['last'])})")  # fmt: skip
        lines.append(f"- [{group['kind']}] {group['text']}{repeat}{mark(found.get(group['record']['id']))}")
    return Section("observations", "Recent activity (repeats counted)", lines, share=0.5)
