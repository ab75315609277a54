"""Records on the wire with their code checked: every endpoint that returns memories about code
(search, list, get, the observations batch, the timeline) adds each one's `freshness` (the
`Freshness` wire model: fresh, changed, deleted, moved, superseded, with the short mark), so
Claude sees it when it searches and the viewer shows it. Records that name no file of a
repository, and every record when `code_checks` is off, carry none."""

from __future__ import annotations

from typing import Any, Iterable

from memory_anchor.worker.context.staleness import marks
from memory_anchor.worker.store.present import record_to_wire


def wire_with_freshness(services, records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """`record_to_wire` of each record, with `freshness` on those about code (call it off the event loop)."""
    records = list(records)
    found = freshness_of(services, records)
    return [_with(record_to_wire(r), found.get(r["id"])) for r in records]


def freshness_of(services, records: list[dict[str, Any]]) -> dict[str, Any]:
    """{record id: Freshness}, one check per project the records belong to (a session's directory names
    the repository when the project is named by its remote)."""
    if not getattr(services.settings, "code_checks", True):
        return {}
    by_project: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        if (record.get("data") or {}).get("code"):
            by_project.setdefault(record.get("project") or "", []).append(record)
    found: dict[str, Any] = {}
    for project, group in by_project.items():
        session = next((r.get("session_id") for r in group if r.get("session_id")), None)
        found.update(marks(services, group, project, session))
    return found


def _with(wire: dict[str, Any], freshness) -> dict[str, Any]:
    if freshness is not None:
        wire["freshness"] = freshness.model_dump(mode="json")
    return wire
