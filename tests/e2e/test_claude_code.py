"""End to end with the real Claude Code CLI (both pins, tests/e2e/cli) and the fake Messages API.

The plugin is installed as a user installs it (marketplace add + install) into
a temporary HOME; Claude Code runs the hooks and the MCP server itself. Most
tests point the hooks at this checkout's environment (`MEMORY_ANCHOR_PYTHON`);
`test_first_run_bootstraps_and_loses_nothing` runs the real bootstrap.

What Claude Code sends the hooks and the MCP server changes between versions, so
the tests of capture, recall, MCP, /compact and the manifests run with the oldest
supported CLI and the newest. Ten parallel sessions and the first run exercise the
worker and the bootstrap, which do not depend on the version: newest only.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import uuid
from pathlib import Path

import pytest

from memory_anchor.client.worker_client import WorkerClient
from tests.e2e.harness import (
    BACKGROUND_STEP,
    DELEGATE_MARKER,
    MCP_PREFIX,
    RUN_MARKER,
    SEARCH_MEMORY,
    ClaudeHome,
    ScriptedModel,
    ClaudeCli,
    copy_plugin,
    ensure_claude_installed,
    last_tool_result,
    last_tool_use,
    mac_like_path,
    offered_tools,
    wait_for,
)
from tests.fakes.anthropic_server import FakeAnthropicServer, last_user_prompt

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="session")
def plugin_root(tmp_path_factory) -> Path:
    return copy_plugin(tmp_path_factory.mktemp("clone") / "memory-anchor")


@pytest.fixture
def marker() -> str:
    return f"MARKER-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def fake_api(marker):
    with FakeAnthropicServer(responder=ScriptedModel(marker)) as server:
        yield server


@pytest.fixture
def machine(tmp_path, claude_cli: ClaudeCli, plugin_root, fake_api):
    """A user's machine with the plugin installed; the worker is stopped afterwards."""
    home = ClaudeHome(tmp_path, fake_api.base_url, developer_python=sys.executable, claude=claude_cli.path)
    home.install_plugin(plugin_root)
    yield home
    stop_worker(home)


def stop_worker(home: ClaudeHome, wait: float = 30.0) -> None:
    """SIGTERM the worker the hooks started, and wait for it to exit while the fake API is still
    up (it is torn down after this): a distilling call in flight then finishes, instead of
    retrying a closed port until the stray-process reaper kills the worker 10 s later."""
    import os

    from tests.conftest import _running

    pids = []
    for info in (home.home / ".claude" / "plugins" / "data").glob("*/worker.json"):
        try:
            pid = json.loads(info.read_text())["pid"]
            os.kill(pid, 15)
            pids.append(pid)
        except (OSError, ValueError, KeyError):
            pass
    try:
        wait_for(lambda: not any(_running(pid) for pid in pids), wait, interval=0.05, message="the worker to stop")
    except AssertionError:
        pass  # still stopping: the stray-process reaper ends it


def main_requests(fake_api, since: int = 0) -> list[dict]:
    """The conversation requests (with tools), not Claude Code's side requests."""
    return [m for m in fake_api.messages()[since:] if m.get("tools")]


def session_one_observation(home: ClaudeHome, marker: str) -> tuple[WorkerClient, dict]:
    client = WorkerClient(home.plugin_data(), autostart=False)

    def find():
        for obs in client.get("/api/v1/observations", limit=50)["results"]:
            if obs.get("data", {}).get("command") == f"echo {marker}":
                return obs
        return None

    return client, wait_for(find, 60, message="session 1's Bash tool use to become an observation")


def test_plugin_manifests_validate(claude_cli: ClaudeCli, plugin_root):
    """`claude plugin validate --strict` passes; with `--json` where the version has it (2.1.332 does, 2.1.197 not)."""
    import subprocess

    def validate(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(claude_cli.path), "plugin", "validate", *args], capture_output=True, text=True, timeout=60)

    has_json = "--json" in validate("--help").stdout
    for target in (plugin_root, plugin_root / ".claude-plugin" / "plugin.json"):
        result = validate("--strict", *(["--json"] if has_json else []), str(target))
        assert result.returncode == 0, result.stdout + result.stderr
        if has_json:
            report = json.loads(result.stdout)
            assert report["success"] and report["strict"], report
            assert report["manifest"]["errors"] == [] and report["manifest"]["warnings"] == [], report["manifest"]
            assert {hook["event"] for hook in report["provides"]["hooks"]} == {
                "SessionStart", "UserPromptSubmit", "PostToolUse", "PreCompact", "Stop", "SessionEnd"}
            assert [server["name"] for server in report["provides"]["mcpServers"]] == ["memory"]
        else:
            assert "Validation passed" in result.stdout


