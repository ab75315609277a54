"""Wire models of the cognitive memory model (docs/memory-model.md): layers L0-L4, approvals,
conflicts, relations and fact extraction.

Layer names are the memory model's own; the names older clients use are accepted as aliases
(`constitution` → identity_schema, `fact` → verified_fact, `session` → event_log).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from memory_anchor.schemas.common import NOT_BLANK_PATTERN, NonBlank, documented
from memory_anchor.schemas.filters import AsOf, Timestamp

# --- layers -------------------------------------------------------------------

IDENTITY = "identity_schema"
ACTIVE_CONTEXT = "active_context"
EVENT_LOG = "event_log"
VERIFIED_FACT = "verified_fact"
OPERATIONAL = "operational_knowledge"
LAYERS = (IDENTITY, ACTIVE_CONTEXT, EVENT_LOG, VERIFIED_FACT, OPERATIONAL)
LAYER_ALIASES = {
    "constitution": IDENTITY,
    "identity": IDENTITY,
    "l0": IDENTITY,
    "l1": ACTIVE_CONTEXT,
    "session": EVENT_LOG,
    "event": EVENT_LOG,
    "events": EVENT_LOG,
    "l2": EVENT_LOG,
    "fact": VERIFIED_FACT,
    "facts": VERIFIED_FACT,
    "l3": VERIFIED_FACT,
    "operations": OPERATIONAL,
    "l4": OPERATIONAL,
}

# Limits of the identity layer: few enough to brief in full, every change confirmed three times by
# a person, a removal restorable for a week (docs/memory-model.md, "Identity").
IDENTITY_MAX_ITEMS = 20
IDENTITY_RESTORE_DAYS = 7
IDENTITY_CONFIRMATIONS = 3

# Confidence tiers of the fact layer: briefed at 0.9 and up, waiting for approval from 0.7, due for
# re-verification below 0.6; an unconfirmed fact loses 5% a day (docs/memory-model.md).
FACT_ACCEPT = 0.9
FACT_PENDING = 0.7
FACT_REVERIFY = 0.6
FACT_DECAY_PER_DAY = 0.95

# The fact categories that say how to work (rules, decisions, preferences, conventions): briefed as
# standing ones when confirmed, in the user's words when said once.
STANDING = ("rule", "decision", "preference", "convention")


def normalize_layer(value: str) -> str:
    """A layer name or alias → its canonical name; a clear error otherwise."""
    key = (value or "").strip().lower()
    if key in LAYERS:
        return key
    if key in LAYER_ALIASES:
        return LAYER_ALIASES[key]
    raise ValueError(f"unknown layer {value!r}; use one of {', '.join(LAYERS)} (or constitution/fact/session)")


def layer_names(*layers: str) -> list[str]:
    """The names and aliases that mean one of `layers` (what the document lists as valid)."""
    return [*layers, *(alias for alias, layer in LAYER_ALIASES.items() if layer in layers)]


# add_memory writes to these; search_memory searches these (identity is always in context in
# full, active context is read by key).
WRITABLE_LAYERS = (EVENT_LOG, VERIFIED_FACT)
SEARCHABLE_LAYERS = (EVENT_LOG, VERIFIED_FACT, OPERATIONAL)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- L0 identity ---------------------------------------------------------------

IdentityAction = Literal["add", "edit", "remove"]


class IdentityWrite(_Strict):
    """A human's write to the identity layer. `confirmations` must be 3: the CLI
    asks three times (or `--yes` states that a script skips them). Fewer is a 400
    `confirmation_required` from the service, which approvals reach too."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=documented(required=("confirmations",)))

    content: str | None = Field(None, max_length=1000)
    priority: int | None = Field(None, ge=0, le=99)
    project: str = Field("", description="Project the item belongs to; '' = every project")
    confirmations: int = Field(
        0, description="How many confirmations the human gave (3 needed)",
        json_schema_extra={"minimum": IDENTITY_CONFIRMATIONS},
    )  # fmt: skip
    actor: str | None = Field(None, description="Who is writing (a human's name); default: the worker's OS account")
    reason: str | None = None


class IdentityAdd(IdentityWrite):
    """`POST /api/v1/identity`: a new item, so `content` is required."""

    content: NonBlank = Field(max_length=1000)


_CONTENT = {"type": "string", "pattern": NOT_BLANK_PATTERN}


