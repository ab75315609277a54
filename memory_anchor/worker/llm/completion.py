"""Claude's reply to one prompt, the same whichever route it took (the SDK or `claude -p`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Completion:
    text: str
    input_tokens: int
    output_tokens: int
    stop_reason: str | None
    model: str