def test_session_two_recalls_session_one_and_mcp_round_trip(machine, fake_api, marker):
    settings = json.loads((machine.home / ".claude" / "settings.json").read_text())
    assert settings["enabledPlugins"] == {"memory-anchor@memory-anchor": True}

    machine.run(RUN_MARKER)
    client, observation = session_one_observation(machine, marker)
    assert observation["data"]["tool_name"] == "Bash" and observation["project"] == str(machine.project)
    client.get("/api/v1/context", project=str(machine.project), source="startup")  # warm, as a later session finds it

    # Session 2: its first model request carries the memory of session 1 (SessionStart context).
    since = len(fake_api.messages())
    machine.run(SEARCH_MEMORY)
    requests = main_requests(fake_api, since)
    first = json.dumps(requests[0])
    assert observation["id"][:8] in first and observation["title"] in first

    # The MCP tools are offered to the model, and search → get_observations returns session 1's memory.
    with_search = [r for r in requests if last_tool_use(r) == MCP_PREFIX + "search"]
    with_details = [r for r in requests if last_tool_use(r) == MCP_PREFIX + "get_observations"]
    assert with_search and with_details, "the scripted search round trip did not happen"
    names = offered_tools(with_search[0])
    ours = {name.removeprefix(MCP_PREFIX) for name in names if name.startswith(MCP_PREFIX)}
    assert ours == {"search", "timeline", "get_observations", "memory_write_fact", "forget_memory", "edit_memory",
                    "record_user_answer"}
    assert observation["id"] in last_tool_result(with_search[0])
    details = last_tool_result(with_details[0])
    assert f"echo {marker}" in details and observation["id"] in details

    # What our memory tools answered is memory already: not captured back (the uses still count).
    def session_two() -> dict | None:
        rows = client.get("/api/v1/sessions", project=str(machine.project))["results"]
        return next((s for s in rows if s["session_id"] != observation["session_id"] and s["tool_count"] >= 2), None)

    second = wait_for(session_two, 60, message="session 2's tool uses to be processed")
    wait_for(lambda: client.get("/api/v1/summaries", session_id=second["session_id"])["results"], 60,
             message="session 2's Stop, after its tool uses, to be processed")  # fmt: skip
    kept = client.get("/api/v1/observations", session_id=second["session_id"], limit=50)["results"]
    assert not [o for o in kept if o["data"].get("tool_name", "").startswith(MCP_PREFIX)], kept


@pytest.mark.parametrize("claude_cli", ["newest"], indirect=True)  # 2.1.197's foreground agent: tests/test_hook_fields.py
def test_a_subagents_tool_use_is_kept_with_its_agent_and_the_outcome_waits_for_it(machine, fake_api, marker):
    """The model hands the marker command to a subagent, which 2.1.332 runs in the background: a
    first Stop comes while it works, then its notification's turn and the Stop after the work."""
    scripted = fake_api.responder

    def stop_received() -> bool:
        inbox = machine.plugin_data() / "memory.sqlite3"
        spool = machine.plugin_data() / "spool.jsonl"
        if inbox.exists():
            with sqlite3.connect(inbox) as db:
                if db.execute("SELECT 1 FROM inbox WHERE event = 'Stop'").fetchone():
                    return True
        return spool.exists() and '"Stop"' in spool.read_text()

    def subagent_waits_for_the_first_stop(request: dict) -> object:
        # An agent quicker than the main conversation's Stop hook would be done before that Stop,
        # which then names no background work: a session that really ended, not this test's case
        # (seen once in a whole run of the suite). The agent's requests wait until the Stop is sent.
        prompt = last_user_prompt(request)
        if request.get("tools") and RUN_MARKER in prompt and DELEGATE_MARKER not in prompt:
            wait_for(stop_received, 60, message="the main conversation's first Stop")
        return scripted(request)

    fake_api.responder = subagent_waits_for_the_first_stop
    machine.run(DELEGATE_MARKER)
    client, observation = session_one_observation(machine, marker)
    assert observation["data"]["subagent"]["type"] == "general-purpose" and observation["data"]["subagent"]["id"]
    session_id = observation["session_id"]
    launches = [o for o in client.get("/api/v1/observations", session_id=session_id, limit=50)["results"]
                if o["data"].get("tool_name") in ("Agent", "Task")]  # fmt: skip
    assert launches and "subagent" not in launches[0]["data"]  # the main conversation launched it

    def summary() -> dict | None:
        summaries = client.get("/api/v1/summaries", session_id=session_id)["results"]
        return summaries[0] if summaries else None

    # Not closed while the agent worked: no version of the session's summary (nor an open next
    # step) ever held the step the first Stop named, moot once the agent is done.
    wait_for(lambda: client.get("/api/v1/sessions/" + session_id).get("status") == "ended", 60, message="SessionEnd")
    latest = wait_for(summary, 60, message="the session's summary")
    assert "the subagent printed the marker" in latest["memory"], latest["memory"]
    versions = client.get(f"/api/v1/memories/{latest['id']}/history")["results"]
    assert versions and not [v for v in versions if BACKGROUND_STEP in v["memory"]], [v["memory"] for v in versions]
    steps = client.get("/api/v1/next-steps", project=str(machine.project))["results"]
    assert not [s for s in steps if BACKGROUND_STEP in json.dumps(s)], steps


