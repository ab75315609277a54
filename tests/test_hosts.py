"""DNS rebinding: a real worker serves only requests addressed to its own loopback name."""

from __future__ import annotations

import http.client
import json

import pytest

from memory_anchor.worker.api.hosts import allowed_hosts, host_name


def send(worker, path: str, headers: dict[str, str], method: str = "GET", body: bytes | None = None):
    """(status, parsed body) for one request with exactly these headers (Host included)."""
    conn = http.client.HTTPConnection("127.0.0.1", worker.port, timeout=30)
    conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    for name, value in headers.items():
        conn.putheader(name, value)
    if body is not None:
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", str(len(body)))
    conn.endheaders(body)
    response = conn.getresponse()
    raw = response.read()
    conn.close()
    try:
        return response.status, json.loads(raw)
    except ValueError:
        return response.status, raw


def test_a_foreign_host_is_refused_even_with_the_token(shared_worker):
    auth = {"Authorization": f"Bearer {shared_worker.token}"}
    status, body = send(shared_worker, "/api/v1/status", {"Host": "evil.example", "Origin": "http://evil.example", **auth})
    assert status == 403
    assert body["error"]["code"] == "invalid_host"
    assert "evil.example" in body["error"]["message"]
    # A write is refused before it is read: nothing is stored.
    event = json.dumps({"hook_event_name": "SessionStart", "session_id": "rebound"}).encode()
    status, _ = send(shared_worker, "/api/v1/events", {"Host": f"evil.example:{shared_worker.port}", **auth}, "POST", event)
    assert status == 403
    # The page and its assets too: a rebound page must not even load the viewer.
    assert send(shared_worker, "/", {"Host": "evil.example"})[0] == 403
    assert send(shared_worker, "/static/viewer.js", {"Host": "127.0.0.1.evil.example"})[0] == 403


def test_a_foreign_origin_is_refused_on_the_right_host(shared_worker):
    auth = {"Authorization": f"Bearer {shared_worker.token}"}
    host = {"Host": f"127.0.0.1:{shared_worker.port}"}
    status, body = send(shared_worker, "/api/v1/status", {**host, "Origin": "http://evil.example", **auth})
    assert (status, body["error"]["code"]) == (403, "invalid_origin")
    assert send(shared_worker, "/api/v1/status", {**host, "Origin": "null", **auth})[0] == 403


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost", "LOCALHOST"])
def test_the_workers_own_names_are_served(shared_worker, name: str):
    auth = {"Authorization": f"Bearer {shared_worker.token}"}
    for host in (name, f"{name}:{shared_worker.port}"):
        origin = f"http://{host}"
        status, body = send(shared_worker, "/api/v1/status", {"Host": host, "Origin": origin, **auth})
        assert status == 200, body
    assert send(shared_worker, "/", {"Host": f"{name}:{shared_worker.port}"})[0] == 200


def test_host_names_are_parsed_with_and_without_ports():
    assert host_name("127.0.0.1:37777") == "127.0.0.1"
    assert host_name("[::1]:80") == "::1"
    assert host_name("::1") == "::1"
    assert host_name("LocalHost") == "localhost"
    assert allowed_hosts("127.0.0.1") == {"127.0.0.1", "localhost"}
    assert allowed_hosts("::1") == {"::1", "localhost"}
    assert "127.0.0.1" in allowed_hosts("localhost")
