"""Claude Code history read into hook events, checked against what the real hooks received.

The fixtures under tests/fixtures/transcripts/<version>/ were written by the real
Claude Code CLI (2.1.197, the pinned one, and 2.1.332) against the fake Messages
API, with a plugin whose hooks logged every payload they got
(`hooks-received.ndjson`): a Bash call with a secret in the prompt, a subagent
(in the foreground on 2.1.197, in the background on 2.1.332, whose completion
comes back as a <task-notification>), a custom slash command, a plugin skill,
Write/Edit/Read, and a built-in /compact. See tests/fixtures/transcripts/README.md.
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

import pytest

from memory_anchor.worker.capture.history import (
    claude_projects_dir,
    history_dirs,
    project_slug,
    session_events,
    session_files,
    session_id_of,
)
from tests.conftest import SHARED

FIXTURES = Path(__file__).parent / "fixtures" / "transcripts"
VERSIONS = ["2.1.197", "2.1.332"]


def received(version: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / version / "hooks-received.ndjson").read_text().splitlines()]


def imported(version: str) -> list[dict]:
    [path] = session_files(FIXTURES / version).files
    return [e.payload | {"_at": e.at, "_id": e.event_id} for e in session_events(path)]


def of(events: list[dict], name: str) -> list[dict]:
    return [e for e in events if e["hook_event_name"] == name]


@pytest.mark.parametrize("version", VERSIONS)
def test_prompts_are_the_users_words_as_the_hooks_got_them(version):
    hooks = [e["prompt"] for e in of(received(version), "UserPromptSubmit")]
    ours = [e["prompt"] for e in of(imported(version), "UserPromptSubmit")]
    # The hook is also called with Claude Code's own <task-notification> (a background agent
    # finished): not the user's words, so never a prompt here.
    users = [p for p in hooks if not p.startswith("<task-notification>")]
    if version == "2.1.332":
        # Sent while the background agent's notification was being answered, this prompt
        # reached the hook but never the transcript (Claude Code dropped it): nothing can import it.
        users.remove("write the file")
    assert ours == users
    assert "/greet world" in ours  # the custom command, unwrapped from its <command-name> wrapper
    assert not any(p.startswith(("/compact", "<", "Caveat", "Base directory for this skill")) for p in ours)
    assert not any("Say hello to world politely" in p for p in ours)  # the command's body is Claude Code's


@pytest.mark.parametrize("version", VERSIONS)
def test_tool_uses_match_the_hooks_payloads(version):
    hooks = {e["tool_use_id"]: e for e in of(received(version), "PostToolUse")}
    ours = {e["tool_use_id"]: e for e in of(imported(version), "PostToolUse")}
    for tool_use_id, hook in hooks.items():
        mine = ours[tool_use_id]
        assert mine["tool_name"] == hook["tool_name"]
        assert mine["tool_input"] == hook["tool_input"]  # a relative file_path made absolute, as for the hooks
        assert mine.get("agent_id") == hook.get("agent_id")  # a subagent's tool use is its agent's
        assert mine.get("agent_type") == hook.get("agent_type")
        assert mine["session_id"] == hook["session_id"] and mine["cwd"] == hook["cwd"]
        if isinstance(mine["tool_response"], dict):  # Claude Code kept the structured result the hook got
            for key in ("stdout", "stderr", "filePath", "type"):
                assert mine["tool_response"].get(key) == hook["tool_response"].get(key)
        else:  # a subagent's transcript keeps no toolUseResult: the result's text stands for it
            assert hook.get("agent_id") and mine["tool_response"] == "(Bash completed with no output)"
    extra = set(ours) - set(hooks)
    if version == "2.1.332":
        # 2.1.332 sends no PostToolUse for a tool that failed (a Read of a missing file);
        # its error is still what happened, so it is imported.
        assert [ours[t]["tool_name"] for t in extra] == ["Read"]
        assert "File does not exist" in ours[extra.pop()]["tool_response"]
    assert not extra
    subagent = [e for e in ours.values() if e.get("agent_id")]
    assert [e["tool_input"]["command"] for e in subagent] == ["ls"]


@pytest.mark.parametrize("version", VERSIONS)
def test_each_turn_ends_with_claudes_last_words(version):
    hooks = [e["last_assistant_message"] for e in of(received(version), "Stop")]
    ours = of(imported(version), "Stop")
    assert [e["last_assistant_message"] for e in ours] == hooks
    events = imported(version)
    assert events[-1]["hook_event_name"] == "SessionEnd"
    assert [e["hook_event_name"] for e in events].count("SessionEnd") == 1


@pytest.mark.parametrize("version", VERSIONS)
def test_events_keep_their_original_times_and_stable_ids(version):
    events = imported(version)
    start = datetime.fromisoformat("2026-11-26T19:14:00+00:00").timestamp()
    assert all(start <= e["_at"] <= start + 60 for e in events)
    prompts = of(events, "UserPromptSubmit")
    assert [p["_at"] for p in prompts] == sorted(p["_at"] for p in prompts)
    assert len({e["_id"] for e in events}) == len(events)
    assert [e["_id"] for e in imported(version)] == [e["_id"] for e in events]  # the same ids every time


def test_a_sidechain_in_the_main_file_is_its_agents_work(tmp_path):
    """Older Claude Code wrote subagents' turns into the main transcript, marked isSidechain."""
    lines = [
        {"type": "user", "uuid": "u1", "sessionId": "s1", "cwd": "/p", "timestamp": "2025-01-01T10:00:00Z",
         "message": {"role": "user", "content": "find the config"}},
        {"type": "assistant", "uuid": "a1", "sessionId": "s1", "timestamp": "2025-01-01T10:00:01Z",
         "message": {"id": "m1", "content": [{"type": "tool_use", "id": "t1", "name": "Task", "input": {"prompt": "look"}}]}},
        {"type": "user", "uuid": "u2", "sessionId": "s1", "isSidechain": True, "timestamp": "2025-01-01T10:00:02Z",
         "message": {"role": "user", "content": "look"}},
        {"type": "assistant", "uuid": "a2", "sessionId": "s1", "isSidechain": True, "timestamp": "2025-01-01T10:00:03Z",
         "message": {"id": "m2", "content": [{"type": "text", "text": "searching"},
                                             {"type": "tool_use", "id": "t2", "name": "Glob", "input": {"pattern": "*.toml"}}]}},
        {"type": "user", "uuid": "u3", "sessionId": "s1", "isSidechain": True, "timestamp": "2025-01-01T10:00:04Z",
         "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "pyproject.toml"}]}},
        {"type": "user", "uuid": "u4", "sessionId": "s1", "timestamp": "2025-01-01T10:00:05Z",
         "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "pyproject.toml"}]}},
        {"type": "assistant", "uuid": "a3", "sessionId": "s1", "timestamp": "2025-01-01T10:00:06Z",
         "message": {"id": "m3", "content": [{"type": "text", "text": "It is pyproject.toml."}]}},
    ]  # fmt: skip
    path = tmp_path / "s1.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    events = [e.payload for e in session_events(path)]
    assert [e["hook_event_name"] for e in events] == ["UserPromptSubmit", "PostToolUse", "PostToolUse", "Stop", "SessionEnd"]
    glob, task = of(events, "PostToolUse")
    assert (glob["tool_name"], glob["agent_id"]) == ("Glob", "sidechain") and "agent_id" not in task
    assert of(events, "Stop")[0]["last_assistant_message"] == "It is pyproject.toml."  # not the subagent's "searching"


def test_interrupted_turns_and_local_commands_are_not_prompts(tmp_path):
    entry = lambda uuid, content, **extra: {"type": "user", "uuid": uuid, "sessionId": "s2", "timestamp": f"2025-01-01T10:00:{uuid[1:]}Z",
                                            "message": {"role": "user", "content": content}, **extra}  # fmt: skip
    lines = [
        entry("u01", "<local-command-caveat>Caveat: The messages below were generated by the user while running local commands.</local-command-caveat>", isMeta=True),
        entry("u02", "<command-name>/model</command-name>\n<command-message>model</command-message>\n<command-args></command-args>"),
        entry("u03", "<local-command-stdout>Set model to opus</local-command-stdout>"),
        entry("u04", "<command-name>/cost</command-name>\n<command-message>cost</command-message>\n<command-args></command-args>"),
        entry("u05", "<local-command-stdout>Total cost: $0.01</local-command-stdout>"),
        entry("u06", "<bash-input>ls</bash-input>"),
        entry("u07", "<bash-stdout>a.txt</bash-stdout><bash-stderr></bash-stderr>"),
        entry("u08", "fix the failing test please"),
        entry("u09", [{"type": "text", "text": "[Request interrupted by user]"}]),
        entry("u10", "<command-message>review</command-message>\n<command-name>/review</command-name>\n<command-args>src/app.py</command-args>"),
        entry("u11", "Review src/app.py carefully.", isMeta=True),
    ]  # fmt: skip
    path = tmp_path / "s2.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    prompts = [e.payload["prompt"] for e in session_events(path) if e.payload["hook_event_name"] == "UserPromptSubmit"]
    assert prompts == ["fix the failing test please", "/review src/app.py"]


def test_the_ide_extensions_notes_are_not_part_of_the_prompt(tmp_path):
    """In an IDE, Claude Code writes the file open or the lines selected into the user's message,
    as its own block or its own entry; what the user typed is the rest."""
    note = ("<ide_opened_file>The user opened the file /home/me/app/sync.ts in the IDE. This may or may not be "
            "related to the current task.</ide_opened_file>")  # fmt: skip
    selection = "<ide_selection>The user selected the lines 3 to 4 from /home/me/app/sync.ts:\nretry()\n</ide_selection>"
    lines = [
        {"type": "user", "uuid": "u1", "sessionId": "s3", "timestamp": "2025-01-01T10:00:01Z",
         "message": {"role": "user", "content": [{"type": "text", "text": note}, {"type": "text", "text": "Is the retry bounded?"}]}},
        {"type": "user", "uuid": "u2", "sessionId": "s3", "timestamp": "2025-01-01T10:00:02Z",
         "message": {"role": "user", "content": selection}},
    ]  # fmt: skip
    path = tmp_path / "s3.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    prompts = [e.payload["prompt"] for e in session_events(path) if e.payload["hook_event_name"] == "UserPromptSubmit"]
    assert prompts == ["Is the retry bounded?"]


def test_claude_codes_folder_for_a_project(tmp_path, monkeypatch):
    # What 2.1.197 and 2.1.332 named the fixtures' project folder (cwd /tmp/b_cc/run197/my.project_x).
    assert project_slug("/tmp/b_cc/run197/my.project_x") == "-tmp-b-cc-run197-my-project-x"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "config"))
    assert claude_projects_dir() == tmp_path / "config" / "projects"
    project = tmp_path / "work" / "my.app_x"
    project.mkdir(parents=True)
    assert history_dirs(str(project)) == []
    folder = claude_projects_dir() / project_slug(str(project))
    folder.mkdir(parents=True)
    shutil.copy(next((FIXTURES / "2.1.197").glob("*.jsonl")), folder / "a.jsonl")
    assert history_dirs(str(project)) == [folder]
    assert session_files(folder).files == [folder / "a.jsonl"]


