"""A newcomer's first commands, as they type them, against a real worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "/tmp/ma-first-steps"


def cli(worker, *args, cwd=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "MEMORY_ANCHOR_"))}
    env.update(MEMORY_ANCHOR_DATA_DIR=str(worker.data_dir), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "memory_anchor.cli.main", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def test_json_is_taken_before_or_after_the_command(shared_worker):
    shared_worker.post("/api/v1/memories", {"messages": [{"role": "user", "content": "The staging database is on port 5433"}],
                                            "infer": False, "user_id": "first-steps"})  # fmt: skip
    shared_worker.wait_idle()
    after = cli(shared_worker, "search", "staging database port", "--json")
    before = cli(shared_worker, "--json", "search", "staging database port")
    assert after.returncode == 0, after.stderr
    assert json.loads(after.stdout) == json.loads(before.stdout)
    assert any("5433" in hit["memory"] for hit in json.loads(after.stdout))
    plain = cli(shared_worker, "search", "staging database port")
    assert not plain.stdout.lstrip().startswith("[")  # text, not JSON, when not asked


def test_get_and_history_take_the_eight_characters_search_prints(shared_worker):
    added = shared_worker.post("/api/v1/memories", {"messages": [{"role": "user", "content": "Deploys go out on Tuesdays"}],
                                                    "infer": False, "user_id": "first-steps"})  # fmt: skip
    whole = added["results"][0]["id"]
    shared_worker.wait_idle()
    printed = cli(shared_worker, "search", "which day do deploys go out").stdout
    assert whole[:8] in printed
    got = cli(shared_worker, "get", whole[:8])
    assert got.returncode == 0, got.stderr
    assert "Deploys go out on Tuesdays" in got.stdout
    history = cli(shared_worker, "--json", "history", whole[:8])
    assert [v["memory"] for v in json.loads(history.stdout)] == ["Deploys go out on Tuesdays"]
    missing = cli(shared_worker, "get", "ffffffff")
    assert missing.returncode == 1 and "not found" in missing.stderr


def test_briefing_prints_what_a_session_here_is_told(shared_worker):
    shared_worker.post("/api/v1/facts", {"text": "The API is served by gunicorn behind nginx", "confidence": 0.95,
                                         "project": PROJECT}, expect=201)  # fmt: skip
    shown = cli(shared_worker, "briefing", "--project", PROJECT)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == shared_worker.get(f"/api/v1/context?project={quote(PROJECT)}")["context"] + "\n"
    assert "gunicorn behind nginx" in shown.stdout
    as_json = json.loads(cli(shared_worker, "briefing", "--project", PROJECT, "--json").stdout)
    assert as_json["context"] + "\n" == shown.stdout and as_json["tokens"] > 0


def test_doctor_in_a_checkout_finds_the_environment_make_run_uses(shared_worker):
    """`make run` then `.venv/bin/memory-anchor doctor`: the checkout's own environment runs the worker."""
    done = cli(shared_worker, "--data-dir", str(shared_worker.data_dir), "doctor")
    assert "ok    environment: this Python" in done.stdout, done.stdout
    assert "FAIL  environment" not in done.stdout
    assert f"answers on 127.0.0.1:{shared_worker.port}" in done.stdout
