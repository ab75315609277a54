"""The types every section shares: the request, a section, the built context."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from memory_anchor.schemas.settings import Settings
    from memory_anchor.worker.codebase.service import Codebase
    from memory_anchor.worker.index.search import SearchService
    from memory_anchor.worker.memory.model import MemoryModel

# Claude Code shows a hook's injected context in full only up to 10,000
# characters (past that the model sees a 2 KB preview): everything we inject,
# identity included, stays under this.
MAX_CHARS = 10_000


def estimate_tokens(text: str) -> int:
    """About four characters a token: close enough to budget English and code."""
    return (len(text) + 3) // 4


@dataclass(frozen=True)
class ContextServices:
    """What the briefing and recall read: the worker hands these, not its whole container, so
    what context/ can reach is what it may read (and a briefing writes nothing)."""

    settings: Settings
    reader: Callable[[], Any]  # the memory database's reading connection (store/db.py)
    memory: MemoryModel | None = None
    codebase: Codebase | None = None  # None: no marks, nothing checked against the code
    # Per-prompt recall's search, built on first use: a briefing needs no embedding model.
    search: Callable[[], SearchService] | None = None


@dataclass
class ContextRequest:
    project: str
    source: str = "startup"
    session_id: str | None = None
    branch: str = "main"
    agent_id: str | None = None
    budget: int = 3000
    services: ContextServices | None = None
    max_chars: int = MAX_CHARS

    @property
    def settings(self):
        """The worker's settings, or the defaults when built outside a worker (tests)."""
        if self.services is not None:
            return self.services.settings
        from memory_anchor.schemas.settings import Settings

        return Settings()

    @property
    def memory(self):
        """The worker's MemoryModel, or None outside a worker."""
        return self.services.memory if self.services is not None else None


@dataclass
class Section:
    name: str
    title: str
    lines: list[str]
    always: bool = False  # outside the budget, never cut (identity)
    share: float = 1.0  # at most this fraction of the budget


SectionBuilder = Callable[[ContextRequest, Any, Any], "Section | None"]


@dataclass
class BuiltContext:
    text: str
    tokens: int
    sections: list[str] = field(default_factory=list)
