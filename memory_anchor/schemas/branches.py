"""Branches, diffs, merges, snapshots and time travel on the wire.

Shared by the worker's REST API, the `memory-anchor branch|snapshot` CLI and the
MCP tools, so that all three speak exactly the same shapes.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from memory_anchor.schemas.filters import AsOf

BranchStatus = Literal["active", "merged", "archived"]
MergeStrategy = Literal["auto", "cherry_pick", "squash", "accept", "skip"]
ChangeKind = Literal["added", "changed", "invalidated"]
ConflictType = Literal["record", "fact_key"]
Resolution = Literal["source", "target", "both", "open"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# What records.validate_branch_name accepts (snapshot labels too), written out for the OpenAPI document:
# 1-100 of these characters, a letter or digit first, no "..", no "/" last.
NAME_SCHEMA = {"pattern": "^[A-Za-z0-9]([A-Za-z0-9._/-]{0,98}[A-Za-z0-9._-])?$", "not": {"pattern": "\\.\\."}}
# A snapshot label also must not be all digits: as_of would read it as a sequence number.
LABEL_SCHEMA = {**NAME_SCHEMA, "not": {"anyOf": [{"pattern": "\\.\\."}, {"pattern": "^[0-9]+$"}]}}


# --- branches -------------------------------------------------------------------------


class BranchCreate(_Strict):
    """`POST /api/v1/branches`: fork `parent` at its current head, at `as_of`, or at a snapshot."""

    # The document says what _one_fork_point checks: not both a snapshot and an as_of.
    model_config = ConfigDict(extra="forbid", json_schema_extra={"not": {
        "required": ["from_snapshot", "as_of"],
        "properties": {"from_snapshot": {"type": "string", "minLength": 1}, "as_of": {"not": {"enum": [None, ""]}}},
    }})  # fmt: skip

    name: str = Field(description="1-100 letters, digits, '.', '_', '-', '/'; starts with a letter or digit",
                      json_schema_extra=NAME_SCHEMA)
    parent: str | None = Field(None, description="Branch to fork from (default main, or the snapshot's branch)",
                               json_schema_extra={"anyOf": [{"type": "string", **NAME_SCHEMA}, {"type": "null"}]})
    from_snapshot: str | None = Field(None, description="Fork at this snapshot: parent = its branch, fork = its seq",
                                      json_schema_extra={"anyOf": [{"type": "string", **NAME_SCHEMA}, {"type": "null"}]})
    as_of: AsOf | None = Field(None, description="Fork the parent as it was then (seq, snapshot or timestamp)")
    description: str = Field("", max_length=2000)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_fork_point(self) -> "BranchCreate":
        if self.from_snapshot and self.as_of not in (None, ""):
            raise ValueError("give from_snapshot or as_of, not both")
        return self


class BranchOut(BaseModel):
    name: str
    parent: str | None = None
    fork_seq: int | None = None
    status: BranchStatus | str = "active"
    description: str = ""
    created_at: str | None = None
    created_by: str | None = None
    merged_at: str | None = None
    archived_at: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    depth: int = Field(0, description="Ancestors between this branch and main")
    own_writes: int = Field(0, description="Versions written on this branch itself")
    head_seq: int | None = Field(None, description="Last seq written on this branch")
    sessions: int = Field(0, description="Sessions currently writing to this branch")


class BranchList(BaseModel):
    results: list[BranchOut]


class BranchUpdate(_Strict):
    """`PATCH /api/v1/branches/{name}`: archive or restore a branch, or change its description."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"minProperties": 1})

    status: Literal["archived", "active"] | None = Field(None, json_schema_extra={"enum": ["archived", "active"]})
    description: str | None = Field(None, json_schema_extra={"type": "string"})


class BranchSwitch(_Strict):
    """`POST /api/v1/branches/switch`: the session's later writes go to `branch`."""

    branch: str = Field(json_schema_extra=NAME_SCHEMA)
    session_id: str = Field(min_length=1, max_length=200)
    create: bool = Field(False, description="Create the branch (from `parent`) if it does not exist")
    parent: str | None = Field(None, json_schema_extra={"anyOf": [{"type": "string", **NAME_SCHEMA}, {"type": "null"}]})


class BranchSwitchOut(BaseModel):
    session_id: str
    branch: str
    previous: str | None = None
    created: bool = False


class SessionFork(_Strict):
    """`POST /api/v1/sessions/{session_id}/fork`: this session is a Claude Code fork (`--fork-session`) of another."""

    parent_session_id: str = Field(min_length=1, max_length=200)


class SessionBranchOut(BaseModel):
    session_id: str
    branch: str
    chosen_by: str


# --- diff -----------------------------------------------------------------------------


class ChangeItem(BaseModel):
    """One record changed on one side since the two branches last shared it."""

    id: str
    kind: str
    change: ChangeKind
    side: Literal["source", "target"]
    seq: int = Field(description="The changed version's seq")
    version: int
    text: str = ""
    title: str | None = None
    fact_key: str | None = None
    status: str = "active"
    deleted: bool = False
    confidence: float | None = None
    branch: str = Field(description="Branch the version was written on")


