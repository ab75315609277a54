"""mem0's platform API (api.mem0.ai) on the wire, as its `MemoryClient` speaks it.

Routes: /v1/ping/, /v3/memories/add/, /v3/memories/ (get_all), /v3/memories/search/,
/v1/memories/{id}/ (GET, PUT, DELETE), /v1/memories/{id}/history/, /v1/memories/ (DELETE),
/v1/entities/, /v2/entities/{type}/{name}/ and /v1/batch/. Fields mem0 sends that have
no meaning here (categories, instructions, expiration, ...) are accepted and ignored,
so a mem0 program runs unchanged; each model says which. A message and an add's
answer are the same models as `POST /api/v1/memories` takes and gives (`schemas/memories.py`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memory_anchor.schemas.filters import TIME_RANGE, FilterObject, filters_field
from memory_anchor.schemas.memories import Message

EntityType = Literal["user", "agent", "app", "run"]


class _Lenient(BaseModel):
    # mem0's SDK grows options between releases; unknown ones must not break old workers.
    model_config = ConfigDict(extra="ignore")


class Mem0AddRequest(_Lenient):
    """`POST /v3/memories/add/`: store the messages (one memory each) or, with infer, the facts in them."""

    messages: list[Message] = Field(min_length=1)
    user_id: str | None = None
    agent_id: str | None = None
    app_id: str | None = Field(None, description="Kept as the memory's metadata.app_id")
    run_id: str | None = None
    filters: FilterObject = filters_field("Entity ids (user_id, agent_id, app_id, run_id), as the v3 API takes them")
    metadata: dict[str, Any] = Field(default_factory=dict)
    infer: bool = True
    timestamp: float | None = Field(None, ge=TIME_RANGE[0], le=TIME_RANGE[1], description="When it happened, epoch seconds")
    # Accepted for compatibility, not used: categories, instructions, expiry, async mode, graph.
    custom_categories: Any = None
    custom_instructions: Any = None
    agent_custom_instructions: Any = None
    expiration_date: Any = None
    structured_data_schema: Any = None
    async_mode: Any = None
    output_format: Any = None
    version: Any = None


class Mem0Memory(BaseModel):
    """A memory as mem0's platform returns it."""

    id: str
    memory: str
    user_id: str | None = None
    agent_id: str | None = None
    app_id: str | None = None
    run_id: str | None = None
    hash: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    categories: list[str] = Field(default_factory=list)
    created_at: str | None = Field(None, description="When the memory was first stored")
    updated_at: str | None = Field(None, description="When this version was stored")
    immutable: bool = False
    expiration_date: str | None = None
    score: float | None = Field(None, description="Search only: relevance, 0..1")


class Mem0GetAllRequest(_Lenient):
    """`POST /v3/memories/`; `page` and `page_size` come in the query string."""

    filters: FilterObject = filters_field()
    start_date: Any = Field(None, description="Accepted, not used: put created_at in filters")
    end_date: Any = Field(None, description="Accepted, not used: put created_at in filters")
    categories: Any = None
    show_expired: Any = None
    latest_only: Any = None
    fields: Any = None


class Mem0Page(BaseModel):
    count: int = Field(description="How many memories match, over all pages")
    next: str | None = Field(None, description="URL of the next page")
    previous: str | None = Field(None, description="URL of the previous page")
    results: list[Mem0Memory]


class Mem0SearchRequest(_Lenient):
    """`POST /v3/memories/search/`."""

    query: str = Field(min_length=1, pattern=r"\S")
    filters: FilterObject = filters_field()
    top_k: int = Field(10, ge=1, le=200)
    threshold: float | None = Field(None, description="Minimum score, 0..1")
    keyword_search: bool | None = Field(None, description="true: keyword matching only")
    rerank: Any = None
    fields: Any = None
    categories: Any = None
    show_expired: Any = None
    reference_date: Any = None
    latest_only: Any = None
    metadata: Any = None


class Mem0SearchResponse(BaseModel):
    results: list[Mem0Memory]


class Mem0UpdateRequest(_Lenient):
    """`PUT /v1/memories/{id}/`: a new version with this text and/or merged metadata."""

    text: str | None = Field(None, min_length=1, pattern=r"\S")
    metadata: dict[str, Any] | None = None
    timestamp: Any = Field(None, description="Accepted, not used")
    expiration_date: Any = Field(None, description="Accepted, not used")


class Mem0HistoryEntry(BaseModel):
    id: str = Field(description="The version's id: <memory id>:<version>")
    memory_id: str
    event: Literal["ADD", "UPDATE", "DELETE"]
    old_memory: str | None = None
    new_memory: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    actor: str | None = None
    created_at: str | None = None
    updated_at: str | None = None


class Mem0Status(BaseModel):
    message: str


class Mem0Ping(BaseModel):
    """mem0's SDK needs an org and a project; a worker is one of each."""

    status: str = "ok"
    message: str
    org_id: str = "local"
    project_id: str = "memory-anchor"
    user_email: str | None = None


class Mem0Entity(BaseModel):
    id: str
    name: str
    type: EntityType
    total_memories: int
    created_at: str | None = None
    updated_at: str | None = None


class Mem0EntityList(BaseModel):
    count: int
    results: list[Mem0Entity]


class Mem0BatchUpdateItem(BaseModel):
    memory_id: str = Field(min_length=1)
    text: str | None = Field(None, min_length=1, pattern=r"\S")
    metadata: dict[str, Any] | None = None


class Mem0BatchUpdate(BaseModel):
    """`PUT /v1/batch/`: up to 1000 updates, all or none."""

    memories: list[Mem0BatchUpdateItem] = Field(min_length=1, max_length=1000)


class Mem0BatchDeleteItem(BaseModel):
    memory_id: str = Field(min_length=1)


class Mem0BatchDelete(BaseModel):
    """`DELETE /v1/batch/`: up to 1000 deletions, all or none."""

    memories: list[Mem0BatchDeleteItem] = Field(min_length=1, max_length=1000)
