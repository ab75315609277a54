"""Observations and session summaries: what distillation produces from raw events.

An observation is one tool use, compressed: a `type`, a one-line
`title`, a `summary` of at most 200 characters, and optional detail. The worker
stores it as a record of kind `observation` in the layer `TYPE_TO_LAYER` gives;
the MCP server and the client read the same model back.

Names follow DESIGN.md; the seed's names are accepted as input aliases
(`details` → `narrative`, `tags` → `concepts`, `files` → `files_modified`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

from memory_anchor.schemas.filters import AsOf

SUMMARY_MAX_CHARS = 200
TITLE_MAX_CHARS = 120

ObservationType = Literal[
    "decision",  # a choice was made (and why)
    "bugfix",  # something broken was fixed
    "refactor",  # code restructured without changing behaviour
    "feature",  # (added) new capability or file created
    "change",  # (added) any other modification: config, deps, docs, generated files
    "discovery",  # something was learned by reading, searching, running, failing
    "note",  # bookkeeping: todo lists, plans, remarks
    "event",  # something happened: a command ran, a commit, a deploy
]
OBSERVATION_TYPES: tuple[str, ...] = ObservationType.__args__  # type: ignore[attr-defined]

# Types that change the code base describe lasting facts about it (so they are
# facts, checked against the code later); the rest is a dated record of what happened.
TYPE_TO_LAYER: dict[str, str] = {
    "decision": "verified_fact",
    "bugfix": "verified_fact",
    "refactor": "verified_fact",
    "feature": "verified_fact",
    "change": "event_log",
    "discovery": "event_log",
    "note": "event_log",
    "event": "event_log",
}

Outcome = Literal["ok", "error", "interrupted"]
DistilledBy = Literal["claude", "local"]


def shorten(text: str, limit: int) -> str:
    """`text` on one line, cut at a word boundary to at most `limit` chars (with …)."""
    flat = " ".join(str(text).split())
    if len(flat) <= limit:
        return flat
    cut = flat[: max(limit - 1, 0)]
    space = cut.rfind(" ")
    if space > limit * 0.6:
        cut = cut[:space]
    return cut.rstrip(" ,;:.-") + "…"


class ObservationDraft(BaseModel):
    """One compressed tool use, before it is stored (no id, no timestamps yet)."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    type: ObservationType = "event"
    title: str = Field(min_length=1, max_length=TITLE_MAX_CHARS)
    summary: str = Field(min_length=1, max_length=SUMMARY_MAX_CHARS)
    narrative: str = Field("", validation_alias=AliasChoices("narrative", "details"))
    facts: list[str] = Field(default_factory=list, description="Short standalone statements")
    files_read: list[str] = Field(default_factory=list)
    files_modified: list[str] = Field(
        default_factory=list, validation_alias=AliasChoices("files_modified", "files")
    )
    concepts: list[str] = Field(
        default_factory=list,
        validation_alias=AliasChoices("concepts", "tags"),
        description="Topics for retrieval (the seed's `tags`)",
    )
    tool_name: str | None = None
    tool_use_id: str | None = None
    command: str | None = Field(None, description="Shell command, for Bash tool uses")
    outcome: Outcome | None = None
    exit_code: int | None = None
    distilled_by: DistilledBy = "local"

    @field_validator("title", "summary", mode="before")
    @classmethod
    def _one_line(cls, value: object) -> object:
        return " ".join(value.split()) if isinstance(value, str) else value

    @property
    def layer(self) -> str:
        return TYPE_TO_LAYER[self.type]

    def text(self) -> str:
        """What is indexed and embedded: title, summary, narrative and facts."""
        parts = [self.title, self.summary, self.narrative, *self.facts]
        return "\n".join(p for p in parts if p)


class SessionSummaryDraft(BaseModel):
    """What a session was about, written at Stop/SessionEnd."""

    model_config = ConfigDict(extra="ignore")

    request: str = Field("", description="What the user asked for")
    investigated: str = Field("", description="What was looked at")
    learned: str = Field("", description="What was found out")
    completed: str = Field("", description="What got done")
    next_steps: str = Field("", description="What is left to do")
    files: list[str] = Field(default_factory=list, description="Files read or modified")
    done: list[str] = Field(default_factory=list, description="The outcome: what the session says it did")
    root_causes: list[str] = Field(default_factory=list, description="Root causes found")
    next: list[str] = Field(default_factory=list, description="Next steps, one per item (open items)")
    files_changed: list[str] = Field(default_factory=list, description="Files the session edited or wrote, as its tool uses show")
    tests: list[str] = Field(default_factory=list, description="Test runs and their last verdict (`pytest -q`: 120 passed)")
    asks_user: bool = Field(False, description="Claude's last message ended with a question to the user")
    text: str = Field("", description="The summary as one readable text (indexed)")
    distilled_by: DistilledBy = "local"

    def render(self) -> str:
        """The labelled text form, used for `text` (what search indexes): what was asked, why it
        broke, what changed and came of it, what is left. What was merely read (`investigated`,
        `files`) stays in the fields: listed here it would drown the session in search."""
        rows = [
            ("Request", self.request),
            ("Root causes", "; ".join(self.root_causes)),
            ("Changed", ", ".join(self.files_changed)),
            ("Tests", "; ".join(self.tests)),
            ("Completed", self.completed),
            ("Learned", self.learned),
            ("Next steps", self.next_steps),
        ]
        return "\n".join(f"{label}: {value}" for label, value in rows if value)

    def rendered_text(self) -> str:
        """`render()`, or a line saying so when the session recorded nothing."""
        return self.render() or "Session with no recorded activity"


class WriteObservationRequest(BaseModel):
    """`POST /api/v1/observations`: an observation an agent records on purpose.

    Tool uses are captured automatically; this is for what no tool shows: a
    discovery, a decision and its reason, an error and its root cause.
    """

    model_config = ConfigDict(extra="forbid")

    type: ObservationType = "note"
    summary: str = Field(min_length=1, max_length=2000)
    tool_name: str | None = None
    raw_input: str | None = Field(None, max_length=20_000)
    raw_output: str | None = Field(None, max_length=20_000)
    files: list[str] = Field(default_factory=list)
    project: str = ""
    session_id: str | None = None
    branch: str | None = None

    def draft(self) -> "ObservationDraft":
        detail = "\n".join(
            part for part in (self.summary, _labelled("Input", self.raw_input), _labelled("Output", self.raw_output)) if part
        )
        return ObservationDraft(
            type=self.type,
            title=shorten(self.summary, TITLE_MAX_CHARS),
            summary=shorten(self.summary, SUMMARY_MAX_CHARS),
            narrative=detail,
            tool_name=self.tool_name,
            files_modified=self.files,
        )


class ObservationsBatch(BaseModel):
    """`POST /api/v1/observations/batch`: full details for these record ids."""

    model_config = ConfigDict(extra="forbid")

    ids: list[str] = Field(min_length=1, max_length=100, description="Record ids (1 to 100)")
    branch: str | None = None
    as_of: AsOf | None = Field(None, description="As of a seq, a snapshot label or a timestamp")


def _labelled(label: str, text: str | None) -> str:
    return f"{label}: {text}" if text else ""
