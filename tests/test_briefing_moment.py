"""A briefing reads one moment of memory.

Its sections read one after the other. A root cause is said in the session's line until it is a
verified fact, then in the facts section instead; written between the two (by another worker on a
team database, or this worker's pipeline), it was left out of both."""

from __future__ import annotations

import pytest

from memory_anchor.schemas.memory_model import FactIn
from memory_anchor.schemas.settings import Settings
from memory_anchor.worker.context import ContextRequest, build
from memory_anchor.worker.context.model import ContextServices, Section
from memory_anchor.worker.store.records import Records

CAUSE = "the cart cache was not cleared between tests"


@pytest.fixture
def model(store_db):
    from memory_anchor.worker.memory import MemoryModel

    return MemoryModel(store_db)


def _briefing(model) -> str:
    services = ContextServices(settings=Settings(), reader=model.db.reader, memory=model)
    return build.build_context(ContextRequest(project="/p", services=services), model.db.reader()).text


def _session_that_found_the_cause(model) -> None:
    """A session's summary with its root cause, not yet a verified fact."""
    with model.db.transaction() as conn:
        Records.put(conn, "summary", "Fixed the flaky checkout test", project="/p", session_id="s1",
                    data={"done": ["Fixed the flaky checkout test"], "root_causes": [CAUSE]})  # fmt: skip


def test_a_root_cause_written_while_the_briefing_is_built_is_in_it_once(model, monkeypatch):
    _session_that_found_the_cause(model)

    def meanwhile(request, conn, view) -> Section | None:  # the fact lands after the facts section read
        model.facts.add(FactIn(text=f"Fixed the flaky checkout test: {CAUSE}", category="bugfix", project="/p"))
        return None

    sections = list(build.SECTIONS)
    sections.insert(sections.index(build.outcomes_section), meanwhile)
    monkeypatch.setattr(build, "SECTIONS", sections)
    assert _briefing(model).count(CAUSE) == 1  # in the session's line, as memory was when the briefing began
    monkeypatch.setattr(build, "SECTIONS", [s for s in sections if s is not meanwhile])
    text = _briefing(model)
    assert text.count(CAUSE) == 1 and f"Fixed the flaky checkout test: {CAUSE}" in text  # now a verified fact


def test_a_section_that_fails_spoils_none_after_it(model, monkeypatch):
    """On PostgreSQL a failed statement spoils the rest of its transaction unless it is rolled back."""
    _session_that_found_the_cause(model)

    def broken(request, conn, view) -> Section | None:
        conn.execute("SELECT no_such_column FROM records")
        return None

    monkeypatch.setattr(build, "SECTIONS", [broken, *build.SECTIONS])
    assert CAUSE in _briefing(model)
