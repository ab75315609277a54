"""The tests' PostgreSQL: the throwaway cluster (memory_anchor/bench/postgres_cluster.py) and team databases.

One cluster per test session, stopped at the end whatever happened. Each test
gets a database of its own. Without the server binaries the tests that need
them are skipped with a message saying so, except under CI (`CI=true`), where
that is a failure: CI runs on an image that has them.
"""

from __future__ import annotations

import os

import pytest

from memory_anchor.bench.postgres_cluster import BIN_GLOB, Cluster, ClusterUnavailable, free_port
from memory_anchor.bench.postgres_cluster import start_cluster as _start_cluster

__all__ = ["Cluster", "free_port", "init_team_database", "member_url", "start_cluster"]


def unavailable(reason: str) -> None:
    """Skip on a developer's machine, fail under CI: CI must never skip the PostgreSQL tests."""
    message = f"PostgreSQL tests need the server binaries ({BIN_GLOB}): {reason}"
    if os.environ.get("CI") == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def start_cluster() -> Cluster:
    try:
        return _start_cluster()
    except ClusterUnavailable as exc:
        unavailable(str(exc))
        raise  # not reached: skip and fail raise


def init_team_database(cluster: Cluster) -> str:
    """A fresh database prepared as `memory-anchor storage init` does, by the superuser; its name.

    The schema is applied once per session, to a template; each database is a copy of it.
    """
    import psycopg

    from memory_anchor.worker.store.postgres.schema import apply_schema

    if cluster.team_template is None:
        template = cluster.create_database()
        with psycopg.connect(cluster.url(template), autocommit=True) as conn:
            apply_schema(conn)
        cluster.team_template = template
    return cluster.create_database(template=cluster.team_template)


def member_url(cluster: Cluster, database: str, role: str) -> str:
    """The URL a developer's worker uses: their own role, made a member as `storage add-member` does."""
    import psycopg

    from memory_anchor.worker.store.postgres.roles import add_member

    with psycopg.connect(cluster.url(database), autocommit=True) as conn:
        add_member(conn, role)
    return cluster.url(database, user=role)


def database_owned_by_a_non_superuser(cluster: Cluster, role: str) -> tuple[str, str]:
    """(database, its owner's URL) as on a managed PostgreSQL: the owner may create roles, nothing more."""
    import psycopg

    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        conn.execute(f'DROP ROLE IF EXISTS "{role}"')
        conn.execute(f'CREATE ROLE "{role}" LOGIN CREATEROLE')
    database = cluster.create_database()
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{database}" OWNER TO "{role}"')
    return database, cluster.url(database, user=role)
