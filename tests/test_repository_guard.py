"""A repository can neither stall nor flood the worker, and an event that stops the worker is quarantined.

A repository's `.git` is whatever its owner made it: a ref that is a FIFO (a hung network mount
acts the same), `ref: /dev/zero`, `ref: ../../secret`. Reads of it take regular files only,
bounded in size and time, inside the git directory; a project whose repository cannot be read
has its code state unknown, and every other project's events flow. An event the worker dies on
(here a Claude call that never answers, the worker killed mid-event) counts a try at each start
and is quarantined after QUARANTINE_AFTER, instead of being retried first forever.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from memory_anchor.bench.gitrepo import GitRepo
from memory_anchor.core import paths
from memory_anchor.worker.codebase.bounded import Bounded
from memory_anchor.worker.store.quarantine import INTERRUPTED, QUARANTINE_AFTER
from tests.conftest import ROOT, start_worker, tool_use_event, wait_for, worker_env
from tests.fakes.anthropic_server import json_reply, request_text
from tests.fakes.fixtures import FAKE_API_KEY

SECRET_SHA = "5ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7"


def _repo(path: Path) -> GitRepo:
    repo = GitRepo(path)
    repo.commit("Start", files={"app.py": "print('hello')\n"})
    return repo


def _hostile_repos(tmp: Path) -> dict[str, Path]:
    """Repositories whose `.git` a careless or hostile owner made unreadable, by name."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "outside_secret").write_text(SECRET_SHA + "\n")
    made: dict[str, Path] = {}

    fifo_ref = _repo(tmp / "fifo_ref").root
    (fifo_ref / ".git" / "HEAD").write_text("ref: refs/heads/stuck\n")
    os.mkfifo(fifo_ref / ".git" / "refs" / "heads" / "stuck")
    made["fifo_ref"] = fifo_ref

    dev_zero = _repo(tmp / "dev_zero").root
    (dev_zero / ".git" / "HEAD").write_text("ref: /dev/zero\n")
    made["dev_zero"] = dev_zero

    outside = _repo(tmp / "outside").root  # tmp/outside/.git/../../outside_secret is tmp/outside_secret
    (outside / ".git" / "HEAD").write_text("ref: ../../outside_secret\n")
    made["outside"] = outside

    linked_out = _repo(tmp / "linked_out").root
    (linked_out / ".git" / "refs" / "heads" / "main").unlink()
    (linked_out / ".git" / "packed-refs").unlink(missing_ok=True)
    (linked_out / ".git" / "refs" / "heads" / "main").symlink_to(tmp / "outside_secret")
    made["linked_out"] = linked_out

    linked_zero = _repo(tmp / "linked_zero").root
    (linked_zero / ".git" / "refs" / "heads" / "main").unlink()
    (linked_zero / ".git" / "refs" / "heads" / "main").symlink_to("/dev/zero")
    made["linked_zero"] = linked_zero

    fifo_packed = _repo(tmp / "fifo_packed").root
    (fifo_packed / ".git" / "refs" / "heads" / "main").unlink()
    (fifo_packed / ".git" / "packed-refs").unlink(missing_ok=True)
    os.mkfifo(fifo_packed / ".git" / "packed-refs")
    made["fifo_packed"] = fifo_packed

    huge_head = _repo(tmp / "huge_head").root
    with open(huge_head / ".git" / "HEAD", "wb") as handle:
        handle.truncate(64 * 1024 * 1024)  # sparse: 64 MB of NULs that cost no disk
    made["huge_head"] = huge_head

    fifo_dot_git = tmp / "fifo_dot_git"
    fifo_dot_git.mkdir()
    os.mkfifo(fifo_dot_git / ".git")
    made["fifo_dot_git"] = fifo_dot_git

    fifo_config = _repo(tmp / "fifo_config").root
    (fifo_config / ".git" / "config").unlink()
    os.mkfifo(fifo_config / ".git" / "config")
    made["fifo_config"] = fifo_config
    return made


def _limit_memory() -> None:
    # Reading /dev/zero without a cap grows until this limit (a MemoryError), never the machine's.
    resource.setrlimit(resource.RLIMIT_AS, (3 * 1024**3, 3 * 1024**3))


