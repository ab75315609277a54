"""The workers the tests start are forked from a forker that has made their imports
(tests/worker_forks.py): each is still the worker for its own data dir and environment,
and says how it ended as a process started with `python -m memory_anchor.worker run` would."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from tests import worker_forks
from tests.conftest import ROOT, start_worker, worker_env

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="the forker needs Linux's /proc")


def test_a_forked_worker_serves_its_own_data_dir_and_shows_it_on_its_command_line(tmp_path, monkeypatch):
    monkeypatch.delenv("TEST_WORKER_FORKS", raising=False)
    worker = start_worker(tmp_path / "data")
    try:
        assert isinstance(worker.process, worker_forks.ForkedWorker)
        assert worker.get("/api/health", token=None)["pid"] == worker.process.pid
        assert json.loads((tmp_path / "data" / "worker.json").read_text())["pid"] == worker.process.pid
        assert worker.get("/api/v1/status")["data_dir"] == str(tmp_path / "data")
        command = Path(f"/proc/{worker.process.pid}/cmdline").read_bytes().split(b"\0")
        assert [part.decode() for part in command if part][1:] == ["-m", "memory_anchor.worker", "run", "--data-dir",
                                                                   str(tmp_path / "data"), "--port", "0"]  # fmt: skip
        assert worker.process.poll() is None
    finally:
        code = worker.stop()
    assert code == 0 and worker.process.poll() == 0  # SIGTERM: a clean shutdown
    assert not (tmp_path / "data" / "worker.json").exists()


def test_each_forked_worker_runs_with_the_environment_its_test_gave(tmp_path):
    budget = start_worker(tmp_path / "a", env=worker_env(tmp_path / "a", MEMORY_ANCHOR_LLM_DAILY_TOKEN_BUDGET="1234",
                                                           ANTHROPIC_API_KEY="sk-ant-fake"))  # fmt: skip
    plain = start_worker(tmp_path / "b")
    try:
        first, second = budget.get("/api/v1/status")["llm"], plain.get("/api/v1/status")["llm"]
        assert first["daily_token_budget"] == 1234 and first["route"] == "api"
        assert second["daily_token_budget"] != 1234 and second["route"] == "local"
    finally:
        budget.stop()
        plain.stop()


def test_a_killed_worker_reports_the_signal_as_popen_would(tmp_path):
    worker = start_worker(tmp_path / "data")
    worker.process.send_signal(signal.SIGKILL)
    assert worker.process.wait(30) == -signal.SIGKILL
    assert worker.stop() == -signal.SIGKILL


def test_without_forks_the_worker_is_started_as_python_m_worker_run(tmp_path, monkeypatch):
    import subprocess

    monkeypatch.setenv("TEST_WORKER_FORKS", "0")
    worker = start_worker(tmp_path / "data")
    try:
        assert isinstance(worker.process, subprocess.Popen)
        assert worker.get("/api/health", token=None)["pid"] == worker.process.pid
    finally:
        assert worker.stop() == 0


def test_a_worker_given_what_an_interpreter_reads_at_start_is_started_plainly(tmp_path):
    """A fork has started long before: a PYTHONPATH of the test's own (here a sitecustomize) would
    be ignored, so that worker is started as `python -m memory_anchor.worker run`, and the file takes effect."""
    import subprocess

    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(f"open({str(site / 'read')!r}, 'w').close()\n")
    data = tmp_path / "data"
    worker = start_worker(data, env=worker_env(data, PYTHONPATH=f"{ROOT}{os.pathsep}{site}"))
    try:
        assert isinstance(worker.process, subprocess.Popen)
        assert (site / "read").exists()
    finally:
        assert worker.stop() == 0
