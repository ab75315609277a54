"""One embedded record version as the vector layers pass it around (Chroma store and memory index)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

# The record columns a vector carries so the index can filter without SQLite.
META_KEYS = ("project", "branch", "kind", "layer", "user_id", "agent_id", "run_id", "session_id")


@dataclass(frozen=True)
class VectorItem:
    seq: int
    vector: np.ndarray  # (DIMENSION,) float32, unit length
    meta: dict[str, Any]  # META_KEYS plus happened_at
