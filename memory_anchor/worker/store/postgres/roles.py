"""Members of a team database: one PostgreSQL role per developer.

Each developer's worker connects as their own role, so `current_user` is who
wrote a row and the row-level security policies (schema.py) know whose private
rows to show. A member is a LOGIN role granted `memory_anchor_member`.
"""

from __future__ import annotations

import re

from psycopg import sql

from memory_anchor.worker.store.postgres.schema import MEMBER_ROLE

ROLE_NAME_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def add_member(conn, role: str) -> dict[str, bool]:
    """Create the LOGIN role `role` if missing and grant it membership; says what was done.

    Role names are kept to lower-case letters, digits and `_`: they appear
    unquoted in URLs, `current_user` and policies, where case folding would
    otherwise make `Alice` and `alice` two different people.
    """
    if not ROLE_NAME_RE.match(role):
        raise ValueError(f"role name {role!r}: use 1-63 lower-case letters, digits or '_', not starting with a digit")
    with conn.transaction():
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is not None
        if not exists:
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        granted = conn.execute(
            "SELECT pg_has_role(%s, %s, 'MEMBER')", (role, MEMBER_ROLE)
        ).fetchone()[0]
        if not granted:
            conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(MEMBER_ROLE), sql.Identifier(role)))
    return {"created": not exists, "granted": not granted}
