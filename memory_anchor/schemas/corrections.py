"""Wire models of corrections: forgetting or editing a fact or an open next step.

Ids are written the way the briefing prints them: `(fact 1a2b3c4d)` for a fact
(a rule, decision, preference, root cause: the first characters of its id, or
the whole id) and `(step 12)` for an open next step. `parse_item_ref` reads
either, so the CLI and the MCP tool take what the user copies from the briefing.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from memory_anchor.schemas.common import NonBlank

ItemKind = Literal["fact", "next_step"]

# The start of a fact's id (a UUID): at least 4 of its characters, the briefing shows 8.
FACT_ID_PATTERN = r"^[0-9a-fA-F][0-9a-fA-F-]{3,35}$"
_REF = re.compile(
    r"^\(?\s*(?:(?P<step>(?:next[\s_-]*)?step)|fact)?[\s:#-]*(?P<id>[0-9a-fA-F][0-9a-fA-F-]*)\s*(?:[,)].*)?$",
    re.IGNORECASE | re.DOTALL,
)


class ItemRefError(ValueError):
    pass


def parse_item_ref(ref: str) -> tuple[ItemKind, str]:
    """("fact", id prefix) or ("next_step", "12") from "fact 1a2b3c4d", "1a2b3c4d", "step 12", "(step 12, …)"."""
    found = _REF.match((ref or "").strip())
    if found is None:
        raise ItemRefError(f"{ref!r} is not an id the briefing shows: write `fact 1a2b3c4d` (or just 1a2b3c4d) or `step 12`")
    if found.group("step"):
        if not found.group("id").isdigit():
            raise ItemRefError(f"a next step's id is a number (`step 12`), not {found.group('id')!r}")
        return "next_step", found.group("id")
    fact_id = found.group("id").lower()
    if not re.fullmatch(FACT_ID_PATTERN, fact_id):
        raise ItemRefError(f"a fact's id is at least 4 of the characters the briefing shows (`fact 1a2b3c4d`; a next step "
                           f"is `step 12`), not {fact_id!r}")
    return "fact", fact_id


def correction_path(ref: str, action: Literal["forget", "edit", "answer"]) -> str:
    """The REST route that forgets, edits or settles with the user's answer the item `ref` names (see `parse_item_ref`)."""
    kind, item_id = parse_item_ref(ref)
    if action == "answer" and kind != "fact":
        raise ItemRefError(f"only a fact waits for the user's answer, not {ref!r}: give `fact 1a2b3c4d`")
    return f"/api/v1/{'next-steps' if kind == 'next_step' else 'facts'}/{item_id}/{action}"


def item_ref(kind: ItemKind, item_id: str | int) -> str:
    """How the briefing names an item: `fact 1a2b3c4d` or `step 12`."""
    return f"step {item_id}" if kind == "next_step" else f"fact {str(item_id)[:8]}"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CorrectionBy(_Strict):
    """Who corrects, and why. A person (the viewer, the CLI) gives `actor`, their name
    (default: the worker's OS account); an agent acting on what the user said (the
    MCP tool) gives `agent_id`, and a read-only agent is refused."""

    reason: str | None = Field(None, max_length=2000, description="Why: what the user said")
    actor: str | None = Field(None, max_length=200, description="The person correcting; default: the worker's OS account")
    agent_id: str | None = Field(None, max_length=200, description="The agent correcting on the user's word")
    project: str | None = Field(None, description="The project the item must belong to: where to look up a short fact "
                                "id, and a next step of another project is not found (default: every project)")
    branch: str | None = None


class ForgetRequest(CorrectionBy):
    """Forget a fact or an open next step: gone from the briefing, recall and search, and
    re-extraction of the same words does not bring it back."""


class EditRequest(CorrectionBy):
    """Replace a fact's or an open next step's text with the user's words; the old wording
    is kept out like a forgotten one, so re-extraction cannot put it back."""

    text: NonBlank = Field(max_length=5000)


class AnswerRequest(CorrectionBy):
    """The user's answer, given in the session, to whether a fact waiting for them holds: a reply
    to Claude's options or an instruction said once. The agent quotes the user's reply; the
    worker finds it in the user's latest prompts before it settles anything."""

    holds: bool = Field(description="True: it stands for later work (a standing rule or decision now); "
                        "false: it was a one-off or is wrong (rejected, and the same words do not come back)")
    user_words: NonBlank = Field(max_length=2000, description="The user's reply, quoted from their prompt")
    session_id: str | None = Field(None, max_length=200, description="The Claude Code session the user answered in: "
                                   "their reply is looked for in its latest prompts (default: the project's)")


class AnswerOut(BaseModel):
    """What the user's answer did to the fact."""

    id: str
    ref: str = Field(description="How the briefing names the fact: `fact 1a2b3c4d`")
    status: str = Field(description="active (it holds) or rejected")
    text: str
    answered_in: str = Field(description="The id of the prompt that holds the user's reply")


class CorrectionOut(BaseModel):
    """What a correction did."""

    kind: ItemKind
    id: str = Field(description="The fact's id, or the next step's number")
    ref: str = Field(description="How the briefing names the item now: `fact 1a2b3c4d`, `step 12`")
    action: Literal["forget", "edit"]
    status: str = Field(description="The item's status now: forgotten, active, pending (facts), open (next steps)")
    text: str = Field(description="The item's text now (after an edit), or the text forgotten")
    previous_text: str | None = None
    actor: str
    reason: str | None = None
    forgotten_id: int = Field(description="The correction's entry in the forgotten list")
    replaced_by: str | None = Field(None, description="An edited next step: the number of the step that replaces it")


class ForgottenEntry(BaseModel):
    """One correction: what was forgotten (or edited away), by whom, when and why."""

    id: int
    project: str
    kind: ItemKind
    item_id: str
    text: str
    key: str
    action: Literal["forget", "edit"]
    actor: str
    reason: str | None = None
    created_at: float
    branch: str = Field("main", description="Where the forget holds: this branch and branches forked from it later")
    purged: bool = Field(False, description="Its text was erased (`text` is empty); the same words stay out")


class PurgeOut(BaseModel):
    """What a purge erased: the forgotten entries of that wording (their text; a hash is kept so the
    same words stay out), the item's versions that held it, open items, and their vectors."""

    forgotten_ids: list[int]
    kind: ItemKind
    item_id: str
    versions: int = Field(description="Versions of the fact whose text now reads [purged]")
    open_items: int = Field(description="Next steps whose text now reads [purged]")
    vectors: int = Field(description="Vectors deleted from the index")
    text: str


class ClosedByCommit(BaseModel):
    commit: str
    subject: str


class NextStep(BaseModel):
    """An open item: a next step a session left (closed when done, forgotten or edited)."""

    model_config = ConfigDict(extra="allow")

    id: int
    ref: str
    project: str
    branch: str
    session_id: str
    text: str
    opened_at: float
    closed_at: float | None = None
    closed_by: str | None = None
    closed_because: str | None = None
    closed_by_commit: ClosedByCommit | None = Field(
        None, description="A step a commit did: the commit (closed_by is 'commit:<sha>') and its subject")


class NextStepsPage(BaseModel):
    results: list[NextStep]


class ForgottenPage(BaseModel):
    results: list[ForgottenEntry]