class IdentityEdit(IdentityWrite):
    """`PUT /api/v1/identity/{id}`: new `content`, a new `priority`, or both."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra=documented(required=("confirmations",), any_of=[
            {"required": ["content"], "properties": {"content": _CONTENT}},
            {"required": ["priority"], "properties": {"priority": {"type": "integer"}}},
        ]),
    )  # fmt: skip

    @model_validator(mode="after")
    def _changes_something(self) -> "IdentityEdit":
        if not (self.content and self.content.strip()) and self.priority is None:
            raise ValueError("nothing to change: give `content` and/or `priority`")
        return self


_TARGET = {"type": "string", "minLength": 1}


class IdentityProposal(_Strict):
    """An agent's proposal to change the identity layer; a human approves it."""

    # What _complete checks, for the document: add needs content, edit content and a
    # target, remove a target.
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra=documented(any_of=[
            {"required": ["content"], "properties": {"action": {"const": "add"}, "content": _CONTENT}},
            {"required": ["action", "content", "target_id"],
             "properties": {"action": {"const": "edit"}, "content": _CONTENT, "target_id": _TARGET}},
            {"required": ["action", "target_id"], "properties": {"action": {"const": "remove"}, "target_id": _TARGET}},
        ]),
    )  # fmt: skip

    action: IdentityAction = "add"
    content: str | None = Field(None, max_length=1000)
    priority: int | None = Field(None, ge=0, le=99)
    target_id: str | None = Field(None, min_length=1, description="Identity item to edit or remove")
    reason: str = Field(min_length=1, max_length=2000)
    project: str = ""
    agent_id: str | None = None
    session_id: str | None = None

    @model_validator(mode="after")
    def _complete(self) -> "IdentityProposal":
        if self.action in ("add", "edit") and not (self.content and self.content.strip()):
            raise ValueError(f"a proposal to {self.action} an identity item needs `content`")
        if self.action in ("edit", "remove") and not self.target_id:
            raise ValueError(f"a proposal to {self.action} an identity item needs `target_id`")
        return self


# --- L1 active context ---------------------------------------------------------


class ActiveContextSet(_Strict):
    session_id: str = Field(min_length=1, max_length=200)
    key: str = Field(min_length=1, max_length=200)
    value: Any = None
    ttl_seconds: int | None = Field(None, ge=1, le=7 * 24 * 3600)
    agent_id: str | None = None


class ActiveContextEnd(_Strict):
    session_id: str = Field(min_length=1, max_length=200)
    agent_id: str | None = None
    project: str = ""
    write_event: bool = Field(True, description="Keep what is left as an L2 event")


# --- L2 event log ---------------------------------------------------------------

EventSource = Literal["ai", "user", "system"]


class EventIn(_Strict):
    """`log_event`: something that happened, with when/where/who (L2)."""

    content: str = Field(min_length=1, max_length=10_000)
    when: Timestamp = Field(description="When it happened: ISO 8601 or epoch seconds (required)")
    where: str | None = Field(None, max_length=1000)
    who: list[str] = Field(default_factory=list)
    source: EventSource = "ai"
    ttl_days: int | None = Field(None, ge=1, le=36500, description="Days to keep; none = forever")
    project: str = ""
    agent_id: str | None = None
    session_id: str | None = None
    branch: str | None = None
    tags: list[str] = Field(default_factory=list)

    @field_validator("who", mode="before")
    @classmethod
    def _who_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


class EventSearch(_Strict):
    """`search_events`: a time range plus (optionally) a meaning."""

    query: str = ""
    start: Timestamp | None = Field(None, description="Happened at or after (ISO 8601 / epoch)")
    end: Timestamp | None = Field(None, description="Happened before (ISO 8601 / epoch)")
    project: str | None = None
    agent_id: str | None = None
    all_agents: bool = Field(False, description="Include other agents' events")
    limit: int = Field(20, ge=1, le=500)
    branch: str | None = None
    as_of: AsOf | None = Field(None, description="As of a seq, a snapshot label or a timestamp")


class PromoteRequest(_Strict):
    confidence: float = Field(0.9, ge=0.0, le=1.0)
    text: str | None = Field(None, description="The generalised fact (default: the event's text)")
    subject: str | None = None
    agent_id: str | None = None
    branch: str | None = None


# --- L3 facts -------------------------------------------------------------------


class FactIn(_Strict):
    """A fact to store; its confidence decides active / pending / rejected."""

    text: str = Field(min_length=1, max_length=5000)
    confidence: float = Field(0.9, ge=0.0, le=1.0)
    subject: str | None = Field(None, max_length=300, description="What the fact is about (→ fact_key)")
    category: str | None = None
    project: str = ""
    agent_id: str | None = None
    session_id: str | None = None
    source: str = "ai"
    source_id: str | None = None
    when: Timestamp | None = None
    branch: str | None = None
    tags: list[str] = Field(default_factory=list)
    quote: str | None = Field(None, max_length=2000, description="The user's own words a standing rule stands on")


class FactUpdate(_Strict):
    text: str = Field(min_length=1, max_length=5000)
    confidence: float | None = Field(None, ge=0.0, le=1.0)
    reason: str = "UPDATE"
    agent_id: str | None = None
    branch: str | None = None


