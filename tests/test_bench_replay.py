"""`bench replay`, quick form: the last sessions of the django replay imported into a real worker.

shared/bench/replay/django holds real agent sessions nobody here wrote, in Claude Code's
transcript shape (its README): their prompts are django bug reports pasted in, none a
standing instruction of the person at the keyboard, and the agents narrate their own
process. Imported through `import-history` and read as a session reads memory (the
briefing, per-prompt recall, the MCP search through the real `mcp` client), the
figures the benchmark prints must be sane and issue 25's precision goals must hold on
the slice. Durations are printed, never asserted.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_anchor.bench import replay
from memory_anchor.worker.memory.outcomes import is_narration
from tests.conftest import SHARED

DJANGO = SHARED / "bench" / "replay" / "django"

pytestmark = pytest.mark.skipif(not DJANGO.exists(), reason="the django replay folder is not present")

# Two earlier sessions whose patch holds a migration no Edit or Write made: their reproduce.py ran Django's
# makemigrations, whose output says it wrote migrations/0001_initial.py (memory_anchor/worker/pipeline/compress/shell_files.py).
WRITTEN_BY_A_COMMAND = ("e312296a-4b59-57cc-834c-411c971a113b", "a91873d3-dcc5-5a61-9fbe-af87a5262947")


def slice_of_django(folder: Path, last: int = 5) -> Path:
    """The last sessions of the django replay and the two above, with their probes: a folder bench replay reads."""
    from memory_anchor.worker.capture.history import session_files

    files = session_files(DJANGO).files
    chosen = [f for f in files if f.stem in WRITTEN_BY_A_COMMAND] + files[-last:]
    folder.mkdir()
    for path in chosen:
        (folder / path.name).symlink_to(path)
    ids = {path.stem for path in chosen}
    probes = [line for line in (DJANGO / "probes.jsonl").read_text().splitlines() if line.strip()]
    (folder / "probes.jsonl").write_text("\n".join(p for p in probes if json.loads(p)["session_id"] in ids) + "\n")
    return folder


def test_the_last_django_sessions_imported_brief_no_false_rule_and_recall_the_files(tmp_path, capsys):
    figures = replay.measure(slice_of_django(tmp_path / "django"), tmp_path / "work")
    met = replay.report(figures)
    printed = capsys.readouterr().out
    print(printed)

    # sane figures, all printed
    assert figures["sessions"] == 7 and figures["events"] == figures["accepted"] > 100 and figures["refused"] == 0
    assert [name for name, _ in figures["not_transcripts"]] == ["probes.jsonl"]  # skipped, with its reason
    assert 0 < figures["processed_seconds"] <= figures["import_seconds"] and figures["cpu_seconds"] > 0
    assert 50 < figures["rss_mb"] <= figures["peak_rss_mb"] < 2000
    assert len(figures["probes"]) == 7 and f"{figures['chars']:,} characters" in printed
    assert figures["subject"]["sessions"] == 7 and "whose title names a subject" in printed  # issue titles, all of them
    assert "import seconds (processed + embedded)" in printed and isinstance(met, bool)

    # what memory asserts: no rule from a pasted bug report, no narration as a fact, a handful of steps
    assert figures["rules"] == [], figures["briefing"]
    assert not [line for line in figures["facts"] if is_narration(line)], figures["facts"]
    assert len(figures["next_steps"]) <= replay.GOALS["next_steps"]
    assert figures["claude_code_text"] == []
    assert figures["chars"] <= replay.GOALS["chars"]
    assert len(figures["last_sessions"]["named"]) >= replay.GOALS["last_sessions"], figures["last_sessions"]

    # asked how an issue was fixed, recall and search name a file the session changed: every session whose
    # transcript says a file of its patch was written, by a tool or a command (a database file a script's run
    # created is beyond memory: no line says so)
    written = [row for row in figures["probes"] if row["written"]]
    assert len(written) == figures["written"]["sessions"] >= 6
    by_command = [row for row in figures["probes"] if row["files"][0] == "migrations/0001_initial.py"]
    assert len(by_command) == 2 and all(row["written"] for row in by_command)
    assert all(row["recall"] for row in written), [r["title"] for r in written if not r["recall"]]
    assert all(row["search"] for row in written), [r["title"] for r in written if not r["search"]]


def test_a_probe_title_names_a_subject_only_in_a_persons_words():
    """Real sessions open with "yes", "continue" or a slash command: no question can point at those,
    so the replay also reports the probes whose title names what the session was about."""
    assert replay.names_a_subject("QuerySet.only() after select_related() crashes on proxy models")
    assert replay.names_a_subject("be sure to also use serena")
    assert replay.names_a_subject("<ide_opened_file>The user opened sync.ts in the IDE.</ide_opened_file> why does the delta sync stall")
    assert replay.names_a_subject("把cc的官方文档中文版输出在桌面")  # written without spaces, a whole request
    for opening in ("yes", "continue", "ok go", "继续",
                    "<command-message>catchup is running…</command-message> <command-name>/catchup</command-name>",
                    "Caveat: The messages below were generated by the user while running local commands."):
        assert not replay.names_a_subject(opening), opening


def test_a_file_written_on_windows_is_named_with_either_separator_and_in_any_case():
    said = r"Edited e:\阿里国际站运营\README.md; Created C:\Users\me\.claude\memory\MEMORY.md"
    assert replay.names_a_file(said, ["E:/阿里国际站运营/README.md"])
    assert replay.names_a_file(said, [".claude/memory/MEMORY.md"])  # relative to the session's first cwd
    assert not replay.names_a_file(said, [".claude/memory/OTHER.md", "README.txt"])
