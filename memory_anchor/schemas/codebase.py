"""What a memory knows of the code it is about, and what the code says of it now.

A record about code keeps, in `data.code`, one `CodeRef` per file it names (read,
edited, written, or mentioned in a fact or a session's outcome) and, in
`data.code_head`, the repository's HEAD commit when it was written. When the
record is shown, `memory_anchor/worker/codebase/freshness.py` compares those files with the
working tree and answers a `Freshness`: the mark the briefing, recall, the REST
API and the MCP tools show beside the memory.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# What an edit put in is kept up to this many characters: enough to find it again in the file.
INSERTED_MAX_CHARS = 400

FreshnessState = Literal["fresh", "changed", "deleted", "moved", "superseded", "unknown"]
FRESHNESS_STATES: tuple[str, ...] = FreshnessState.__args__  # type: ignore[attr-defined]
# The states that say a memory may no longer hold.
STALE_STATES = frozenset({"changed", "deleted", "moved", "superseded"})


class CodeRef(BaseModel):
    """One file a memory is about, as it was when the memory was written."""

    model_config = ConfigDict(extra="ignore")

    path: str = Field(description="The file's path relative to the repository's root, with '/'.")
    blob: str | None = Field(None, description="Its git blob id then; None when the file was absent or unreadable.")
    head: str | None = Field(None, description="The repository's HEAD commit then; None outside git.")
    inserted: str | None = Field(
        None, max_length=INSERTED_MAX_CHARS, description="For an edit or a write: the text it put in (bounded)."
    )


class Freshness(BaseModel):
    """A memory's files compared with the working tree, when it is shown."""

    state: FreshnessState = Field("unknown", description="fresh: unchanged; changed, deleted, moved, superseded: "
                                  "the memory may no longer hold; unknown: outside git, or nothing to compare.")
    path: str | None = Field(None, description="The file the state is about (the first stale one).")
    new_path: str | None = Field(None, description="Where a moved file is now (a rename git follows).")
    commits: int | None = Field(None, description="Commits that touched the file since the memory was written.")
    detail: str = Field("", description="The short mark shown beside the memory; empty when fresh or unknown.")

    @property
    def stale(self) -> bool:
        return self.state in STALE_STATES