class AddMemoryIn(_Strict):
    """`add_memory`: into L2 (event_log) or L3 (verified_fact)."""

    content: str = Field(min_length=1, max_length=10_000)
    layer: str = Field(VERIFIED_FACT, json_schema_extra={"enum": layer_names(*WRITABLE_LAYERS)})
    confidence: float = Field(0.9, ge=0.0, le=1.0)
    when: Timestamp | None = None
    where: str | None = None
    who: list[str] = Field(default_factory=list)
    subject: str | None = None
    project: str = ""
    agent_id: str | None = None
    session_id: str | None = None
    branch: str | None = None
    tags: list[str] = Field(default_factory=list)


# Any case and spacing is read (normalize_layer); the document lists the plain names.
SearchableLayer = Annotated[str, Field(json_schema_extra={"enum": layer_names(*SEARCHABLE_LAYERS)})]


class MemorySearch(_Strict):
    """`search_memory`: across L2, L3 and L4 with the fallback chain."""

    query: str = Field(min_length=1, max_length=2000)
    layers: list[SearchableLayer] | None = None
    project: str | None = None
    agent_id: str | None = None
    all_agents: bool = False
    limit: int = Field(10, ge=1, le=100)
    branch: str | None = None
    as_of: AsOf | None = Field(None, description="As of a seq, a snapshot label or a timestamp")

    @field_validator("layers")
    @classmethod
    def _known_layers(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        return [normalize_layer(v) for v in value]


# --- approvals and conflicts ----------------------------------------------------------

ApprovalKind = Literal["identity_change", "fact", "agent_write"]


class Decision(_Strict):
    actor: str | None = Field(None, description="Who decides; default: the worker's OS account")
    note: str | None = None
    confirmations: int = Field(0, description="Identity changes need 3")


ConflictResolution = Literal["keep_existing", "keep_new", "keep_both"]


class ConflictResolve(_Strict):
    resolution: ConflictResolution
    actor: str | None = Field(None, description="Who decides; default: the worker's OS account")
    note: str | None = None


# --- relations ---------------------------------------------------------------------


class RelationIn(_Strict):
    subject: str = Field(min_length=1, max_length=300)
    relation: str = Field(min_length=1, max_length=100)
    object: str = Field(min_length=1, max_length=300)
    properties: dict[str, Any] = Field(default_factory=dict)
    confidence: float = Field(0.9, ge=0.0, le=1.0)
    valid_from: Timestamp | None = None
    project: str = ""
    agent_id: str | None = None
    branch: str | None = None


class GraphQuery(_Strict):
    entity: str = Field(min_length=1, max_length=300)
    relation_type: str | None = None
    depth: int = Field(1, ge=1, le=5)
    project: str | None = None
    at: Timestamp | None = Field(None, description="Relations valid at this time (default now)")
    branch: str | None = None
    as_of: AsOf | None = Field(None, description="As of a seq, a snapshot label or a timestamp")


# --- L4 operational knowledge ------------------------------------------------------------


class OperationsReindex(_Strict):
    project: str = Field(min_length=1, description="The project directory (it holds .ai/operations/)")


# --- fact extraction (what the model must reply) -------------------------------------


class ExtractedFact(BaseModel):
    """One fact proposed by the model in the extraction step."""

    model_config = ConfigDict(extra="ignore")

    text: str = Field(min_length=3, max_length=1000)
    confidence: float = Field(ge=0.0, le=1.0)
    subject: str | None = Field(None, max_length=300)
    category: str | None = None
    quote: str | None = Field(None, max_length=2000, description="The user's own words a rule or decision stands on")


class ExtractionReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    facts: list[ExtractedFact] = Field(default_factory=list, max_length=50)


FactAction = Literal["ADD", "UPDATE", "DELETE", "NONE"]


class FactDecision(BaseModel):
    """The model's decision for one candidate against its similar existing facts.
    `target` is the short number the prompt gave an existing fact, never its id."""

    model_config = ConfigDict(extra="ignore")

    candidate: int = Field(ge=0)
    event: FactAction
    target: int | None = None
    text: str | None = Field(None, max_length=1000)
    reason: str | None = Field(None, max_length=1000)

    @field_validator("event", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value


class DecisionReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    decisions: list[FactDecision] = Field(default_factory=list)


class ExtractRequest(_Strict):
    """`POST /api/v1/facts/extract`: run extraction on given material now."""

    observations: list[dict[str, Any]] = Field(default_factory=list)
    text: str | None = Field(None, description="A session summary or transcript excerpt")
    source: Literal["observation", "summary", "transcript", "messages"] = "summary"
    project: str = ""
    agent_id: str | None = None
    session_id: str | None = None
    branch: str | None = None


class ExtractionOutcome(BaseModel):
    """What one extraction run did, for logs, tests and the API."""

    mode: Literal["claude", "local"]
    results: list[dict[str, Any]] = Field(default_factory=list)
    rejected: int = 0
    errors: list[str] = Field(default_factory=list)
