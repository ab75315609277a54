"""The hook fields Claude Code added by 2.1.332, fed to a real worker as the real CLI sent them.

The payloads are recorded from the CLI, not written here:
- tests/fixtures/transcripts/<version>/hooks-received.ndjson: a stream-json session
  (Bash, a subagent that runs in the background on 2.1.332, a skill, /compact);
- tests/fixtures/hook_payloads/<version>/: one-shot `claude -p` sessions (a Bash call,
  our MCP tool, a resume and a fork) and what the CLI wrote to the MCP server.
Their READMEs say how to record them again.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from memory_anchor.hookkit import origin
from memory_anchor.core.projects import project_for_cwd
from memory_anchor.schemas.events import accepted_event, typed_by_person
from tests.conftest import ROOT
from tests.test_hooks import hook_env, run_hook

FIXTURES = ROOT / "tests" / "fixtures"
VERSIONS = ("2.1.197", "2.1.332")
SESSION_332 = "8270c8fb-509e-497e-a760-2d2be05f9805"  # the stream-json session of 2.1.332
SUBAGENT_332 = "a37f70d0b080ba3ca"


def recorded(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def session_events(version: str) -> list[dict]:
    return recorded(FIXTURES / "transcripts" / version / "hooks-received.ndjson")


def one_shot_events(version: str) -> list[dict]:
    return recorded(FIXTURES / "hook_payloads" / version / "hooks-received.ndjson")


def transcript_lines(version: str) -> list[dict]:
    [path] = (FIXTURES / "transcripts" / version).glob("*.jsonl")
    return recorded(path)


def post_all(worker, events: list[dict]) -> None:
    for event in events:
        worker.post("/api/v1/events", event, expect=202)


# --- 1. who sent a prompt -------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_every_recorded_payload_is_accepted_by_the_wire_models(version):
    for event in session_events(version) + one_shot_events(version):
        if event["hook_event_name"] in ("SubagentStop",):  # not an event the plugin registers
            continue
        assert accepted_event(event) is event


@pytest.mark.parametrize("version", VERSIONS)
def test_claude_p_prompts_carry_no_source_yet_and_are_the_users_ask(version):
    """2.1.332 declares `source` but sends it on no prompt; a person's `claude -p` prompt is their ask."""
    prompts = [e for e in session_events(version) + one_shot_events(version) if e["hook_event_name"] == "UserPromptSubmit"]
    assert prompts and all("source" not in p for p in prompts)
    typed = [p for p in prompts if not p["prompt"].startswith("<task-notification>")]
    assert typed and all(typed_by_person(p) for p in typed)


def test_the_transcript_names_claude_p_prompts_sdk_and_a_notification_system():
    """What `source` will say once sent: the transcript's promptSource of the same prompts."""
    sources = {}
    for line in transcript_lines("2.1.332"):
        if line.get("type") == "user" and line.get("promptSource"):
            content = line["message"]["content"]
            text = content if isinstance(content, str) else " ".join(b.get("text", "") for b in content)
            sources[text.split("\n")[0]] = line["promptSource"]
    assert sources["run the failing check"] == "sdk" and sources["<task-notification>"] == "system"
    assert origin.typed_by_person("sdk", "run the failing check")
    assert not origin.typed_by_person("system", "anything")
    for machine in ("loop_wakeup", "schedule_wakeup", "poll_event"):
        assert not origin.typed_by_person(machine, "check the deploy")


def test_a_background_agents_notification_is_neither_the_users_ask_nor_recalled(worker):
    """2.1.332 hands the finished background agent's report to UserPromptSubmit, without `source`."""
    events = session_events("2.1.332")
    [notification] = [e for e in events if e.get("prompt", "").startswith("<task-notification>")]
    # Memory that matches it well: the same report, as an earlier notification's words would be kept.
    naming = json.loads((worker.data_dir / "worker.json").read_text())["project_names"]
    report = re.sub(r"<[^>]+>", " ", notification["prompt"])
    worker.post("/api/v1/memories", {"content": report, "infer": False,
                                     "project": project_for_cwd(notification["cwd"], naming)})  # fmt: skip
    worker.wait_idle()
    env = hook_env(worker.data_dir)

    # The hook answers a machine turn with nothing; the same words typed by a person get recall.
    silent = run_hook("UserPromptSubmit", notification, env)
    assert silent.returncode == 0 and silent.stdout == b""
    heard = run_hook("UserPromptSubmit", dict(notification, prompt=report.strip(), session_id="typed-1"), env)
    assert SUBAGENT_332 in json.loads(heard.stdout)["hookSpecificOutput"]["additionalContext"]

    post_all(worker, [e for e in events if e["hook_event_name"] != "SubagentStop"])
    worker.wait_idle()
    prompts = worker.get(f"/api/v1/prompts?session_id={SESSION_332}&limit=50")["results"]
    sources = {p["memory"].split("\n")[0]: p["data"].get("prompt_source") for p in prompts}
    assert sources["<task-notification>"] == "system"
    assert sources["use a subagent to list files"] is None  # no source sent: a person's, as before
    [summary] = worker.get(f"/api/v1/summaries?session_id={SESSION_332}")["results"]
    assert "task-notification" not in summary["memory"] and "Subagent report" not in summary["data"].get("request", "")


