"""WorkerClient keeps one connection a thread to the worker, and never sends on one it cannot trust.

A new TCP connection for every call cost the worker about 0.25 ms of CPU and the caller 0.2 ms: a
few per cent of a mem0 add (`memory-anchor bench ingest`). Real worker, real sockets.
"""

from __future__ import annotations

import io
import socket

import pytest

from memory_anchor.client.worker_client import WorkerClient, WorkerError, _closed_by_peer
from tests.conftest import in_threads, start_worker


def local_port(client: WorkerClient) -> int:
    return client._held.connection[1].sock.getsockname()[1]


def test_calls_share_one_connection_errors_included(shared_worker):
    client = WorkerClient(shared_worker.data_dir, autostart=False)
    client.add("Ina deploys with ops/deploy.sh", user_id="ina", infer=False)
    port = local_port(client)
    for n in range(5):
        client.add(f"note {n}", user_id="ina", infer=False)
    with pytest.raises(WorkerError) as missing:
        client.get_memory("no-such-memory")
    assert missing.value.status == 404
    assert client.get("/api/health")["status"] == "ok"
    assert local_port(client) == port  # the same connection all along, the error's answer read whole

    # A download broken off halfway leaves its answer unread: that connection is not used again.
    class Full(io.BytesIO):
        def write(self, chunk):
            raise OSError("disk full")

    with pytest.raises(OSError):
        client.download("/api/v1/export", Full(), chunk_size=16)
    assert client.get("/api/health")["status"] == "ok"
    assert local_port(client) != port


def test_each_thread_has_its_own_connection(shared_worker):
    client = WorkerClient(shared_worker.data_dir, autostart=False)
    ports: dict[int, set[int]] = {}

    def work(n: int) -> None:
        for k in range(10):
            added = client.add(f"thread {n} note {k}", user_id=f"t{n}", infer=False)
            assert added["results"][0]["memory"] == f"thread {n} note {k}"
            ports.setdefault(n, set()).add(local_port(client))

    in_threads(work, [(n,) for n in range(4)])
    assert all(len(used) == 1 for used in ports.values())
    assert len({next(iter(used)) for used in ports.values()}) == 4


def test_a_restarted_worker_is_reached_on_a_new_connection_and_a_stopped_one_is_an_error(tmp_path):
    data = tmp_path / "data"
    first = start_worker(data)
    client = WorkerClient(data, autostart=False)
    try:
        assert client.get("/api/health")["pid"] == first.process.pid
    finally:
        first.stop()
    second = start_worker(data)
    try:
        assert client.get("/api/health")["pid"] == second.process.pid  # the kept connection is not written to
    finally:
        second.stop()
    with pytest.raises(WorkerError) as down:
        client.get("/api/health")
    assert "cannot reach the worker" in str(down.value) or "no worker is running" in str(down.value)


def test_a_connection_the_peer_closed_is_seen_before_it_is_used():
    ours, theirs = socket.socketpair()
    try:
        assert not _closed_by_peer(ours)  # idle and open: nothing to read
        theirs.close()
        assert _closed_by_peer(ours)  # the end of the stream waits to be read
    finally:
        ours.close()
