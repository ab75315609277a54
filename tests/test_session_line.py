"""A session's line in the briefing and in recall: what was asked, why it broke, what changed.

A changed file whose path is too long for the line keeps its name: the folders above it go first.
"""

from __future__ import annotations

from memory_anchor.worker.context.sessions import outcome_line
from memory_anchor.worker.memory.text import clip_path

DEEP = "ynab_api/db/document_schema/functions/sync/budget/entities/subcategories/check_for_calculation_invalidation.sql"


def test_a_long_path_keeps_its_file_name_and_its_separators():
    assert clip_path(DEEP, 80) == "…/sync/budget/entities/subcategories/check_for_calculation_invalidation.sql"
    assert clip_path("src/cart.py", 80) == "src/cart.py"
    assert clip_path("X:\\03_ACG\\Custom_Addons\\crm_custom_fields\\views\\crm_lead_tree_dates.xml", 40) == "…\\views\\crm_lead_tree_dates.xml"
    assert len(clip_path("a" * 100 + ".py", 80)) == 80


def test_the_session_line_names_the_changed_file_by_its_name():
    summary = {"happened_at": 1.7e9, "project": "/p", "data": {"request": "run the checks when the goal date changes",
                                                              "files_changed": [f"/p/{DEEP}", "/p/README.md"]}}  # fmt: skip
    line = outcome_line(summary)
    assert "changed: …/sync/budget/entities/subcategories/check_for_calculation_invalidation.sql, README.md" in line
