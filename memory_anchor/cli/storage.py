"""`memory-anchor storage ...`: prepare a PostgreSQL database for team memory, move memory into it,
and scrub the local vector index files.

Run by the database owner, once (`init`), then per developer (`add-member`), and to bring an
existing memory along (`migrate`, either way). All talk to the databases directly, not to a worker.
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

    migrate = cmds.add_parser(
        "migrate", help="copy a SQLite memory into an empty team database, or a team database into a SQLite file",
        description="Seqs, versions, branches, snapshots and timestamps are kept, so every read (as_of included) "
        "answers the same. The target must be empty. Run as the database owner.",
    )  # fmt: skip
    migrate.add_argument("--to", required=True, dest="target", help=f"{URL_HELP}, or a SQLite file for the way back")
    migrate.add_argument(
        "--from", dest="source", default=None,
        help="a SQLite file (default: the data dir's memory), or for the way back the team database's owner URL",
    )  # fmt: skip
    migrate.add_argument("--author", default=None, help="into PostgreSQL: the member role whose memory it is")
    migrate.set_defaults(handler=migrate_storage)

    scrub = cmds.add_parser(
        "scrub", help="clear freed memory that earlier versions left in the vector index files, now",
        description="A worker does this once at its first start on a data dir; this runs it again, "
        "with no worker running on the data dir.",
    )  # fmt: skip
    scrub.set_defaults(handler=scrub_storage)

    storage.set_defaults(handler=lambda args: storage.print_help() or 0)


def init_storage(args: argparse.Namespace) -> int:
    from memory_anchor.worker.store.postgres.connect import StorageError, connect, explain
    from memory_anchor.worker.store.postgres.schema import MIGRATIONS, apply_schema

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
    from memory_anchor.worker.store.postgres.connect import StorageError, connect, explain
    from memory_anchor.worker.store.postgres.roles import add_member as grant_member
    from memory_anchor.worker.store.postgres.schema import MEMBER_ROLE, applied_migrations

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


def migrate_storage(args: argparse.Namespace) -> int:
    from pathlib import Path

    from memory_anchor.core import paths
    from memory_anchor.worker.store.postgres.connect import SCHEMES, StorageError
    from memory_anchor.worker.store.postgres.migrate import postgres_to_sqlite, sqlite_to_postgres
    from memory_anchor.worker.store.records import RecordError

    def is_url(value: str | None) -> bool:
        return bool(value) and value.split("://", 1)[0] in SCHEMES

    try:
        if is_url(args.target):
            if is_url(args.source):
                return _fail("--from is a SQLite file when --to is a team database")
            if not args.author:
                return _fail("give --author ROLE: the member whose memory this is (its rows are written in that name)")
            source = Path(args.source) if args.source else paths.database_path(args.data_dir or paths.data_dir())
            result = sqlite_to_postgres(source, args.target, args.author)
            copied = sum(result["copied"].values())
            text = f"copied {copied} rows ({result['copied'].get('records', 0)} record versions, head seq {result['head_seq']}) from {source}"
            if result["left_local"]:
                text += f"; kept on this machine: {', '.join(result['left_local'])}"
        else:
            source = args.source or os.environ.get("MEMORY_ANCHOR_STORAGE_URL", "")
            if not is_url(source):
                return _fail("the way back needs --from postgresql://OWNER@HOST:PORT/DATABASE (the team database)")
            target = Path(args.target)
            if target.is_dir():
                target = paths.database_path(target)
            result = postgres_to_sqlite(source, target)
            text = f"copied {result['rows']} rows ({result['imported'].get('records', 0)} record versions, head seq {result['head_seq']}) into {target}"
    except (StorageError, RecordError) as exc:
        return _fail(exc)
    emit(args, result, text)
    return 0


def scrub_storage(args: argparse.Namespace) -> int:
    """Zero the unused slots of the data dir's Chroma index files (memory_anchor/worker/index/scrub.py), holding the
    data dir's lock so that no worker opens Chroma meanwhile."""
    from memory_anchor.core import paths
    from memory_anchor.worker.index.scrub import ChromaScrub
    from memory_anchor.core.lifecycle import AlreadyRunning, acquire_lock

    data_dir = args.data_dir or paths.data_dir()
    try:
        lock = acquire_lock(data_dir)
    except AlreadyRunning as exc:
        return _fail(f"{exc}: stop it first (`memory-anchor worker stop`); a worker scrubs at its first start anyway")
    try:
        report = ChromaScrub(data_dir, paths.chroma_path(data_dir)).run()
    finally:
        lock.close()
    text = f"scrubbed {report.segments} vector index segments in {paths.chroma_path(data_dir)}: "
    text += f"{report.cleared_bytes} bytes of freed memory cleared" if report.cleared_bytes else "nothing to clear"
    if report.files:
        text += " (" + ", ".join(report.files) + ")"
    if report.skipped:
        text += f"; left in a format this version does not read: {', '.join(report.skipped)}"
    emit(args, report.as_dict(), text)
    return 0


def _fail(reason: object) -> int:
    print(f"memory-anchor storage: {reason}", file=sys.stderr)
    return 1
