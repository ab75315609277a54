"""The files a record is about, as `CodeRef`s to keep with it (`data.code`, `data.code_head`).

Which files a record names:
- an observation: the files its tool use read or changed (`data.files_read`,
  `data.files_modified`) and the path in the tool's input; an Edit or MultiEdit also
  says what it put in (the tool's input holds the new text);
- a session summary: the files the session changed (`data.files_changed`), each with
  what the session's edits put in that is still in the file at its end, the files it read
  (`data.files`), and the files its outcome names (what was asked, found, done) that exist;
- a fact (or anything else with text): the paths its text names that exist in the
  repository (a path that does not exist is not evidence of anything).

The blob ids are computed here, in the pipeline's drain, from the work tree (one read
and one sha1 per file, none when the file has not changed since it was last seen):
never in a hook.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from memory_anchor.schemas.codebase import INSERTED_MAX_CHARS, CodeRef
from memory_anchor.worker.codebase.git import Repo, WorkTree, head, squeeze

# Files a record names beyond these add little and cost a read each.
MAX_REFS = 12
# An edit that put in less than this (once squeezed) could be found anywhere: not kept.
MIN_INSERTED_CHARS = 12


# A path in prose: at least one '/' or a file extension, made of path characters.
_PATH_IN_TEXT = re.compile(r"(?<![\w./-])(?:\.{0,2}/)?[\w.-]+(?:/[\w.-]+)*\.[A-Za-z0-9]{1,8}(?![\w/-])|"
                           r"(?<![\w./-])[\w.-]+(?:/[\w.-]+)+(?![\w/-])")


def stored_refs(record: dict[str, Any]) -> list[CodeRef]:
    """The refs a record was written with (`data.code`); [] for a record written before refs were kept."""
    refs = []
    for item in (record.get("data") or {}).get("code") or []:
        if isinstance(item, dict) and isinstance(item.get("path"), str):
            if all(isinstance(item.get(k), (str, type(None))) for k in ("blob", "head", "inserted")):
                # Written by `to_data` and checked then: read without validating again (every briefing reads them).
                refs.append(CodeRef.model_construct(path=item["path"], blob=item.get("blob"), head=item.get("head"),
                                                    inserted=item.get("inserted")))  # fmt: skip
    return refs


def paths_in_text(text: str) -> list[str]:
    """Path-like words of `text` (`app/cart.py`, `settings.toml`, `docs/guide`), in order, once each."""
    found = []
    for match in _PATH_IN_TEXT.finditer(text or ""):
        word = match.group(0).rstrip(".")
        if word and not word.startswith(("http", "www.")) and not re.fullmatch(r"[\d.]+", word):
            found.append(word)
    return list(dict.fromkeys(found))


def named_paths(record: dict[str, Any], payload: dict[str, Any] | None = None) -> list[tuple[str, list[str]]]:
    """[(path as the record names it, [texts an edit of it put in])], the edited files first."""
    data = record.get("data") or {}
    kind = record.get("kind")
    named: dict[str, list[str]] = {}

    def add(path: Any, inserted: Iterable[str] = ()) -> None:
        if isinstance(path, str) and path.strip() and "\n" not in path:
            named.setdefault(path.strip(), []).extend(t for t in inserted if t)

    tool_input = (payload or {}).get("tool_input")
    if isinstance(tool_input, dict):
        path = tool_input.get("file_path") or tool_input.get("notebook_path")
        add(path, edit_texts((payload or {}).get("tool_name"), tool_input))
    if kind == "summary":  # the files it changed, then those it read (what it learned is about them)
        for path in [*(data.get("files_changed") or []), *(data.get("files") or [])]:
            add(path)
    elif kind == "observation":
        for key in ("files_modified", "files_read"):
            for path in data.get(key) or []:
                add(path)
    else:
        for path in paths_in_text(record.get("text") or ""):
            add(path)
    return list(named.items())


def edit_texts(tool_name: Any, tool_input: dict[str, Any]) -> list[str]:
    """What an Edit, MultiEdit or NotebookEdit put in: the lines it changed, without the unchanged
    lines around them that the edit repeats to anchor itself (a later change of those is not a
    change of the fix), squeezed and bounded, when long enough to be found again. A Write keeps
    none: a whole file is not "an edit" that a later change could undo."""
    if tool_name == "MultiEdit":
        pairs = [(e.get("old_string"), e.get("new_string")) for e in tool_input.get("edits") or [] if isinstance(e, dict)]
    elif tool_name == "NotebookEdit":
        pairs = [("", tool_input.get("new_source"))]
    elif tool_name == "Edit":
        pairs = [(tool_input.get("old_string"), tool_input.get("new_string"))]
    else:
        return []
    out = []
    for old, new in pairs:
        if isinstance(new, str):
            bounded = bound_inserted(changed_lines(old if isinstance(old, str) else "", new))
            if bounded:
                out.append(bounded)
    return out


def changed_lines(old: str, new: str) -> str:
    """The lines of `new` between the lines it shares with `old` at its start and at its end."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    start = 0
    while start < min(len(old_lines), len(new_lines)) and old_lines[start] == new_lines[start]:
        start += 1
    end = 0
    while (end < min(len(old_lines), len(new_lines)) - start
           and old_lines[len(old_lines) - 1 - end] == new_lines[len(new_lines) - 1 - end]):  # fmt: skip
        end += 1
    return "\n".join(new_lines[start:len(new_lines) - end])


