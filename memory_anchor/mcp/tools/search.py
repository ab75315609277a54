"""Progressive-disclosure retrieval: search → timeline → get_observations.

The one way Claude asks memory. The three steps cost ~60-100 tokens per search
hit, a few hundred for a timeline window, and full detail only for the ids the
model picks.
"""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from memory_anchor.mcp import render
from memory_anchor.mcp.app import mcp
from memory_anchor.mcp.worker_gateway import branch_scope, call, project_scope

SearchMode = Literal["hybrid", "vector", "keyword"]


def _search(
    query: str,
    *,
    limit: int,
    type: str | None = None,
    kind: str | None = None,
    date_start: str | None = None,
    date_end: str | None = None,
    project: str | None = None,
    mode: SearchMode = "hybrid",
    branch: str | None = None,
    as_of: str | None = None,
) -> list[render.RecordOut]:
    filters = {"project": project_scope(project), "type": type, "kind": kind}
    body = {
        "query": query,
        "top_k": limit,
        "mode": mode,
        "filters": {k: v for k, v in filters.items() if v},
        "after": date_start,
        "before": date_end,
        "branch": branch_scope(branch),
        "as_of": as_of,
    }
    answer = call("POST", "/api/v1/memories/search", {k: v for k, v in body.items() if v is not None})
    return [render.record(hit) for hit in answer.get("results", [])]


@mcp.tool(structured_output=False)  # plain text: compact for the model
def search(
    query: Annotated[str, Field(min_length=1, description="What you want to know, in plain words (a question works)")],
    limit: Annotated[int, Field(ge=1, le=50)] = 10,
    type: Annotated[
        str | None,
        Field(description="Observation type: decision, bugfix, refactor, feature, change, discovery, note, event"),
    ] = None,
    date_start: Annotated[str | None, Field(description="Only after this date (ISO 8601, e.g. 2025-05-01)")] = None,
    date_end: Annotated[str | None, Field(description="Only before this date (ISO 8601)")] = None,
    project: Annotated[str | None, Field(description='Project path; default this project, "*" = all')] = None,
    kind: Annotated[
        str | None,
        Field(description="Record kind: observation (a tool use), prompt, transcript (Claude's replies), summary, fact, event, memory"),
    ] = None,
    mode: Annotated[SearchMode, Field(description='"keyword" for exact identifiers, error codes, file names')] = "hybrid",
    branch: Annotated[str | None, Field(description="Memory branch (default: this session's)")] = None,
) -> str:
    """Ask this project's long-term memory: what earlier sessions did, said, found and decided.

    Use it whenever earlier work might help: "how did we fix X?", "why did we choose Y?",
    "what failed when we tried Z?", "where does W live?", "have we seen this error before?",
    or when the user refers to something from a previous session. Memory holds the user's
    prompts, every tool use, Claude's replies (explanations, reasons, failed attempts),
    session summaries and facts. Each hit is an index line (id | time | kind/type | title |
    score, and how often it was said) with the start of its text; best first. Then call
    `timeline` around a promising id for what happened before and after, and
    `get_observations` for the full details of the few ids you need.
    """
    hits = _search(
        query, limit=limit, type=type, kind=kind, date_start=date_start, date_end=date_end,
        project=project, mode=mode, branch=branch,
    )  # fmt: skip
    if not hits:
        return f"No memories match {query!r}."
    return f"{len(hits)} memories for {query!r}, best first (details with get_observations):\n" + "\n".join(
        render.hit_lines(hit) for hit in hits
    )


@mcp.tool(structured_output=False)  # plain text: compact for the model
def timeline(
    anchor_id: Annotated[str | None, Field(description="A record id from search (the window's centre)")] = None,
    query: Annotated[str | None, Field(description="Or: search for the anchor with this query")] = None,
    depth_before: Annotated[int, Field(ge=0, le=50)] = 5,
    depth_after: Annotated[int, Field(ge=0, le=50)] = 5,
    project: Annotated[str | None, Field(description='Project path for `query`; "*" = all')] = None,
    branch: str | None = None,
) -> str:
    """Show what happened just before and after one memory, in time order.

    Use it after `search` to understand the context of a hit (what led to a fix,
    what was tried first, what followed a decision). Give `anchor_id` from a
    search result, or a `query` whose best match becomes the anchor. The anchor
    line is marked with >>.
    """
    if not anchor_id:
        if not query:
            raise ToolError("give anchor_id (an id from search) or query")
        hits = _search(query, limit=1, project=project, branch=branch)
        if not hits:
            return f"No memories match {query!r}."
        anchor_id = hits[0].id
    answer = call(
        "GET", "/api/v1/timeline",
        anchor=anchor_id, depth_before=depth_before, depth_after=depth_after, branch=branch_scope(branch),
    )  # fmt: skip
    before = [render.record(r) for r in answer.get("before", [])]
    after = [render.record(r) for r in answer.get("after", [])]
    anchor = render.record(answer["anchor"])
    lines = [render.index_line(r) for r in before]
    lines.append(">> " + render.index_line(anchor)[2:])
    lines += [render.index_line(r) for r in after]
    return f"Timeline around {anchor_id} (oldest first):\n" + "\n".join(lines)


@mcp.tool(structured_output=False)  # plain text: compact for the model
def get_observations(
    ids: Annotated[list[str], Field(min_length=1, max_length=50, description="Record ids from search/timeline")],
    branch: str | None = None,
) -> str:
    """Get the full details (narrative, facts, files, command, output summary) of the given ids.

    Use it last, only for the few ids from `search` or `timeline` whose details
    you actually need: it returns everything stored for each, which costs far
    more context than an index line.
    """
    answer = call("POST", "/api/v1/observations/batch", {"ids": ids, "branch": branch_scope(branch)})
    found = [render.record(r) for r in answer.get("results", [])]
    missing = sorted(set(ids) - {r.id for r in found})
    text = "\n\n".join(render.detail(r) for r in found) or "None of these ids exist."
    if missing and found:
        text += "\n\nNot found: " + ", ".join(missing)
    return text
