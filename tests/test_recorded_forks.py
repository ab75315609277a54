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
from memory_anchor.core.projects import context_cache_path, project_for_cwd
from tests.conftest import tool_use_event

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
        worker.wait_idle()  # a fork right after its parent: test_a_fork_sees_its_parents_events_still_in_the_inbox

    fork, parent = ids["fork"], ids["parent"]
    assert worker.get(f"/api/v1/sessions/{fork}/branch") == {"session_id": fork, "branch": f"fork/{fork}", "chosen_by": "fork"}
    assert worker.get(f"/api/v1/sessions/{parent}/branch")["branch"] == "main"
    assert worker.get(f"/api/v1/branches/fork/{fork}")["parent"] == "main"
    assert {b["name"] for b in worker.get("/api/v1/branches")["results"]} == {"main", f"fork/{fork}"}

    def commands(branch: str) -> set[str]:
        return branch_commands(worker, branch)

    # The fork's tool use is on its branch only; the parent's later ones (resume, continue) stay on main.
    assert {"echo parent", "echo fork"} <= commands(f"fork/{fork}")
    assert "echo fork" not in commands("main") and {"echo parent", "echo resume", "echo continue"} <= commands("main")


def branch_commands(worker, branch: str) -> set[str]:
    """The commands of the tool uses a branch's view holds."""
    found = worker.get(f"/api/v1/observations?branch={quote(branch)}&limit=100")["results"]
    return {observation["data"].get("command") for observation in found}


def test_a_fork_sees_its_parents_events_still_in_the_inbox(worker):
    """`claude --resume S1 --fork-session` right after S1's last tool uses: the worker is told
    of the fork while they still wait in its inbox. The fork's branch is made once they are
    processed, so it holds all its parent did, and the parent's branch has none of the fork."""
    ids = sessions("2.1.332")
    parent, fork = ids["parent"], ids["fork"]
    worker.request("POST", "/api/v1/events", tool_use_event("warm-up", 0))
    worker.wait_idle()  # the pipeline's first pass loads the embedding model: not what is measured here
    last = [tool_use_event(parent, n) for n in range(1, 21)]
    for payload, _known in recorded("2.1.332", "parent"):
        assert worker.request("POST", "/api/v1/events", payload)[0] == 202
    for payload in last:
        assert worker.request("POST", "/api/v1/events", payload)[0] == 202
    assert worker.post(f"/api/v1/sessions/{fork}/fork", {"parent_session_id": parent})["branch"] == f"fork/{fork}"

    parents_commands = {"echo parent"} | {payload["tool_input"]["command"] for payload in last}
    # Read before the fork's own events exist: what the fork's first briefing and recall see.
    assert parents_commands <= branch_commands(worker, f"fork/{fork}")
    for payload, _known in recorded("2.1.332", "fork"):
        assert worker.request("POST", "/api/v1/events", payload)[0] == 202
    worker.wait_idle()
    assert parents_commands | {"echo fork"} <= branch_commands(worker, f"fork/{fork}")
    assert "echo fork" not in branch_commands(worker, "main")


def test_a_fork_told_twice_or_of_itself(worker):
    first = worker.post("/api/v1/sessions/F1/fork", {"parent_session_id": "S1"})
    assert first == {"session_id": "F1", "branch": "fork/F1", "chosen_by": "fork"}
    assert worker.post("/api/v1/sessions/F1/fork", {"parent_session_id": "S2"}) == first  # the first word stands
    status, body = worker.request("POST", "/api/v1/sessions/S1/fork", {"parent_session_id": "S1"})
    assert status == 409 and "fork of itself" in json.dumps(body)  # well-formed, but it contradicts itself
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


def test_forks_started_while_the_worker_is_down_get_their_branch_when_it_is_back(tmp_path):
    """Each version's recorded parent and fork run through the real hooks while the worker is
    down (a worker.json left by a crash): everything is spooled, the fork's SessionStart with
    its parent. The worker started afterwards ingests the spool and puts each fork on its branch,
    made from its parent's (each parent writes to a branch of its own: MEMORY_ANCHOR_BRANCH)."""
    import subprocess

    from tests.conftest import start_worker
    from tests.test_hooks import HOOKS, crashed_worker_info, hook_env, spool_lines

    data = tmp_path / "data"
    crashed_worker_info(data)

    def run_hooks(version: str, step: str, **extra: str) -> None:
        """Each hook as Claude Code ran it: under the `claude` process's arguments, with its environment."""
        for payload, known in recorded(version, step):
            env = hook_env(data, CLAUDE_ENV_FILE=known["CLAUDE_ENV_FILE"] or "", **extra)
            claude_pid = "CLAUDE_PID=$$ " if known["CLAUDE_PID"] else ""  # 2.1.214+ names the claude process
            hook = f"{claude_pid}python3 -S {HOOKS / 'hook.py'} {payload['hook_event_name']}; true"
            done = subprocess.run(["sh", "-c", hook, *known["claude_argv"]], input=json.dumps(payload).encode(),
                                  env=env, capture_output=True, timeout=30)  # fmt: skip
            assert done.returncode == 0 and done.stderr == b"", done.stderr

    for version in VERSIONS:
        # A briefing cached by an earlier worker: SessionStart prints it rather than wait for a new worker.
        cache = context_cache_path(data, project_for_cwd(recorded(version, "parent")[0][0]["cwd"]))
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text("# Memory Anchor\n- cached: builds use uv")
        run_hooks(version, "parent", MEMORY_ANCHOR_BRANCH=f"parent-{version}")
        run_hooks(version, "fork")
    starts = {e["payload"]["session_id"]: e["payload"].get("parent_session_id") for e in spool_lines(data)
              if e["payload"]["hook_event_name"] == "SessionStart" and e["payload"].get("source") != "startup"}  # fmt: skip
    assert starts == {sessions(version)["fork"]: sessions(version)["parent"] for version in VERSIONS}

    worker = start_worker(data)
    try:
        worker.wait_idle()
        for version in VERSIONS:
            fork, parent = sessions(version)["fork"], sessions(version)["parent"]
            assert worker.get(f"/api/v1/sessions/{fork}/branch") == {"session_id": fork, "branch": f"fork/{fork}",
                                                                    "chosen_by": "fork"}  # fmt: skip
            assert worker.get(f"/api/v1/branches/fork/{fork}")["parent"] == f"parent-{version}"
            assert {"echo parent", "echo fork"} <= branch_commands(worker, f"fork/{fork}")
            assert "echo fork" not in branch_commands(worker, f"parent-{version}")
        assert branch_commands(worker, "main") == set()
    finally:
        worker.stop()
