"""Errors about the storage itself (not about what was asked of it), free of any driver import.

The pipeline and the HTTP layer tell "the team database is away" apart from a
bad request or a poisoned event without loading the PostgreSQL driver on a
single-machine worker.
"""

from __future__ import annotations


class StorageError(Exception):
    """Team storage that cannot be used; the message says why and what to check."""


class StorageUnavailable(StorageError):
    """The team database cannot be reached now (down, restarting, network): worth trying again later,
    unlike a bad URL or a missing right. Nothing is wrong with the work that met it."""