@pytest.mark.parametrize("claude_cli", ["newest"], indirect=True)  # the worker's concurrency, not Claude Code's
def test_ten_parallel_sessions_share_one_worker(machine, fake_api, marker):
    """Ten sessions at once, each with its own MCP bridge: one worker serves them all, without an error."""
    from concurrent.futures import ThreadPoolExecutor

    machine.run(RUN_MARKER)
    client, observation = session_one_observation(machine, marker)
    worker_pid = json.loads((machine.plugin_data() / "worker.json").read_text())["pid"]
    since = len(fake_api.messages())

    def session(_):
        return machine.claude("-p", "--dangerously-skip-permissions", SEARCH_MEMORY, timeout=600)

    with ThreadPoolExecutor(max_workers=10) as pool:
        results = list(pool.map(session, range(10)))
    for result in results:
        assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-2000:])
        assert "Found it in memory." in result.stdout

    requests = main_requests(fake_api, since)
    details = [last_tool_result(r) for r in requests if last_tool_use(r) == MCP_PREFIX + "get_observations"]
    assert len(details) >= 10 and all(f"echo {marker}" in d and observation["id"] in d for d in details)
    errors = [block for r in requests for m in r["messages"] if isinstance(m.get("content"), list)
              for block in m["content"] if isinstance(block, dict) and block.get("is_error")]  # fmt: skip
    assert not errors, errors
    assert json.loads((machine.plugin_data() / "worker.json").read_text())["pid"] == worker_pid
    assert client.get("/api/health")["status"] == "ok"


def test_compact_captures_before_and_reinjects_after(machine, fake_api, marker):
    found = {}

    def after_prompt(n: int) -> None:
        if n == 1:  # the worker has distilled the tool use before the user compacts
            found["observation"] = session_one_observation(machine, marker)[1]

    machine.session([RUN_MARKER, "/compact keep the marker", "what next?"], between=after_prompt)
    observation = found["observation"]
    db = sqlite3.connect(machine.plugin_data() / "memory.sqlite3")
    events = [row[0] for row in db.execute("SELECT event FROM inbox ORDER BY id")]
    assert "PreCompact" in events
    assert "SessionStart" in events[events.index("PreCompact") + 1 :]  # the session restarts after compaction
    pre_compact = json.loads(db.execute("SELECT payload FROM inbox WHERE event = 'PreCompact'").fetchone()[0])
    assert pre_compact["trigger"] == "manual" and pre_compact["transcript_path"].endswith(".jsonl")
    # The request after compaction carries the SessionStart(compact) context with session 1's observation.
    after = [m for m in main_requests(fake_api) if "what next?" in json.dumps(m["messages"])]
    assert after, "no request for the prompt after /compact"
    text = json.dumps(after[0])
    assert "Memory Anchor" in text and observation["id"][:8] in text


