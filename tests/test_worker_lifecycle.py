"""The worker as a process: one per data dir, loopback only, token auth, clean shutdown."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time

from tests.conftest import ROOT, start_worker, wait_for, worker_env


def test_worker_json_is_private_and_names_a_loopback_port(worker):
    info_path = worker.data_dir / "worker.json"
    mode = stat.S_IMODE(info_path.stat().st_mode)
    assert mode == 0o600
    info = json.loads(info_path.read_text())
    assert info["pid"] == worker.process.pid
    assert info["host"] == "127.0.0.1"
    assert len(info["token"]) >= 32
    # Listening on loopback only: the port is not reachable through another interface address.
    with socket.create_connection(("127.0.0.1", worker.port), timeout=2):
        pass


def test_every_route_but_health_needs_the_token(worker):
    assert worker.request("GET", "/api/health", token=None)[0] == 200
    status, body = worker.request("GET", "/api/v1/status", token=None)
    assert status == 401 and body["error"]["code"] == "missing_token"
    status, body = worker.request("GET", "/api/v1/status", token="not-the-token")
    assert status == 401 and body["error"]["code"] == "invalid_token"
    assert worker.request("GET", "/api/v1/status")[0] == 200


def test_second_worker_on_same_data_dir_exits_with_a_clear_message(worker):
    result = subprocess.run(
        [sys.executable, "-m", "memory_anchor.worker", "run", "--data-dir", str(worker.data_dir), "--port", "0"],
        cwd=ROOT, env=worker_env(worker.data_dir), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 3
    assert "already running" in result.stdout
    assert str(worker.process.pid) in result.stdout
    # The first worker is untouched.
    assert worker.get("/api/health", token=None)["pid"] == worker.process.pid


def test_two_workers_started_at_once_one_wins(tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    env = worker_env(data_dir)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "memory_anchor.worker", "run", "--data-dir", str(data_dir), "--port", "0"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        for _ in range(2)
    ]
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and all(p.poll() is None for p in procs):
            time.sleep(0.1)
        losers = [p for p in procs if p.poll() is not None]
        assert len(losers) == 1, "exactly one of the two must give up"
        assert losers[0].returncode == 3
        assert "already running" in losers[0].stdout.read()
        winner = next(p for p in procs if p.poll() is None)
        # The loser gives up as soon as the winner holds the lock; the winner writes worker.json
        # only once it listens, which on a busy machine comes later.
        wait_for(lambda: winner.poll() is not None or data_dir.joinpath("worker.json").exists(), what="worker.json")
        assert winner.poll() is None, "the winner exited"
        assert json.loads((data_dir / "worker.json").read_text())["pid"] == winner.pid
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(20)


def test_stale_pid_and_lock_files_do_not_block_a_start(tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "worker.lock").write_text("999999")
    (data_dir / "worker.json").write_text(json.dumps({"pid": 999999, "port": 1, "token": "x"}))
    running = start_worker(data_dir)
    try:
        assert running.get("/api/health", token=None)["pid"] == running.process.pid
    finally:
        running.stop()


def test_a_taken_port_makes_the_worker_pick_a_free_one(tmp_path):
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen(1)
    taken = blocker.getsockname()[1]
    data_dir = tmp_path / "data"
    env = worker_env(data_dir, MEMORY_ANCHOR_PORT=str(taken))
    data_dir.mkdir()
    process = subprocess.Popen(
        [sys.executable, "-m", "memory_anchor.worker", "run", "--data-dir", str(data_dir)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        info = None
        while time.monotonic() < deadline:
            try:
                info = json.loads((data_dir / "worker.json").read_text())
                break
            except (OSError, ValueError):
                time.sleep(0.05)
        assert info is not None, "worker never wrote worker.json"
        assert info["port"] != taken
        with socket.create_connection(("127.0.0.1", info["port"]), timeout=2):
            pass
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(20)
        blocker.close()


def test_sigterm_shuts_down_cleanly_and_removes_worker_json(tmp_path):
    running = start_worker(tmp_path / "data")
    assert running.stop(signal.SIGTERM) == 0
    assert not (running.data_dir / "worker.json").exists()
    log_lines = (running.data_dir / "logs" / "worker.log").read_text().splitlines()
    entries = [json.loads(line) for line in log_lines]
    assert any(e["message"] == "worker stopped" for e in entries), "structured log records the stop"


def test_non_loopback_host_is_refused(tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "memory_anchor.worker", "run", "--data-dir", str(data_dir)],
        cwd=ROOT, env=worker_env(data_dir, MEMORY_ANCHOR_HOST="0.0.0.0"), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0
    assert "loopback" in (result.stdout + result.stderr)
    assert not (data_dir / "worker.json").exists()


def test_cli_start_status_stop(tmp_path):
    data_dir = tmp_path / "data"
    env = worker_env(data_dir)
    cli = [sys.executable, "-m", "memory_anchor.cli.main", "--data-dir", str(data_dir)]
    started = subprocess.run([*cli, "worker", "start"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=90)
    assert started.returncode == 0, started.stderr
    assert "worker running at http://127.0.0.1:" in started.stdout
    status = subprocess.run([*cli, "--json", "worker", "status"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["running"] is True
    stopped = subprocess.run([*cli, "worker", "stop"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert "worker stopped" in stopped.stdout
    after = subprocess.run([*cli, "worker", "status"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert after.returncode == 1 and "no worker running" in after.stdout
    assert os.path.exists(data_dir / "memory.sqlite3")


def test_a_worker_this_process_started_is_stopped_and_collected(tmp_path, monkeypatch):
    """The SDK and the benchmarks start the worker as their own child: stopping it must
    collect it, not take its zombie (which still answers kill(pid, 0)) for a live worker."""
    from memory_anchor.core import lifecycle

    data_dir = tmp_path / "data"
    for key, value in worker_env(data_dir).items():
        monkeypatch.setenv(key, value)
    info = lifecycle.start_background(data_dir, wait=60)
    assert lifecycle.stop(data_dir) is True
    assert not os.path.exists(f"/proc/{info.pid}"), "the exited worker was left a zombie"
    entries = [json.loads(line) for line in (data_dir / "logs" / "worker.log").read_text().splitlines()]
    assert any(e["message"] == "worker stopped" for e in entries), "it stopped on SIGTERM, cleanly"


class ModelStillLoading:
    """An embedder whose model load has not finished until the test says so."""

    def __init__(self) -> None:
        import threading

        self.loading, self.release = threading.Event(), threading.Event()

    def embed(self, texts):
        self.loading.set()
        self.release.wait(30)
        return [[0.0] * 4 for _ in texts]


def test_stopping_does_not_wait_for_the_warm_up_to_load_the_model_and_no_store_is_touched_after(tmp_path):
    """Every short-lived worker (a `worker stop` soon after a start, the suite's tests) used to wait
    for the embedding model to load at exit; the warm-up's steps on the stores still never overlap
    or follow the close."""
    from memory_anchor.schemas.settings import load_settings
    from memory_anchor.worker.services import Services

    services = Services(tmp_path / "data", load_settings(tmp_path / "data"), token="test")
    embedder = services.__dict__["embedder"] = ModelStillLoading()
    loaded_vectors = []
    services.vectors.load = lambda: loaded_vectors.append(1)
    warm_up = services.warming.submit(services.warm_up)
    assert embedder.loading.wait(30)

    services.close()  # returns while the model is still loading

    assert not warm_up.done()
    embedder.release.set()
    warm_up.result(timeout=30)
    assert loaded_vectors == []  # closed first: the vector index is not loaded after the close


def test_a_worker_stopped_during_its_warm_up_starts_again_with_everything(tmp_path):
    worker = start_worker(tmp_path / "data")
    worker.post("/api/v1/memories", {"messages": [{"role": "user", "content": "The release checklist lives in docs/release.md"}],
                                     "user_id": "dev", "infer": False})  # fmt: skip
    assert worker.stop() == 0
    again = start_worker(tmp_path / "data")
    try:
        again.wait_idle()
        hits = again.post("/api/v1/memories/search", {"query": "where is the release checklist", "filters": {"user_id": "dev"}})
        assert [h["memory"] for h in hits["results"]] == ["The release checklist lives in docs/release.md"]
    finally:
        again.stop()
