"""The SessionStart section that says which memory branch is active.

An agent on a branch must know it (its writes do not reach main until merged),
and an agent on main should know which experiments are in flight. Nothing is
said when the session is on main and no other branch is active: the context
header already names the branch, and tokens are precious.
"""

from __future__ import annotations

from typing import Any

from memory_anchor.worker.store.branches import list_branches
from memory_anchor.worker.context.model import Section
from memory_anchor.worker.store.records import MAIN

MAX_LISTED = 10


def branch_section(request: Any, conn, view) -> Section | None:
    """Context section builder: `(ContextRequest, conn, View) -> Section | None`."""
    current = request.branch or MAIN
    branches = list_branches(conn)
    mine = next((b for b in branches if b["name"] == current), None)
    others = [b for b in branches if b["status"] == "active" and b["name"] != current]
    if current == MAIN and not others:
        return None
    lines = [describe_active(mine, current)]
    if others:
        lines.append("Other active branches (memory_branch_diff / memory_branch_merge to compare and merge):")
        for branch in sorted(others, key=lambda b: -(b["head_seq"] or 0))[:MAX_LISTED]:
            lines.append("- " + describe_other(branch))
        if len(others) > MAX_LISTED:
            lines.append(f"- … and {len(others) - MAX_LISTED} more (memory_branch_list)")
    return Section("branches", "Memory branches", lines, share=0.1)


def describe_active(branch: dict[str, Any] | None, name: str) -> str:
    if branch is None or branch["parent"] is None:
        return f"Active branch: {name} (writes go to main directly)."
    note = f" — {branch['description']}" if branch.get("description") else ""
    return (
        f"Active branch: {name} (from {branch['parent']} at seq {branch['fork_seq']}, "
        f"{branch['own_writes']} writes of its own, status {branch['status']}){note}. "
        f"Writes stay on this branch until merged into {branch['parent']}."
    )


def describe_other(branch: dict[str, Any]) -> str:
    desc = branch.get("description") or "no description"
    parent = f" from {branch['parent']}" if branch.get("parent") else ""
    return f"{branch['name']}{parent}: {desc} ({branch['own_writes']} writes, {branch['sessions']} sessions)"
