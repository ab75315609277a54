"""`POST /api/v1/verify` and `memory-anchor verify`: every memory of a project checked against its code."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from memory_anchor.schemas.codebase import Freshness
from memory_anchor.schemas.corrections import ClosedByCommit


class VerifyRequest(BaseModel):
    # One of project and cwd names what to walk: said in the schema too, so a client knows before asking.
    model_config = ConfigDict(extra="forbid", json_schema_extra={"anyOf": [
        {"required": [name], "properties": {name: {"type": "string", "minLength": 1}}} for name in ("project", "cwd")]})

    project: str | None = Field(None, min_length=1, description="The project (default: the one `cwd` belongs to)")
    cwd: str | None = Field(None, min_length=1, description="A directory in the project's working tree (default: the project's path)")
    branch: str | None = Field(None, description="The memory branch to walk (default main)")
    fix: bool = Field(False, description="Demote facts whose files are gone and close the next steps commits did")
    include_fresh: bool = Field(False, description="List the memories that still hold too, not only the stale ones")

    @model_validator(mode="after")
    def _names_a_project(self) -> "VerifyRequest":
        if not self.project and not self.cwd:
            raise ValueError("name the project (`project`) or a directory in it (`cwd`)")
        return self


class CheckedMemory(BaseModel):
    """One memory and what its code says of it now."""

    id: str
    kind: str
    type: str | None = None
    line: str = Field(description="The memory in one short line")
    session_id: str | None = None
    happened_at: str | None = None
    freshness: Freshness


class StepDone(BaseModel):
    """An open next step a commit did (closed with `fix`)."""

    id: int
    text: str
    closed_by_commit: ClosedByCommit


class VerifyReport(BaseModel):
    project: str
    repository: str | None = Field(None, description="The working tree compared; None outside git")
    head: str | None = None
    why_unknown: str | None = Field(None, description="Why nothing could be checked (no repository, git missing)")
    checked: int = Field(0, description="Memories that name files of the repository")
    states: dict[str, int] = Field(default_factory=dict, description="How many memories are in each state")
    stale: list[CheckedMemory] = Field(default_factory=list)
    fresh: list[CheckedMemory] = Field(default_factory=list, description="With include_fresh only")
    steps_done: list[StepDone] = Field(default_factory=list)
    fixed: bool = False
    facts_demoted: int = 0
    facts_restored: int = 0
