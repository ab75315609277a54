"""The PostgreSQL the tests start: loopback only, and never silently missing under CI."""

from __future__ import annotations

import psycopg
import pytest

from memory_anchor.bench import postgres_cluster
from tests import postgres


def test_the_test_server_listens_on_loopback_only(postgres_cluster, postgres_url):
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SHOW listen_addresses").fetchone()[0] == "127.0.0.1"
        socket_dir = conn.execute("SHOW unix_socket_directories").fetchone()[0]
    assert socket_dir == str(postgres_cluster.base)


def test_missing_binaries_skip_on_a_developers_machine(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(postgres_cluster, "find_bin_dir", lambda: None)
    with pytest.raises(pytest.skip.Exception, match="server binaries"):
        postgres.start_cluster()


def test_missing_binaries_fail_under_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    monkeypatch.setattr(postgres_cluster, "find_bin_dir", lambda: None)
    with pytest.raises(pytest.fail.Exception, match="server binaries"):
        postgres.start_cluster()
