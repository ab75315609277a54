"""The Claude Code hooks as Claude Code runs them: `python3 -S hooks/hook.py <event>`, payload on stdin.

Against the real worker wherever the worker's behaviour is part of what is
checked; a raw socket listener stands in only to see the exact bytes a hook
sends (headers), which the worker does not expose.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from memory_anchor.core import paths
from memory_anchor.core.projects import context_cache_path, project_for_cwd
from tests.conftest import ROOT, tool_use_event

HOOKS = ROOT / "hooks"
EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse", "PreCompact", "Stop", "SessionEnd")


def hook_argv(event: str, plugin: Path = ROOT) -> list[str]:
    """The hook of `event` as launch.sh starts it: one script for every event, the event its argument."""
    return ["python3", "-S", str(plugin / "hooks" / "hook.py"), event]


def hook_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORY_ANCHOR_", "CLAUDE_", "PYTHON"))}
    env["MEMORY_ANCHOR_DATA_DIR"] = str(data_dir)
    # Deliver before exiting, so a test can look at the worker or the spool once the hook
    # returns; the detached delivery Claude Code gets has tests of its own (test_hook_launch.py).
    env["MEMORY_ANCHOR_HOOKS_FOREGROUND"] = "1"
    # Never let a unit test start a real environment bootstrap (venv + pip install).
    env.setdefault("MEMORY_ANCHOR_PYTHON", "/bin/true")
    env.update(extra)
    return env


def run_hook(event: str, payload: dict | bytes, env: dict[str, str], timeout: float = 20) -> subprocess.CompletedProcess:
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return subprocess.run(
        hook_argv(event), input=data, env=env, capture_output=True, timeout=timeout
    )


def spool_lines(data_dir: Path) -> list[dict]:
    spool = paths.spool_path(data_dir)
    return [json.loads(line) for line in spool.read_text().splitlines()] if spool.exists() else []


def crashed_worker_info(data_dir: Path) -> None:
    """A worker.json left by a worker that died: it names a port nobody listens on."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead_port = s.getsockname()[1]
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "worker.json").write_text(json.dumps({"pid": 999999, "port": dead_port, "token": "t"}))


def base_payload(event: str, session_id: str, cwd: str, **fields) -> dict:
    return {
        "session_id": session_id,
        "transcript_path": f"/tmp/.claude/projects/x/{session_id}.jsonl",
        "cwd": cwd,
        "hook_event_name": event,
        **fields,
    }


def test_hooks_json_runs_one_stdlib_executable_for_every_event():
    config = json.loads((HOOKS / "hooks.json").read_text())["hooks"]
    assert set(config) == set(EVENTS)
    for event in EVENTS:
        (entry,) = config[event]
        (command,) = entry["hooks"]
        assert command["command"] == f'hook_event={event}; script=hooks/hook.py; . "${{CLAUDE_PLUGIN_ROOT}}/hooks/launch.sh"'
        assert command["timeout"] <= 15
    assert os.access(HOOKS / "hook.py", os.X_OK)
    assert sorted(p.name for p in HOOKS.glob("*.py")) == ["hook.py"]