def bound_inserted(text: str) -> str | None:
    """An inserted text as kept: squeezed, its first INSERTED_MAX_CHARS (a prefix is still found in
    the file), or None when too short to tell apart."""
    flat = squeeze(text)
    if len(flat) < MIN_INSERTED_CHARS:
        return None
    return flat[:INSERTED_MAX_CHARS].rstrip()


class CodeRecorder:
    """Makes the refs a record is written with. One per worker: its `WorkTree` cache is shared
    with the freshness checker, so a file read for one is not read again for the other."""

    def __init__(self, worktree: WorkTree | None = None):
        self.worktree = worktree or WorkTree()

    def refs_for(self, record: dict[str, Any], repo: Repo | None, *, payload: dict[str, Any] | None = None,
                 cwd: str | None = None, only_existing: bool | None = None) -> tuple[list[CodeRef], str | None]:  # fmt: skip
        """(the record's refs, the HEAD) as of now; ([], None) outside a repository.

        `only_existing`: keep only files that exist now (default: for facts and other prose,
        whose paths are guesses from text)."""
        if repo is None:
            return [], None
        if only_existing is None:
            only_existing = record.get("kind") not in ("observation", "summary")
        head_sha = head(repo)
        refs: list[CodeRef] = []
        seen: set[str] = set()
        for named, inserted in named_paths(record, payload):
            rel = self._relative(repo, named, cwd)
            if rel is None or rel in seen:
                continue
            blob = self.worktree.blob(repo, rel)
            if blob is None and only_existing:
                continue
            seen.add(rel)
            texts = self._still_there(repo, rel, inserted) if blob is not None else []
            if texts:
                refs.extend(CodeRef(path=rel, blob=blob, head=head_sha, inserted=t) for t in texts)
            else:
                refs.append(CodeRef(path=rel, blob=blob, head=head_sha))
            if len(seen) >= MAX_REFS:
                break
        return refs, head_sha

    def summary_refs(self, summary: dict[str, Any], observations: list[dict[str, Any]], repo: Repo | None,
                     cwd: str | None = None) -> tuple[list[CodeRef], str | None]:  # fmt: skip
        """A session summary's refs: the files it changed, each with what the session's edits put in
        that is still there (an edit a later edit of the same session replaced is not the outcome)."""
        refs, head_sha = self.refs_for(summary, repo, cwd=cwd)
        named, _ = self.refs_for({"kind": "outcome", "text": outcome_text(summary.get("data") or {})}, repo, cwd=cwd)
        refs += [ref for ref in named if ref.path not in {r.path for r in refs}]
        if not refs:
            return refs, head_sha
        inserted: dict[str, list[str]] = {}
        for observation in observations:
            for ref in stored_refs(observation):
                if ref.inserted:
                    inserted.setdefault(ref.path, []).append(ref.inserted)
        out: list[CodeRef] = []
        for ref in refs:
            texts = self._still_there(repo, ref.path, list(dict.fromkeys(inserted.get(ref.path, [])))) if ref.blob else []
            out.extend([ref.model_copy(update={"inserted": t}) for t in texts] or [ref])
        return out, head_sha

    def _still_there(self, repo: Repo, rel: str, texts: list[str]) -> list[str]:
        if not texts:
            return []
        content = self.worktree.squeezed_text(repo, rel) or ""
        return [t for t in dict.fromkeys(texts) if t in content]

    @staticmethod
    def _relative(repo: Repo, path: str, cwd: str | None) -> str | None:
        import os

        if os.path.isabs(path):
            return repo.relative(path)
        if cwd:  # a tool's relative path is the session's directory's
            rel = repo.relative(os.path.join(cwd, path))
            if rel is not None and os.path.exists(repo.absolute(rel)):
                return rel
        return repo.relative(path)


def outcome_text(data: dict[str, Any]) -> str:
    """What a session's outcome says it asked, found and did: the paths it names there are what
    the session is about ("the settings are in config/settings.toml"), beside the files it changed.
    Not its next steps: the file a step names is meant to change."""
    parts = [data.get("request"), data.get("learned"), data.get("completed"), *(data.get("done") or []),
             *(data.get("root_causes") or [])]  # fmt: skip
    return "\n".join(p for p in parts if isinstance(p, str))


def to_data(refs: list[CodeRef], head_sha: str | None, *, keep_head: bool = False) -> dict[str, Any]:
    """The fields a record keeps them in: {"code": [...], "code_head": sha}; {} when there is nothing.
    `keep_head`: the HEAD even without refs (a session's summary: what the project was at its end)."""
    if not refs:
        return {"code_head": head_sha} if keep_head and head_sha else {}
    return {"code": [r.model_dump(exclude_none=True) for r in refs], "code_head": head_sha}