def test_only_claude_code_transcripts_are_sessions(tmp_path):
    """A folder of transcripts may hold other .jsonl files (the replay benchmark's probes.jsonl,
    a tool's log): they are skipped, each with its reason, never imported as a session."""
    folder = tmp_path / "project"
    folder.mkdir()
    transcript = folder / "58951dce-fe9a-4328-bb9c-9f166ee8011b.jsonl"
    shutil.copy(next((FIXTURES / "2.1.197").glob("*.jsonl")), transcript)
    (folder / "probes.jsonl").write_text(json.dumps({"session_id": "s1", "title": "Fix the admin"}) + "\n")
    (folder / "empty.jsonl").write_text("")
    (folder / "notes.jsonl").write_text("not json\n[1, 2]\n")
    # Only Claude Code's bookkeeping, no conversation: nothing to import.
    (folder / "summary-only.jsonl").write_text(json.dumps({"type": "summary", "summary": "x", "leafUuid": "u1"}) + "\n")
    found = session_files(folder)
    assert found.files == [transcript]
    assert dict((p.name, why) for p, why in found.skipped) == {
        "empty.jsonl": "empty",
        "notes.jsonl": "not JSON Lines of objects",
        "probes.jsonl": "not a Claude Code transcript (no user or assistant entry with a sessionId in its first 1 lines)",
        "summary-only.jsonl": "not a Claude Code transcript (no user or assistant entry with a sessionId in its first 1 lines)",
    }


