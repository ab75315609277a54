"""`memory-anchor storage ...`: prepare a PostgreSQL database for team memory.

Run by the database owner, once (`init`) and then per developer (`add-member`).
Both talk to PostgreSQL directly, not to a worker.
"""

from __future__ import annotations

import argparse
import os
import sys

from memory_anchor.cli.main import emit

URL_HELP = "postgresql://OWNER@HOST:PORT/DATABASE (the password from PGPASSWORD or ~/.pgpass, not the URL)"


def register(sub) -> None:
    storage = sub.add_parser("storage", help="team memory on PostgreSQL: create the schema, add members")
    cmds = storage.add_subparsers(dest="storage_command", metavar="ACTION")

    init = cmds.add_parser("init", help="create or upgrade the schema, roles and row-level security (idempotent)")
    init.add_argument("url", help=URL_HELP)
    init.set_defaults(handler=init_storage)

    member = cmds.add_parser("add-member", help="create a developer's LOGIN role if missing and make it a member")
    member.add_argument("role", help="the developer's PostgreSQL role (lower case)")
    member.add_argument("--url", default=None, help=f"{URL_HELP}; default $MEMORY_ANCHOR_STORAGE_URL")
    member.set_defaults(handler=add_member)

    storage.set_defaults(handler=lambda args: storage.print_help() or 0)


def init_storage(args: argparse.Namespace) -> int:
    from worker.store.postgres.connect import StorageError, connect, explain
    from worker.store.postgres.schema import MIGRATIONS, apply_schema

    import psycopg

    try:
        with connect(args.url, autocommit=True) as conn:
            try:
                applied = apply_schema(conn)
            except psycopg.Error as exc:
                raise explain(exc, "creating the schema") from exc
    except StorageError as exc:
        return _fail(exc)
    latest = MIGRATIONS[-1][0]
    text = (
        "applied: " + ", ".join(applied) + f"\nschema is at {latest}"
        if applied
        else f"nothing to apply: schema is at {latest}"
    )
    emit(args, {"applied": applied, "schema": latest}, text)
    return 0


def add_member(args: argparse.Namespace) -> int:
    from worker.store.postgres.connect import StorageError, connect, explain
    from worker.store.postgres.roles import add_member as grant_member
    from worker.store.postgres.schema import MEMBER_ROLE, applied_migrations

    import psycopg

    url = args.url or os.environ.get("MEMORY_ANCHOR_STORAGE_URL", "")
    if not url:
        return _fail("give the database with --url (or MEMORY_ANCHOR_STORAGE_URL)")
    try:
        with connect(url, autocommit=True) as conn:
            if not applied_migrations(conn):
                raise StorageError("this database has no team memory schema yet: run `memory-anchor storage init URL` first")
            try:
                done = grant_member(conn, args.role)
            except psycopg.Error as exc:
                raise explain(exc, f"adding member {args.role!r}") from exc
    except (StorageError, ValueError) as exc:
        return _fail(exc)
    steps = [f"created LOGIN role {args.role}" if done["created"] else f"role {args.role} exists"]
    steps.append(f"granted {MEMBER_ROLE}" if done["granted"] else f"already a member of {MEMBER_ROLE}")
    emit(args, {"role": args.role, **done}, "; ".join(steps))
    return 0


def _fail(reason: object) -> int:
    print(f"memory-anchor storage: {reason}", file=sys.stderr)
    return 1
