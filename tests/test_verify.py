"""`memory-anchor verify [--fix]` (issue 27 item 4): every memory of a project checked against its working tree.

A real git repository, a real worker fed a session through the hook-event door
(the files on disk change as the session's tools change them), then commits
outside any session: a file deleted, one moved, one rewritten, one untouched,
a next step done. verify names each stale memory and why, leaves the memories
of the untouched file alone, and lists the step; --fix demotes the fact whose
file is gone and closes the step with its commit. The worker runs with
`code_checks` off, so its git watch, which writes the same when HEAD moves,
leaves that to --fix (verify checks whatever the setting says).
"""

from __future__ import annotations

import os
import subprocess
import sys
from urllib.parse import quote

import pytest

from tests.conftest import ROOT, _backend_env, start_worker, worker_env
from memory_anchor.bench.gitrepo import GitRepo

pytestmark = pytest.mark.both_backends

PRICE = "def price(amount, rate):\n    return round(amount * rate)\n"
PRICE_FIXED = "def price(amount, rate):\n    return round(amount * (1 + float(rate)), 2)\n"


def cli(worker, cwd, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "MEMORY_ANCHOR_"))}
    env.update(MEMORY_ANCHOR_DATA_DIR=str(worker.data_dir), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "memory_anchor.cli.main", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def post(worker, root: str, session: str, name: str, **fields) -> None:
    worker.post("/api/v1/events", {"session_id": session, "transcript_path": f"/tmp/.claude/projects/x/{session}.jsonl",
                                   "cwd": root, "hook_event_name": name, **fields}, expect=202)  # fmt: skip
    worker.wait_idle()  # the worker reads each file as the session left it at that tool use


def read(worker, repo: GitRepo, session: str, path: str, n: int) -> None:
    content = (repo.root / path).read_text()
    full = str(repo.root.resolve() / path)
    post(worker, str(repo.root.resolve()), session, "PostToolUse", tool_name="Read", tool_use_id=f"toolu_{session}_{n}",
         tool_input={"file_path": full},
         tool_response={"type": "text", "file": {"filePath": full, "content": content, "numLines": content.count("\n"),
                                                  "startLine": 1, "totalLines": content.count("\n")}})  # fmt: skip


@pytest.fixture
def worker(request, tmp_path, worker_backend):
    """A fresh worker whose automatic code checks are off: what --fix writes is its own."""
    data_dir = tmp_path / "data"
    env = _backend_env(request, worker_backend, data_dir) or worker_env(data_dir)
    running = start_worker(data_dir, env={**env, "MEMORY_ANCHOR_CODE_CHECKS": "false"})
    yield running
    running.stop()


@pytest.fixture
def project(worker, tmp_path):
    repo = GitRepo(tmp_path / "shop")
    repo.commit("Start the shop", files={"src/price.py": PRICE, "config/settings.toml": "tax_rate = '0.2'\n",
                                         "docs/guide.md": "# Guide\nRun `make`.\n", "README.md": "# Shop\n",
                                         "src/tax.py": "RATE = 0.2\n"})  # fmt: skip
    root, session = str(repo.root.resolve()), "s-verify"
    post(worker, root, session, "SessionStart", source="startup")
    post(worker, root, session, "UserPromptSubmit", prompt="fix the price with tax", permission_mode="default")
    for n, path in enumerate(["README.md", "config/settings.toml", "docs/guide.md", "src/price.py"]):
        read(worker, repo, session, path, n)
    (repo.root / "src/price.py").write_text(PRICE_FIXED)
    post(worker, root, session, "PostToolUse", tool_name="Edit", tool_use_id=f"toolu_{session}_edit",
         tool_input={"file_path": f"{root}/src/price.py", "old_string": "round(amount * rate)",
                     "new_string": "round(amount * (1 + float(rate)), 2)"},
         tool_response={"filePath": f"{root}/src/price.py"})  # fmt: skip
    post(worker, root, session, "Stop", stop_hook_active=False, last_assistant_message=(
        "Fixed the price with tax in src/price.py.\n\nRoot cause: the tax_rate in config/settings.toml is a string, "
        "so `price` multiplied by text.\n\nNext steps:\n- add a tax_rate range check to src/tax.py"))  # fmt: skip
    post(worker, root, session, "SessionEnd", reason="other")
    repo.commit("Save the price fix", files={})  # the session's own work, committed as it left it
    return repo


def test_verify_names_what_is_stale_and_why_and_fix_acts_on_it(worker, project):
    repo, root = project, str(project.root.resolve())
    repo.commit("Settings move into pyproject", files={"config/settings.toml": None, "pyproject.toml": "[tool.shop]\n"})
    repo.git("mv", "docs/guide.md", "handbook.md")
    repo.commit("Move the guide")
    repo.commit("Rewrite price", files={"src/price.py": "from decimal import Decimal\n\n\ndef price(amount, rate):\n"
                                                        "    return (Decimal(amount) * (1 + Decimal(rate))).quantize(Decimal('0.01'))\n"})  # fmt: skip
    did = repo.commit("Add tax_rate range check", files={"src/tax.py": "RATE = 0.2\nassert 0 <= RATE < 1  # tax_rate range\n"})

    shown = cli(worker, root, "verify")
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "config/settings.toml deleted since" in out and "docs/guide.md moved to handbook.md" in out
    assert "the edit to src/price.py is no longer in the file" in out
    assert "README" not in out  # the untouched file's memory holds: not listed
    assert f"done by commit {did[:8]} (Add tax_rate range check): add a tax_rate range check to src/tax.py" in out

    report = worker.post("/api/v1/verify", {"project": root, "include_fresh": True})
    fresh_lines = [m["line"] for m in report["fresh"]]
    assert any("README.md" in line for line in fresh_lines) and report["states"]["fresh"] == len(fresh_lines)
    assert not any("README.md" in m["line"] for m in report["stale"]) and not report["fixed"]
    [fact] = [m for m in report["stale"] if m["kind"] == "fact"]
    assert fact["freshness"]["state"] == "deleted"
    assert worker.get(f"/api/v1/next-steps?project={quote(root)}")["results"]  # a dry run closes nothing

    fixed = cli(worker, root, "verify", "--fix")
    assert fixed.returncode == 0 and "1 facts demoted for re-verification" in fixed.stdout and "1 steps closed" in fixed.stdout
    assert worker.get(f"/api/v1/facts/{fact['id']}")["needs_verification"] is True
    [closed] = worker.get(f"/api/v1/next-steps?project={quote(root)}&status=closed")["results"]
    assert closed["closed_by_commit"]["commit"] == did


def test_outside_git_verify_says_why_nothing_was_checked(worker, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    report = worker.post("/api/v1/verify", {"cwd": str(plain)})
    assert report["why_unknown"] == "the project is not in a git repository here" and report["checked"] == 0
    status, body = worker.request("POST", "/api/v1/verify", {"fix": "yes please"})
    assert status == 422 and "fix" in str(body)  # bad input: a clear error, nothing done