def test_a_resumed_sessions_file_is_filed_under_the_conversation_it_continues(tmp_path):
    """Older Claude Code wrote a resumed session to a new file whose lines keep the first session's id:
    its events, and whoever looks the session up (bench replay), go by that id, not the file name."""
    [original] = session_files(FIXTURES / "2.1.197").files
    first_id = session_events(original)[0].payload["session_id"]
    resumed = tmp_path / "1842319d-fe3b-4b85-ab5f-adedbce12474.jsonl"
    summary = json.dumps({"type": "summary", "summary": "Refactoring", "leafUuid": "u1"})
    resumed.write_text(summary + "\n" + original.read_text(encoding="utf-8"), encoding="utf-8")
    assert session_id_of(resumed) == first_id != resumed.stem
    assert {e.payload["session_id"] for e in session_events(resumed)} == {first_id}
    assert session_id_of(tmp_path / "no-such-file.jsonl") == "no-such-file"


BRAIN = SHARED / "bench" / "replay" / "brain"
BRAIN_ORIGINAL = BRAIN / "06ea6fa4-e075-452b-a4af-00dce71fbe5d.jsonl"
BRAIN_RESUMED = BRAIN / "d67a1cb3-a6ec-4293-8fc9-b46d94b4e857.jsonl"  # opens with a copy of the one above