def test_git_reads_take_regular_files_only_bounded_and_inside_the_git_dir(tmp_path):
    """Each read in a child process (a hang or a flood there fails this test, not the suite)."""
    repos = _hostile_repos(tmp_path)
    good = _repo(tmp_path / "good")
    os.mkfifo(good.root / "pipe.py")  # a work tree file that is a FIFO: an Edit of it reads nothing
    transcript = tmp_path / "transcript.jsonl"
    os.mkfifo(transcript)
    script = textwrap.dedent("""
        import json, sys
        from memory_anchor.core.projects import BY_REMOTE, git_dirs, project_for_cwd, remote_name
        from memory_anchor.worker.branching.sessions import _other_session_in_transcript
        from memory_anchor.worker.capture.transcript import TranscriptError, read_entries
        from memory_anchor.worker.codebase.git import WorkTree, find_repo, head
        repos, good, transcript = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
        out = {name: head(find_repo(path)) for name, path in repos.items()}
        out["good"] = head(find_repo(good))
        out["fifo_dot_git_dirs"] = git_dirs(repos["fifo_dot_git"])
        out["fifo_config_remote"] = remote_name(repos["fifo_config"])
        out["fifo_config_project"] = project_for_cwd(repos["fifo_config"], BY_REMOTE)
        out["pipe_blob"] = WorkTree().blob(find_repo(good), "pipe.py")
        out["transcript_parent"] = _other_session_in_transcript(__import__("pathlib").Path(transcript), "s")
        try:
            read_entries(transcript)
            out["transcript"] = "read"
        except TranscriptError as exc:
            out["transcript"] = str(exc)
        print(json.dumps(out))
    """)  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps({k: str(v) for k, v in repos.items()}), str(good.root), str(transcript)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, preexec_fn=_limit_memory,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert time.monotonic() - started < 30
    out = json.loads(done.stdout)
    assert out["good"] == good.git("rev-parse", "HEAD").strip()  # a sound repository still reads as git does
    for name in set(repos) - {"fifo_config"}:
        assert out[name] is None, (name, out[name])  # unknown: not a wait, not a flood, not the secret
    assert out["fifo_config"] is not None  # its HEAD is sound; only its remote is unknown
    assert SECRET_SHA not in done.stdout
    assert out["fifo_dot_git_dirs"] is None and out["fifo_config_remote"] is None
    assert out["fifo_config_project"] == str(repos["fifo_config"].resolve())
    assert out["pipe_blob"] is None and out["transcript_parent"] is None
    assert "is a FIFO" in out["transcript"]  # refused, with what it is


def _edit(session: str, root: Path, n: int) -> dict:
    path = str(root / "app.py")
    return {
        "session_id": session, "transcript_path": f"/tmp/.claude/projects/x/{session}.jsonl", "cwd": str(root),
        "hook_event_name": "PostToolUse", "tool_name": "Edit", "tool_use_id": f"toolu_{session}_{n}",
        "tool_input": {"file_path": path, "old_string": "print('hello')", "new_string": "print('hello, world and all')"},
        "tool_response": {"filePath": path, "oldString": "print('hello')", "newString": "print('hello, world and all')"},
    }  # fmt: skip


