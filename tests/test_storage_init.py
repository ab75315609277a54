"""`memory-anchor storage init` and `add-member`, against a real PostgreSQL server."""

from __future__ import annotations

import json

import psycopg
import pytest

from memory_anchor.cli.main import main
from tests.postgres import database_owned_by_a_non_superuser, free_port


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_init_creates_the_schema_once_and_then_has_nothing_to_apply(postgres_url, capsys):
    code, out, _ = run(capsys, "storage", "init", postgres_url)
    assert code == 0 and "applied: 0001_versioned_core" in out and "0004_row_level_security" in out

    code, out, _ = run(capsys, "storage", "init", postgres_url)
    assert code == 0 and out.startswith("nothing to apply")

    with psycopg.connect(postgres_url) as conn:
        forced = dict(conn.execute(
            "SELECT relname, relforcerowsecurity FROM pg_class WHERE relname IN ('records', 'sessions', 'branches')"
        ).fetchall())  # fmt: skip
    assert forced == {"records": True, "sessions": True, "branches": True}


def test_init_upgrades_an_older_schema_with_the_migrations_it_lacks(postgres_url, capsys):
    from memory_anchor.worker.store.postgres.schema import MIGRATIONS, apply_schema

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert apply_schema(conn, MIGRATIONS[:2]) == ["0001_versioned_core", "0002_memory_model"]
    code, out, _ = run(capsys, "storage", "init", postgres_url)
    assert code == 0 and out.splitlines()[0] == "applied: " + ", ".join(name for name, _ in MIGRATIONS[2:])


def test_add_member_creates_the_login_role_and_grants_membership(postgres_url, capsys):
    run(capsys, "storage", "init", postgres_url)
    code, out, _ = run(capsys, "storage", "add-member", "carol", "--url", postgres_url)
    assert code == 0 and "created LOGIN role carol" in out and "granted memory_anchor_member" in out

    code, out, _ = run(capsys, "storage", "add-member", "carol", "--url", postgres_url)
    assert code == 0 and "role carol exists" in out and "already a member" in out
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT pg_has_role('carol', 'memory_anchor_member', 'MEMBER')").fetchone()[0]


def test_add_member_refuses_a_role_name_that_postgresql_would_fold(postgres_url, capsys):
    run(capsys, "storage", "init", postgres_url)
    code, _, err = run(capsys, "storage", "add-member", "Alice", "--url", postgres_url)
    assert code == 1 and "lower-case" in err


def test_add_member_before_init_says_to_run_init(postgres_url, capsys):
    code, _, err = run(capsys, "storage", "add-member", "dave", "--url", postgres_url)
    assert code == 1 and "storage init" in err


@pytest.mark.parametrize(
    "url, expected",
    [
        ("mysql://root@127.0.0.1/team", "is not a PostgreSQL URL"),
        ("postgresql://postgres@127.0.0.1:5432", "names no database"),
        ("postgresql://postgres@127.0.0.1:99999/team", "not a usable PostgreSQL URL"),
    ],
)
def test_a_bad_url_is_refused_before_connecting(url, expected, capsys):
    code, _, err = run(capsys, "storage", "init", url)
    assert code == 1 and expected in err


def test_an_unreachable_server_is_named_in_the_error(capsys):
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/team"
    code, _, err = run(capsys, "storage", "init", url)
    assert code == 1 and "cannot connect to PostgreSQL at" in err and str(url.split(":")[2].split("/")[0]) in err


def test_a_role_without_rights_is_told_to_use_the_owner(postgres_cluster, postgres_url, capsys):
    with psycopg.connect(postgres_cluster.url(), autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS nobody_special")
        conn.execute("CREATE ROLE nobody_special LOGIN")
    database = postgres_url.rsplit("/", 1)[1]
    code, _, err = run(capsys, "storage", "init", postgres_cluster.url(database, user="nobody_special"))
    assert code == 1 and "lacks the right" in err and "database owner" in err


@pytest.mark.parametrize(
    "url",
    ["postgresql://alice:s3cret@db.internal:5432/team", "postgresql://alice@db.internal/team?password=s3cret&sslmode=require"],
)
def test_settings_never_print_a_password_in_the_storage_url(url, monkeypatch, tmp_path, capsys):
    """The README says to keep passwords in ~/.pgpass or PGPASSWORD; one put in the URL anyway stays off the screen."""
    monkeypatch.setenv("MEMORY_ANCHOR_STORAGE_URL", url)
    code, out, _ = run(capsys, "--data-dir", str(tmp_path), "settings")
    assert code == 0 and "s3cret" not in out
    assert "storage_url = 'postgresql://alice" in out and "***" in out and "db.internal" in out
    code, out, _ = run(capsys, "--data-dir", str(tmp_path), "--json", "settings")
    shown = json.loads(out)["storage_url"]
    assert "s3cret" not in shown and "***" in shown and shown.startswith("postgresql://alice")
    assert "sslmode=require" in shown or "5432" in shown  # everything but the password is kept


def test_the_storage_url_setting_is_empty_or_a_postgresql_url(monkeypatch, tmp_path):
    from memory_anchor.schemas.settings import Settings, SettingsError, load_settings

    assert Settings().storage_url == ""
    assert Settings(storage_url=" postgresql://alice@db/team ").storage_url == "postgresql://alice@db/team"
    with pytest.raises(ValueError, match="postgresql://"):
        Settings(storage_url="mysql://alice@db/team")
    monkeypatch.setenv("MEMORY_ANCHOR_STORAGE_URL", "sqlite:///x")
    with pytest.raises(SettingsError, match="storage_url"):
        load_settings(tmp_path, write_defaults=False)


def test_an_owner_who_is_not_a_superuser_can_init_and_add_members(postgres_cluster, capsys):
    """As on a managed PostgreSQL: the team's database belongs to a role with CREATEROLE only."""
    database, owner = database_owned_by_a_non_superuser(postgres_cluster, "team_owner")
    try:
        assert run(capsys, "storage", "init", owner)[0] == 0
        assert run(capsys, "storage", "add-member", "erin", "--url", owner)[0] == 0
        with psycopg.connect(postgres_cluster.url(database, user="erin"), autocommit=True) as erin:
            erin.execute(
                "INSERT INTO records(id, version, kind, text, happened_at, created_at) VALUES ('e', 1, 'fact', 'hi', 0, 0)"
            )
            assert erin.execute("SELECT author, private FROM records").fetchall() == [("erin", False)]
        with psycopg.connect(owner) as conn:  # FORCE: the owner is no member, so it reads nothing
            assert conn.execute("SELECT count(*) FROM records").fetchone()[0] == 0
    finally:
        postgres_cluster.drop_database(database)