@pytest.mark.skipif(not BRAIN_RESUMED.exists(), reason=f"needs the brain replay set in {BRAIN}")
def test_a_resumed_sessions_copy_of_the_conversation_is_not_imported_twice():
    """A real user's resumed session whose file opens with a copy of the conversation it resumes,
    under its own session id and new line ids: imported after the original, only its own turns
    become events, as its hooks reported them live."""
    said_before: set[bytes] = set()
    original = session_events(BRAIN_ORIGINAL, said_before=said_before)
    resumed = session_events(BRAIN_RESUMED, said_before=said_before)
    prompts = [e["prompt"] for e in of([e.payload for e in resumed], "UserPromptSubmit")]
    assert prompts[0] == "continue"  # not the resumed conversation's first request
    assert not set(prompts) & {e.payload["prompt"] for e in original if "prompt" in e.payload}
    assert min(e.at for e in resumed) > max(e.at for e in original if e.at)
    # Read on its own (no earlier file), the resumed file is all its turns, the copy included.
    alone = [e.payload["prompt"] for e in session_events(BRAIN_RESUMED) if "prompt" in e.payload]
    assert alone[0].startswith("the stop hook is a bust") and alone[-len(prompts):] == prompts


def test_the_offer_to_import_reads_no_folder_a_path_cannot_name(tmp_path):
    from memory_anchor.worker.capture.history_offer import importable_sessions

    # What a caller sends as transcript_path is listed only when it is a folder (never raised on).
    assert importable_sessions(None, "/no/such/folder/s.jsonl", "s", tmp_path) == 0
    assert importable_sessions(None, "bad\0path/s.jsonl", "s", tmp_path) == 0
    assert importable_sessions(None, "", None, tmp_path) == 0


