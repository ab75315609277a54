"""Facts that look older than they are, on either backend.

A fact's freshness is its `data.verified_at`, stamped by memory_anchor.worker.memory.facts
when it is written. Records are append-only on team storage (no member may
UPDATE one), so a test ages a fact by writing it under a clock set back,
never by editing the stored row.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock


@contextmanager
def facts_verified_at(when: float) -> Iterator[None]:
    """Facts written inside the block say they were verified at `when`."""
    with mock.patch("memory_anchor.worker.memory.facts.now", lambda: when):
        yield
