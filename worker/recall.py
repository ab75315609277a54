"""Per-prompt recall: the few memories worth adding to what the user just asked."""

from __future__ import annotations

from typing import Any

from memory_anchor.projects import project_for_cwd
from memory_anchor.schemas.events import RecallRequest
from worker.present import record_to_wire
from worker.store.records import resolve_view

RECALL_KINDS = ["observation", "summary", "fact", "event", "memory"]


def recall_for_prompt(services, request: RecallRequest) -> dict[str, Any]:
    settings = services.settings
    if not settings.prompt_recall or len(request.prompt.split()) < 3:
        return {"context": "", "results": []}
    project = request.project or project_for_cwd(request.cwd)
    branch = services.session_branch(request.session_id) if request.session_id else None
    view = resolve_view(services.db.reader(), branch or settings.default_branch)
    hits = services.search.search(
        request.prompt,
        view,
        filters={"project": project or None, "kind": RECALL_KINDS},
        top_k=settings.prompt_recall_limit,
        threshold=settings.prompt_recall_threshold,
        mode="hybrid",
        fallback=False,
    )
    # The prompt itself was just captured; recalling it back is noise.
    hits = [h for h in hits if h.get("session_id") != request.session_id or h["kind"] != "prompt"]
    if not hits:
        return {"context": "", "results": []}
    lines = ["Memory Anchor recalls (from earlier work on this project):"]
    for hit in hits:
        title = hit.get("title") or hit.get("text", "")
        lines.append(f"- [{hit['kind']}] {' '.join(title.split())[:200]} (id {hit['id']})")
    return {"context": "\n".join(lines), "results": [record_to_wire(h) for h in hits]}
