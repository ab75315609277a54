"""What a cluster's owner does to whole databases (the benchmarks' and tests' throwaway clusters):
create and drop them, refresh the planner's statistics, count what arrived."""

from __future__ import annotations


def create_database(url: str, name: str, template: str | None = None) -> None:
    """A new database `name`, empty or a copy of `template`; `url` reaches the cluster as its owner."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))


def drop_database(url: str, name: str) -> None:
    """Drop a database, closing what still reaches it."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def vacuum_analyze(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def prompts_stored(url: str, session_ids: list[str]) -> int:
    """How many distinct prompt events of these sessions the database holds, every member's."""
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute(
            # source_id is inbox:<id>, numbered per machine: with the session it names one event
            "SELECT count(DISTINCT (session_id, source_id)) FROM records WHERE kind = 'prompt' AND session_id = ANY(%s)",
            (session_ids,),
        ).fetchone()[0]