# --- 2. subagents ----------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)  # in the foreground on 2.1.197, in the background on 2.1.332
def test_a_subagents_tool_use_is_kept_with_its_agent(worker, version):
    events = [e for e in session_events(version) if e["hook_event_name"] != "SubagentStop"]
    post_all(worker, events)
    worker.wait_idle()
    observations = worker.get(f"/api/v1/observations?session_id={events[0]['session_id']}&limit=50")["results"]
    by_command = {o["data"].get("command"): o for o in observations if o["data"].get("tool_name") == "Bash"}
    [agent] = {e["agent_id"] for e in events if e.get("agent_type") == "general-purpose"}
    assert by_command["ls"]["data"]["subagent"] == {"id": agent, "type": "general-purpose"}
    assert "subagent" not in by_command["echo hi"]["data"]  # the main conversation's own

    from memory_anchor.mcp import render

    line = render.index_line(render.record(by_command["ls"]))
    assert "| by subagent general-purpose |" in line
    assert "subagent" not in render.index_line(render.record(by_command["echo hi"]))


def test_a_stop_with_background_work_leaves_the_outcome_to_the_stop_after_it(worker):
    """2.1.332: the agent runs in the background; the first Stop comes while it works."""
    events = [e for e in session_events("2.1.332") if e["hook_event_name"] != "SubagentStop"]
    paused = next(i for i, e in enumerate(events) if e["hook_event_name"] == "Stop" and e["background_tasks"])
    assert events[paused]["background_tasks"][0]["status"] == "running"

    def summary() -> dict:
        [found] = worker.get(f"/api/v1/summaries?session_id={SESSION_332}")["results"]
        return found

    post_all(worker, events[:paused])
    worker.wait_idle()
    before = summary()
    post_all(worker, events[paused:paused + 1])
    worker.wait_idle()
    assert summary()["version"] == before["version"]  # not closed on "The subagent listed the files"
    done = next(i for i in range(paused + 1, len(events)) if events[i]["hook_event_name"] == "Stop")
    post_all(worker, events[paused + 1:done + 1])
    worker.wait_idle()
    assert summary()["version"] > before["version"]


# --- 3. MCP tools ----------------------------------------------------------------------


def our_mcp_tool_use() -> dict:
    [use] = [e for e in one_shot_events("2.1.332") if e.get("tool_name", "").startswith("mcp__")]
    return use


def test_the_cli_names_our_server_as_origin_does():
    use = our_mcp_tool_use()
    assert use["mcp_server"] == {"name": origin.OWN_MCP_SERVER, "source": "plugin"}
    assert use["tool_name"].startswith(origin.OWN_MCP_TOOL_PREFIX)
    plugin = json.loads((ROOT / ".claude-plugin" / "plugin.json").read_text())["name"]
    [server] = json.loads((ROOT / ".mcp.json").read_text())["mcpServers"]
    assert origin.OWN_MCP_SERVER == f"plugin:{plugin}:{server}"


def test_our_own_memory_tools_are_not_captured_back_and_other_servers_are_kept(worker):
    ours = our_mcp_tool_use()
    older = {k: v for k, v in ours.items() if k != "mcp_server"}  # as 2.1.197 sends it
    older.update(session_id="older-cli", tool_use_id="toolu_older")
    theirs = dict(ours, tool_name="mcp__plugin_github_github__search_issues", tool_use_id="toolu_github",
                  mcp_server={"name": "plugin:github:github", "source": "plugin"})  # fmt: skip
    post_all(worker, [ours, older, theirs])
    worker.wait_idle()
    kept = worker.get(f"/api/v1/observations?session_id={ours['session_id']}&limit=50")["results"]
    assert [o["data"]["tool_name"] for o in kept] == [theirs["tool_name"]]
    assert kept[0]["data"]["mcp_server"] == "plugin:github:github"
    assert worker.get("/api/v1/observations?session_id=older-cli")["results"] == []
    session = worker.get(f"/api/v1/sessions/{ours['session_id']}")
    assert session["tool_count"] >= 1  # the use still counts as activity of the session


