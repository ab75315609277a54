"""How Claude Code starts the hooks: through hooks/launch.sh, and, for the events it does not
wait on, with the delivery detached from the session.

test_hooks.py checks what a hook delivers with delivery in the foreground; these tests
run the hooks as hooks.json has Claude Code run them (`sh -c '<command>'`, the plugin's
environment variables set) and check what is different: the hook process ends before
the worker has answered, and the interpreter behind a `python3` shim is started
directly from the second hook on.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

from tests.conftest import ROOT, tool_use_event, wait_for
from tests.test_hooks import base_payload, crashed_worker_info, spool_lines

HOOKS_JSON = json.loads((ROOT / "hooks" / "hooks.json").read_text())["hooks"]
REAL_PYTHON = os.path.realpath(getattr(sys, "_base_executable", sys.executable))


def claude_code_env(data_dir: Path, plugin_data: Path, path: str = "/usr/local/bin:/usr/bin:/bin") -> dict[str, str]:
    """The environment Claude Code gives a plugin's hook (shared/docs/claude-code-e2e.md), delivery as shipped."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORY_ANCHOR_", "CLAUDE_", "PYTHON"))}
    env.update(PATH=path, CLAUDE_PLUGIN_ROOT=str(ROOT), CLAUDE_PLUGIN_DATA=str(plugin_data),
               MEMORY_ANCHOR_DATA_DIR=str(data_dir), MEMORY_ANCHOR_PYTHON="/bin/true")  # fmt: skip
    return env


def run_as_claude_code(event: str, payload: dict, env: dict[str, str]) -> subprocess.CompletedProcess:
    """hooks.json's command for `event`, through /bin/sh as Claude Code runs it."""
    (entry,) = HOOKS_JSON[event]
    (hook,) = entry["hooks"]
    return subprocess.run(["/bin/sh", "-c", hook["command"]], input=json.dumps(payload).encode(), env=env,
                          capture_output=True, timeout=30)  # fmt: skip


class HoldingListener:
    """A worker stand-in that holds each request until released, then answers 202 and notes
    whether the client read the answer (it closes the connection after reading it)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.received = threading.Event()
        self.release = threading.Event()
        self.client_read_answer = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            self.received.set()
            self.release.wait(30)
            conn.sendall(b"HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
            conn.settimeout(30)
            try:
                while conn.recv(65536):
                    pass
            except OSError:
                return
            self.client_read_answer.set()


def test_an_event_claude_code_does_not_wait_on_is_delivered_after_the_hook_exits(tmp_path):
    listener = HoldingListener()
    data = tmp_path / "data"
    data.mkdir()
    (data / "worker.json").write_text(json.dumps({"pid": 1, "port": listener.port, "token": "t"}))
    result = run_as_claude_code("PostToolUse", tool_use_event("bg", 1), claude_code_env(data, tmp_path / "plugin"))
    # The hook is over while the worker still holds the event: Claude Code waited for nothing.
    # (Delivered in the foreground, the hook would have given up on the answer and spooled it.)
    assert result.returncode == 0 and result.stdout == b"" and result.stderr == b""
    assert spool_lines(data) == [] and not listener.client_read_answer.is_set()
    wait_for(listener.received.is_set, timeout=20, what="the detached delivery")
    listener.release.set()
    wait_for(listener.client_read_answer.is_set, timeout=20, what="the delivery to read the worker's answer")
    assert spool_lines(data) == []


def test_a_detached_event_is_spooled_when_no_worker_answers(tmp_path):
    data = tmp_path / "data"
    crashed_worker_info(data)
    payload = base_payload("Stop", "bg-down", "/tmp", stop_hook_active=False, last_assistant_message="done")
    result = run_as_claude_code("Stop", payload, claude_code_env(data, tmp_path / "plugin"))
    assert result.returncode == 0 and result.stdout == b"" and result.stderr == b""
    wait_for(lambda: spool_lines(data), timeout=20, what="the spooled event")
    (entry,) = spool_lines(data)
    assert entry["payload"] == payload


def test_session_start_still_prints_its_context(tmp_path):
    """The events Claude Code waits on are never detached: their output is what it waits for."""
    from memory_anchor.core.projects import context_cache_path, project_for_cwd

    cwd = tmp_path / "proj"
    cwd.mkdir()
    data = tmp_path / "data"
    cache = context_cache_path(data, project_for_cwd(str(cwd)))
    cache.parent.mkdir(parents=True)
    cache.write_text("# Memory Anchor\n- cached fact: deploys go through fly.io")
    result = run_as_claude_code("SessionStart", base_payload("SessionStart", "fg", str(cwd), source="resume"),
                                claude_code_env(data, tmp_path / "plugin"))  # fmt: skip
    assert json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"].endswith("through fly.io")


def test_the_interpreter_behind_a_python3_shim_is_started_directly_after_the_first_hook(tmp_path):
    """pyenv's `python3` is a shell script that finds the version to run; on every hook it cost
    tens of milliseconds. The first hook writes down the interpreter it really runs on."""
    calls = tmp_path / "shim-calls"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "python3"
    shim.write_text(f'#!/bin/sh\necho "$@" >> "{calls}"\nexec "{REAL_PYTHON}" "$@"\n')
    shim.chmod(0o755)
    plugin_data = tmp_path / "plugin"
    data = tmp_path / "data"
    env = claude_code_env(data, plugin_data, path=f"{bin_dir}:/usr/bin:/bin")
    env["MEMORY_ANCHOR_HOOKS_FOREGROUND"] = "1"  # every delivery (the spool here) done when the hook returns
    for n in (1, 2, 3):
        assert run_as_claude_code("PostToolUse", tool_use_event("shim", n), env).returncode == 0
    assert len(calls.read_text().splitlines()) == 1  # only the first hook went through the shim
    assert (plugin_data / "hook-python").read_text() == REAL_PYTHON + "\n"
    assert sorted(e["payload"]["tool_use_id"] for e in spool_lines(data)) == [f"toolu_shim_{n}" for n in (1, 2, 3)]

    # The remembered interpreter went away (a Homebrew or pyenv upgrade): python3 again, and a new note.
    (plugin_data / "hook-python").write_text(str(tmp_path / "gone" / "python3.11") + "\n")
    assert run_as_claude_code("PostToolUse", tool_use_event("shim", 4), env).returncode == 0
    assert len(calls.read_text().splitlines()) == 2
    assert (plugin_data / "hook-python").read_text() == REAL_PYTHON + "\n"
    assert len(spool_lines(data)) == 4
