"""End to end: a user without `ANTHROPIC_API_KEY`, logged in to Claude Code, gets Claude's distillation.

The HOME's Claude Code is logged in through an `apiKeyHelper` in
`~/.claude/settings.json` (as a subscription or a company helper would be; no
key anywhere), `claude` is on PATH, and the plugin is installed the user's way.
The worker, started by the hooks, finds the CLI and distils the captured tool
use through `claude -p`: the request reaches the fake API, whose reply becomes
the stored observation. The session it spawned is never captured.

Runs with both pinned CLIs: the flags and the login check the worker spawns
`claude` with are Claude Code's, and change between versions.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

from memory_anchor.client.worker_client import WorkerClient
from tests.e2e.harness import RUN_MARKER, ClaudeCli, ClaudeHome, ScriptedModel, copy_plugin, wait_for
from tests.e2e.test_claude_code import stop_worker
from tests.fakes.anthropic_server import FakeAnthropicServer, json_reply
from memory_anchor.worker.pipeline.compress.claude import OBSERVATION_SYSTEM, SUMMARY_SYSTEM

pytestmark = pytest.mark.e2e
HELPER_KEY = "sk-ant-from-the-users-helper"


def system_text(request: dict) -> str:
    system = request.get("system")
    return "\n".join(b.get("text", "") for b in system) if isinstance(system, list) else str(system or "")


class UserAndDistiller(ScriptedModel):
    """The user's session follows the marker script; the worker's distilling calls get a recognisable answer."""

    def __call__(self, request: dict):
        system = system_text(request)
        if OBSERVATION_SYSTEM[:60] in system:
            title = f"Printed {self.marker} (distilled through Claude Code)"
            return json_reply({"observations": [{"index": 0, "type": "discovery", "title": title,
                                                 "summary": f"The marker command printed {self.marker}."}]})  # fmt: skip
        if SUMMARY_SYSTEM[:60] in system:
            return json_reply({"request": "Run the marker command", "investigated": "", "learned": "",
                               "completed": f"Printed {self.marker}", "next_steps": "", "files": []})  # fmt: skip
        return super().__call__(request)


@pytest.fixture
def fake_api(marker):
    with FakeAnthropicServer(responder=UserAndDistiller(marker), api_key=HELPER_KEY) as server:
        yield server


@pytest.fixture
def marker() -> str:
    import uuid

    return f"MARKER-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def logged_in_machine(tmp_path, fake_api, claude_cli: ClaudeCli):
    home = ClaudeHome(tmp_path, fake_api.base_url, developer_python=sys.executable, claude=claude_cli.path)
    # Logged in the way a user is: a login Claude Code reads from its own settings, no key in the environment.
    del home.env["ANTHROPIC_API_KEY"]
    del home.env["MEMORY_ANCHOR_LLM_DAILY_TOKEN_BUDGET"]
    (home.home / ".claude").mkdir()
    (home.home / ".claude" / "settings.json").write_text(json.dumps({"apiKeyHelper": f"echo {HELPER_KEY}"}))
    home.env["PATH"] = f"{claude_cli.path.parent}:{home.env['PATH']}"  # `claude` on PATH, as a user has it
    home.install_plugin(copy_plugin(tmp_path / "clone" / "memory-anchor"))
    yield home
    stop_worker(home)


def test_without_a_key_tool_uses_are_distilled_through_the_users_claude_code_login(
    logged_in_machine, fake_api, marker, claude_cli: ClaudeCli, capsys
):
    machine = logged_in_machine
    settings = json.loads((machine.home / ".claude" / "settings.json").read_text())
    assert settings["apiKeyHelper"] and settings["enabledPlugins"] == {"memory-anchor@memory-anchor": True}

    machine.run(RUN_MARKER)
    client = WorkerClient(machine.plugin_data(), autostart=False)

    def distilled():
        for obs in client.get("/api/v1/observations", limit=50)["results"]:
            if obs.get("data", {}).get("command") == f"echo {marker}" and "distilled through" in obs["title"]:
                return obs
        return None

    observation = wait_for(distilled, 120, message="the tool use to be distilled through the Claude Code CLI")
    assert observation["title"] == f"Printed {marker} (distilled through Claude Code)"

    # The worker's request went through the CLI, with the user's own login, no tools, our system prompt.
    distilling = [r for r in fake_api.requests if isinstance(r.body, dict) and OBSERVATION_SYSTEM[:60] in system_text(r.body)]
    assert distilling, "no distilling request reached the fake API"
    request = distilling[0]
    headers = {k.lower(): v for k, v in request.headers.items()}
    assert headers["user-agent"].startswith(f"claude-cli/{claude_cli.version}") and headers["x-api-key"] == HELPER_KEY
    assert request.body.get("tools") in (None, []) and f"echo {marker}" in json.dumps(request.body["messages"])

    status = client.get("/api/v1/status")["llm"]
    assert status["route"] == "cli" and status["available"]
    assert status["reason"].startswith(f"no ANTHROPIC_API_KEY; Claude Code CLI {claude_cli.version} at ")
    assert "(PATH), logged in via api_key_helper" in status["reason"]
    assert status["usage_today"]["calls"] >= 1  # the CLI route spends the same daily budget

    # Let the session's summary (a second spawned session) finish too before looking for traces.
    wait_for(lambda: client.get("/api/v1/status")["llm"]["usage_today"]["calls"] >= 2, 60,
             message="the session summary through the CLI")  # fmt: skip
    assert any(SUMMARY_SYSTEM[:60] in system_text(m) for m in fake_api.messages())
    spawned = {
        r.headers.get("X-Claude-Code-Session-Id") or r.headers.get("x-claude-code-session-id")
        for r in fake_api.requests
        if isinstance(r.body, dict) and (OBSERVATION_SYSTEM[:60] in system_text(r.body) or SUMMARY_SYSTEM[:60] in system_text(r.body))
    }  # fmt: skip
    spawned.discard(None)
    assert spawned, "the CLI's requests carry no session id"
    assert_never_captured(machine, spawned)
    worker = client.get("/api/v1/status")
    with capsys.disabled():
        print(f"\nworker on the CLI route: RSS {worker['rss_mb']} MB (peak {worker['peak_rss_mb']} MB), "
              f"Claude calls today {worker['llm']['usage_today']}")  # fmt: skip


def assert_never_captured(machine: ClaudeHome, spawned: set[str]) -> None:
    """No event, session or record of the worker's own sessions; no transcript of them either."""
    db = sqlite3.connect(machine.plugin_data() / "memory.sqlite3")
    captured_sessions = {row[0] for row in db.execute("SELECT DISTINCT session_id FROM inbox")}
    known_sessions = {row[0] for row in db.execute("SELECT session_id FROM sessions")}
    assert captured_sessions and not (captured_sessions & spawned), "our hooks ran in a spawned session"
    assert not (known_sessions & spawned)
    payloads = "\n".join(row[0] for row in db.execute("SELECT payload FROM inbox"))
    assert OBSERVATION_SYSTEM[:60] not in payloads and "Reply with a single JSON value" not in payloads
    # The user's own session left its transcript; the spawned ones left none.
    transcripts = {p.stem for p in Path(machine.home, ".claude", "projects").rglob("*.jsonl")}
    assert transcripts & captured_sessions and not (transcripts & spawned)
