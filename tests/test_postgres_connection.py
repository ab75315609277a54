"""The store's SQL on psycopg: `?` placeholders become `%s` (quoted text and a literal `%` survive),
and rows read like `sqlite3.Row`."""

from __future__ import annotations

import pytest

from memory_anchor.worker.store.postgres.placeholders import to_psycopg


@pytest.mark.parametrize(
    "store_sql, psycopg_sql",
    [
        ("SELECT * FROM records WHERE id = ?", "SELECT * FROM records WHERE id = %s"),
        ("VALUES (?, ?, ?)", "VALUES (%s, %s, %s)"),
        ("WHERE text = 'why?' AND id = ?", "WHERE text = 'why?' AND id = %s"),
        ("WHERE text = 'it''s ?' AND id = ?", "WHERE text = 'it''s ?' AND id = %s"),
        ('SELECT "odd?name" FROM t WHERE a = ?', 'SELECT "odd?name" FROM t WHERE a = %s'),
        ("WHERE title LIKE 'a%' AND n = ?", "WHERE title LIKE 'a%%' AND n = %s"),
        ("SELECT 7 % ?", "SELECT 7 %% %s"),
        ("SELECT ? -- who? it's a comment\n, ?", "SELECT %s -- who? it's a comment\n, %s"),
        ("SELECT 1", "SELECT 1"),
    ],
)
def test_placeholders_outside_quotes_become_psycopg_ones(store_sql, psycopg_sql):
    assert to_psycopg(store_sql) == psycopg_sql


def test_the_translated_sql_means_the_same_on_the_server(postgres_url):
    from memory_anchor.worker.store.postgres.database import Connection

    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as raw:
        conn = Connection(raw)
        row = conn.execute("SELECT 'why?' AS a, ? AS b, 'it''s 100%' AS c, 7 % 4 AS d", ["given"]).fetchone()
        assert row == ("why?", "given", "it's 100%", 3)
        assert conn.execute("SELECT 'no parameters, 50%'").fetchone() == ("no parameters, 50%",)


def test_rows_read_by_name_by_index_and_as_a_dict_like_sqlite_rows(postgres_url, tmp_path):
    import sqlite3

    from memory_anchor.worker.store.postgres.database import row_factory

    import psycopg

    query = "SELECT 1 AS seq, 'x' AS id"
    lite = sqlite3.connect(tmp_path / "rows.sqlite3")
    lite.row_factory = sqlite3.Row
    with psycopg.connect(postgres_url, autocommit=True, row_factory=row_factory) as raw:
        for row in (lite.execute(query).fetchone(), raw.execute(query).fetchone()):
            assert (row["seq"], row["id"], row[0], row[1]) == (1, "x", 1, "x")
            assert dict(row) == {"seq": 1, "id": "x"} and row.keys() == ["seq", "id"]
            seq, record_id = row
            assert (seq, record_id) == (1, "x")
            with pytest.raises((KeyError, IndexError)):
                row["missing"]
    lite.close()


def test_the_stores_statements_are_planned_for_their_values_every_time(postgres_cluster):
    """psycopg prepares a statement it ran 5 times, and PostgreSQL may then plan it once for any
    values: a generic plan of keyword search took 2.5 s where its planned-per-value one took 50 ms.
    The store's connections prepare nothing server-side, however often a statement runs."""
    from tests.postgres import init_team_database, member_url
    from memory_anchor.worker.store.postgres.database import PostgresDatabase

    name = init_team_database(postgres_cluster)
    db = PostgresDatabase(member_url(postgres_cluster, name, "dev"))
    try:
        conn = db.reader()
        for project in range(12):
            conn.execute("SELECT count(*) FROM records WHERE project = ? AND kind = ?", (f"p{project}", "fact")).fetchone()
        with db.transaction() as writer:
            for _ in range(12):
                writer.execute("SELECT count(*) FROM records WHERE project = ?", ("p",)).fetchone()
            assert writer.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0] == 0
    finally:
        db.close()
        postgres_cluster.drop_database(name)