def test_claude_codes_own_lines_without_their_marks_are_not_prompts(tmp_path):
    """Older or converted transcripts lose `isMeta` and `isCompactSummary`: a custom command's body still
    follows its command entry at the same moment, a hook's output still comes wrapped in its tags, and a
    compacted session's summary still opens as Claude Code writes it."""
    entry = lambda uuid, at, content, **extra: {"type": "user", "uuid": uuid, "sessionId": "s4", "timestamp": at,
                                                "message": {"role": "user", "content": content}, **extra}  # fmt: skip
    lines = [
        entry("u1", "2025-01-01T10:00:00Z", "<session-start-hook><EXTREMELY_IMPORTANT>\nYou have superpowers. For all other skills, use the 'Skill' tool:"),
        entry("u2", "2025-01-01T10:00:05Z", "<command-message>handoff is running…</command-message>\n<command-name>/handoff</command-name>"),
        entry("u3", "2025-01-01T10:00:05Z", [{"type": "text", "text": "# Session Handoff\n\nPrepare for ending this session."}]),
        {"type": "assistant", "uuid": "a1", "sessionId": "s4", "timestamp": "2025-01-01T10:00:09Z",
         "message": {"role": "assistant", "id": "m1", "content": [{"type": "text", "text": "Done."}]}},
        entry("u4", "2025-01-01T10:01:00Z", "make sure that handoff updates the wiki if needed"),
        entry("u5", "2025-01-01T11:00:00Z", "This session is being continued from a previous conversation that ran out "
                                            "of context. Summary: the user said never edit generated files."),
    ]  # fmt: skip
    path = tmp_path / "s4.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    prompts = [e.payload["prompt"] for e in session_events(path) if e.payload["hook_event_name"] == "UserPromptSubmit"]
    assert prompts == ["/handoff", "make sure that handoff updates the wiki if needed"]
def test_a_line_added_to_claude_md_with_the_hash_shortcut_is_the_users_prompt(tmp_path):
    """Claude Code 1.0 records `# text` as a block in tags after a caveat, then an empty "(no content)"
    line (the shapes of a real 1.0.35 transcript): the user typed it, to keep it."""
    line = lambda uuid, at, content, **extra: {"type": "user", "uuid": uuid, "sessionId": "s5", "timestamp": at,
                                               "version": "1.0.35", "userType": "external",
                                               "message": {"role": "user", "content": content}, **extra}  # fmt: skip
    lines = [
        line("u1", "2025-06-27T15:34:13.157Z", "Caveat: The messages below were generated by the user while running "
             "local commands. DO NOT respond to these messages or otherwise consider them in your response unless the "
             "user explicitly asks you to.", isMeta=True),
        line("u2", "2025-06-27T18:51:28.347Z", "<user-memory-input> Never edit the .env file without authorization </user-memory-input>"),
        line("u3", "2025-06-27T18:51:28.408Z", "(no content)"),
    ]  # fmt: skip
    path = tmp_path / "s5.jsonl"
    path.write_text("\n".join(json.dumps(entry) for entry in lines))
    prompts = [e.payload["prompt"] for e in session_events(path) if e.payload["hook_event_name"] == "UserPromptSubmit"]
    assert prompts == ["<user-memory-input> Never edit the .env file without authorization </user-memory-input>"]


def test_every_event_keeps_a_time_of_the_transcript_and_a_transcript_of_nothing_gives_none(tmp_path):
    """A Stop whose turn has no timestamp of its own is dated by the transcript's latest time, never by the
    import; a session opened and left with /exit (Claude Code's own lines only) is no session at all."""
    from memory_anchor.worker.capture.history import session_events

    said = "2025-03-01T10:00:00Z"
    lines = [{"type": "user", "sessionId": "s1", "uuid": "u1", "cwd": "/p", "timestamp": said,
              "message": {"role": "user", "content": "why does the export fail?"}},
             {"type": "assistant", "sessionId": "s1", "uuid": "a1", "cwd": "/p",
              "message": {"role": "assistant", "content": [{"type": "text", "text": "The path was wrong."}]}}]  # fmt: skip
    transcript = tmp_path / "s1.jsonl"
    transcript.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    events = session_events(transcript)
    assert [e.payload["hook_event_name"] for e in events] == ["UserPromptSubmit", "Stop", "SessionEnd"]
    assert {e.at for e in events} == {datetime.fromisoformat("2025-03-01T10:00:00+00:00").timestamp()}

    exit_only = tmp_path / "s2.jsonl"
    exit_only.write_text(json.dumps({"type": "user", "sessionId": "s2", "uuid": "m1", "cwd": "/p", "timestamp": said,
                                     "isMeta": True, "message": {"role": "user", "content": "Caveat: The messages below "
                                     "were generated by the user while running local commands."}}) + "\n")  # fmt: skip
    assert session_events(exit_only) == []