class ConflictItem(BaseModel):
    """Both sides changed the same record, or wrote different facts about one subject."""

    key: str = Field(description="Stable id of this conflict within the diff")
    type: ConflictType
    fact_key: str | None = None
    source: ChangeItem
    target: ChangeItem
    reason: str


class DiffCounts(BaseModel):
    source_added: int = 0
    source_changed: int = 0
    source_invalidated: int = 0
    target_added: int = 0
    target_changed: int = 0
    target_invalidated: int = 0
    conflicts: int = 0


class BranchDiff(BaseModel):
    source: str
    target: str
    base: str | None = Field(None, description="Nearest common ancestor branch and seq, e.g. main@42")
    counts: DiffCounts
    source_changes: list[ChangeItem]
    target_changes: list[ChangeItem]
    conflicts: list[ConflictItem]


# --- merge ----------------------------------------------------------------------------


class MergeRequest(_Strict):
    """`POST /api/v1/branches/{source}/merge`."""

    # The document says what _items_for_cherry_pick checks.
    model_config = ConfigDict(extra="forbid", json_schema_extra={"anyOf": [
        {"required": ["strategy", "items"],
         "properties": {"strategy": {"const": "cherry_pick"}, "items": {"type": "array", "minItems": 1}}},
        {"properties": {"strategy": {"enum": ["auto", "squash", "accept", "skip"]}, "items": {"type": "null"}}},
    ]})  # fmt: skip

    target: str = Field("main", json_schema_extra=NAME_SCHEMA)
    strategy: MergeStrategy = "auto"
    items: list[str] | None = Field(None, description="cherry_pick: the record ids to bring over")
    resolutions: dict[str, Literal["source", "target"]] | None = Field(
        None, description="Manual decisions for conflicts: {conflict key or record id: source|target}"
    )
    dry_run: bool = Field(False, description="Plan the merge and report it without writing")

    @model_validator(mode="after")
    def _items_for_cherry_pick(self) -> "MergeRequest":
        if self.strategy == "cherry_pick" and not self.items:
            raise ValueError("cherry_pick needs `items`: the ids to bring over (see the diff)")
        if self.strategy != "cherry_pick" and self.items:
            raise ValueError("`items` is only for the cherry_pick strategy")
        return self


class MergedItem(BaseModel):
    id: str
    kind: str
    action: str = Field(description="added|changed|invalidated|squashed|superseded|merged_text")
    source_seq: int | None = None
    target_seq: int
    text: str = ""
    squashed_from: list[str] = Field(default_factory=list)


class RejectedItem(BaseModel):
    id: str
    kind: str | None = None
    reason: str


class ConflictOutcome(BaseModel):
    key: str
    type: ConflictType
    source_id: str
    target_id: str
    resolution: Resolution
    decided_by: str = Field(description="strategy|rules|llm_judge|manual|none")
    reason: str = ""
    conflict_id: str | None = Field(None, description="Open conflict recorded for review, if any")


class MergeOut(BaseModel):
    id: str | None = Field(None, description="Merge history id (None on a dry run)")
    source: str
    target: str
    strategy: MergeStrategy
    actor: str | None = None
    merged_by: str
    created_at: str | None = None
    dry_run: bool = False
    merged: list[MergedItem]
    rejected: list[RejectedItem]
    conflicts: list[ConflictOutcome]
    open_conflicts: int = 0
    source_marked_merged: bool = False


class MergeList(BaseModel):
    results: list[MergeOut]


# --- snapshots and time travel -----------------------------------------------------


class SnapshotCreate(_Strict):
    label: str | None = Field(None, description="Name, not all digits; default snap-<branch>-<seq>",
                              json_schema_extra={"anyOf": [{"type": "string", **LABEL_SCHEMA}, {"type": "null"}]})
    branch: str = Field("main", json_schema_extra=NAME_SCHEMA)
    description: str = Field("", max_length=2000)


class SnapshotOut(BaseModel):
    name: str
    branch: str
    seq: int
    created_at: str | None = None
    created_by: str | None = None
    description: str = ""


class SnapshotList(BaseModel):
    results: list[SnapshotOut]


class TimeTravelRequest(_Strict):
    """Search memory as it was at `as_of` (a seq, snapshot label or timestamp)."""

    query: str = Field(min_length=1)
    as_of: AsOf
    branch: str = Field("main", json_schema_extra=NAME_SCHEMA)
    project: str | None = None
    top_k: int = Field(10, ge=1, le=100)


class TimeTravelOut(BaseModel):
    as_of: str | int
    seq: int = Field(description="The sequence number as_of resolved to")
    branch: str
    results: list[dict[str, Any]]


# --- the Claude merge judge's replies ---------------------------------------------


class JudgeReply(BaseModel):
    """What the merge judge answers for one conflict."""

    keep: Literal["source", "target", "both"]
    reason: str = ""
    merged_text: str | None = Field(None, description="With keep=both: one fact stating both, if they combine")


class ConsolidationReply(BaseModel):
    """What the judge answers when squashing several facts about one subject."""

    text: str = Field(min_length=1)