# --- 4. what the hooks print ---------------------------------------------------------------

HOOK_EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse", "PreCompact", "Stop", "SessionEnd")


def assert_claude_code_takes(stdout: bytes) -> None:
    """2.1.248+: stdout that opens with "{" and is not valid JSON is a hook error. Ours is either
    nothing or one JSON object of the fields Claude Code reads."""
    if not stdout.strip():
        return
    assert stdout.lstrip().startswith(b"{"), stdout[:200]
    output = json.loads(stdout.decode("ascii"))  # ASCII too: no locale can garble it
    assert set(output) <= {"hookSpecificOutput", "systemMessage"}, output


def recorded_payload(event: str) -> dict:
    """The first payload of that kind the real 2.1.332 sent."""
    return next(e for e in one_shot_events("2.1.332") + session_events("2.1.332") if e["hook_event_name"] == event)


def test_every_hook_prints_valid_json_or_nothing_with_a_worker(shared_worker):
    """Memory with quotes, backslashes, non-ASCII and braces comes back through SessionStart and recall."""
    payloads = {event: recorded_payload(event) for event in HOOK_EVENTS}
    cwd = payloads["UserPromptSubmit"]["cwd"]
    naming = json.loads((shared_worker.data_dir / "worker.json").read_text())["project_names"]
    odd = 'The "deploy" key {env: "prod"} lives in C:\\ops\\deploy — naïve ✓ 部署'
    shared_worker.post("/api/v1/memories", {"content": odd, "infer": False, "project": project_for_cwd(cwd, naming)})
    shared_worker.wait_idle()
    payloads["UserPromptSubmit"]["prompt"] = 'where does the "deploy" key {env: "prod"} live?'
    env = hook_env(shared_worker.data_dir)
    printed = {}
    for event, payload in payloads.items():
        result = run_hook(event, payload, env)
        assert result.returncode == 0 and result.stderr == b""
        assert_claude_code_takes(result.stdout)
        printed[event] = result.stdout
    assert "部署" in json.loads(printed["UserPromptSubmit"])["hookSpecificOutput"]["additionalContext"]


@pytest.mark.parametrize("event", HOOK_EVENTS)
def test_every_hook_prints_valid_json_or_nothing_when_things_go_wrong(tmp_path, event):
    payload = recorded_payload(event)
    blocker = tmp_path / "file"
    blocker.write_text("")
    broken = tmp_path / 'a "quoted" folder' / "hooks"  # a plugin copy whose kit cannot be imported
    broken.mkdir(parents=True)
    (broken / "hook.py").write_text((ROOT / "hooks" / "hook.py").read_text())
    situations = [
        (json.dumps(payload).encode(), hook_env(tmp_path / "no-worker", MEMORY_ANCHOR_PYTHON="")),  # first run
        (b"\xff not json {", hook_env(tmp_path / "garbage")),
        (json.dumps(payload).encode(), hook_env(blocker / "data")),  # the data dir cannot be written
    ]
    for raw, env in situations:
        result = run_hook(event, raw, env)
        assert result.returncode == 0 and result.stderr == b""
        assert_claude_code_takes(result.stdout)
    result = subprocess.run(["python3", "-S", str(broken / "hook.py"), event], input=json.dumps(payload).encode(),
                            env=hook_env(tmp_path / "broken"), capture_output=True, timeout=20)  # fmt: skip
    assert result.returncode == 0
    assert_claude_code_takes(result.stdout)
    if event == "SessionStart":  # the one hook that tells the user memory is off
        assert "Memory Anchor is off" in json.loads(result.stdout)["systemMessage"]


def test_session_end_has_a_timeout_of_its_own():
    """Before 2.1.268 a SessionEnd hook without its own `timeout` was cut after 1.5 s."""
    config = json.loads((ROOT / "hooks" / "hooks.json").read_text())["hooks"]
    [[hook]] = [entry["hooks"] for entry in config["SessionEnd"]]
    assert hook["timeout"] >= 5
