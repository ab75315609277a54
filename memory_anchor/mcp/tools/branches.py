"""Git for memory: branch, switch, diff, merge, snapshot, time travel (seed 004 §3.1 names).

Replies are short text for the model; ids are given in full where the next
call needs them (cherry_pick items, conflict keys).
"""

from __future__ import annotations

from typing import Annotated, Any, Callable, Literal

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from memory_anchor.client import branches as branch_api
from memory_anchor.client.worker_client import WorkerError
from memory_anchor.mcp.app import mcp
from memory_anchor.mcp.worker_gateway import branch_scope, client, project_scope, session_id, set_session_branch

Strategy = Literal["auto", "cherry_pick", "squash", "accept", "skip"]
BranchName = Annotated[str, Field(min_length=1, max_length=100, description="letters, digits, . _ - /")]


def _api(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return func(client(), *args, **kwargs)
    except WorkerError as exc:
        raise ToolError(f"Memory Anchor worker: {exc}") from None
    except (OSError, RuntimeError, TimeoutError) as exc:
        raise ToolError(f"Memory Anchor worker is not available: {exc}") from None


def _short(text: str | None, limit: int = 140) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@mcp.tool(structured_output=False)
def memory_branch_create(
    branch_name: BranchName,
    parent_branch: Annotated[str | None, Field(description="Branch to fork from (default main)")] = None,
    description: Annotated[str, Field(max_length=2000, description="What the branch is for")] = "",
    from_snapshot: Annotated[str | None, Field(description="Fork at this snapshot instead of the parent's head")] = None,
) -> str:
    """Create a memory branch: a zero-copy fork where writes do not touch the parent.

    Use it before an experiment, a risky refactor or a speculative approach whose
    learnings may turn out wrong, or give each parallel agent its own branch
    (e.g. "agent-A-fix-auth"). Then `memory_branch_switch` to write to it, and
    later `memory_branch_diff` / `memory_branch_merge` to keep what worked.
    """
    made = _api(branch_api.create_branch, branch_name, parent=parent_branch, description=description,
                from_snapshot=from_snapshot)  # fmt: skip
    return f"Created branch {made['name']} from {made['parent']} at seq {made['fork_seq']}."


@mcp.tool(structured_output=False)
def memory_branch_list(
    status: Annotated[Literal["active", "merged", "archived"] | None, Field(description="Only this status")] = None,
) -> str:
    """List memory branches with parent, fork point, status and how much was written on each."""
    found = _api(branch_api.list_branches, status)
    if not found:
        return "No branches."
    current = branch_scope(None) or "main"
    lines = []
    for b in found:
        mark = "*" if b["name"] == current else " "
        origin = f"from {b['parent']}@{b['fork_seq']}" if b["parent"] else "root"
        desc = f" — {_short(b['description'], 80)}" if b.get("description") else ""
        lines.append(f"{mark} {b['name']} [{b['status']}] {origin}, {b['own_writes']} writes{desc}")
    return "\n".join(lines)


@mcp.tool(structured_output=False)
def memory_branch_switch(
    branch_name: BranchName,
    create: Annotated[bool, Field(description="Create the branch from main if it does not exist")] = False,
) -> str:
    """Make this session write to (and read from) a memory branch from now on.

    Captured tool uses, prompts and summaries of this session go to the branch,
    and memory tools default to it, until you switch again (switch to "main" to
    return).
    """
    sid = session_id()
    if sid:
        result = _api(branch_api.switch, sid, branch_name, create=create)
        set_session_branch(result["branch"])
        before = f" (was {result['previous']})" if result.get("previous") else ""
        return f"This session now writes to memory branch {result['branch']}{before}."
    if create:
        try:
            _api(branch_api.get_branch, branch_name)
        except ToolError:
            _api(branch_api.create_branch, branch_name)
    else:
        _api(branch_api.get_branch, branch_name)  # a clear error for a missing branch
    set_session_branch(branch_name)
    return (f"Memory tools now use branch {branch_name}. (No Claude Code session id is known here, so "
            "automatic capture keeps its branch; set MEMORY_ANCHOR_BRANCH for that.)")  # fmt: skip


@mcp.tool(structured_output=False)
def memory_branch_diff(
    source_branch: BranchName,
    target_branch: Annotated[str, Field(description="Usually main")] = "main",
    category: Annotated[str | None, Field(description="Only these record kinds, comma-separated, e.g. fact")] = None,
) -> str:
    """Compare two memory branches: what each changed since they diverged, and the conflicts.

    Conflicts are the same memory changed on both sides, or different facts
    about the same subject. Use the ids shown with `memory_branch_merge`
    (cherry_pick items) and the conflict keys for manual resolutions.
    """
    kinds = [k.strip() for k in category.split(",") if k.strip()] if category else None
    d = _api(branch_api.diff, source_branch, target_branch, kinds=kinds, limit=100)
    c = d["counts"]
    lines = [
        f"{d['source']} vs {d['target']} (common base {d['base']}): "
        f"{c['source_added']} added, {c['source_changed']} changed, {c['source_invalidated']} invalidated on "
        f"{d['source']}; {c['target_added']} added, {c['target_changed']} changed, "
        f"{c['target_invalidated']} invalidated on {d['target']}; {c['conflicts']} conflicts.",
    ]
    for side in ("source", "target"):
        if d[f"{side}_changes"]:
            lines.append(f"On {d[side]}:")
            for item in d[f"{side}_changes"]:
                lines.append(f"- {item['change']} {item['kind']} {item['id']}: {_short(item['text'] or item.get('title'))}")
    if d["conflicts"]:
        lines.append("Conflicts:")
        for conflict in d["conflicts"]:
            lines.append(f"- key {conflict['key']} ({conflict['reason']})")
            lines.append(f"  {d['source']}: {_short(conflict['source']['text'])}")
            lines.append(f"  {d['target']}: {_short(conflict['target']['text'])}")
    return "\n".join(lines)


@mcp.tool(structured_output=False)
def memory_branch_merge(
    source_branch: BranchName,
    target_branch: Annotated[str, Field(description="Default main")] = "main",
    strategy: Annotated[Strategy, Field(description=(
        "auto: apply what does not conflict, settle conflicts by rules or the Claude judge, leave the rest open; "
        "cherry_pick: only `items`; squash: consolidate the branch's facts; accept: source wins; skip: target wins"
    ))] = "auto",  # fmt: skip
    items: Annotated[list[str] | None, Field(description="cherry_pick: record ids from memory_branch_diff")] = None,
    resolutions: Annotated[
        dict[str, Literal["source", "target"]] | None,
        Field(description="Decide conflicts yourself: {conflict key or record id: 'source'|'target'}"),
    ] = None,
    dry_run: Annotated[bool, Field(description="Only show what would happen")] = False,
) -> str:
    """Merge a memory branch into another (all or nothing, recorded in the merge history).

    Run `memory_branch_diff` first. Prefer cherry_pick when only some findings
    of an experiment or agent are right; accept when the branch is right
    throughout; squash to bring many small facts back as a few.
    """
    m = _api(branch_api.merge, source_branch, target_branch, strategy, items=items, resolutions=resolutions,
             dry_run=dry_run)  # fmt: skip
    head = "Plan" if m.get("dry_run") else f"Merged {m['source']} into {m['target']}"
    lines = [f"{head} ({m['strategy']}): {len(m['merged'])} written, {len(m['rejected'])} not merged, "
             f"{m['open_conflicts']} conflicts open."]  # fmt: skip
    lines += [f"- {i['action']} {i['id']}: {_short(i.get('text'))}" for i in m["merged"][:50]]
    lines += [f"- not merged {i['id']}: {i['reason']}" for i in m["rejected"][:50]]
    lines += [f"- conflict {c['key']}: {c['resolution']} by {c['decided_by']} {c.get('reason') or ''}".rstrip()
              for c in m["conflicts"][:50]]  # fmt: skip
    if m.get("source_marked_merged"):
        lines.append(f"{m['source']} is now marked merged.")
    return "\n".join(lines)


@mcp.tool(structured_output=False)
def memory_snapshot(
    label: Annotated[str | None, Field(description='Name, e.g. "before-refactor" (default snap-<branch>-<seq>)')] = None,
    branch: Annotated[str | None, Field(description="Default: this session's branch")] = None,
    description: str = "",
) -> str:
    """Name the current state of memory so it can be queried or branched from later.

    Take one before a refactor, a migration or a risky experiment: later,
    `memory_time_travel` answers "what did we know before X?" and
    `memory_branch_create(from_snapshot=...)` restarts from there.
    """
    s = _api(branch_api.snapshot, label, branch_scope(branch) or "main", description)
    return f"Snapshot {s['name']} = {s['branch']} at seq {s['seq']}."


@mcp.tool(structured_output=False)
def memory_snapshot_list(branch: Annotated[str | None, Field(description="Only this branch's")] = None) -> str:
    """List snapshots (name, branch, seq, when)."""
    found = _api(branch_api.list_snapshots, branch)
    if not found:
        return "No snapshots."
    return "\n".join(
        f"- {s['name']}: {s['branch']} at seq {s['seq']} ({(s.get('created_at') or '')[:16]})"
        + (f" — {_short(s['description'], 80)}" if s.get("description") else "")
        for s in found
    )


@mcp.tool(structured_output=False)
def memory_time_travel(
    query: Annotated[str, Field(min_length=1, description="What to look for")],
    timestamp: Annotated[str | None, Field(description="ISO 8601 time to look back to")] = None,
    snapshot: Annotated[str | None, Field(description="Or a snapshot label")] = None,
    branch: Annotated[str | None, Field(description="Default: this session's branch")] = None,
    limit: Annotated[int, Field(ge=1, le=50)] = 10,
) -> str:
    """Search memory exactly as it was at a past time or snapshot (read-only).

    Superseded and deleted memories come back as they were then. Use it for
    "what did we believe before the refactor?" or to see why a past decision
    was made.
    """
    as_of = snapshot or timestamp
    if not as_of:
        raise ToolError("give `timestamp` (ISO 8601) or `snapshot` (a label from memory_snapshot_list)")
    answer = _api(branch_api.time_travel, query, as_of, branch=branch_scope(branch) or "main",
                  project=project_scope(None), top_k=limit)  # fmt: skip
    head = f"Memory on {answer['branch']} as of {as_of} (seq {answer['seq']}):"
    if not answer["results"]:
        return head + " nothing matches."
    lines = [head]
    for hit in answer["results"]:
        lines.append(f"- {hit['id']} v{hit.get('version')} [{hit.get('kind')}] {_short(hit.get('memory') or hit.get('title'))}")
    return "\n".join(lines)
