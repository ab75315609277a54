"""`memory-anchor import-history` reports a bad file and goes on, against a real worker.

A line of 200,000 nested `[`, a directory or a FIFO named like a transcript (in the folder and
among a session's subagents), a dangling symbolic link, a loop of them: each is named with its
reason and every good session is imported; a FIFO never hangs the import. A transcript that
grew imports only what is new (one SessionEnd per session). A session whose cwd is relative or
climbs out with `..` is refused; without PATH, a session of another project is left out. One
bad timestamp does not move a session's end to the import's time.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import zlib
from datetime import datetime, timezone
from pathlib import Path

from memory_anchor.worker.capture.history import project_slug
from tests.conftest import ROOT

DAY = "2024-05-06"


def line(kind: str, session: str, cwd: str, n: int, text: str, stamp: str | None = None) -> str:
    # Two sessions never have a prompt said at the same millisecond: one that does is a resumed
    # session's copy of the other (memory_anchor/worker/capture/history.py, continued_from).
    moment = f"{DAY}T10:{n:02d}:00.{zlib.crc32(session.encode()) % 1000:03d}Z"
    entry = {"type": kind, "uuid": f"{session}-{kind}-{n}", "timestamp": stamp or moment,
             "sessionId": session, "cwd": cwd}  # fmt: skip
    if kind == "user":
        entry["message"] = {"role": "user", "content": text}
    else:
        entry["message"] = {"id": f"msg-{session}-{n}", "role": "assistant", "content": [{"type": "text", "text": text}]}
    return json.dumps(entry) + "\n"


def transcript(folder: Path, session: str, cwd: str, turns: int = 2, start: int = 0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{session}.jsonl"
    with open(path, "a") as handle:
        for n in range(start, start + turns):
            handle.write(line("user", session, cwd, 2 * n, f"please check the invoice export number {n}"))
            handle.write(line("assistant", session, cwd, 2 * n + 1, f"Checked invoice export {n}: it is fine."))
    return path


def edits(session: str, cwd: str, path: Path, files: list[str]) -> None:
    """Append an Edit of each file to a session's transcript, with its result, as Claude Code writes them."""
    with open(path, "a") as handle:
        for n, name in enumerate(files, start=40):
            call = {"type": "tool_use", "id": f"toolu_{session}_{n}", "name": "Edit",
                    "input": {"file_path": name, "old_string": "a = 1", "new_string": "a = 2"}}  # fmt: skip
            result = {"type": "tool_result", "tool_use_id": call["id"], "content": "The file has been updated."}
            for kind, content in (("assistant", [call]), ("user", [result])):
                entry = json.loads(line(kind, session, cwd, n, ""))
                entry["message"]["content"] = content
                handle.write(json.dumps(entry) + "\n")


