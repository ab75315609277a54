"""The team database going away and coming back, below the worker: what is an outage and what is not.

An outage (the server stopped) is `StorageUnavailable`, which the pipeline waits
out; a bad statement stays the driver's error, which the pipeline counts against
the event. A pooled connection broken by a restart is replaced, not kept.
"""

from __future__ import annotations

import psycopg
import pytest

from tests.conftest import wait_for
from tests.postgres import init_team_database, member_url
from memory_anchor.worker.store.errors import StorageUnavailable
from memory_anchor.worker.store.postgres.database import PostgresDatabase
from memory_anchor.worker.store.postgres.team import TeamDatabase


@pytest.fixture
def dev_url(postgres_cluster):
    name = init_team_database(postgres_cluster)
    yield member_url(postgres_cluster, name, "dev")
    postgres_cluster.drop_database(name)


def test_a_bad_statement_is_not_an_outage(dev_url):
    db = PostgresDatabase(dev_url)
    try:
        with pytest.raises(psycopg.errors.UndefinedTable):
            db.reader().execute("SELECT * FROM no_such_table")
        with pytest.raises(psycopg.errors.UndefinedTable):
            with db.transaction() as conn:
                conn.execute("SELECT * FROM no_such_table")
        assert db.reader().execute("SELECT 1").fetchone()[0] == 1
    finally:
        db.close()


def test_connections_broken_by_a_restart_are_replaced(dev_url, postgres_cluster):
    db = PostgresDatabase(dev_url)
    try:
        assert db.reader().execute("SELECT count(*) FROM records").fetchone()[0] == 0
        postgres_cluster.pause()
        try:
            with pytest.raises(StorageUnavailable):
                db.reader().execute("SELECT count(*) FROM records")
        finally:
            postgres_cluster.resume()
        # The same thread's reader was broken: the next read gets a new connection. (Writes wait
        # for the pool's own reconnection; TeamDatabase replaces a lost pool whole, tested below.)
        assert db.reader().execute("SELECT count(*) FROM records").fetchone()[0] == 0
    finally:
        db.close()


def test_team_database_opens_when_the_server_comes_up(dev_url, postgres_cluster):
    postgres_cluster.pause()
    try:
        team = TeamDatabase(dev_url, retry_seconds=0.1)
        with pytest.raises(StorageUnavailable, match="cannot connect"):
            team.reader()
        assert "cannot connect" in team.unreachable_reason()
    finally:
        postgres_cluster.resume()
    try:
        wait_for(lambda: team.unreachable_reason() is None, what="the team database reachable again")
        with team.transaction() as conn:
            assert conn.execute("SELECT count(*) FROM branches").fetchone()[0] == 1
        # Lost while open, and back: the next check replaces the pool, and writes go on.
        postgres_cluster.pause()
        try:
            assert team.unreachable_reason() is not None
            with pytest.raises(StorageUnavailable):
                team.reader()  # fails fast until the next attempt is due
        finally:
            postgres_cluster.resume()
        wait_for(lambda: team.unreachable_reason() is None, what="reachable after the second outage")
        with team.transaction() as conn:
            assert conn.execute("SELECT count(*) FROM branches").fetchone()[0] == 1
    finally:
        team.close()
