"""Reads do not write: the briefing built with the code changed under a fact leaves the database
as it was; the maintenance job records the demotion the briefing showed."""

from __future__ import annotations

import hashlib
import shutil

import pytest

from tests.gitrepo import GitRepo

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

SETTINGS = "[database]\nurl = 'postgresql://localhost/shop'\n"
RULE = "Always keep the database settings in config/settings.toml"


def database_state(db, data_dir):
    """The bytes of the database and its WAL, and every version of every record."""
    files = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
             for p in sorted(data_dir.iterdir()) if p.name.startswith("memory.sqlite3") and not p.name.endswith("-shm")}  # fmt: skip
    rows = [tuple(row) for row in db.reader().execute("SELECT * FROM records ORDER BY seq").fetchall()]
    return files, rows


def test_the_briefing_shows_a_fact_demoted_for_its_deleted_file_and_writes_nothing(tmp_path):
    from memory_anchor.schemas.memory_model import FactIn
    from memory_anchor.schemas.settings import Settings
    from memory_anchor.worker.codebase.service import Codebase
    from memory_anchor.worker.context import ContextRequest, ContextServices, build_context
    from memory_anchor.worker.memory import MemoryModel
    from memory_anchor.worker.store.db import Database

    repo = GitRepo(tmp_path / "shop")
    repo.write("config/settings.toml", SETTINGS)
    repo.commit("the shop")
    project = str(repo.root.resolve())
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    db = Database(data_dir / "memory.sqlite3")
    codebase = Codebase()
    model = MemoryModel(db, codebase=codebase)
    fact = model.add_fact(FactIn(text=RULE, confidence=0.95, project=project, category="rule"))["record"]
    assert [ref["path"] for ref in fact["data"]["code"]] == ["config/settings.toml"]
    services = ContextServices(settings=Settings(), reader=db.reader, memory=model, codebase=codebase)

    def briefing() -> str:
        return build_context(ContextRequest(project=project, services=services), db.reader()).text

    assert "needs verification" not in briefing()
    repo.git("rm", "-q", "config/settings.toml")
    repo.commit("settings move to the environment")

    before = database_state(db, data_dir)
    shown = briefing()
    assert database_state(db, data_dir) == before  # no new version, not a byte of the files
    line = next(line for line in shown.splitlines() if RULE in line)
    assert "[needs verification]" in line and line.endswith("(config/settings.toml deleted since)"), shown

    # Where writes belong: the maintenance job, the git watch and `verify --fix` record it.
    assert model.check_facts_against_code() == 1
    assert len(database_state(db, data_dir)[1]) == len(before[1]) + 1
    stored = model.facts.get(fact["id"])
    assert stored["data"]["code_stale"]["state"] == "deleted" and stored["needs_verification"], stored
    assert briefing() == shown  # the briefing showed what the store now holds
    assert model.check_facts_against_code() == 0
