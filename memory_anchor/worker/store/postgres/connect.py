"""Opening a PostgreSQL connection, with errors a person can act on.

A wrong URL, a server that does not answer and a role without the right to do
something are told apart, each with what to check; `StorageError` carries the
message, and the CLI prints it and exits non-zero.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import psycopg
from psycopg import errors

from memory_anchor.schemas.settings import without_password
from memory_anchor.worker.store.errors import StorageError, StorageUnavailable

__all__ = ["StorageError", "StorageUnavailable", "check_url", "connect", "explain", "unreachable", "without_password"]

SCHEMES = ("postgresql", "postgres")
CONNECT_TIMEOUT_SECONDS = 10

# SQLSTATE classes that mean the connection, not the statement, failed: 08 connection exception,
# 57P0x the server shutting down, crashed or not yet accepting connections.
_UNREACHABLE_STATES = ("08", "57P01", "57P02", "57P03")


def unreachable(exc: BaseException) -> bool:
    """Whether a driver error means the server is out of reach (rather than the SQL being wrong)."""
    if isinstance(exc, StorageUnavailable):
        return True
    if isinstance(exc, psycopg.OperationalError):
        state = exc.sqlstate
        # No SQLSTATE: the client side lost or never had the connection.
        return state is None or state.startswith(_UNREACHABLE_STATES)
    return isinstance(exc, psycopg.InterfaceError)  # a connection already closed


def check_url(url: str) -> str:
    """`url` if it is a postgresql:// URL naming a database, else StorageError."""
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 (parses the port: a bad one raises here, not inside the driver)
    except ValueError as exc:
        raise StorageError(f"not a usable PostgreSQL URL ({exc}): expected postgresql://ROLE@HOST:PORT/DATABASE")
    if parts.scheme not in SCHEMES:
        raise StorageError(f"{without_password(url)!r} is not a PostgreSQL URL: expected postgresql://ROLE@HOST:PORT/DATABASE")
    if not parts.path.strip("/"):
        raise StorageError(f"{without_password(url)!r} names no database: expected postgresql://ROLE@HOST:PORT/DATABASE")
    return url.strip()


def connect(url: str, **kwargs) -> psycopg.Connection:
    """A connection to `url`, or StorageError saying whether the URL, the server or the login failed."""
    check_url(url)
    kwargs.setdefault("connect_timeout", CONNECT_TIMEOUT_SECONDS)
    try:
        return psycopg.connect(url, **kwargs)
    except psycopg.OperationalError as exc:
        raise StorageError(f"cannot connect to PostgreSQL at {without_password(url)}: {_first_line(exc)}") from exc
    except psycopg.ProgrammingError as exc:  # the driver refused the URL's options
        raise StorageError(f"not a usable PostgreSQL URL {without_password(url)}: {_first_line(exc)}") from exc


def explain(exc: psycopg.Error, doing: str) -> StorageError:
    """A database error while `doing` something, as a StorageError that says what to check."""
    if isinstance(exc, errors.InsufficientPrivilege):
        return StorageError(
            f"{doing}: the role lacks the right ({_first_line(exc)}); "
            "connect as the database owner, a role that may create tables, roles and policies"
        )
    return StorageError(f"{doing}: {_first_line(exc)}")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