def test_an_unreadable_repository_is_unknown_and_every_other_project_flows(tmp_path):
    repos = _hostile_repos(tmp_path / "repos")
    good = _repo(tmp_path / "good")
    worker = start_worker(tmp_path / "data")
    try:
        for n, (name, root) in enumerate(repos.items()):
            if (root / "app.py").exists():
                worker.post("/api/v1/events", _edit(f"s-{name}", root, n), expect=202)
        worker.post("/api/v1/events", _edit("s-good", good.root, 99), expect=202)
        wait_for(lambda: not worker.get("/api/v1/status")["inbox"].get("pending"), timeout=60, what="every event processed")
        inbox = worker.get("/api/v1/inbox")
        assert not inbox["counts"].get("quarantined"), inbox

        sound = worker.get(f"/api/v1/observations?session_id=s-good")["results"]
        assert len(sound) == 1 and sound[0]["data"]["code_head"] == good.git("rev-parse", "HEAD").strip()
        for name, root in repos.items():
            if not (root / "app.py").exists() or name == "fifo_config":  # its HEAD reads; only its remote cannot
                continue
            (seen,) = worker.get(f"/api/v1/observations?session_id=s-{name}")["results"]
            assert seen["data"].get("code_head") is None, name  # its code state is unknown
            assert SECRET_SHA not in json.dumps(seen)

        # `memory-anchor verify` answers, for a project that cannot be read as for one that can
        for root in (repos["fifo_ref"], repos["dev_zero"], good.root):
            done = subprocess.run(
                [sys.executable, "-m", "memory_anchor.cli.main", "--data-dir", str(worker.data_dir), "verify",
                 "--project", str(root.resolve())],
                cwd=root, env=worker.env, capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
        report = worker.post("/api/v1/verify", {"project": str(repos["fifo_ref"].resolve())})
        assert report["head"] is None
        assert worker.post("/api/v1/verify", {"project": str(good.root.resolve())})["head"] == sound[0]["data"]["code_head"]
    finally:
        worker.stop()


def test_a_read_that_hangs_is_given_up_and_its_place_answers_unknown_until_it_returns():
    """What a hung mount does to `open`, a read that blocks until released; real threads, real waits."""
    bounded = Bounded(timeout=0.3)
    release = threading.Event()
    started = time.monotonic()
    assert bounded.run("/mnt/hung", release.wait, 60, default="unknown") == "unknown"
    assert 0.25 < time.monotonic() - started < 5
    started = time.monotonic()
    assert bounded.run("/mnt/hung", lambda: "read", default="unknown") == "unknown"  # at once: no second wait
    assert time.monotonic() - started < 0.2
    assert bounded.run("/home/me/other", lambda: "read", default="unknown") == "read"  # other projects go on
    release.set()
    wait_for(lambda: not bounded.stuck("/mnt/hung"), timeout=5, what="the stuck read came back")
    assert bounded.run("/mnt/hung", lambda: "read", default="unknown") == "read"
    with pytest.raises(ZeroDivisionError):
        bounded.run("/x", lambda: 1 / 0)
    assert bounded.timeouts == 1


def _hang_or_answer(request: dict):
    """Claude never answers about the poisoned tool use (the worker is stuck mid-event); the rest it answers."""
    text = request_text(request)
    if "HANGS-FOREVER" in text:
        return json_reply({"observations": []}, delay=600)
    return json_reply({"observations": []})


def _hang_requests(fake) -> int:
    return sum("HANGS-FOREVER" in request_text(m) for m in fake.messages())


def test_an_event_the_worker_dies_on_is_quarantined_after_its_tries_and_never_holds_the_inbox(tmp_path, fake_anthropic):
    fake_anthropic.responder = _hang_or_answer
    data_dir = tmp_path / "data"
    env = worker_env(data_dir, ANTHROPIC_BASE_URL=fake_anthropic.base_url, ANTHROPIC_API_KEY=FAKE_API_KEY)
    worker = start_worker(data_dir, env=env)
    try:
        worker.post("/api/v1/events", tool_use_event("poisoned", 0, output="HANGS-FOREVER"), expect=202)
        for start in range(1, QUARANTINE_AFTER + 1):
            wait_for(lambda: _hang_requests(fake_anthropic) >= start, timeout=60, what=f"try {start} of the poisoned event")
            # another project's event waits behind the stuck one...
            worker.post("/api/v1/events", tool_use_event(f"after-{start}", 0, cwd=f"/tmp/other-{start}"), expect=202)
            worker.process.kill()  # kill -9 mid-event, as a user does with a worker that is stuck
            worker.process.wait()
            worker = start_worker(data_dir, env=env)
            # ...and flows after the restart: the next run counted that try, and tries the poisoned event later, alone
            wait_for(lambda: worker.get(f"/api/v1/observations?session_id=after-{start}")["total"] == 1, timeout=60,
                     what=f"events flow after restart {start}")  # fmt: skip
        wait_for(lambda: worker.get("/api/v1/inbox")["counts"].get("quarantined") == 1, timeout=30, what="quarantined")
        inbox = worker.get("/api/v1/inbox")
        (item,) = inbox["quarantined"]
        assert item["session_id"] == "poisoned" and item["attempts"] == QUARANTINE_AFTER
        assert item["error"] == INTERRUPTED
        # The last event that flowed may still be finishing (its observation is written before what
        # follows from it): pending counts it until then, and nothing stays pending after.
        wait_for(lambda: not worker.get("/api/v1/inbox")["counts"].get("pending"), timeout=30, what="nothing pending")
        assert _hang_requests(fake_anthropic) == QUARANTINE_AFTER  # not tried again once parked
        log = (data_dir / paths.LOGS / paths.WORKER_LOG).read_text()
        assert "QUARANTINED inbox event" in log and "killed, crashed or hung" in log
    finally:
        worker.stop()