def cli(worker, *args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "MEMORY_ANCHOR_", "ANTHROPIC_"))}
    base.update(MEMORY_ANCHOR_DATA_DIR=str(worker.data_dir), PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run([sys.executable, "-m", "memory_anchor.cli.main", *args], env=base, capture_output=True,
                          text=True, timeout=120, cwd=cwd or ROOT)  # fmt: skip


def prompts(worker, session: str) -> list[str]:
    return [p["memory"] for p in worker.get(f"/api/v1/prompts?limit=100&session_id={session}")["results"]]


def inbox_events(worker, session: str, event: str) -> int:
    with sqlite3.connect(f"file:{worker.data_dir / 'memory.sqlite3'}?mode=ro", uri=True) as db:
        return db.execute("SELECT count(*) FROM inbox WHERE session_id = ? AND event = ?", (session, event)).fetchone()[0]


def test_bad_files_are_reported_with_their_reason_and_the_rest_is_imported(worker, tmp_path):
    folder = tmp_path / "history"
    cwd = str(tmp_path / "proj")
    transcript(folder, "good-one", cwd)
    (folder / "nested.jsonl").write_text("[" * 200_000 + "\n")
    deep = transcript(folder, "good-deep", cwd)  # a good session with one such line in the middle
    deep.write_text(deep.read_text().replace("\n", "\n" + "[" * 200_000 + "\n", 1))
    (folder / "adir.jsonl").mkdir()
    os.mkfifo(folder / "pipe.jsonl")
    (folder / "dangling.jsonl").symlink_to(folder / "nowhere.jsonl")
    (folder / "loop-a.jsonl").symlink_to(folder / "loop-b.jsonl")
    (folder / "loop-b.jsonl").symlink_to(folder / "loop-a.jsonl")
    with_agent = transcript(folder, "good-agents", cwd)
    agents = with_agent.with_suffix("") / "subagents"
    agents.mkdir(parents=True)
    os.mkfifo(agents / "agent-fifo.jsonl")
    (agents / "agent-dir.jsonl").mkdir()

    done = cli(worker, "--json", "import-history", str(folder))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    why = {Path(name).name: reason for name, reason in report["not_transcripts"] + report["failed"]}
    assert why["nested.jsonl"] == "not JSON Lines of objects", why
    assert why["adir.jsonl"] == "a directory" and why["pipe.jsonl"].startswith("a FIFO"), why
    assert why["dangling.jsonl"] == "a dangling symbolic link", why
    assert why["loop-a.jsonl"] == why["loop-b.jsonl"] == "a symbolic link loop", why
    assert why["agent-fifo.jsonl"].startswith("a FIFO") and why["agent-dir.jsonl"] == "a directory", why
    assert report["sessions"] == 3 and report["accepted"] > 0
    worker.wait_idle()
    for session in ("good-one", "good-deep", "good-agents"):
        assert "please check the invoice export number 1" in prompts(worker, session), session


def test_a_transcript_that_grew_adds_only_what_is_new_and_ends_its_session_once(worker, tmp_path):
    folder = tmp_path / "history"
    cwd = str(tmp_path / "proj")
    path = transcript(folder, "growing", cwd, turns=1)
    for round_ in range(1, 4):
        done = cli(worker, "--json", "import-history", str(path))
        assert done.returncode == 0, done.stderr
        transcript(folder, "growing", cwd, turns=1, start=round_)  # the session goes on
    again = json.loads(cli(worker, "--json", "import-history", str(path)).stdout)
    assert again["accepted"] == 2  # the last turn's prompt and Stop; nothing earlier again
    worker.wait_idle()
    assert inbox_events(worker, "growing", "SessionEnd") == 1
    assert inbox_events(worker, "growing", "UserPromptSubmit") == 4
    assert len(prompts(worker, "growing")) == 4


def test_a_session_whose_cwd_is_not_an_absolute_clean_path_is_refused(worker, tmp_path):
    folder = tmp_path / "history"
    transcript(folder, "relative-cwd", "relative/dir")
    transcript(folder, "climbing-cwd", str(tmp_path / "a" / ".." / ".." / ".." / "etc"))
    transcript(folder, "drive-relative-cwd", "C:projects\\shop")
    transcript(folder, "clean-cwd", str(tmp_path / "proj"))
    # Claude Code on Windows writes its own paths: a history made there is read here as it is.
    windows = transcript(folder, "windows-cwd", "X:\\03_ACG\\Odoo_Docs")
    edits("windows-cwd", "X:\\03_ACG\\Odoo_Docs", windows, ["X:\\03_ACG\\Custom_Addons\\crm\\views.xml", "notes\\plan.md"])
    done = cli(worker, "--json", "import-history", str(folder))
    assert done.returncode == 0, done.stderr
    why = {Path(name).stem: reason for name, reason in json.loads(done.stdout)["failed"]}
    assert set(why) == {"relative-cwd", "climbing-cwd", "drive-relative-cwd"}, why
    assert all("not an absolute, normalised path" in reason for reason in why.values()), why
    worker.wait_idle()
    projects = {s["project"] for s in worker.get("/api/v1/sessions?limit=50")["results"]}
    assert projects == {str(tmp_path / "proj"), "X:\\03_ACG\\Odoo_Docs"}
    # Its file paths too: a drive path is absolute there, a relative one is joined the Windows way.
    edited = " ".join(o["memory"] for o in worker.get("/api/v1/observations?session_id=windows-cwd&limit=50")["results"])
    assert "X:\\03_ACG\\Custom_Addons\\crm\\views.xml" in edited and "Odoo_Docs/X:" not in edited, edited
    assert "X:\\03_ACG\\Odoo_Docs\\notes\\plan.md" in edited, edited


def test_without_a_path_sessions_of_another_project_are_left_out(worker, tmp_path):
    project = tmp_path / "work" / "shop"
    project.mkdir(parents=True)
    home = tmp_path / "home"
    folder = home / ".claude" / "projects" / project_slug(str(project))
    transcript(folder, "own-session", str(project))
    transcript(folder, "planted", str(tmp_path / "victim"))
    run = cli(worker, "--json", "import-history", cwd=project, env={"HOME": str(home)})
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert [Path(name).stem for name, _ in report["other_projects"]] == ["planted"]
    assert report["sessions"] == 1 and list(report["projects"]) == [str(project)]
    everything = cli(worker, "--json", "import-history", "--all-projects", cwd=project, env={"HOME": str(home)})
    assert json.loads(everything.stdout)["projects"] == {str(project): 1, str(tmp_path / "victim"): 1}


def test_one_bad_timestamp_does_not_move_the_sessions_end_to_now(worker, tmp_path):
    folder = tmp_path / "history"
    cwd = str(tmp_path / "proj")
    path = transcript(folder, "bad-stamp", cwd)
    with open(path, "a") as handle:
        handle.write(line("user", "bad-stamp", cwd, 10, "one more question about the export", stamp="not-a-time"))
        handle.write(line("assistant", "bad-stamp", cwd, 11, "Answered it.", stamp="0001-01-01T00:00:00Z"))
    done = cli(worker, "--json", "import-history", str(path))
    assert done.returncode == 0, done.stderr
    worker.wait_idle()
    [session] = [s for s in worker.get("/api/v1/sessions?limit=50")["results"] if s["session_id"] == "bad-stamp"]
    ended = datetime.fromisoformat(session["ended_at"].replace("Z", "+00:00"))
    assert ended.date().isoformat() == DAY, session
    assert ended <= datetime(2024, 5, 7, tzinfo=timezone.utc)
