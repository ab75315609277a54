"""`memory-anchor identity|approvals|conflicts` as a user runs them, against a real worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "/tmp/ma-cli-project"

pytestmark = pytest.mark.both_backends


@pytest.fixture
def worker(shared_worker):
    return shared_worker  # one worker for the module: starting one costs seconds


def cli(worker, *args, env_extra=None, stdin=""):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "MEMORY_ANCHOR_"))}
    env.update(MEMORY_ANCHOR_DATA_DIR=str(worker.data_dir), PYTHONPATH=str(ROOT), **(env_extra or {}))
    return subprocess.run([sys.executable, "-m", "memory_anchor.cli.main", *args], env=env, input=stdin,
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def test_identity_commands(worker):
    refused = cli(worker, "identity", "add", "Goal: memory", "--project", PROJECT)
    assert refused.returncode == 1 and "--yes" in refused.stderr  # no terminal, no --yes: nothing written
    inside = cli(worker, "identity", "add", "Goal: memory", "--project", PROJECT, "--yes", env_extra={"CLAUDECODE": "1"})
    assert inside.returncode == 1 and "propose_identity_change" in inside.stderr
    assert worker.get(f"/api/v1/identity?project={PROJECT}")["results"] == []
    added = cli(worker, "--json", "identity", "add", "Goal: memory", "--project", PROJECT, "--priority", "0", "--yes")
    assert added.returncode == 0, added.stderr
    assert "confirmations are skipped" in added.stderr
    item = json.loads(added.stdout)
    listed = cli(worker, "identity", "list", "--project", PROJECT)
    assert item["id"][:8] in listed.stdout and "Goal: memory" in listed.stdout
    assert cli(worker, "identity", "edit", item["id"][:8], "--content", "Goal: memory for agents", "--project", PROJECT, "--yes").returncode == 0
    assert cli(worker, "identity", "remove", item["id"], "--yes").returncode == 0
    assert "Goal" not in cli(worker, "identity", "list", "--project", PROJECT).stdout
    assert "[removed]" in cli(worker, "identity", "list", "--project", PROJECT, "--removed").stdout
    assert cli(worker, "identity", "restore", item["id"], "--yes").returncode == 0
    history = cli(worker, "identity", "history", item["id"]).stdout
    assert history.count("human:") == 4 and "RESTORE" in history


def test_approvals_and_conflicts_commands(worker):
    proposal = worker.post("/api/v1/identity/proposals", {"content": "Rule: tests first", "reason": "team rule", "project": PROJECT},
                           expect=202, headers={"X-Memory-Anchor-Agent": "claude-code"})
    fact = worker.post("/api/v1/facts", {"text": "Maybe cache search results", "confidence": 0.8, "project": PROJECT}, expect=201)
    listed = cli(worker, "approvals", "list")
    assert f"#{proposal['approval_id']} identity_change/add" in listed.stdout and "Maybe cache search results" in listed.stdout
    inside = cli(worker, "approvals", "approve", str(proposal["approval_id"]), "--yes", env_extra={"CLAUDECODE": "1"})
    assert inside.returncode == 1
    no_yes = cli(worker, "approvals", "approve", str(proposal["approval_id"]))
    assert no_yes.returncode == 1 and "three confirmations" in no_yes.stderr
    assert cli(worker, "approvals", "approve", str(proposal["approval_id"]), "--yes").returncode == 0
    assert cli(worker, "approvals", "reject", str(fact["approval_id"]), "--note", "not now").returncode == 0
    assert cli(worker, "approvals").stdout.strip() == "nothing waits for approval"
    assert "Rule: tests first" in cli(worker, "identity", "list", "--project", PROJECT).stdout
    assert cli(worker, "conflicts").stdout.strip() == "no open conflicts"
    bad = cli(worker, "conflicts", "resolve", "42", "keep_new")
    assert bad.returncode == 1 and "not found" in bad.stderr


def test_triple_confirmation_prompts(monkeypatch):
    from memory_anchor.cli import human
    from memory_anchor.client.worker_client import WorkerError

    monkeypatch.setattr(human.sys.stdin, "isatty", lambda: True, raising=False)
    answers = iter(["y", "yes", "y"])
    asked = []
    monkeypatch.setattr("builtins.input", lambda prompt: asked.append(prompt) or next(answers))
    assert human.confirm_three_times("add to", False) == 3
    assert [p.split(":")[0] for p in asked] == ["Confirmation 1/3", "Confirmation 2/3", "Confirmation 3/3"]
    answers = iter(["y", "n"])
    with pytest.raises(WorkerError, match="cancelled"):
        human.confirm_three_times("remove from", False)
