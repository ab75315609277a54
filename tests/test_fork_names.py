"""Distinct sessions get distinct fork branches, and a session id in a URL is bounded.

A fork's branch is `fork/<session id>` kept to what a branch name allows. `col:1`, `col/1` and
`col-1` all read `col-1` that way, and two ids longer than the name allows share their cut:
without more, the second fork wrote on the first one's branch. Each now has its own branch,
and each fork's tool uses land only on it. A real worker, forks told the way the SessionStart
hook tells them (`POST /api/v1/sessions/{id}/fork`) and the way Claude Code 2.1.214+ says it
(`source: "fork"`).
"""

from __future__ import annotations

from urllib.parse import quote

from memory_anchor.schemas.common import SESSION_ID_MAX_CHARS
from tests.conftest import tool_use_event
from tests.test_recorded_forks import branch_commands

LONG = "session-" + "x" * 90
FORKS_TOLD = ["col:1", "col/1", "col-1", LONG + "-first", LONG + "-second"]
FORKS_STARTED = ["col 2", "col_2?", "col-2"]  # say so in their SessionStart: `source: "fork"`


def _start_fork(session_id: str) -> dict:
    return {"session_id": session_id, "transcript_path": f"/tmp/.claude/projects/x/{quote(session_id, safe='')}.jsonl",
            "cwd": "/tmp/project-x", "hook_event_name": "SessionStart", "source": "fork"}  # fmt: skip


def test_distinct_session_ids_fork_to_distinct_branches(worker):
    worker.post("/api/v1/events", tool_use_event("parent", 0), expect=202)
    worker.wait_idle()
    branches = {}
    for session_id in FORKS_TOLD:
        told = worker.post(f"/api/v1/sessions/{quote(session_id, safe='')}/fork", {"parent_session_id": "parent"})
        assert told["session_id"] == session_id and told["chosen_by"] == "fork"
        branches[session_id] = told["branch"]
    for session_id in FORKS_STARTED:
        worker.post("/api/v1/events", _start_fork(session_id), expect=202)
    worker.wait_idle()
    for session_id in FORKS_STARTED:
        branches[session_id] = worker.get(f"/api/v1/sessions/{quote(session_id, safe='')}/branch")["branch"]

    assert len(set(branches.values())) == len(branches), branches
    assert branches["col-1"] == "fork/col-1" and branches["col-2"] == "fork/col-2"  # an id a name can hold is kept as it is
    assert all(name.startswith("fork/col-1-") for sid, name in branches.items() if sid in ("col:1", "col/1"))
    assert all(len(name) <= 100 for name in branches.values())

    # each fork's tool use is on its own branch, and on no other fork's
    for n, session_id in enumerate(branches):
        worker.post("/api/v1/events", tool_use_event(session_id, 100 + n), expect=202)
    worker.wait_idle()
    for n, (session_id, branch) in enumerate(branches.items()):
        commands = branch_commands(worker, branch)
        assert f"echo step-{100 + n}" in commands and "echo step-0" in commands, (session_id, commands)
        assert not {f"echo step-{100 + m}" for m in range(len(branches)) if m != n} & commands, (session_id, commands)


def test_a_session_id_in_a_url_is_bounded_in_length_and_characters(worker):
    for bad in ["s" * (SESSION_ID_MAX_CHARS + 1), "s" * 5000, "bad\x00id", "line\nbreak", "tab\tid"]:
        for method, path, body in (("GET", "/api/v1/sessions/{}/branch", None),
                                   ("POST", "/api/v1/sessions/{}/fork", {"parent_session_id": "parent"}),
                                   ("GET", "/api/v1/sessions/{}", None)):  # fmt: skip
            status, answer = worker.request(method, path.format(quote(bad, safe="")), body)
            assert (status, answer["error"]["code"]) == (422, "invalid_session_id"), (bad[:20], path, answer)
    names = {b["name"] for b in worker.get("/api/v1/branches")["results"]}
    assert names == {"main"}  # nothing was made of them
    longest = "s" * SESSION_ID_MAX_CHARS
    assert worker.post(f"/api/v1/sessions/{longest}/fork", {"parent_session_id": "parent"})["session_id"] == longest
