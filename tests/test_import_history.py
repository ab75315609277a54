"""`memory-anchor import-history` against a real worker: real transcripts through the capture door.

The transcripts are the real CLI's (tests/fixtures/transcripts/), copied with their
times moved to 2024, so that "the original time" cannot be mistaken for "now".
The worker is given a key to a fake Messages API: an import that called Claude
would show up in its request log.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from uuid import NAMESPACE_URL, uuid5

import pytest

from tests.conftest import ROOT, start_worker, worker_env
from tests.fakes.anthropic_server import FakeAnthropicServer, json_reply

FIXTURES = ROOT / "tests" / "fixtures" / "transcripts"
DAY = "2024-03-05"
START = datetime.fromisoformat(f"{DAY}T09:14:00+00:00").timestamp()
SECRET = "sk-ant-api03-Qx7vR2mT9pL4kW8nZ3bY6cH1dF5gJ0sA-4e2Xw"


def history(tmp_path: Path, *versions: str) -> Path:
    """The fixtures' sessions in one folder, as Claude Code keeps a project's, dated 2024-03-05 09:14."""
    folder = tmp_path / "history"
    for version in versions or ("2.1.197", "2.1.332"):
        for item in (FIXTURES / version).iterdir():
            if item.name == "hooks-received.ndjson":
                continue
            if item.is_dir():
                shutil.copytree(item, folder / item.name)
            else:
                folder.mkdir(exist_ok=True)
                (folder / item.name).write_text(item.read_text().replace("2026-11-26T19:1", f"{DAY}T09:1"))
    for agent in folder.glob("*/subagents/*.jsonl"):
        agent.write_text(agent.read_text().replace("2026-11-26T19:1", f"{DAY}T09:1"))
    return folder


def cli(worker, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "MEMORY_ANCHOR_", "ANTHROPIC_"))}
    env.update(MEMORY_ANCHOR_DATA_DIR=str(worker.data_dir), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "memory_anchor.cli.main", *args], env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def records(worker, kind: str, session_id: str | None = None) -> list[dict]:
    route = {"prompt": "prompts", "observation": "observations", "summary": "summaries"}[kind]
    return worker.get(f"/api/v1/{route}?limit=500" + (f"&session_id={session_id}" if session_id else ""))["results"]


@pytest.fixture
def fake_claude():
    server = FakeAnthropicServer(default=json_reply({"observations": [], "facts": []})).start()
    yield server
    server.stop()


@pytest.fixture
def keyed_worker(request, tmp_path, fake_claude, worker_backend):
    """A worker that could reach Claude (a key to the fake API), on each storage backend."""
    data_dir = tmp_path / "data"
    extra = {"ANTHROPIC_API_KEY": "sk-ant-fake", "ANTHROPIC_BASE_URL": fake_claude.base_url}
    if worker_backend == "postgres":
        from tests.postgres import init_team_database, member_url

        cluster = request.getfixturevalue("postgres_cluster")
        name = init_team_database(cluster)
        request.addfinalizer(lambda: cluster.drop_database(name))
        extra["MEMORY_ANCHOR_STORAGE_URL"] = member_url(cluster, name, "dev")
    running = start_worker(data_dir, env=worker_env(data_dir, **extra))
    yield running
    running.stop()


@pytest.mark.both_backends
def test_history_is_imported_with_its_times_redacted_and_locally(keyed_worker, fake_claude, tmp_path):
    worker = keyed_worker
    folder = history(tmp_path)
    done = cli(worker, "--json", "import-history", str(folder), "--wait")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["sessions"] == 2 and report["accepted"] == report["events"] > 30 and report["duplicates"] == 0
    assert "processed" in done.stderr  # progress is shown
    assert fake_claude.requests == []  # distilled locally: no Claude call, no tokens spent

    sessions = {s["session_id"]: s for s in worker.get("/api/v1/sessions?limit=50")["results"]}
    for path in folder.glob("*.jsonl"):
        session = sessions[path.stem]
        # started, last seen and ended when the transcript says, not when it was imported
        times = [_epoch(session[k]) for k in ("started_at", "last_seen_at", "ended_at")]
        assert START <= times[0] < times[1] <= times[2] < START + 60
        assert session["status"] == "ended" and session["cwd"].endswith("my.project_x")
        prompts = records(worker, "prompt", path.stem)
        assert {p["memory"] for p in prompts} >= {"use a subagent to list files", "/greet world", "read the notes"}
        assert all(_epoch(p["happened_at"]) >= START for p in prompts)
        summary = records(worker, "summary", path.stem)[0]
        assert START <= _epoch(summary["happened_at"]) < START + 60
    texts = json.dumps(worker.get("/api/v1/timeline?limit=500"))
    assert SECRET not in texts and "[REDACTED:anthropic_key]" in texts

    project = next(iter(sessions.values()))["project"]
    briefing = worker.get(f"/api/v1/context?project={project}&source=startup")["context"]
    assert f"{DAY} 09:14" in briefing and datetime.now(timezone.utc).strftime("%Y-%m-%d %H:") not in briefing

    again = cli(worker, "--json", "import-history", str(folder))
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)
    assert second["accepted"] == 0 and second["duplicates"] == report["events"]  # importing again adds nothing
    assert json.dumps(worker.get("/api/v1/timeline?limit=500")) == texts


def test_sessions_the_hooks_captured_are_not_imported_again(worker, tmp_path):
    folder = history(tmp_path, "2.1.197")
    [transcript] = folder.glob("*.jsonl")
    worker.post("/api/v1/events", {"hook_event_name": "UserPromptSubmit", "session_id": transcript.stem,
                                   "cwd": "/tmp/b_cc/run197/my.project_x", "prompt": "run echo hi"}, expect=202)  # fmt: skip
    done = cli(worker, "--json", "import-history", str(folder))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["skipped_sessions"] == [transcript.stem] and report["accepted"] == 0
    worker.wait_idle()
    assert [p["memory"] for p in records(worker, "prompt", transcript.stem)] == ["run echo hi"]


def test_excluded_projects_are_not_imported(tmp_path):
    data_dir = tmp_path / "data"
    worker = start_worker(data_dir, env=worker_env(data_dir, MEMORY_ANCHOR_EXCLUDED_PROJECTS="/tmp/b_cc/*"))
    try:
        done = cli(worker, "--json", "import-history", str(history(tmp_path, "2.1.197")), "--wait")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["accepted"] > 0  # accepted at the door, as a hook's event would be...
        for kind in ("prompt", "observation", "summary"):
            assert records(worker, kind) == []  # ...and never recorded, as a hook's event would not be
    finally:
        worker.stop()


def test_with_claude_the_import_takes_the_workers_route(keyed_worker, fake_claude, tmp_path):
    done = cli(keyed_worker, "--json", "import-history", str(history(tmp_path, "2.1.197")), "--claude", "--wait")
    assert done.returncode == 0, done.stderr
    systems = [json.dumps(r.body.get("system")) for r in fake_claude.requests]
    assert any("into an observation" in s for s in systems)  # tool uses compressed by Claude, as live


def test_the_default_is_this_projects_claude_code_folder(worker, tmp_path):
    project = tmp_path / "work" / "my.app_x"
    project.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "MEMORY_ANCHOR_", "ANTHROPIC_"))}
    env.update(MEMORY_ANCHOR_DATA_DIR=str(worker.data_dir), PYTHONPATH=str(ROOT), HOME=str(tmp_path / "home"))
    run = lambda: subprocess.run([sys.executable, "-m", "memory_anchor.cli.main", "import-history"], cwd=project,
                                 env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    missing = run()
    assert missing.returncode == 1 and "no Claude Code history" in missing.stderr
    assert "-work-my-app-x" in missing.stderr  # where Claude Code would keep it
    folder = tmp_path / "home" / ".claude" / "projects" / str(project).replace("/", "-").replace(".", "-").replace("_", "-")
    shutil.copytree(history(tmp_path, "2.1.197"), folder)
    for transcript in folder.rglob("*.jsonl"):  # sessions of this project, as its Claude Code folder holds
        transcript.write_text(transcript.read_text().replace("/tmp/b_cc/run197/my.project_x", str(project)))
    (folder / "probes.jsonl").write_text('{"session_id": "s1", "title": "not a session"}\n')  # another tool's file
    found = run()
    assert found.returncode == 0, found.stderr
    assert "imported 1 sessions" in found.stdout
    assert "skipped 1 files that are not Claude Code transcripts: probes.jsonl: not a Claude Code transcript" in found.stdout


def _epoch(value) -> float:
    return value if isinstance(value, (int, float)) else datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


def _session_start(worker, transcript_path: Path, source: str = "startup") -> dict:
    """The real SessionStart hook, as Claude Code runs it for a session whose transcript is `transcript_path`."""
    from tests.test_hooks import hook_env, run_hook

    payload = {"hook_event_name": "SessionStart", "session_id": transcript_path.stem, "source": source,
               "transcript_path": str(transcript_path), "cwd": "/tmp/b_cc/run197/my.project_x"}  # fmt: skip
    done = run_hook("SessionStart", payload, hook_env(worker.data_dir), timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_new_session_offers_the_projects_earlier_sessions_once(worker, tmp_path):
    """A project with Claude Code history: the first session's briefing (and the user) hear in one line that
    its earlier sessions can be imported and how; once they are, the line is gone. Other sessions do not count."""
    folder = history(tmp_path)  # two earlier sessions, as Claude Code keeps a project's
    (folder / "probes.jsonl").write_text("{}\n")  # not a session
    current = folder / "0b9c1a52-3d1e-4a43-9c55-1c4a6b8e2f10.jsonl"  # this session's own transcript, being written
    first = _session_start(worker, current)
    context = first["hookSpecificOutput"]["additionalContext"]
    offer = ("Memory Anchor: 2 earlier Claude Code sessions of this project can be imported into memory (locally, no "
             "Claude tokens): run `memory-anchor import-history` in the project's folder, or "
             "`memory-anchor import-history --dismiss` to stop this note.")  # fmt: skip
    assert context.endswith("\n\n" + offer) and context.count("import-history") == 2
    assert first["systemMessage"] == offer  # the user is the one to run it
    compacted = _session_start(worker, current, source="compact")  # said when a session starts, not after compaction
    assert "systemMessage" not in compacted and "import-history" not in compacted["hookSpecificOutput"]["additionalContext"]

    done = cli(worker, "import-history", str(folder))
    assert done.returncode == 0, done.stderr
    worker.wait_idle()
    after = _session_start(worker, current)
    assert "import-history" not in after["hookSpecificOutput"]["additionalContext"] and "systemMessage" not in after


def test_dismissing_the_offer_stops_it_and_imports_nothing(worker, tmp_path):
    folder = history(tmp_path, "2.1.332")
    current = folder / "0b9c1a52-3d1e-4a43-9c55-1c4a6b8e2f10.jsonl"
    assert "1 earlier Claude Code session of" in _session_start(worker, current)["systemMessage"]
    done = cli(worker, "import-history", "--dismiss", str(folder))
    assert done.returncode == 0, done.stderr
    assert "no longer offer" in done.stdout
    after = _session_start(worker, current)
    assert "systemMessage" not in after and "import-history" not in after["hookSpecificOutput"]["additionalContext"]
    assert records(worker, "prompt") == []  # dismissed, not imported


# --- forgetting survives a re-import ------------------------------------------------------------------------

RULE = "From now on always keep the notes in notes.txt, one per line."


def with_a_rule(tmp_path: Path) -> Path:
    """The 2.1.197 session the real CLI wrote, with one prompt reworded into a standing instruction."""
    folder = history(tmp_path, "2.1.197")
    [transcript] = folder.glob("*.jsonl")
    text = transcript.read_text()
    assert text.count('"text":"read the notes"') == 1
    transcript.write_text(text.replace('"text":"read the notes"', f'"text":{json.dumps(RULE)}'))
    return folder


def as_another_session(folder: Path, tmp_path: Path) -> Path:
    """The same conversation in another session's transcript (new session id, new line ids), as a copy of
    the history would be: its events are new to the inbox, so the same words are distilled again."""
    [transcript] = folder.glob("*.jsonl")
    text = transcript.read_text()
    new_id = "6f1d2c3b-4a5e-4f60-8a7b-9c0d1e2f3a4b"
    for uuid in set(re.findall(r'"(?:uuid|parentUuid)":"([0-9a-f-]{36})"', text)):
        text = text.replace(uuid, str(uuid5(NAMESPACE_URL, uuid)))
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / f"{new_id}.jsonl").write_text(text.replace(transcript.stem, new_id))
    return copy


def test_what_was_forgotten_stays_forgotten_when_the_history_is_imported_again(worker, tmp_path):
    folder = with_a_rule(tmp_path)
    assert cli(worker, "import-history", str(folder), "--wait").returncode == 0
    project = worker.get("/api/v1/sessions?limit=1")["results"][0]["project"]
    text = worker.get(f"/api/v1/context?project={project}&source=startup")["context"]
    rule = re.search(r"- rule: From now on always keep the notes in notes\.txt.*\(fact ([0-9a-f]{8})\)", text).group(1)
    cause = re.search(r"- missing\.txt was never created.*\(fact ([0-9a-f]{8})", text).group(1)
    step = re.search(r"- create missing\.txt \(step (\d+),", text).group(1)

    done = cli(worker, "forget", f"fact {rule}", f"fact {cause}", f"step {step}", "--reason", "not so")
    assert done.returncode == 0, done.stderr
    gone = ("keep the notes in notes.txt", "missing.txt was never created", "create missing.txt")

    def shown() -> list[str]:
        briefing = worker.get(f"/api/v1/context?project={project}&source=startup")["context"]
        recalled = worker.post("/api/v1/recall", {"prompt": "Where do we keep notes, and what about missing.txt?",
                                                  "project": project})["context"]  # fmt: skip
        steps = json.dumps(worker.get(f"/api/v1/next-steps?project={project}")["results"])
        facts = json.dumps(worker.get(f"/api/v1/facts?project={project}&status=active,pending")["results"])
        return [words for words in gone for where in (briefing, recalled, steps, facts) if words in where]

    assert shown() == []
    again = cli(worker, "--json", "import-history", str(folder), "--wait")  # the same files: nothing new
    assert again.returncode == 0 and json.loads(again.stdout)["accepted"] == 0
    assert shown() == []
    copy = cli(worker, "--json", "import-history", str(as_another_session(folder, tmp_path)), "--wait")
    assert copy.returncode == 0 and json.loads(copy.stdout)["accepted"] > 0, copy.stderr
    worker.wait_idle()
    # The same words distilled again, locally: the prompt and Claude's last message, in a session of their own...
    assert RULE in [p["memory"] for p in records(worker, "prompt", "6f1d2c3b-4a5e-4f60-8a7b-9c0d1e2f3a4b")]
    assert len(worker.get(f"/api/v1/summaries?project={project}")["results"]) == 2
    assert shown() == []  # ...and what was forgotten did not come back


def test_a_file_that_only_copies_a_session_read_before_is_no_session_of_its_own(worker, tmp_path):
    """A resumed session's file may hold nothing but its copy of the conversation it resumes (left before
    a new prompt): imported with the original, it adds no session and files none under "(no project)"."""
    folder = history(tmp_path, "2.1.197")
    [copy] = as_another_session(folder, tmp_path).glob("*.jsonl")
    shutil.copy(copy, folder / copy.name)
    done = cli(worker, "--json", "import-history", str(folder), "--wait")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["sessions"] == 1 and report["no_conversation"] == 1
    assert "(no project)" not in report["projects"] and sum(report["projects"].values()) == 1
    shown = cli(worker, "import-history", str(folder))
    assert "held no conversation of their own" in shown.stdout + shown.stderr


HEDGED_RULE = "Make sure to keep the notes in notes.txt, one per line."
RESUMED = "6f1d2c3b-4a5e-4f60-8a7b-9c0d1e2f3a4b"  # as_another_session's id


def with_a_hedged_rule(tmp_path: Path) -> Path:
    """The 2.1.197 session with one prompt reworded into an instruction said with a doubt: it waits for approval."""
    folder = history(tmp_path, "2.1.197")
    [transcript] = folder.glob("*.jsonl")
    transcript.write_text(transcript.read_text().replace('"text":"read the notes"', f'"text":{json.dumps(HEDGED_RULE)}'))
    return folder


def pending_rules(worker) -> tuple[list[dict], list[dict]]:
    """The facts waiting for approval that keep the notes in notes.txt, and the approvals that ask about them."""
    facts = [f for f in worker.get("/api/v1/facts?status=pending")["results"] if "notes.txt" in f["text"]]
    asked = [a for a in worker.get("/api/v1/approvals")["results"] if "notes.txt" in a["payload"].get("text", "")]
    return facts, asked


def imported_again(worker, folder: Path) -> None:
    done = cli(worker, "--json", "import-history", str(folder), "--wait")
    assert done.returncode == 0 and json.loads(done.stdout)["accepted"] > 0, done.stderr
    worker.wait_idle()


@pytest.mark.both_backends
def test_a_resumed_sessions_copy_of_a_pending_rule_reaffirms_it_and_one_approval_settles_it(keyed_worker, tmp_path):
    """Claude Code copies the earlier conversation into a resumed session's transcript: the user's sentence
    is imported twice, under two session ids. It is one pending rule said in both sessions, one approval."""
    worker = keyed_worker
    folder = with_a_hedged_rule(tmp_path)
    imported_again(worker, folder)
    [first], [asked] = pending_rules(worker)
    imported_again(worker, as_another_session(folder, tmp_path))
    assert HEDGED_RULE in [p["memory"] for p in records(worker, "prompt", RESUMED)]  # the copy was imported...
    [fact], [still] = pending_rules(worker)  # ...and reaffirmed the pending rule instead of adding one
    assert fact["id"] == first["id"] and still["id"] == asked["id"]
    original = next(folder.glob("*.jsonl")).stem
    assert fact["data"]["sessions"] == [original, RESUMED]
    assert [v["reason"] for v in worker.get(f"/api/v1/facts/{fact['id']}/history")["results"]][-1].startswith("REAFFIRM")

    worker.post(f"/api/v1/approvals/{asked['id']}/approve", {"actor": "alice"})
    assert pending_rules(worker) == ([], [])
    project = worker.get("/api/v1/sessions?limit=1")["results"][0]["project"]
    briefing = worker.get(f"/api/v1/context?project={project}&source=startup")["context"]
    assert briefing.count("keep the notes in notes.txt") == 1


@pytest.mark.both_backends
def test_a_rejected_rule_said_again_stays_rejected_unless_said_in_a_later_session(keyed_worker, tmp_path):
    """A person rejected it: the same words copied into a resumed session (said at the same time) ask nothing
    again; the user saying it again in a later session asks once more."""
    worker = keyed_worker
    folder = with_a_hedged_rule(tmp_path)
    imported_again(worker, folder)
    [fact], [asked] = pending_rules(worker)
    worker.post(f"/api/v1/approvals/{asked['id']}/reject", {"actor": "alice"})

    resumed = as_another_session(folder, tmp_path)
    imported_again(worker, resumed)
    assert pending_rules(worker) == ([], [])
    rejected = worker.get(f"/api/v1/facts/{fact['id']}")
    assert rejected["status"] == "rejected" and rejected["data"]["sessions"][-1] == RESUMED

    (tmp_path / "later").mkdir()
    [copied] = as_another_session(resumed, tmp_path / "later").glob("*.jsonl")  # new line ids
    later = copied.with_name(f"{LATER}.jsonl")  # another session, a day later
    later.write_text(copied.read_text().replace(f"{DAY}T09:1", "2024-03-06T09:1").replace(RESUMED, LATER))
    copied.unlink()
    imported_again(worker, later.parent)
    [again], [asked_again] = pending_rules(worker)
    assert again["id"] != fact["id"] and again["session_id"] == LATER and asked_again["id"] != asked["id"]


LATER = "0c9d8e7f-6a5b-4c3d-9e2f-1a0b9c8d7e6f"


def said_in_a_session(tmp_path: Path, name: str, session_id: str, day: str, prompt: str) -> Path:
    """The 2.1.197 session the real CLI wrote, as another session on `day` whose user said `prompt`."""
    (tmp_path / name).mkdir()
    folder = history(tmp_path / name, "2.1.197")
    [transcript] = folder.glob("*.jsonl")
    text = transcript.read_text().replace('"text":"read the notes"', f'"text":{json.dumps(prompt)}')
    for uuid in set(re.findall(r'"(?:uuid|parentUuid)":"([0-9a-f-]{36})"', text)):  # lines of its own
        text = text.replace(uuid, str(uuid5(NAMESPACE_URL, session_id + uuid)))
    transcript.unlink()
    (folder / f"{session_id}.jsonl").write_text(text.replace(transcript.stem, session_id).replace(f"{DAY}T", f"{day}T"))
    return folder


@pytest.mark.both_backends
def test_an_older_statement_imported_after_a_newer_one_is_kept_as_superseded_and_never_briefed(keyed_worker, tmp_path):
    """Months of live use, then the old history is imported: what the user said before the rule they gave
    later does not come back beside it or replace it."""
    worker = keyed_worker
    newer = said_in_a_session(tmp_path, "new", RESUMED, "2024-06-10", "From now on we format with ruff format instead of black.")
    older = said_in_a_session(tmp_path, "old", LATER, "2024-03-05", "We use black for formatting.")
    imported_again(worker, newer)
    imported_again(worker, older)
    project = worker.get("/api/v1/sessions?limit=1")["results"][0]["project"]
    briefing = worker.get(f"/api/v1/context?project={project}&source=startup")["context"]
    assert "ruff format instead of black" in briefing and "We use black" not in briefing
    live = worker.get(f"/api/v1/facts?project={project}&status=active,pending,disputed")["results"]
    [rule] = [f for f in live if "black" in f["text"]]
    assert rule["text"].startswith("From now on we format with ruff format") and worker.get("/api/v1/conflicts")["results"] == []
    [kept] = worker.get(f"/api/v1/facts?project={project}&status=superseded")["results"]
    assert kept["text"] == "We use black for formatting" and kept["data"]["superseded_by"] == rule["id"]
    assert kept["session_id"] == LATER and _epoch(kept["data"]["verified_at"]) < _epoch(rule["data"]["verified_at"])


def test_imported_words_keep_the_time_they_were_said(worker, tmp_path):
    """Facts, approvals and the timeline carry when the words were said (the transcript's time), not when
    they were imported; history imported today from 2024 sits below this week's work in the timeline."""
    worker.post("/api/v1/events", {"hook_event_name": "UserPromptSubmit", "session_id": "live-session",
                                   "cwd": "/tmp/b_cc/run197/my.project_x", "prompt": "what changed today"}, expect=202)  # fmt: skip
    worker.wait_idle()
    imported_again(worker, with_a_hedged_rule(tmp_path))
    [pending], [asked] = pending_rules(worker)
    assert START <= _epoch(pending["happened_at"]) < START + 60
    assert START <= asked["payload"]["said_at"] < START + 60 and asked["created_at"] > START + 86_400
    [cause] = [f for f in worker.get("/api/v1/facts?limit=100")["results"] if "missing.txt was never created" in f["text"]]
    assert START <= _epoch(cause["happened_at"]) < START + 60
    timeline = worker.get("/api/v1/timeline?limit=500")["results"]
    assert timeline[0]["memory"] == "what changed today"  # written first, said last: newest first
    said = [_epoch(r["happened_at"]) for r in timeline]
    assert said == sorted(said, reverse=True)
