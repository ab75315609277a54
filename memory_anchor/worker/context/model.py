"""The types every section shares: the request, a section, the built context."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

# Claude Code shows a hook's injected context in full only up to 10,000
# characters (past that the model sees a 2 KB preview): everything we inject,
# identity included, stays under this.
MAX_CHARS = 10_000


def estimate_tokens(text: str) -> int:
    """About four characters a token: close enough to budget English and code."""
    return (len(text) + 3) // 4


@dataclass
class ContextRequest:
    project: str
    source: str = "startup"
    session_id: str | None = None
    branch: str = "main"
    agent_id: str | None = None
    budget: int = 3000
    services: Any = None
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
        return getattr(self.services, "memory", None) if self.services is not None else None


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