def test_hooks_import_only_the_standard_library_and_nothing_slow():
    """The whole hook path under `python3 -S`: no site-packages, none of the slow modules, the modules
    SessionStart (forks, launcher, projects) and UserPromptSubmit (origin) import on their way included."""
    probe = (
        "import sys; sys.argv=['x']; sys.path.insert(0, %r)\n"
        "import memory_anchor.hookkit.entry, memory_anchor.hookkit.runner, memory_anchor.hookkit.forks\n"
        "import memory_anchor.hookkit.launcher, memory_anchor.hookkit.origin, memory_anchor.core.projects\n"
        "slow = {'json','socket','subprocess','pathlib','typing','urllib','uuid','re','http','pydantic'}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in slow))\n"
        "print(any('site-packages' in str(getattr(m, '__file__', '') or '') for m in list(sys.modules.values())))\n"
    ) % str(ROOT)
    out = subprocess.run(["python3", "-S", "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["[]", "False"]


def test_post_tool_use_reaches_the_real_worker(shared_worker):
    # One worker for the module's posting tests: each counts the inbox before and after and
    # reads back only its own session.
    worker = shared_worker
    env = hook_env(worker.data_dir)
    before = worker.get("/api/v1/inbox")["counts"]
    event = tool_use_event("hook-s1", 1, cwd=str(ROOT), output="pelican-7731")
    result = run_hook("PostToolUse", event, env)
    assert result.returncode == 0 and result.stdout == b"" and result.stderr == b""
    after = worker.get("/api/v1/inbox")["counts"]
    assert sum(after.values()) == sum(before.values()) + 1
    assert spool_lines(worker.data_dir) == []
    worker.wait_idle()
    observations = worker.get("/api/v1/observations?session_id=hook-s1")["results"]
    assert [o["tool_use_id"] for o in observations] == ["toolu_hook-s1_1"]


@pytest.mark.parametrize("event", ["PreCompact", "Stop", "SessionEnd"])
def test_other_events_are_posted_unchanged(shared_worker, event):
    worker = shared_worker
    env = hook_env(worker.data_dir)
    extra = {"PreCompact": {"trigger": "manual", "custom_instructions": None},
             "Stop": {"stop_hook_active": False, "last_assistant_message": "done"},
             "SessionEnd": {"reason": "other"}}[event]  # fmt: skip
    before = sum(worker.get("/api/v1/inbox")["counts"].values())
    result = run_hook(event, base_payload(event, f"hook-{event}", str(ROOT), **extra), env)
    assert result.returncode == 0 and result.stdout == b"" and result.stderr == b""
    assert sum(worker.get("/api/v1/inbox")["counts"].values()) == before + 1


class RawListener:
    """Accepts connections on loopback and answers 202, keeping the raw requests."""

    def __init__(self, status: int = 202):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.status = status
        self.requests: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = int([l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0].split(b":")[1])
                while len(body) < length:
                    body += conn.recv(65536)
                self.requests.append(head + b"\r\n\r\n" + body)
                conn.sendall(f"HTTP/1.1 {self.status} X\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}".encode())


def test_hook_sends_payload_bytes_token_event_id_branch_and_agent(tmp_path):
    listener = RawListener()
    (tmp_path / "worker.json").write_text(json.dumps({"pid": 1, "port": listener.port, "token": "tok-123", "host": "127.0.0.1"}))
    raw = json.dumps(tool_use_event("hdr", 1), indent=2).encode()  # exact bytes, even pretty-printed
    env = hook_env(tmp_path, MEMORY_ANCHOR_BRANCH="exp-auth", MEMORY_ANCHOR_AGENT_ID="agent-7")
    assert run_hook("PostToolUse", raw, env).returncode == 0
    (request,) = listener.requests
    head, _, body = request.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
    assert lines[0] == "POST /api/v1/events HTTP/1.1"
    assert body == raw
    assert headers["authorization"] == "Bearer tok-123"
    assert uuid.UUID(headers["x-memory-anchor-event-id"]).version == 4
    assert headers["x-memory-anchor-branch"] == "exp-auth"
    assert headers["x-memory-anchor-agent"] == "agent-7"


def test_rejected_event_is_spooled_not_lost(tmp_path):
    listener = RawListener(status=500)
    (tmp_path / "worker.json").write_text(json.dumps({"pid": 1, "port": listener.port, "token": "t"}))
    result = run_hook("Stop", base_payload("Stop", "rej", "/tmp"), hook_env(tmp_path))
    assert result.returncode == 0
    (entry,) = spool_lines(tmp_path)
    sent_id = [l for l in listener.requests[0].decode().split("\r\n") if l.lower().startswith("x-memory-anchor-event-id")]
    assert entry["id"] == sent_id[0].split(":", 1)[1].strip()  # same id: the worker dedups a replay


def test_worker_down_spools_quietly_without_hanging(tmp_path):
    crashed_worker_info(tmp_path)
    event = tool_use_event("down", 1, output="albatross-99")
    # A hook that waited on the dead port would fail here through run_hook's timeout.
    result = run_hook("PostToolUse", event, hook_env(tmp_path, MEMORY_ANCHOR_BRANCH="b1", MEMORY_ANCHOR_AGENT_ID="a1"))
    assert result.returncode == 0 and result.stdout == b"" and result.stderr == b""
    (entry,) = spool_lines(tmp_path)
    assert set(entry) == {"id", "received_at", "branch", "agent_id", "payload"}
    assert entry["payload"] == event and entry["branch"] == "b1" and entry["agent_id"] == "a1"
    assert uuid.UUID(entry["id"]).version == 4 and abs(entry["received_at"] - time.time()) < 60
    assert oct(os.stat(paths.spool_path(tmp_path)).st_mode & 0o777) == "0o600"


def test_concurrent_hooks_never_interleave_spool_lines(tmp_path):
    big = "x" * 200_000  # far above PIPE_BUF: atomicity comes from one O_APPEND write per line
    env = hook_env(tmp_path)
    procs = [
        subprocess.Popen(hook_argv("PostToolUse"), stdin=subprocess.PIPE, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(16)
    ]  # fmt: skip
    for n, proc in enumerate(procs):
        proc.stdin.write(json.dumps(tool_use_event("par", n, output=big)).encode())
        proc.stdin.close()
    assert all(proc.wait(30) == 0 for proc in procs)
    entries = spool_lines(tmp_path)
    assert sorted(e["payload"]["tool_use_id"] for e in entries) == sorted(f"toolu_par_{n}" for n in range(16))
    assert len({e["id"] for e in entries}) == 16


def test_garbage_on_stdin_is_kept_and_exits_zero(tmp_path):
    result = run_hook("PostToolUse", b"\xff not json {", hook_env(tmp_path))
    assert result.returncode == 0 and result.stdout == b"" and result.stderr == b""
    (entry,) = spool_lines(tmp_path)
    assert entry["payload"]["hook_event_name"] == "PostToolUse"
    assert "not json" in entry["payload"]["unparsed_payload"]


def test_unwritable_data_dir_still_exits_zero_without_traceback(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = run_hook("PostToolUse", tool_use_event("ro", 1), hook_env(blocker / "data"))
    assert result.returncode == 0 and result.stdout == b"" and result.stderr == b""


def test_spooled_events_reach_the_worker_the_hook_starts(tmp_path):
    """Worker down: the hook spools and starts it (developer shortcut); the worker ingests the spool."""
    data = tmp_path / "data"
    env = hook_env(data, MEMORY_ANCHOR_PYTHON=sys.executable)
    first = tool_use_event("cold", 1, cwd=str(ROOT), output="narwhal-5150")
    result = run_hook("PostToolUse", first, env)
    assert result.returncode == 0
    assert [e["payload"]["tool_use_id"] for e in spool_lines(data)] == ["toolu_cold_1"]
    info_path = paths.worker_info_path(data)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not info_path.exists():
        time.sleep(0.1)
    assert info_path.exists(), (data / "logs").exists() and list((data / "logs").iterdir())
    pid = json.loads(info_path.read_text())["pid"]
    try:
        # Once up, the next hook goes straight through.
        assert run_hook("PostToolUse", tool_use_event("cold", 2, cwd=str(ROOT)), env).returncode == 0
        from memory_anchor.client.worker_client import WorkerClient

        client = WorkerClient(data, autostart=False)
        deadline = time.monotonic() + 60
        seen: list[str] = []
        while time.monotonic() < deadline:
            seen = sorted(o["tool_use_id"] for o in client.get("/api/v1/observations", session_id="cold")["results"])
            if len(seen) == 2:
                break
            time.sleep(0.2)
        assert seen == ["toolu_cold_1", "toolu_cold_2"]
        assert spool_lines(data) == []
    finally:
        os.kill(pid, 15)


@pytest.mark.both_backends  # the context comes from storage
def test_session_start_prints_the_workers_context(worker):
    cwd = str(ROOT)
    result = run_hook("SessionStart", base_payload("SessionStart", "ss1", cwd, source="startup"), hook_env(worker.data_dir))
    assert result.returncode == 0 and result.stderr == b""
    output = json.loads(result.stdout)
    expected = worker.get(f"/api/v1/context?project={project_for_cwd(cwd)}&source=startup&session_id=ss1")["context"]
    assert output == {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": expected}}


def test_session_start_prints_the_cached_context_when_the_worker_is_down(tmp_path):
    cwd = str(tmp_path / "proj")
    os.makedirs(cwd)
    cache = context_cache_path(tmp_path, project_for_cwd(cwd))
    cache.parent.mkdir(parents=True)
    cache.write_text("# Memory Anchor\n- cached fact: builds use uv")
    result = run_hook("SessionStart", base_payload("SessionStart", "ss2", cwd, source="resume"), hook_env(tmp_path))
    assert json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"].endswith("builds use uv")


def test_session_start_without_worker_or_environment_says_memory_is_being_set_up(tmp_path):
    """The first session of a new install: no context yet, but the user learns why (issue 19)."""
    result = run_hook("SessionStart", base_payload("SessionStart", "ss3", "/tmp", source="startup"),
                      hook_env(tmp_path, MEMORY_ANCHOR_PYTHON=""))  # fmt: skip
    assert result.returncode == 0 and result.stderr == b""
    output = json.loads(result.stdout)
    assert output["systemMessage"].startswith("Memory Anchor is setting up its Python environment")
    assert "installing itself" in output["hookSpecificOutput"]["additionalContext"]


@pytest.mark.both_backends  # the context comes from storage
def test_user_prompt_submit_adds_relevant_memories_and_is_quiet_otherwise(worker):
    cwd = str(ROOT)
    # Named as the worker names projects (worker.json): on a team database a clone with an
    # `origin` remote is named by it, as the hook will name it.
    naming = json.loads((worker.data_dir / "worker.json").read_text())["project_names"]
    worker.post(
        "/api/v1/memories",
        {"content": "The staging database password rotates every Tuesday via vault-rotator", "infer": False,
         "project": project_for_cwd(cwd, naming)},
    )  # fmt: skip
    worker.wait_idle()
    env = hook_env(worker.data_dir)
    hit = prompt_hook(worker.data_dir, env, base_payload("UserPromptSubmit", "up1", cwd,
                      prompt="when does the staging database password rotate?"))  # fmt: skip
    assert hit.returncode == 0
    assert hit.stdout, hooks_log(worker.data_dir)
    context = json.loads(hit.stdout)["hookSpecificOutput"]
    assert context["hookEventName"] == "UserPromptSubmit" and "vault-rotator" in context["additionalContext"]
    miss = prompt_hook(worker.data_dir, env, base_payload("UserPromptSubmit", "up1", cwd, prompt="zxqv wibble"))
    assert miss.returncode == 0 and miss.stdout == b""


def hooks_log(data_dir: Path) -> str:
    log = data_dir / paths.LOGS / paths.HOOKS_LOG
    return log.read_text() if log.exists() else ""


def prompt_hook(data_dir: Path, env: dict[str, str], payload: dict) -> subprocess.CompletedProcess:
    """The UserPromptSubmit hook's run. Its calls to the worker have a budget of a second or two,
    so that they never hold up the user's prompt; when one ran out on a loaded machine (hooks.log
    says it timed out), the hook is run again, as the next prompt would."""
    for _ in range(3):
        before = len(hooks_log(data_dir))
        run = run_hook("UserPromptSubmit", payload, env)
        if run.stdout or "timed out" not in hooks_log(data_dir)[before:]:
            return run
    return run
