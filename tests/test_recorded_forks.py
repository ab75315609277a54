"""Forks, resumes and continues as the real Claude Code CLIs send them (tests/fixtures/forks, recorded).

Each version's recording holds four `claude -p` runs in one project: a session
S1, `--resume S1 --fork-session`, `--resume S1` and `--continue`, with every
payload the hooks got and what each hook's process knew of the `claude`
process. The SessionStart hook names the fork and its parent from exactly that
(memory_anchor/hookkit/forks.py); a real worker then gets the same calls and
payloads a hook would send, in the same order, and puts the fork, and only the
fork, on its own branch.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import pytest

from memory_anchor.hookkit.forks import env_file_session, fork_of, resumed_session

FIXTURES = Path(__file__).parent / "fixtures" / "forks"
VERSIONS = ["2.1.197", "2.1.332"]
STEPS = ["parent", "fork", "resume", "continue"]


def recorded(version: str, step: str) -> list[tuple[dict, dict]]:
    """(payload, what the hook's process knew) for each hook call of one step, in order."""
    folder = FIXTURES / version
    payloads = [json.loads(line) for line in (folder / f"{step}.ndjson").read_text().splitlines() if line.strip()]
    known = [json.loads(line) for line in (folder / f"{step}.env.ndjson").read_text().splitlines() if line.strip()]
    assert [p["hook_event_name"] for p in payloads] == [k["hook_event_name"] for k in known]
    return list(zip(payloads, known))


def sessions(version: str) -> dict[str, str]:
    return json.loads((FIXTURES / version / "sessions.json").read_text())


def link(payload: dict, known: dict) -> tuple[str, str] | None:
    """What the SessionStart hook finds, given what its process knew when Claude Code ran it."""
    return fork_of(payload, known, read_command_line=lambda environ: known["claude_argv"])


@pytest.mark.parametrize("version", VERSIONS)
def test_the_session_start_hook_names_the_fork_and_its_parent_and_nothing_else(version):
    ids = sessions(version)
    assert ids["resume"] == ids["continue"] == ids["parent"] != ids["fork"]  # resume and continue keep the id
    for step in STEPS:
        starts = [(p, k) for p, k in recorded(version, step) if p["hook_event_name"] == "SessionStart"]
        assert len(starts) == 1
        expected = (ids["fork"], ids["parent"]) if step == "fork" else None
        assert link(*starts[0]) == expected, step


def test_what_each_version_tells_a_forks_session_start():
    old_payload, old_known = recorded("2.1.197", "fork")[0]
    new_payload, new_known = recorded("2.1.332", "fork")[0]
    # 2.1.197: the parent's payload; the fork is named only by the hook's environment file.
    assert (old_payload["session_id"], old_payload["source"]) == (sessions("2.1.197")["parent"], "resume")
    assert env_file_session(old_known["CLAUDE_ENV_FILE"]) == sessions("2.1.197")["fork"]
    # ... and a --continue names a fresh id there too, so the command line decides.
    continued = recorded("2.1.197", "continue")[0][1]
    assert env_file_session(continued["CLAUDE_ENV_FILE"]) not in (None, *sessions("2.1.197").values())
    # 2.1.332: the fork's own payload with source "fork"; its parent is on claude's command line.
    assert (new_payload["session_id"], new_payload["source"]) == (sessions("2.1.332")["fork"], "fork")
    assert resumed_session(new_known["claude_argv"]) == sessions("2.1.332")["parent"]
    assert resumed_session(["claude", "-p", "--resume", "S1", "hi"]) is None  # a plain resume is no fork
    assert resumed_session(["claude", "--fork-session", "--resume=S1"]) == "S1"


@pytest.mark.parametrize("version", VERSIONS)
def test_a_worker_fed_the_recorded_sessions_puts_only_the_fork_on_its_own_branch(worker, version):
    ids = sessions(version)
    for step in STEPS:
        for payload, known in recorded(version, step):
            if payload["hook_event_name"] == "SessionStart" and (found := link(payload, known)):
                fork, parent = found
                worker.post(f"/api/v1/sessions/{fork}/fork", {"parent_session_id": parent})
            status, body = worker.request("POST", "/api/v1/events", payload)
            assert status == 202, body
        # Between two runs the worker is done with the last (a fork made from the parent's
        # branch while the parent's last events still wait in the inbox would not see them).
        worker.wait_idle()

    fork, parent = ids["fork"], ids["parent"]
    assert worker.get(f"/api/v1/sessions/{fork}/branch") == {"session_id": fork, "branch": f"fork/{fork}", "chosen_by": "fork"}
    assert worker.get(f"/api/v1/sessions/{parent}/branch")["branch"] == "main"
    assert worker.get(f"/api/v1/branches/fork/{fork}")["parent"] == "main"
    assert {b["name"] for b in worker.get("/api/v1/branches")["results"]} == {"main", f"fork/{fork}"}

    def commands(branch: str) -> set[str]:
        found = worker.get(f"/api/v1/observations?branch={quote(branch)}&limit=50")["results"]
        return {observation["data"].get("command") for observation in found}

    # The fork's tool use is on its branch only; the parent's later ones (resume, continue) stay on main.
    assert {"echo parent", "echo fork"} <= commands(f"fork/{fork}")
    assert "echo fork" not in commands("main") and {"echo parent", "echo resume", "echo continue"} <= commands("main")


def test_a_fork_told_twice_or_of_itself(worker):
    first = worker.post("/api/v1/sessions/F1/fork", {"parent_session_id": "S1"})
    assert first == {"session_id": "F1", "branch": "fork/F1", "chosen_by": "fork"}
    assert worker.post("/api/v1/sessions/F1/fork", {"parent_session_id": "S2"}) == first  # the first word stands
    status, body = worker.request("POST", "/api/v1/sessions/S1/fork", {"parent_session_id": "S1"})
    assert status == 400 and "differ" in json.dumps(body)
    status, body = worker.request("POST", "/api/v1/sessions/S1/fork", {"parent": "S0"})
    assert status == 422 and "parent_session_id" in json.dumps(body), body  # the wire model names the field it wants


def test_a_forks_recall_reads_its_branch_from_its_first_prompt(worker):
    """Told of the fork at SessionStart, the worker reads the fork's branch (made from the parent's)
    for its first prompt's recall, before any of the fork's events is processed."""
    project = "/tmp/forks/recall"
    worker.post("/api/v1/branches/switch", {"session_id": "S1", "branch": "experiment", "create": True})
    said = "From now on always tag each release with its date."
    status, body = worker.request("POST", "/api/v1/events", {"hook_event_name": "UserPromptSubmit", "session_id": "S1",
                                                             "cwd": project, "prompt": said})  # fmt: skip
    assert status == 202, body
    worker.wait_idle()
    worker.post("/api/v1/sessions/F1/fork", {"parent_session_id": "S1"})
    assert worker.get("/api/v1/branches/fork/F1")["parent"] == "experiment"

    def recall(session_id: str) -> str:
        return worker.post("/api/v1/recall", {"prompt": "how should we tag a release?", "project": project,
                                              "session_id": session_id})["context"]  # fmt: skip

    assert "tag each release with its date" in recall("F1")
    assert "tag each release with its date" not in recall("S9")  # a session nobody announced reads main


def test_the_hook_finds_claudes_arguments_among_its_ancestors(tmp_path):
    """2.1.197 sets no CLAUDE_PID: the hook runs under a shell, and the first ancestor whose
    arguments hold --fork-session is taken for `claude` (here a shell started with that flag)."""
    import subprocess
    import sys

    code = "import json, os; from memory_anchor.hookkit.forks import claude_command_line; print(json.dumps(claude_command_line({})))"
    script = f"{sys.executable} -c '{code}'"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    forked = subprocess.run(["sh", "-c", f"{script}; true", "claude", "--resume", "S1", "--fork-session"], env=env,
                            capture_output=True, text=True, timeout=30)  # fmt: skip
    assert json.loads(forked.stdout)[-3:] == ["--resume", "S1", "--fork-session"], forked.stderr
    plain = subprocess.run(["sh", "-c", f"{script}; true", "claude", "--resume", "S1"], env=env,
                           capture_output=True, text=True, timeout=30)  # fmt: skip
    assert json.loads(plain.stdout) == []
