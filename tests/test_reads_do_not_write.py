"""Reads do not write: the briefing built with the code changed under a fact and a next step leaves
the database as it was; the jobs that write (the maintenance job, the git watch, `verify --fix`)
record the demotion and the close the briefing showed."""

from __future__ import annotations

import hashlib
import shutil
import time

import pytest

from tests.gitrepo import GitRepo

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

SETTINGS = "[database]\nurl = 'postgresql://localhost/shop'\n"
RULE = "Always keep the database settings in config/settings.toml"
STEP = "add a retry to fetch_user in src/api/client.py"


def database_state(db, data_dir):
    """The bytes of the database and its WAL, and every version of every record."""
    files = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
             for p in sorted(data_dir.iterdir()) if p.name.startswith("memory.sqlite3") and not p.name.endswith("-shm")}  # fmt: skip
    rows = [tuple(row) for row in db.reader().execute("SELECT * FROM records ORDER BY seq").fetchall()]
    return files, rows


def open_steps(briefing: str) -> str:
    return briefing.split("## Open next steps")[1].split("\n## ")[0] if "## Open next steps" in briefing else ""


def test_the_briefing_shows_what_commits_changed_and_writes_nothing(tmp_path):
    from memory_anchor.schemas.memory_model import FactIn
    from memory_anchor.schemas.settings import Settings
    from memory_anchor.worker.codebase.service import Codebase
    from memory_anchor.worker.context import ContextRequest, ContextServices, build_context
    from memory_anchor.worker.memory import MemoryModel
    from memory_anchor.worker.store.db import Database

    repo = GitRepo(tmp_path / "shop")
    repo.write("config/settings.toml", SETTINGS)
    repo.write("src/api/client.py", "def fetch_user(id):\n    return get(id)\n")
    repo.commit("the shop")
    project = str(repo.root.resolve())
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    db = Database(data_dir / "memory.sqlite3")
    codebase = Codebase()
    model = MemoryModel(db, codebase=codebase)
    fact = model.add_fact(FactIn(text=RULE, confidence=0.95, project=project, category="rule"))["record"]
    assert [ref["path"] for ref in fact["data"]["code"]] == ["config/settings.toml"]
    with db.transaction() as conn:  # opened a little before the commits below (git keeps whole seconds)
        model.open_items.record_outcome(conn, project=project, branch="main", session_id="s1", next_steps=[STEP],
                                        done=[], at=time.time() - 5)  # fmt: skip
    services = ContextServices(settings=Settings(), reader=db.reader, memory=model, codebase=codebase)

    def briefing() -> str:
        return build_context(ContextRequest(project=project, services=services), db.reader()).text

    first = briefing()
    assert "needs verification" not in first and STEP in open_steps(first)
    repo.git("rm", "-q", "config/settings.toml")
    repo.commit("settings move to the environment")
    repo.write("src/api/client.py", "def fetch_user(id, retries=3):\n    return get(id, retries=retries)\n")
    repo.commit("Add retry to fetch_user")

    before = database_state(db, data_dir)
    shown = briefing()
    assert database_state(db, data_dir) == before  # no new version, not a byte of the files
    line = next(line for line in shown.splitlines() if RULE in line)
    assert "[needs verification]" in line and line.endswith("(config/settings.toml deleted since)"), shown
    assert STEP not in open_steps(shown), shown  # a commit did it: shown closed

    # Where writes belong: the maintenance job, the git watch and `verify --fix` record it.
    assert model.check_facts_against_code() == 1
    assert len(database_state(db, data_dir)[1]) == len(before[1]) + 1
    stored = model.facts.get(fact["id"])
    assert stored["data"]["code_stale"]["state"] == "deleted" and stored["needs_verification"], stored
    assert model.close_steps_done() == 1
    [closed] = model.open_items.closed(project)
    assert closed["text"] == STEP and closed["closed_because"] == "Add retry to fetch_user"
    assert briefing() == shown  # the briefing showed what the store now holds
    assert model.check_facts_against_code() == 0 and model.close_steps_done() == 0