# A real venv + pip install (minutes on a busy 2-core machine): the first run a user gets.
@pytest.mark.timeout(2400)
@pytest.mark.parametrize("claude_cli", ["newest"], indirect=True)  # the bootstrap is ours, whatever the version
def test_first_run_bootstraps_and_loses_nothing(tmp_path, claude_cli: ClaudeCli, plugin_root, fake_api, marker):
    """A Mac's first run: `python3` is 3.9, a newer Python is beside it. The user is told that
    memory is being set up; the environment builds with the newer Python in the background,
    the session is never blocked, then the worker ingests every spooled event."""
    home = ClaudeHome(tmp_path, fake_api.base_url, developer_python=None, claude=claude_cli.path)
    home.env["PATH"] = mac_like_path(tmp_path / "bin")
    home.install_plugin(plugin_root)
    try:
        # What the user sees in the terminal (claude -p never shows a hook's systemMessage).
        screen = home.interactive_screen("Memory Anchor is setting up its Python environment", timeout=120)
        assert "events are kept".replace(" ", "") in screen.replace(" ", "")
        result = home.run(RUN_MARKER)
        assert "The marker command ran." in result.stdout
        data = home.plugin_data()

        def spooled_events() -> list[dict]:
            spool = data / "spool.jsonl"
            return [json.loads(line) for line in spool.read_text().splitlines()] if spool.exists() else []

        # The events Claude Code does not wait on are spooled by a detached process (hookkit/entry.py).
        every_event = {"SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "SessionEnd"}
        wait_for(lambda: {e["payload"]["hook_event_name"] for e in spooled_events()} >= every_event, 30,
                 message="every event of the session in the spool")  # fmt: skip
        spooled = spooled_events()
        wait_for(lambda: (data / "worker.json").exists(), 900, message="the bootstrap to start the worker")
        client, observation = session_one_observation(home, marker)
        db = sqlite3.connect(data / "memory.sqlite3")
        stored = {row[0] for row in db.execute("SELECT dedup_key FROM inbox")}
        for entry in spooled:
            key = (f"tool:{entry['payload']['tool_use_id']}" if entry["payload"].get("tool_use_id")
                   else f"event:{entry['id']}")  # fmt: skip
            assert key in stored, entry["payload"]["hook_event_name"]
        assert [p.name for p in (data / "env").iterdir()] == ["0.2.0"]
        newer = f"{sys.version_info[0]}.{sys.version_info[1]}"
        assert f"building with Python {newer}" in (data / "logs" / "bootstrap.log").read_text()
        assert not list((data / "env" / "0.2.0").glob("lib/python3*/site-packages/kubernetes"))  # cut: unused
    finally:
        stop_worker(home)


# The measurement behind docs/benchmarks.md's first-run figures: two full installs from pypi.org.
@pytest.mark.slow
@pytest.mark.timeout(7200)
def test_bench_first_run_cold_and_warm_pip_cache():
    import subprocess

    ensure_claude_installed()
    result = subprocess.run([sys.executable, "-m", "tests.e2e.bench_first_run", "--cache", "both"],
                            cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=7000)  # fmt: skip
    print(result.stdout)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["cold", "warm"]
    assert all("first observation" in line and "packages" in line for line in lines)


@pytest.mark.parametrize("claude_cli", ["newest"], indirect=True)
def test_a_project_with_history_is_offered_its_import_until_it_is_imported(machine, fake_api, marker):
    """A user installs the plugin in a project Claude Code has history for: the first session's briefing
    says in one line that the earlier session can be imported, and how; `memory-anchor import-history`
    run in the project imports it, and the next session says nothing of it."""
    import subprocess

    from memory_anchor.worker.capture.history import project_slug

    root = Path(__file__).resolve().parents[2]
    folder = machine.home / ".claude" / "projects" / project_slug(str(machine.project))
    folder.mkdir(parents=True)
    earlier = next((root / "tests" / "fixtures" / "transcripts" / "2.1.197").glob("*.jsonl"))
    # A session from before the plugin, by the real CLI, in this project (it was recorded in another folder).
    lines = [json.loads(line) for line in earlier.read_text().splitlines() if line.strip()]
    (folder / earlier.name).write_text("".join(json.dumps({**line, "cwd": str(machine.project)} if "cwd" in line else line) + "\n"
                                               for line in lines))  # fmt: skip

    since = len(fake_api.messages())
    machine.run(RUN_MARKER)
    first = json.dumps(main_requests(fake_api, since)[0])
    assert "1 earlier Claude Code session of this project can be imported" in first
    assert "memory-anchor import-history" in first
    assert len(list(folder.glob("*.jsonl"))) == 2  # Claude Code kept this session's transcript beside it

    env = {**machine.env, "MEMORY_ANCHOR_DATA_DIR": str(machine.plugin_data()), "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-m", "memory_anchor.cli.main", "import-history", "--wait"],
                          cwd=machine.project, env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "imported 2 sessions" in done.stdout and "left out 1 sessions the hooks captured live" in done.stdout

    since = len(fake_api.messages())
    machine.run(RUN_MARKER)
    assert "can be imported" not in json.dumps(main_requests(fake_api, since)[0])
